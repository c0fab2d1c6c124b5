"""A JVM class-data-sharing archive for local sessions: a shorter start for every Spark command (issue 28, item 5).

A local command spends seconds of its fixed cost loading and verifying the same ~15,000 classes of Spark and Delta
Lake (docs/performance.md, "The floor of a Spark command"). The JVM can write the classes one run loaded into an
archive (``-XX:ArchiveClassesAtExit``) and map them from it in later runs (``-XX:SharedArchiveFile``). The archive
only fits the class path and the JDK it was written with, so it is kept per class path, JDK and pyspark
(``archive_path``); a JVM that finds it does not fit (another JDK build, a changed jar) ignores it and loads its
classes as usual, so a stale archive costs speed, never correctness.

``ratio-spark jars --class-archive`` (run by ``scripts/setup.sh``) writes it by running a small Delta session in a
child process; ``session.build_spark_session`` uses it when it exists (``spark.class_archive``, default on).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ratio_spark.core.errors import UserError

if TYPE_CHECKING:
    from ratio_spark.pipeline.settings import SparkConfig

_SILENT = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"  # an archive that does not fit: no warning, no error


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_path(jars: list[Path], cache_dir: Path) -> Path | None:
    """Where the archive of a local session with ``jars`` on its class path lives (None: no java found). The name
    is a hash of what the archive depends on: the jars (path, size, time), Spark's own jars and the java binary."""
    import pyspark

    java = _java()
    if java is None:
        return None
    spark_jars = Path(pyspark.__file__).parent / "jars"
    parts = [str(java), str(java.stat().st_mtime_ns), pyspark.__version__, str(spark_jars.stat().st_mtime_ns)]
    for jar in jars:
        stat = jar.stat()
        parts += [str(jar), str(stat.st_size), str(stat.st_mtime_ns)]
    key = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return cache_dir / "class-archive" / f"{key}.jsa"


def java_options(archive: Path) -> str:
    """The driver JVM options that map ``archive``."""
    return f"-XX:SharedArchiveFile={archive} {_SILENT}"


def with_java_options(conf: dict[str, str], options: str) -> dict[str, str]:
    """``conf`` with ``options`` added to the driver's JVM options, after any the configuration gives."""
    given = conf.get("spark.driver.extraJavaOptions", "").strip()
    return {**conf, "spark.driver.extraJavaOptions": f"{given} {options}".strip()}


def build_archive(config: SparkConfig) -> Path:
    """Write the archive of the local sessions ``config`` describes, unless it is there: a child process starts one
    with ``-XX:ArchiveClassesAtExit``, writes, reads and counts a small Delta table, and exits; the JVM writes the
    archive as it exits, into a temporary file that then replaces the archive at once."""
    from ratio_spark.pipeline.jars import ensure_jars, profile_folder

    if not (config.master or "").startswith("local") or config.jars.mode != "local":
        raise UserError("a class archive serves local sessions with local jars (spark.master local[...], "
                        f"spark.jars.mode local); this configuration has master {config.master!r}, mode {config.jars.mode!r}")
    jars = ensure_jars(config.jars.profile, config.jars.cache_dir, wanted=("delta",))
    target = archive_path(jars, profile_folder(config.jars.profile, config.jars.cache_dir))
    if target is None:
        raise UserError("no java found (JAVA_HOME or java on PATH): Spark needs one")
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.stem}.{os.getpid()}.partial")
    # (a session whose options name an archive maps none of ours: ``session.class_archive``)
    dumping = config.model_copy(update={"conf": with_java_options(config.conf, f"-XX:ArchiveClassesAtExit={partial} {_SILENT}")})
    with tempfile.TemporaryDirectory(prefix="class-archive-") as work:
        command = [sys.executable, "-c", "import sys; from ratio_spark.pipeline.session import start_and_exit; "
                   "start_and_exit(sys.argv[1], sys.argv[2])", work, dumping.model_dump_json()]
        result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0 or not partial.exists():
        partial.unlink(missing_ok=True)
        last = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise UserError(f"could not write the class archive (exit {result.returncode}): {last[0]}")
    partial.replace(target)
    return target
