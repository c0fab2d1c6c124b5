"""What both halves share, without pyspark: configuration, errors (``UserError`` / ``RunFailure``), the
tables and drop reasons (``schema``), the Delta reader of the Python half, cache folders, the TSV dialect
and text rules."""
