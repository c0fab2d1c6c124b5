"""The Spark half: stages that read inputs or Delta tables and write Delta tables (ingest .. export)."""
