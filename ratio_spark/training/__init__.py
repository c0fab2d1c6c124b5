"""Fine-tuning retrievers on the benchmark's train split (``ratio-spark train``): docs/training.md."""
