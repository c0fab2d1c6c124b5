"""The silver test set (the paper's §4.3 and appendix E): stratified sampling, a two-prompt LLM judge,
calibration against human labels, the ``silver`` Delta table and the anaphora analysis. Plain Python."""
