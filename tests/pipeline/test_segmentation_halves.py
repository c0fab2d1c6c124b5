"""The held-out split of the segmentation benchmark (benchmarks/segmentation_quality.py): ScisummNet papers
split by id into a tuning half and a test half (docs/segmentation.md)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from conftest import REPO_ROOT
from prerequisites import missing

SCRIPT = REPO_ROOT / "benchmarks" / "segmentation_quality.py"
_spec = importlib.util.spec_from_file_location("segmentation_quality", SCRIPT)
sq = sys.modules[_spec.name] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sq)


def test_a_papers_half_depends_only_on_its_id():
    ids = [f"X{n:02d}-{m:04d}" for n in range(10) for m in range(100)]
    halves = [sq.paper_half(i) for i in ids]
    assert set(halves) == {"tuning", "test"}
    assert halves == [sq.paper_half(i) for i in reversed(ids)][::-1]
    assert 400 < halves.count("test") < 600  # about half of any large set of ids
    with pytest.raises(ValueError, match="half 'train'"):
        sq.read_sections(sq.DEFAULT_ARCHIVE, half="train")


def test_the_halves_split_the_978_papers():
    if not sq.DEFAULT_ARCHIVE.exists():
        missing(f"ScisummNet archive not found: {sq.DEFAULT_ARCHIVE}")
    everything, _ = sq.read_sections(sq.DEFAULT_ARCHIVE)
    tuning, _ = sq.read_sections(sq.DEFAULT_ARCHIVE, half="tuning")
    test, test_sections = sq.read_sections(sq.DEFAULT_ARCHIVE, half="test")
    assert not set(tuning) & set(test)
    assert sorted(tuning + test) == everything
    assert (len(everything), len(tuning), len(test)) == (978, 475, 503)  # as docs/segmentation.md says
    assert {s.key.split(":")[0] for s in test_sections} <= set(test)  # (one paper, N03-2021, has no sentences)
