"""The lexical analyzer shared by BM25 and the lexical-overlap analysis (the paper's appendices C and F.1):
lowercase, word tokens of two or more word characters (bm25s' and scikit-learn's pattern), bm25s' English
stopword list removed, Snowball (Porter2) stemming with PyStemmer. N-grams are built over the analysed
unigram sequence (after stopword removal and stemming), as a CountVectorizer with stop words does.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable, Sequence

TOKEN_PATTERN = re.compile(r"(?u)\b\w\w+\b")
NGRAM_JOINER = " "  # stems never contain a space, so a joined n-gram cannot collide with a unigram


@lru_cache(maxsize=1)
def english_stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


class Analyzer:
    """Text -> stemmed, stopword-free tokens; stems are memoised per word (a pool repeats its vocabulary)."""

    def __init__(self) -> None:
        import Stemmer  # PyStemmer: the Snowball stemmers in C

        self._stemmer = Stemmer.Stemmer("english")
        self._stopwords = english_stopwords()
        self._stems: dict[str, str] = {}

    def unigrams(self, text: str) -> list[str]:
        words = [w for w in TOKEN_PATTERN.findall(text.lower()) if w not in self._stopwords]
        stems = self._stems
        unknown = [w for w in set(words) if w not in stems]
        if unknown:
            stems.update(zip(unknown, self._stemmer.stemWords(unknown)))
        return [stems[w] for w in words]

    def tokens(self, text: str, ngram: int = 1) -> list[str]:
        """Unigrams, plus the n-grams of order ``ngram`` when it is above 1 (the paper's uni+bi, uni+tri)."""
        grams = self.unigrams(text)
        if ngram <= 1:
            return grams
        return grams + [NGRAM_JOINER.join(grams[i : i + ngram]) for i in range(len(grams) - ngram + 1)]

    def token_sets(self, texts: Iterable[str]) -> list[frozenset[str]]:
        return [frozenset(self.unigrams(t)) for t in texts]


def jaccard(a: frozenset[str] | set[str], b: frozenset[str] | set[str]) -> float:
    """Jaccard similarity of two token sets; two empty sets count as 0 (nothing shared)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def ngram_order_name(order: int) -> str:
    return {1: "unigram", 2: "bigram", 3: "trigram"}.get(order, f"{order}-gram")


def analyse_all(analyzer: Analyzer, texts: Sequence[str], ngram: int, progress: bool = False, desc: str = "") -> list[list[str]]:
    from tqdm.auto import tqdm

    return [analyzer.tokens(t, ngram) for t in tqdm(texts, desc=desc, disable=not progress, unit="text", mininterval=1.0)]
