"""The evaluation half: plain Python over the Delta tables or the release (no JVM); heavy imports stay lazy."""
