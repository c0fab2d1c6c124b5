"""The benchmark browser (``ratio-spark browse``): a read-only web page over a release and its results."""
