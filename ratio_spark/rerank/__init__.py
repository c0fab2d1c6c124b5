"""LLM listwise reranking of first-stage runs (the Ratio paper's reranker; docs/rerank.md)."""
