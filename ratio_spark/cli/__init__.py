"""The ``ratio-spark`` command: one parser (``main``), one module per command group."""
