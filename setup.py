"""The one packaging rule pyproject.toml cannot say: the shipped lexicons live at the top of the repository
(``lexicons/``, beside ``jobs/`` and ``conf/``) and install as the package's data folder ``ratio_spark/lexicons/``.
Everything else is in pyproject.toml."""

from setuptools import find_namespace_packages, setup

# Data folders count as (namespace) packages, as pyproject's `packages.find` counts them.
LEXICONS = ["ratio_spark.lexicons", *(f"ratio_spark.lexicons.{name}" for name in find_namespace_packages(where="lexicons"))]

setup(
    packages=[*find_namespace_packages(include=["ratio_spark*"], exclude=["ratio_spark.lexicons*"]), *LEXICONS],
    package_dir={"ratio_spark.lexicons": "lexicons"},
)
