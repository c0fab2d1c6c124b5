"""The Spark half: stages that read inputs or Delta tables and write Delta tables (ingest .. export), each under
its contract (``contracts``: what it reads, writes and may drop; ``runner``: the checks)."""
