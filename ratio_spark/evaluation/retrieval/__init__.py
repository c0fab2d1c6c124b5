"""Retrievers over a split's shared pool: BM25 (``bm25``), dense bi-encoders with faiss (``dense``) and
MaxSim over token embeddings (``maxsim``). Each module imports its heavy dependencies itself, so importing
this package stays cheap. ``base.retrieve`` applies exclusions and the deterministic tie order."""
