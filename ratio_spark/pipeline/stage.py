"""A pipeline stage as one object: what it reads, writes, drops and configures, and the one method that does its work.

NeMo-Curator's ``ProcessingStage`` (``inputs()``/``outputs()``/``process()``) and datatrove's ``PipelineStep``
are the models. A ``Stage`` declares the tables it reads (with the columns it uses), the tables it writes (their
columns are ``core.schema.TABLES``), where its drops go (the reasons are ``core.schema.Reason``'s of its name),
its file inputs (a lexicon) and its configuration section. ``process`` does the work through a
``runner.StageIO`` and returns an ``Outcome``: the stage's own counts and the ``Balance`` lines that account for
every row that came in. The runner (``pipeline/runner.py``) checks the declarations, reconciles the balances (a
stage cannot skip that: one balance at least) and writes one summary shape for every stage.

No pyspark here, nor in ``pipeline/stages.py`` at import: ``ratio-spark --help`` lists the stages without a JVM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce
from typing import Any, ClassVar, Mapping

from ratio_spark.core.errors import ReconciliationError
from ratio_spark.core.schema import reasons_of


def reconcile(stage: str, unit: str, received: int, outputs: dict[str, int], dropped: dict[str, int]) -> str:
    """Check ``received = sum(outputs) + sum(dropped)``; raise ``ReconciliationError`` naming every number.

    The three sides must be counted independently (the input as read, each output as written, the
    drops as written), or the check could never fail. Returns the balance as one line for the summary.
    """
    parts = [f"{n} {name}" for name, n in outputs.items()] + [f"{sum(dropped.values())} dropped"]
    accounted = sum(outputs.values()) + sum(dropped.values())
    if received != accounted:
        reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(dropped.items())) or "no drops"
        raise ReconciliationError(
            f"{stage}: {received} {unit} came in but {' + '.join(parts)} ({reasons}) = {accounted} are accounted "
            f"for ({received - accounted:+d} unexplained): a row was lost or made up without a drop"
        )
    return f"{received} {unit} = {' + '.join(parts)}"


@dataclass(frozen=True)
class Balance:
    """One reconciliation: ``received`` units came in, ``outputs`` went out, ``dropped`` were dropped by reason.

    ``dropped`` None: every drop the stage wrote (the runner counts them as written). ``part`` names a balance
    of part of the stage's rows ("train, queries"): the check's name is then ``pools (train, queries)``.
    """

    unit: str
    received: int
    outputs: dict[str, int]
    dropped: dict[str, int] | None = None
    part: str = ""

    def check(self, stage: str, all_drops: Mapping[str, int] | None = None) -> str:
        """``reconcile`` this balance; ``all_drops`` stands in for ``dropped`` when that is None."""
        name = f"{stage} ({self.part})" if self.part else stage
        return reconcile(name, self.unit, self.received, self.outputs, dict(self.dropped if self.dropped is not None
                                                                             else all_drops or {}))


@dataclass
class Outcome:
    """What ``Stage.process`` returns: the stage's own counts (the summary's body) and its balances."""

    counts: dict[str, Any]
    balances: list[Balance] = field(default_factory=list)


class Stage:
    """One pipeline stage. A subclass sets the class attributes and writes ``process``; the runner does the rest."""

    name: ClassVar[str]
    help: ClassVar[str]  # one line: the `ratio-spark <name>` help
    reads: ClassVar[Mapping[str, tuple[str, ...]]] = {}  # table -> the columns the stage uses
    writes: ClassVar[tuple[str, ...]] = ()  # tables it replaces; their columns are TABLES[name]
    drops_table: ClassVar[str | None] = "drops"  # where its drops go (ingest: rejects); None: it drops nothing
    settings: ClassVar[str | None] = None  # its section of the configuration (``io.settings``)
    files: ClassVar[Mapping[str, str]] = {}  # file inputs: what -> the setting that names it (``io.file(what)``)

    @property
    def drop_reasons(self) -> tuple[str, ...]:
        return reasons_of(self.name)

    def setting(self, config: Any, key: str) -> Any:
        """The value of a dotted setting (``"mining.lexicon"``) of ``config``."""
        return reduce(getattr, key.split("."), config)

    def process(self, io: Any, **options: Any) -> Outcome:
        """Read the inputs through ``io`` (a ``runner.StageIO``: not imported here, the runner imports the stages),
        write the outputs and drops through it; return the counts and balances."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<stage {self.name}>"
