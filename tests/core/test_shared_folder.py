"""Where the benchmarks and tests find the project's shared data (``core.provenance.shared_folder``)."""

import subprocess

from ratio_spark.core.provenance import shared_folder


def test_the_shared_folder_is_found_beside_the_checkout_or_the_one_it_was_cloned_from(tmp_path, monkeypatch):
    monkeypatch.delenv("RATIO_SHARED", raising=False)
    checkout, shared = tmp_path / "work" / "main", tmp_path / "work" / "shared"
    checkout.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    subprocess.run(["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "x"], check=True)
    clone = tmp_path / "elsewhere" / "clone"
    subprocess.run(["git", "clone", "-q", str(checkout), str(clone)], check=True)
    # No shared folder anywhere: the one beside the checkout (the caller's error names it).
    assert shared_folder(clone) == clone.parent / "shared"
    shared.mkdir()
    assert shared_folder(checkout) == shared
    assert shared_folder(clone) == shared  # a clone in another folder (CI's temporary clone)
    (clone.parent / "shared").mkdir()
    assert shared_folder(clone) == clone.parent / "shared"  # its own neighbour first
    monkeypatch.setenv("RATIO_SHARED", str(tmp_path / "given"))
    assert shared_folder(clone) == tmp_path / "given"
