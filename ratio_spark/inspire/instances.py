"""An instance version folder as the service and the scorer read it, checked against its manifest."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path

from ratio_spark.core.errors import UserError
from ratio_spark.inspire.manifest import sha256_file


class InstanceError(UserError, ValueError):
    """The instance folder is incomplete or does not match its manifest."""


@dataclass(frozen=True)
class Instance:
    instance_id: str
    brief: str
    cutoff: dt.date
    target_id: str  # evaluator-only: the service hides it, the scorer never needs it
    gains: dict[str, float]  # evaluator-only: graded antecedent id -> gain
    flagged: bool  # the brief shares many words with the target title (the lexical check)


@dataclass
class InstanceSet:
    folder: Path
    manifest: dict
    instances: dict[str, Instance]  # in manifest order

    @classmethod
    def load(cls, folder: str | Path) -> "InstanceSet":
        folder = Path(folder)
        manifest_path = folder / "manifest.json"
        if not manifest_path.exists():
            raise InstanceError(f"{folder} has no manifest.json: build it with `ratio-spark inspire build`")
        manifest = json.loads(manifest_path.read_text())
        instances = {}
        for iid in manifest["splits"]["eval"]:
            entry = manifest["instances"][iid]
            path = folder / entry["file"]
            if not path.exists() or sha256_file(path) != entry["sha256"]:
                raise InstanceError(f"{path} is missing or differs from the manifest's SHA-256: rebuild the version")
            data = json.loads(path.read_text())
            evaluator = data["evaluator"]
            instances[iid] = Instance(
                iid, data["policy"]["brief"], dt.date.fromisoformat(data["policy"]["cutoff"]),
                evaluator["target"]["paper_id"], {a["paper_id"]: float(a["gain"]) for a in evaluator["antecedents"]},
                bool(evaluator["brief"]["flagged"]),
            )
        corpus = folder / manifest["corpus"]["file"]
        if not corpus.exists() or sha256_file(corpus) != manifest["corpus"]["sha256"]:
            raise InstanceError(f"{corpus} is missing or differs from the manifest's SHA-256: rebuild the version")
        return cls(folder, manifest, instances)

    @property
    def corpus_path(self) -> Path:
        return self.folder / self.manifest["corpus"]["file"]

    def get(self, instance_id: str) -> Instance:
        try:
            return self.instances[instance_id]
        except KeyError:
            raise InstanceError(f"unknown instance {instance_id!r}") from None
