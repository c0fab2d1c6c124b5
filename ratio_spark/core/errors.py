"""Errors that stop a stage on purpose."""


class ReconciliationError(RuntimeError):
    """Counts that must add up do not: something was lost or made up."""
