"""All-or-nothing writes of an analysis: analysis.json, report.md and analysis.png are replaced
together or not at all, and the message says which."""

from __future__ import annotations

import errno
import os
import shutil

import pytest

from harness.analysis.render import figures
from harness.analysis.analyze import analyze_dir
from harness.tools import analyze as analyze_tool

from ._results_factory import accuracies, make_results, write_results

NAMES = ("analysis.json", "report.md", "analysis.png")


def _analysed_then_one_seed_fewer(tmp_path):
    """A folder analysed at 6 seeds, then a seed's results removed: the next analysis describes 5."""
    root = write_results(tmp_path / "sweep", make_results(accuracies(6, shift=0.5)))
    analyze_dir(root)
    before = {n: (root / n).read_bytes() for n in NAMES}
    shutil.rmtree(root / "runs" / "seed=5")
    return root, before


@pytest.mark.slow
def test_a_full_disk_at_the_figure_replaces_none_of_the_three_and_says_so(tmp_path, monkeypatch, capsys):
    root, before = _analysed_then_one_seed_fewer(tmp_path)

    def disk_full(analysis, path, named=None):  # as atomic_write fails: after json and report were written
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(figures, "write_figure", disk_full)
    assert analyze_tool.main([str(root)]) != 0
    err = " ".join(capsys.readouterr().err.split())
    assert "No space left on device" in err
    assert f"None of analysis.json, report.md, analysis.png in {root} was replaced" in err
    assert "unchanged" in err
    assert {n: (root / n).read_bytes() for n in NAMES} == before  # the three still agree: 6 seeds
    assert not [p for p in root.iterdir() if p.name.startswith(".analysis-new-")]


def test_a_failed_rename_puts_the_old_files_back(tmp_path, monkeypatch):
    root, before = _analysed_then_one_seed_fewer(tmp_path)
    real = os.replace

    def fail_at_the_report(src, dst, *a, **kw):
        if str(dst) == str(root / "report.md") and ".analysis-new-" in str(src) and "/.old/" not in str(src):
            raise OSError(errno.EIO, "Input/output error", str(dst))
        return real(src, dst, *a, **kw)

    monkeypatch.setattr(os, "replace", fail_at_the_report)
    with pytest.raises(OSError) as e:
        analyze_dir(root)
    assert "was replaced" in str(e.value) and e.value.errno == errno.EIO
    assert {n: (root / n).read_bytes() for n in NAMES} == before  # analysis.json, renamed first, was put back


def test_a_written_analysis_replaces_all_three_and_leaves_no_temporary_folder(tmp_path):
    root, before = _analysed_then_one_seed_fewer(tmp_path)
    analysis = analyze_dir(root)
    assert analysis["comparisons"]["B"]["n_pairs"] == 5
    after = {n: (root / n).read_bytes() for n in NAMES}
    assert all(after[n] != before[n] for n in NAMES)
    assert not [p for p in root.iterdir() if p.name.startswith(".analysis-new-")]
    assert oct((root / "report.md").stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old
