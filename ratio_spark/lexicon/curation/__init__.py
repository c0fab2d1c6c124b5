"""The lexicon construction toolkit (paper §4.1, appendix A, Tables 3 and 4).

Four sources of candidate markers, one build that merges them into a lexicon version, one report:

* ``span_review``: the most frequent sentence-opening spans, with seeded sample pairs, as review
  sheets (CSV, HTML) and a decisions file a curator fills in (manual curation).
* ``extensions``: every extension of up to five words up to a comma of chosen prefixes
  (extendable connectives), with counts.
* ``patterns``: Hearst-style templates with typed slots, filled from term lists and inflected.
* LLM generation and labelling (package ``ratio_spark.llm``, another module) writes ``llm.tsv`` and
  ``labels.tsv`` in the same candidates format.
* ``build``: merge, check disjointness, write ``lexicons/<version>/markers.tsv``.
* ``report``: the paper's Table 4: markers by source and move, and how many occur in a corpus.

``formats`` holds the file formats they share; ``ratio_spark.cli.lexicon`` is the ``ratio-spark lexicon`` command.
"""
