"""Errors that stop a stage on purpose."""


class ReconciliationError(RuntimeError):
    """Counts that must add up do not: something was lost or made up."""


class ContractError(RuntimeError):
    """A stage wrote what its contract (``pipeline/contracts.py``) does not declare, or missed what it does."""


class MissingTableError(FileNotFoundError):
    """A stage's input table is missing or lacks columns: the message names the stage to run first."""
