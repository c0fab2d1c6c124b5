"""ratio-spark: mine the Ratio ideation-retrieval benchmark from full-text papers."""

__version__ = "0.1.0"
