"""The pipeline's settings sections: Spark and its jars, the inputs, and one section per stage.

Pure pydantic, no pyspark: ``ratio-spark --help`` and the Python half import them without a JVM, and the stages'
Python workers import only this much of the configuration. ``ratio_spark.config.Config`` extends
``PipelineConfig`` with the other packages' sections.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ratio_spark.core.schema import DEFAULT_MAX_EXTENSION_WORDS
from ratio_spark.core.strict import RegexPattern, StrictModel


class JarsConfig(StrictModel):
    """How the Delta Lake and Spark NLP jars reach Spark (Spark NLP's only when ``segment.engine: sparknlp`` runs).

    ``local``: resolve once with Maven into a cache and pass them to Spark (laptops, CI).
    ``packages``: let Spark resolve Maven coordinates (``spark.jars.packages``; EMR).
    ``provided``: the cluster already has them (Databricks: Delta built in, Spark NLP as a cluster library).
    """

    mode: Literal["local", "packages", "provided"] = "local"
    profile: str = "spark35"
    cache_dir: str | None = None
    packages: list[str] = Field(
        default_factory=lambda: ["io.delta:delta-spark_2.12:3.3.2", "com.johnsnowlabs.nlp:spark-nlp_2.12:5.5.3"]
    )

    def packages_for(self, spark_nlp: bool) -> list[str]:
        """The coordinates a session needs: Spark NLP's (group com.johnsnowlabs.nlp) only with ``spark_nlp``."""
        return [p for p in self.packages if spark_nlp or not p.startswith("com.johnsnowlabs.nlp:")]


class SparkConfig(StrictModel):
    master: str | None = "local[2]"  # None: leave it to spark-submit / the cluster
    app_name: str = "ratio-spark"
    log_level: Literal["ERROR", "WARN", "INFO", "DEBUG"] = "ERROR"
    progress_interval_s: float = Field(default=25, gt=0)  # a stage's status-tracker line: no 30 s without a line
    jars: JarsConfig = Field(default_factory=JarsConfig)
    # Local sessions map the JVM class archive that `ratio-spark jars --class-archive` wrote, when there is one
    # (pipeline/class_archive.py: a shorter start).
    class_archive: bool = True
    conf: dict[str, str] = Field(default_factory=dict)

    @field_validator("conf", mode="before")
    @classmethod
    def _stringify(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}
        return value


InputFormat = Literal["tei", "jats", "s2orc_2020", "s2orc_current", "jsonl"]
DateRule = Literal["source", "anthology_id"]


class InputConfig(StrictModel):
    """One corpus to ingest. ``path`` is a file, a folder (read recursively) or a glob."""

    name: str
    format: InputFormat
    path: str
    metadata_path: str | None = None  # s2orc_current: the papers dataset with corpusid, publicationdate
    # Where the publication date comes from, in order; the first rule that gives a date wins.
    # source: the record's own date (TEI header, S2ORC year / metadata, JSONL pub_date);
    # anthology_id: the year in an ACL Anthology id (P14-1001 -> 2014, 2020.acl-main.1 -> 2020).
    date_rules: list[DateRule] = Field(default_factory=lambda: ["source", "anthology_id"])
    # Paths matching this regex are not papers (e.g. ACL front matter *-?000.tei.xml): rejected with a reason.
    exclude_path_regex: str | None = None
    dehyphenate: bool = True  # undo PDF line-break hyphens ("how- ever" -> "however")

    @field_validator("metadata_path")
    @classmethod
    def _metadata_only_for_current(cls, value: str | None, info: Any) -> str | None:
        if value is not None and info.data.get("format") not in ("s2orc_current",):
            raise ValueError("metadata_path is only used by format s2orc_current")
        return value


class IngestConfig(StrictModel):
    min_year: int = 1900
    max_year: int = 2100
    min_body_chars: int = 200  # a body shorter than this is rejected as empty_body


SegmentEngine = Literal["rules", "sparknlp"]
# The keys only Spark NLP's SentenceDetector reads; the rules engine has no use for them.
SPARK_NLP_ONLY_KEYS = ("use_abbreviations", "keep_semicolons", "detect_lists", "custom_bounds", "min_length",
                       "max_length", "split_length")


class SegmentConfig(StrictModel):
    """Sentence segmentation (measured in docs/segmentation.md).

    ``engine: rules`` (the default): the project's own rules as RE2 regexes over whole Arrow batches
    (``pipeline.segment``); ``engine: sparknlp``: the same masking before Spark NLP's rule-based
    SentenceDetector, which needs the Spark NLP jars."""

    engine: SegmentEngine = "rules"
    # Periods after these are not sentence ends (both engines); Spark NLP's own list misses much scientific usage.
    abbreviations: list[str] = Field(
        default_factory=lambda: [
            "Fig", "Figs", "Eq", "Eqs", "Sec", "Secs", "Sect", "Tab", "Tabs", "Ch", "App", "Ref", "Refs",
            "Def", "Thm", "Prop", "Alg", "No", "Nos", "Vol", "pp", "cf", "c.f", "e.g", "i.e", "a.k.a", "w.r.t",
            "vs", "resp", "approx", "ca", "viz", "Dr", "Prof", "Mr", "Mrs", "Ms", "Jr", "Inc", "Ltd", "Co", "Corp",
        ]  # not "etc": it often ends a sentence, and Spark NLP's own list keeps "etc. and", "etc.,"
    )
    protect_et_al: bool = True  # "et al." is a sentence end only before a capitalised word
    # Spark NLP's own abbreviation handling: off, since the masking above covers scientific usage; it
    # halves the detector's time for -0.0002 boundary F1 on ScisummNet (docs/segmentation.md).
    use_abbreviations: bool = False
    keep_semicolons: bool = True  # mask ";" so the detector does not split there (Spark NLP always would)
    # Spark NLP's list detection splits before any lowercase word in parentheses ("the nodes | (nouns)")
    # and before "3. " ("in Section | 3. The"): far more harm than help on papers.
    detect_lists: bool = False
    # Split after a closing bracket or quote that follows a sentence end (masked by segment.MASK, U+E000)
    # and precedes a capital: "(as shown above.) | Next". Zero-width: a bound that consumes characters
    # makes Spark NLP 5.5.3 return wrong offsets.
    custom_bounds: list[str] = Field(
        default_factory=lambda: ["(?<=[.?!\\uE000][)\\]\u201d\u2019\"'])(?=\\s[A-Z])"]
    )
    min_length: int = 0
    max_length: int = 99999
    split_length: int | None = None
    min_letters_ratio: float = 0.5  # below this share of letters a sentence is flagged malformed

    @model_validator(mode="after")
    def _sparknlp_keys_need_sparknlp(self) -> "SegmentConfig":
        if self.engine != "sparknlp":
            defaults = SegmentConfig.model_construct()
            changed = [k for k in SPARK_NLP_ONLY_KEYS if getattr(self, k) != getattr(defaults, k)]
            if changed:
                raise ValueError(f"{', '.join('segment.' + k for k in changed)} only apply to segment.engine: sparknlp "
                                 f"(the engine is {self.engine}); set segment.engine=sparknlp or drop them")
        return self


class CitationsConfig(StrictModel):
    """Resolving bibliography entries to corpus papers (the ``citations`` stage; docs/inspire.md)."""

    year_tolerance: int = Field(1, ge=0)  # a title match needs |entry year - paper year| <= this
    min_title_words: int = Field(3, ge=1)  # shorter titles ("Deep learning") never match by title alone


class CitationFilter(StrictModel):
    """Drop a pair whose query or gold contains a citation, as the released benchmark does ("noise removal",
    appendix B.1): a query must read on its own. The one place of the patterns (docs/mining.md lists them):
    Python regexes searched in the normalised, cut texts; each family drops with its own reason
    (``citation_<family>``, ``ratio_spark.pipeline.mine``); null turns one family off."""

    enabled: bool = True
    # A parenthesis containing "et al.": "(smith et al., 2019)", "(e.g., smith et al. 2019)".
    et_al: RegexPattern | None = r"\([^()]*\bet al\b[^()]*\)"
    # An author-year parenthesis: "(smith and jones, 2006)", "(see smith, 2019)", "(smith, 2006a; lee, 2007)".
    author_year: RegexPattern | None = r"\([^()]*[a-z],\s*(?:1[89]|20)\d\d[a-z]?\b[^()]*\)"
    # Square brackets containing a digit or "et al." ("[12]", "[3, 4]"; normalisation already removes
    # the plainest ones, "[3a]", "[12; 15]", "[smith et al.]" remain).
    brackets: RegexPattern | None = r"\[[^\[\]]*(?:\d|\bet al\b)[^\[\]]*\]"
    # "[]": a citation whose text the PDF extraction lost.
    empty_brackets: RegexPattern | None = r"\[\]"
    # Placeholders that converted corpora leave for a citation (arXiv-derived ones especially): "[\cite=key]",
    # "[\cite]", "\cite{key}", "{{cite:key}}", "<cit>", "<cit id=3>". Whatever the key (issue 34).
    placeholders: RegexPattern | None = r"\[\s*\\cite\b[^\]]*\]|\\cite[a-z]*\*?\{[^{}]*\}|\{\{\s*cite\b[^{}]*\}\}|</?cit\b[^<>]*>"
    # A formula given as a placeholder: "[formula]", "[math]", "[equation]", "{{formula:3}}", "<formula>": the
    # query or gold would not read on its own without it.
    formula_placeholders: RegexPattern | None = (
        r"\[\s*(?:formula|math|equation|eq)\s*\]|\{\{\s*(?:formula|math)\b[^{}]*\}\}|</?formula\b[^<>]*>")


class MiningConfig(StrictModel):
    """Marker matching over consecutive sentence pairs (the paper's §4.2 and appendix B.1; docs/mining.md)."""

    lexicon: str = "v1"  # a shipped version (v1, v2, v3: the top-level lexicons/), or the path of a lexicon folder
    min_chars: int = 35  # query and gold sentences shorter than this are dropped
    require_comma: bool = True  # a marker counts only when a comma follows it ("For example, ...")
    # Extendable connectives: words after the prefix, up to a comma (the released benchmark allows 3).
    max_extension_words: int = Field(DEFAULT_MAX_EXTENSION_WORDS, ge=0)
    # The query loses an opening clause of at most this many words followed by a comma ("at times, ...",
    # "in the rw dataset, ...") when no discourse marker opens it; 0 turns this off.
    query_opening_clause_words: int = Field(4, ge=0)
    citation_filter: CitationFilter = Field(default_factory=CitationFilter)


class SplitRange(StrictModel):
    start: dt.date
    end: dt.date  # inclusive

    @model_validator(mode="after")
    def _ordered(self) -> "SplitRange":
        if self.end < self.start:
            raise ValueError(f"end {self.end} is before start {self.start}")
        return self


class RollingSplits(StrictModel):
    """Splits that move forward with the corpus (the living benchmark, ``ratio-spark update``): test is the
    last ``test_months`` calendar months up to the latest publication date mined, validation the
    ``validation_months`` before it, train everything from ``train.start`` up to validation."""

    test_months: int = Field(ge=1)
    validation_months: int = Field(ge=1)


def _add_months(day: dt.date, months: int) -> dt.date:
    index = day.year * 12 + day.month - 1 + months
    return dt.date(index // 12, index % 12 + 1, 1)


class SplitsConfig(StrictModel):
    """Temporal splits by publication date; the defaults are the paper's. With ``rolling``, the validation
    and test ranges (and train's end) follow from the latest date (``resolved``)."""

    train: SplitRange = Field(default_factory=lambda: SplitRange(start="2015-01-01", end="2025-09-30"))
    validation: SplitRange = Field(default_factory=lambda: SplitRange(start="2025-10-01", end="2025-12-31"))
    test: SplitRange = Field(default_factory=lambda: SplitRange(start="2026-01-01", end="2026-05-05"))
    rolling: RollingSplits | None = None

    def resolved(self, latest: dt.date | None) -> "SplitsConfig":
        """The fixed ranges to use: these, or the rolling windows ending with the month of ``latest``."""
        if self.rolling is None or latest is None:
            return self
        month_after = _add_months(latest.replace(day=1), 1)
        test_start = _add_months(month_after, -self.rolling.test_months)
        validation_start = _add_months(test_start, -self.rolling.validation_months)
        day = dt.timedelta(days=1)
        return SplitsConfig(
            train=SplitRange(start=min(self.train.start, validation_start - day), end=validation_start - day),
            validation=SplitRange(start=validation_start, end=test_start - day),
            test=SplitRange(start=test_start, end=month_after - day),
        )

    @model_validator(mode="after")
    def _in_time_order(self) -> "SplitsConfig":
        # In time order and disjoint: the pools keep later splits clean of what earlier ones contain.
        ranges = list(self.ranges().items())
        for (a, ra), (b, rb) in zip(ranges, ranges[1:]):
            if rb.start <= ra.end:
                raise ValueError(f"split {b} must start after {a} ends ({a}: {ra.start}..{ra.end}, {b}: {rb.start}..{rb.end})")
        return self

    def ranges(self) -> dict[str, SplitRange]:
        return {"train": self.train, "validation": self.validation, "test": self.test}


class ReleaseConfig(StrictModel):
    root: str = "data/release"  # Parquet/JSONL per split and BEIR folders per move and split
    # The dataset card (README.md of the release): its title and the corpus's licence (a Hugging Face licence id:
    # cc-by-4.0, other, unknown) with a note (attribution, or what "other" means).
    name: str = "Ratio"
    license: str = "unknown"
    license_note: str = ""


class TablesConfig(StrictModel):
    root: str = "data/tables"
    overrides: dict[str, str] = Field(default_factory=dict)  # table name -> location

    def location(self, name: str) -> str:
        return self.overrides.get(name) or f"{self.root.rstrip('/')}/{name}"



class PipelineConfig(StrictModel):
    """The sections the stages read (``ratio_spark.config.Config`` adds the rest): a stage is typed with this,
    so the pipeline needs no package above it."""

    spark: SparkConfig = Field(default_factory=SparkConfig)
    tables: TablesConfig = Field(default_factory=TablesConfig)
    inputs: list[InputConfig] = Field(default_factory=list)
    ingest: IngestConfig = Field(default_factory=IngestConfig)
    segment: SegmentConfig = Field(default_factory=SegmentConfig)
    citations: CitationsConfig = Field(default_factory=CitationsConfig)
    mining: MiningConfig = Field(default_factory=MiningConfig)
    splits: SplitsConfig = Field(default_factory=SplitsConfig)
    release: ReleaseConfig = Field(default_factory=ReleaseConfig)
