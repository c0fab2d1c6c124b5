"""Fetch the JVM jars (Delta Lake, Spark NLP) once with Maven and cache them, one folder per component.

Spark's own Ivy resolver cannot always reach a registry (it cannot on our build machines), while
Maven can; so we resolve with Maven and hand Spark local jars. The cache lives outside the source
tree (``~/.cache/ratio-spark/jars/<profile>/<component>``) so fresh clones, test runs and reruns share it.
Every Spark command needs ``delta``; only ``segment.engine: sparknlp`` needs ``sparknlp`` (~270 MB of jars
that a session otherwise never loads: ``components``).
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from ratio_spark.core import paths
from ratio_spark.core.errors import UserError

if TYPE_CHECKING:
    from ratio_spark.pipeline.settings import PipelineConfig

DEFAULT_PROFILE = "spark35"
COMPONENTS = ("delta", "sparknlp")
SPARK_NLP_GROUP = "com.johnsnowlabs.nlp"  # the Maven group of Spark NLP's coordinates (spark.jars.packages)
_COMPLETE_MARKER = ".complete"


POM = resources.files("ratio_spark.pipeline") / "maven" / "pom.xml"  # a real file only as_file() guarantees


def components(config: PipelineConfig, stages: Iterable[str] = ("segment",)) -> tuple[str, ...]:
    """The jar components a command that runs ``stages`` needs: Delta Lake always, Spark NLP only for the segment
    stage with ``segment.engine: sparknlp``."""
    if config.segment.engine == "sparknlp" and "segment" in stages:
        return COMPONENTS
    return ("delta",)


def profile_folder(profile: str, cache_dir: Path | str | None) -> Path:
    """The cache folder of one Spark line: a folder per component, and the class archive (``class_archive``)."""
    return Path(cache_dir or paths.cache_dir("jars")).expanduser() / profile


def _folder(profile: str, component: str, cache_dir: Path | str | None) -> Path:
    if component not in COMPONENTS:
        raise ValueError(f"unknown jar component {component!r}; expected one of {COMPONENTS}")
    return profile_folder(profile, cache_dir) / component


def is_cached(profile: str = DEFAULT_PROFILE, cache_dir: Path | str | None = None,
              wanted: Iterable[str] = COMPONENTS) -> bool:
    return all((_folder(profile, c, cache_dir) / _COMPLETE_MARKER).exists() for c in wanted)


def spark_profiles() -> list[str]:
    """The Spark lines the pom has a profile for (its other profiles pick a component: ``COMPONENTS``)."""
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    ids = [e.text for e in ET.fromstring(POM.read_bytes()).findall("m:profiles/m:profile/m:id", ns)]
    return [i for i in ids if i not in COMPONENTS]


def _resolve(profile: str, component: str, target: Path, quiet: bool) -> None:
    if profile not in spark_profiles():  # else Maven fails with a page of its own about an unset artifact
        raise UserError(f"unknown jars profile {profile!r}; the pom has: {', '.join(spark_profiles())}")
    mvn = shutil.which("mvn")
    if mvn is None:
        raise UserError(
            f"Maven (mvn) is needed once to fetch the {component} jars; install it, "
            f"or put the jars in {target} and create {target / _COMPLETE_MARKER}."
        )
    partial = target.with_name(component + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    with resources.as_file(POM) as pom:  # from a zipped package, a temporary copy
        cmd = [
            mvn, "-B", "-f", str(pom), "-P", f"{profile},{component}",
            "dependency:copy-dependencies",
            f"-DoutputDirectory={partial}",
            "-DincludeScope=runtime",
            "-DexcludeGroupIds=org.scala-lang",  # Spark ships its own Scala library
        ]
        if quiet:
            cmd.insert(2, "-q")
        result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0 or not any(partial.glob("*.jar")):
        raise UserError(
            f"Maven could not resolve the {component} jars of profile {profile!r} (check the network, the Maven "
            f"settings and the profile, or use spark.jars.mode=packages|provided):\n"
            f"{result.stdout[-3000:]}{result.stderr[-2000:]}"
        )
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    (target / _COMPLETE_MARKER).write_text("resolved by " + " ".join(cmd[:5]) + "\n")


def _resolve_once(profile: str, component: str, target: Path, quiet: bool) -> None:
    """Resolve under an exclusive lock: two processes that start at once (test workers, two commands) would
    otherwise run Maven side by side on the same local repository and partial folder, and copy half-written jars."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(component + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (target / _COMPLETE_MARKER).exists():  # another process may have finished while we waited
            _resolve(profile, component, target, quiet)


def ensure_jars(profile: str = DEFAULT_PROFILE, cache_dir: Path | str | None = None, quiet: bool = True,
                wanted: Iterable[str] = COMPONENTS) -> list[Path]:
    """Return the local jar files of the components ``wanted`` of ``profile``, resolving them with Maven on first
    use (each jar once, by file name, in component order)."""
    jars: dict[str, Path] = {}
    for component in wanted:
        target = _folder(profile, component, cache_dir)
        if not (target / _COMPLETE_MARKER).exists():
            _resolve_once(profile, component, target, quiet)
        found = sorted(target.glob("*.jar"))
        if not found:
            raise UserError(f"no jars in {target}: delete the folder to fetch them again")
        for jar in found:
            jars.setdefault(jar.name, jar)
    return list(jars.values())
