"""What both halves share: configuration, errors, the benchmark's names (moves, splits, columns), text rules."""
