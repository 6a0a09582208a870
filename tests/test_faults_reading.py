"""Bounded reading: a huge result.json, a FIFO, a symlink loop or an unreadable file is named and
skipped, the rest is analysed; the experiment's resume reruns such a unit and sets the entry aside."""

from __future__ import annotations

import errno
import json
import os

import pytest
from harness import results
from harness.results import MAX_RESULT_BYTES, load_tree

from ._results_factory import accuracies, make_results, write_results
from .conftest import FAST, run_cli


def _damaged_tree(tmp_path):
    root = write_results(tmp_path / "sweep", make_results(accuracies(6, shift=0.5)))
    bad = {}
    for seed, kind in ((7, "loop"), (8, "fifo"), (9, "huge")):
        folder = root / "runs" / f"seed={seed}" / "arm=A"
        folder.mkdir(parents=True)
        path = folder / "result.json"
        if kind == "loop":
            os.symlink("result.json", path)  # a symlink to itself
        elif kind == "fifo":
            os.mkfifo(path)  # opening it for reading would wait for a writer for ever
        else:
            with open(path, "wb") as f:  # sparse: a size above the bound without the disk space
                f.truncate(MAX_RESULT_BYTES + 1)
        bad[kind] = f"runs/seed={seed}/arm=A/result.json"
    return root, bad


@pytest.mark.slow
def test_the_analysis_names_each_damaged_entry_and_analyses_the_rest(tmp_path):
    root, bad = _damaged_tree(tmp_path)
    done = run_cli([str(root)], module="harness.analyze", timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    analysis = json.loads((root / "analysis.json").read_text())
    reasons = {u["path"]: u["reason"] for u in analysis["unreadable"]}
    assert "Too many levels of symbolic links" in reasons[bad["loop"]]
    assert "not a regular file (a FIFO)" in reasons[bad["fifo"]]
    assert "above the 64 MB" in reasons[bad["huge"]] and "without reading it" in reasons[bad["huge"]]
    assert len(analysis["unreadable"]) == 3
    assert sorted(analysis["arms"]) == ["A", "B"] and analysis["comparisons"]["B"]["n_pairs"] == 6
    screen = " ".join(done.stdout.split())
    assert all(path in screen for path in bad.values())


def test_a_file_that_cannot_be_opened_is_named_with_the_reason(tmp_path, monkeypatch):
    """Permission: simulated, since a test running as root may read any file."""
    root = write_results(tmp_path / "sweep", make_results(accuracies(4, shift=0.5)))
    denied = str(root / "runs" / "seed=2" / "arm=B" / "result.json")
    real_open = os.open

    def refuse(path, *a, **kw):
        if os.fspath(path) == denied:
            raise PermissionError(errno.EACCES, "Permission denied", denied)
        return real_open(path, *a, **kw)

    monkeypatch.setattr(os, "open", refuse)
    loaded = load_tree(root)
    assert loaded.unreadable == [(denied, "could not be read: Permission denied")]
    assert len(loaded.results) == 7


@pytest.mark.slow
def test_resume_reruns_a_unit_whose_result_is_a_fifo_or_a_symlink_loop(tmp_path):
    out = tmp_path / "out"
    fifo_dir, loop_dir = out / "runs" / "seed=0" / "arm=A", out / "runs" / "seed=1" / "arm=B"
    for d in (fifo_dir, loop_dir):
        d.mkdir(parents=True)
    os.mkfifo(fifo_dir / "result.json")
    os.symlink("result.json", loop_dir / "result.json")
    done = run_cli([*FAST, "determinism.threads=1", "repro.certificate=false", f"hydra.run.dir={out}"])
    assert done.returncode == 0, done.stderr[-3000:]
    log = (out / "harness.log").read_text()
    assert "seed=0 arm=A: rerun, the existing result file is unreadable (not a regular file (a FIFO)" in log
    # (units.py logs its "rerun, <why>" line only when path.exists(), False for a loop: it says where it kept it)
    assert "seed=1 arm=B: previous result kept at" in log
    assert len([r for r in load_tree(out).results if r["status"] == "completed"]) == 6
    assert load_tree(out).unreadable == []
    kept = list((fifo_dir / "superseded").iterdir()) + list((loop_dir / "superseded").iterdir())
    assert len(kept) == 2 and any(p.is_fifo() for p in kept) and any(p.is_symlink() for p in kept)


def test_a_file_that_grows_after_its_size_was_read_is_read_to_its_end(tmp_path, monkeypatch):
    # read_json reads size + 1 bytes in one call, then to the end: a file still being written when
    # its size was taken (fstat says 10 bytes here) is parsed whole, not cut at that size
    path = tmp_path / "result.json"
    path.write_text(json.dumps({"values": list(range(50_000))}))
    real_fstat = os.fstat

    class Smaller:
        def __init__(self, st):
            self.st_mode, self.st_size = st.st_mode, 10

    monkeypatch.setattr(os, "fstat", lambda fd: Smaller(real_fstat(fd)))
    assert results.read_json(path)["values"][-1] == 49_999
