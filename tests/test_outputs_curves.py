"""Learning curves in analysis.json and the figure, whatever the logging pattern (issue 17, item 8.1).

Keys logged at different steps, sparse keys, keys absent from some runs, runs that logged no
curve at all (drawn from the per-step losses in result.json), and a figure that fails: the
analysis still ends with its verdict, analysis.json and report.md.
"""

from __future__ import annotations

import json
import logging
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the factory lives beside the tests

import _results_factory as F  # noqa: E402

from harness.analysis import curves
from harness.analysis.render import report as report  # noqa: E402
from harness.analysis.render import summary  # noqa: E402
from harness.analysis.analyze import analyze, analyze_dir  # noqa: E402

FAST = {"bootstrap_resamples": 999}


def _loss_bits(values) -> list[str]:
    """float32 loss bits as result.json records them: 8 hex digits per step."""
    return [struct.pack(">f", v).hex() for v in values]


def _results(curves: dict[tuple[int, str], dict | None], n_seeds: int = 6) -> list[dict]:
    """Factory results whose curve is replaced per (seed, arm): None removes the curve."""
    rs = F.make_results(F.accuracies(n_seeds, shift=0.5))
    for r in rs:
        key = (r["seed"], r["arm"])
        if key in curves:
            if curves[key] is None:
                r.pop("curve", None)
            else:
                r["curve"] = curves[key]
    return rs


def _usable(rs):
    return {(r["seed"], r["arm"]): {"result": r} for r in rs}


def _json_clean(obj) -> None:
    json.dumps(obj, allow_nan=False)  # no NaN, no infinity
    assert "None" not in repr(obj), obj  # no holes in the curves


def test_keys_logged_at_different_steps_sparse_and_absent_are_averaged_where_present():
    every_10 = {"step": [10, 20, 30, 40, 50], "train_loss": [2.0, 1.8, 1.6, 1.4, 1.2],
                "val_bpc": [None, None, None, None, 3.0]}
    sparse = {"step": [10, 50], "train_loss": [2.2, None], "val_bpc": [None, 3.2]}
    no_val = {"step": [10, 30, 50], "train_loss": [2.4, 1.7, 1.0]}
    rs = _results({(0, "A"): every_10, (1, "A"): sparse, (2, "A"): no_val})
    out = curves.curves(_usable([r for r in rs if r["seed"] < 3]), ["A", "B"])
    _json_clean(out)
    tl = out["A"]["train_loss"]
    assert tl["step"] == [10, 20, 30, 40, 50]
    assert tl["mean"][0] == pytest.approx((2.0 + 2.2 + 2.4) / 3)
    assert tl["mean"][2] == pytest.approx((1.6 + 1.7) / 2)
    assert tl["mean"][4] == pytest.approx((1.2 + 1.0) / 2)  # the sparse run's hole is skipped, not a zero
    assert tl["count"] == [3, 1, 2, 1, 2] and tl["n"] == 3
    assert tl["std"][1] == 0.0 and tl["std"][0] == pytest.approx(np.std([2.0, 2.2, 2.4], ddof=1))
    vb = out["A"]["val_bpc"]
    assert vb["step"] == [50] and vb["mean"] == [pytest.approx(3.1)] and vb["n"] == 2
    assert out["B"]["train_loss"]["step"] == [1, 2, 3]  # the factory's own curve, every run


def test_a_run_without_a_logged_curve_gets_its_train_loss_from_the_per_step_losses():
    rs = _results({(s, a): None for s in range(6) for a in "AB"})
    losses = {0: [2.5, 2.0, 1.5, 1.25], 1: [2.0, 1.5, 1.0, 0.5]}
    for r in rs:
        r["fingerprints"]["steps"] = {"loss": _loss_bits(losses[r["seed"] % 2]), "params": ["0" * 16] * 4}
    out = curves.curves(_usable(rs), ["A", "B"])
    _json_clean(out)
    tl = out["A"]["train_loss"]
    assert tl["step"] == [1, 2, 3, 4]
    assert tl["mean"] == pytest.approx([2.25, 1.75, 1.25, 0.875])
    assert tl["n"] == 6 and tl["source"] == "per-step losses (result.json fingerprints)"


def test_the_figure_draws_sparse_curves_and_old_analyses_with_holes():
    from harness.analysis.render.figures import figure

    rs = _results({(s, "A"): {"step": [10, 20, 30], "train_loss": [None, 1.5, None]} for s in range(6)})
    a = analyze(rs, **FAST)
    fig = figure(a, title=summary.title(a), fmt=summary.Fmt(a))
    assert len(fig.axes[3].lines) == 2
    # an analysis.json written before curves were gathered this way has None inside mean and std
    a["curves"]["A"]["train_loss"] = {"step": [10, 20, 30], "mean": [None, 1.5, 1.2], "std": [None, None, 0.1], "n": 6}
    fig = figure(a, title=summary.title(a), fmt=summary.Fmt(a))
    assert list(fig.axes[3].lines[0].get_xdata()) == [20, 30]


@pytest.mark.slow
def test_logged_every_10_and_every_25_steps_the_analysis_ends_with_its_verdict_and_files(tmp_path):
    # train_loss every 10 steps, val_bpc every 25: the rows of one step hold only what was logged there
    steps = sorted(set(range(10, 101, 10)) | {25, 75})
    curve = {"step": steps, "train_loss": [2.0 - 0.01 * s if s % 10 == 0 else None for s in steps],
             "val_bpc": [3.0 - 0.001 * s if s % 25 == 0 else None for s in steps]}
    only_val = {"step": [50, 100], "val_bpc": [2.9, 2.8]}  # train_loss never logged in this run
    rs = _results({**{(s, a): curve for s in range(6) for a in "AB"}, (0, "B"): only_val})
    root = F.write_results(tmp_path / "exp", rs)
    analysis = analyze_dir(root, **FAST)
    assert analysis["comparisons"]["B"]["verdict"]["code"]
    for name in ("analysis.json", "report.md", "analysis.png"):
        assert (root / name).is_file(), name
    _json_clean(json.loads((root / "analysis.json").read_text())["curves"])


@pytest.mark.slow
def test_a_figure_that_fails_is_a_warning_naming_the_file(tmp_path, monkeypatch, caplog, capsys):
    from harness.analysis.render import figures as figures
    from harness.tools.analyze import main

    def broken(*args, **kwargs):
        raise TypeError("unsupported operand type(s) for -: 'NoneType' and 'NoneType'")

    monkeypatch.setattr(figures, "figure", broken)
    root = F.write_results(tmp_path / "exp", F.make_results(F.accuracies(6, shift=0.5)))
    (root / "analysis.png").write_bytes(b"an older figure")  # must not survive to look current
    with caplog.at_level(logging.WARNING):
        assert main([str(root), "--bootstrap-resamples", "999"]) == 0
    assert "verdict" in capsys.readouterr().out
    assert (root / "analysis.json").is_file() and (root / "report.md").is_file()
    assert not (root / "analysis.png").exists()
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(root / "analysis.png") in m and "NoneType" in m for m in warned), warned


@pytest.mark.parametrize("n_runs", [1, 2, 7, 300])
def test_runs_logged_at_the_same_steps_give_each_steps_mean_and_sd_of_those_runs_exactly(n_runs):
    """The usual sweep (every run logs the same steps) takes a vectorised path: its numbers are
    the ones each step's own values give, to the bit, and a non-finite value falls back to the
    step-by-step path, which leaves that run out at that step only."""
    rng = np.random.default_rng(n_runs)
    steps = [10, 20, 30, 40]
    values = rng.normal(2.0, 0.5, (n_runs, len(steps))).round(6)
    logged = {(seed, arm): {"step": steps, "train_loss": values[seed].tolist()}
              for seed in range(n_runs) for arm in ("A",)}
    rs = [r for r in _results(logged, n_seeds=n_runs) if r["arm"] == "A"]
    got = curves.curves(_usable(rs), ["A"])["A"]["train_loss"]
    assert got["step"] == steps and got["count"] == [n_runs] * 4 and got["n"] == n_runs
    assert got["mean"] == [float(np.array(values[:, j]).mean()) for j in range(4)]
    assert got["std"] == [float(np.array(values[:, j]).std(ddof=1)) if n_runs > 1 else 0.0 for j in range(4)]
    if n_runs > 1:
        rs[0]["curve"]["train_loss"][1] = float("nan")
        got = curves.curves(_usable(rs), ["A"])["A"]["train_loss"]
        assert got["count"] == [n_runs, n_runs - 1, n_runs, n_runs]
        assert got["mean"][1] == float(np.array(values[1:, 1]).mean())


@pytest.mark.parametrize("comparisons", [1, 12])
def test_the_figure_keeps_its_title_labels_and_ticks_inside_the_image_without_overlap(comparisons):
    # the figure has fixed margins (no layout engine): what they must hold is checked here, on a
    # title of one line (one comparison) and of several (many, wrapped)
    from harness.analysis.render.figures import figure

    rs = _results({(s, "A"): {"step": [10, 20, 30], "train_loss": [2.0, 1.5, 1.25]} for s in range(6)})
    a = analyze(rs, **FAST)
    fig = figure(a, title="; ".join([summary.title(a)] * comparisons), fmt=summary.Fmt(a))
    assert fig._suptitle.get_text().count("\n") == (0 if comparisons == 1 else 2)
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    heading = fig._suptitle.get_window_extent(renderer)
    assert box.y0 <= heading.y0 and heading.y1 <= box.y1 and box.x0 <= heading.x0 and heading.x1 <= box.x1
    for ax in fig.axes:
        tight = ax.get_tightbbox(renderer)  # the panel with its title, tick labels and axis labels
        assert box.x0 <= tight.x0 and tight.x1 <= box.x1 and box.y0 <= tight.y0 and tight.y1 <= box.y1, ax.get_title()
        assert tight.y1 <= heading.y0, f"{ax.get_title()!r} runs into the figure's title"
    top, bottom = fig.axes[0].get_tightbbox(renderer), fig.axes[2].get_tightbbox(renderer)
    assert bottom.y1 <= top.y0, "the lower panels' titles run into the upper panels' tick labels"
    left, right = fig.axes[0].get_tightbbox(renderer), fig.axes[1].get_tightbbox(renderer)
    assert left.x1 <= right.x0, "the right panels' labels run into the left panels"
