"""The ``ratio-spark`` command: one parser and the one error handler (``main``), the pre-flight checks
(``preflight``), one module per command group."""
