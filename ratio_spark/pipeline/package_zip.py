"""The package as one zip for ``spark-submit --py-files`` (README, "On a cluster"): what the driver and the
executors import, with its data folders. ``ratio-spark zip`` writes it.

Zipping the folder ``ratio_spark/`` alone is not enough: in a source tree the shipped lexicons are the top-level
``lexicons/``, beside the package. The zip carries them where a wheel does, as ``ratio_spark/lexicons/``, which is
where the loader looks when the package is imported from a zip (``lexicon.loader.SHIPPED_DIR``).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import ratio_spark
from ratio_spark.core.errors import UserError
from ratio_spark.lexicon.loader import SHIPPED_DIR

LEXICONS_IN_PACKAGE = Path("ratio_spark") / "lexicons"


def package_files() -> list[tuple[Path, str]]:
    """(file or folder on disk, its name in the zip), folders too as ``python -m zipfile -c`` writes them: the package
    without ``__pycache__``, and the shipped lexicons under ``ratio_spark/lexicons/`` (installed from a wheel, the
    package holds them already: taken once)."""
    if not isinstance(SHIPPED_DIR, Path):
        raise UserError(f"the package is imported from {SHIPPED_DIR}, not from a folder: run `ratio-spark zip` "
                        "where ratio-spark is installed or checked out")
    package = Path(ratio_spark.__file__).parent
    entries = [(path, path.relative_to(package.parent)) for path in sorted(package.rglob("*"))
               if "__pycache__" not in path.parts and path.relative_to(package).parts[0] != "lexicons"]
    entries += [(SHIPPED_DIR, LEXICONS_IN_PACKAGE)]
    entries += [(path, LEXICONS_IN_PACKAGE / path.relative_to(SHIPPED_DIR)) for path in sorted(SHIPPED_DIR.rglob("*"))]
    return [(path, name.as_posix()) for path, name in entries]


def write_package_zip(out: str | Path) -> Path:
    """Write the package zip to ``out`` (replacing it); returns its path."""
    out = Path(out)
    entries = package_files()
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w") as archive:
        for path, name in entries:
            archive.write(path, name)
    return out
