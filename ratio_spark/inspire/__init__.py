"""Inspire on our own corpus (docs/inspire.md): instances from the Delta tables (targets, cutoffs, graded
cited antecedents, solution-redacted briefs), a date-gated search service, an agent harness and baselines,
and stage-wise funnel scoring. Plain Python: reads Delta with ``deltalake``, never imports pyspark."""
