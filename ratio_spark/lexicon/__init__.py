"""Marker lexicons: the versioned file format and its loader, the matcher, and the curation toolkit."""
