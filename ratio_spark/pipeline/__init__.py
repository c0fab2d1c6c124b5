"""The Spark half: stages that read inputs or Delta tables and write Delta tables (ingest .. export), one ``Stage``
class each (``stages``: what it reads, writes, drops and configures, and its work; ``runner``: the checks)."""
