"""The paper's B.1 normalisation over Spark columns, in the JVM: the rules of ``ratio_spark.core.text``."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from ratio_spark.core.text import NORMALIZATION_RULES


def normalize_column(column: Column) -> Column:
    """The paper's B.1 normalisation of a string column, in the JVM."""
    out = F.lower(column)
    for kind, pattern, replacement in NORMALIZATION_RULES:
        if kind == "literal":
            out = F.replace(out, F.lit(pattern), F.lit(replacement))
        else:
            out = F.regexp_replace(out, pattern, replacement)
    return F.trim(out)  # Spark's trim strips only " ", as str.strip(" ") does
