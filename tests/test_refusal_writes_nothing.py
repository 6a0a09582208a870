"""A run refused before training leaves no folder behind (README, "Bad input": exit status 2 and
nothing is written), and a folder that existed before the refused run is left as it was."""

from __future__ import annotations

from tests.conftest import FAST, run_cli


def _files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_refused_run_leaves_no_output_folder(tmp_path):
    # a _target_ refusal comes after the declaration was written: the worst case
    proc = run_cli([*FAST, "model._target_=nope.Nope"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "model._target_='nope.Nope'" in proc.stderr and "Nothing was run" in proc.stderr
    assert _files(tmp_path) == []


def test_a_refusal_keeps_a_folder_that_existed_before(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("kept")
    proc = run_cli([*FAST, "train.epochs=0", f"hydra.run.dir={folder}"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "train.epochs=0 must be an integer >= 1" in proc.stderr
    assert (folder / "notes.txt").read_text() == "kept"
