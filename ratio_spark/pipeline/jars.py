"""Fetch the JVM jars (Delta Lake, Spark NLP) once with Maven and cache them.

Spark's own Ivy resolver cannot always reach a registry (it cannot on our build machines), while
Maven can; so we resolve with Maven and hand Spark local jars. The cache lives outside the source
tree (``~/.cache/ratio-spark/jars/<profile>``) so fresh clones, test runs and reruns share it.
"""

from __future__ import annotations

import shutil
import subprocess
from importlib import resources
from pathlib import Path

from ratio_spark.core import paths
from ratio_spark.core.errors import UserError

DEFAULT_PROFILE = "spark35"
_COMPLETE_MARKER = ".complete"


POM = resources.files("ratio_spark.pipeline") / "maven" / "pom.xml"  # a real file only as_file() guarantees


def is_cached(profile: str = DEFAULT_PROFILE, cache_dir: Path | None = None) -> bool:
    return (Path(cache_dir or paths.cache_dir("jars")).expanduser() / profile / _COMPLETE_MARKER).exists()


def ensure_jars(profile: str = DEFAULT_PROFILE, cache_dir: Path | None = None, quiet: bool = True) -> list[Path]:
    """Return the local jar files of ``profile``, resolving them with Maven on first use."""
    target = Path(cache_dir or paths.cache_dir("jars")).expanduser() / profile
    if not is_cached(profile, cache_dir):
        mvn = shutil.which("mvn")
        if mvn is None:
            raise UserError(
                "Maven (mvn) is needed once to fetch the Delta Lake and Spark NLP jars; install it, "
                f"or put the jars in {target} and create {target / _COMPLETE_MARKER}."
            )
        partial = target.with_name(profile + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        with resources.as_file(POM) as pom:  # from a zipped package, a temporary copy
            cmd = [
                mvn, "-B", "-f", str(pom), "-P", profile,
                "dependency:copy-dependencies",
                f"-DoutputDirectory={partial}",
                "-DincludeScope=runtime",
                "-DexcludeGroupIds=org.scala-lang",  # Spark ships its own Scala library
            ]
            if quiet:
                cmd.insert(2, "-q")
            result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise UserError(
                f"Maven could not resolve the jars of profile {profile!r} (check the network and the Maven settings, "
                f"or use spark.jars.mode=packages|provided):\n{result.stdout[-3000:]}{result.stderr[-2000:]}"
            )
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
        (target / _COMPLETE_MARKER).write_text("resolved by " + " ".join(cmd[:4]) + "\n")
    jars = sorted(target.glob("*.jar"))
    if not jars:
        raise UserError(f"no jars in {target}: delete the folder to fetch them again")
    return jars
