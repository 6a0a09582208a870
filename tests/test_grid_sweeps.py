"""Issue 13, items 7-9: real multirun sweeps (tiny: 10 steps on 256 digits, no certificate rerun).

- a grid around an A/B lands in ONE sweep folder, is analysed per grid point, and summarised;
- a boolean override does not split the sweep folder from the one the callback analyses;
- job folders name the (seed, arm) they hold, so a wider sweep in the same folder resumes.
"""

from __future__ import annotations

import shlex


import pytest
from statsmodels.stats.multitest import multipletests

from harness.tools.analyze import main
from harness.results import load_tree, read_json

from .conftest import FAST, run_cli

TINY = [o for o in FAST if not o.startswith(("train.max_steps", "data.train_limit"))] + [
    "train.max_steps=10", "data.train_limit=256", "repro.certificate=false",
]


@pytest.mark.slow
def test_a_grid_around_an_ab_is_analysed_per_point_in_one_folder(tmp_path, capsys):
    # repro.certificate=false as the user types it: the jobs see False (issue 13, item 9)
    proc = run_cli(["-m", *TINY, "optim.lr=0.01,0.05", "seed=range(0,3)"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "raised" not in proc.stderr and "Holm" in proc.stdout  # the callback renders the grid summary
    (sweep,) = (tmp_path / "multirun" / "loss_ab").iterdir()  # one folder for the whole grid
    assert "repro.certificate" not in sweep.name and "optim.lr=0.01,0.05" in sweep.name  # it changes no bit
    assert sorted(p.relative_to(sweep).as_posix() for p in sweep.glob("*/seed=*")) == [
        f"optim.lr={lr}/seed={s}" for lr in ("0.01", "0.05") for s in range(3)
    ]
    assert len(load_tree(sweep).results) == 12
    said = " ".join((proc.stdout + proc.stderr).split())
    again = f"python -m harness.analyze {shlex.quote(str(sweep.relative_to(tmp_path)))} --grid"
    assert f"analyse a whole tree with: {again}" in said  # the command that works on a grid, ready to paste

    grid = read_json(sweep / "grid.json")  # written by the sweep's callback
    assert grid["swept"] == ["optim.lr"]
    assert [p["setting"] for p in grid["points"]] == [{"optim.lr": 0.01}, {"optim.lr": 0.05}]
    raw = [p["comparisons"]["B"]["pvalue"] for p in grid["points"]]
    holm = [p["comparisons"]["B"]["pvalue_holm_grid"] for p in grid["points"]]
    assert holm == pytest.approx(multipletests(raw, method="holm")[1])
    for point in grid["points"]:
        own = read_json(sweep / point["folder"] / "analysis.json")
        assert own["grid_point"] == point["setting"] and own["comparisons"]["B"]["n_pairs"] == 3
        assert point["comparisons"]["B"]["mean_diff"] == own["comparisons"]["B"]["mean_diff"]
        assert point["comparisons"]["B"]["ci"] == own["comparisons"]["B"]["t"]["ci"]
    assert (sweep / "grid.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "optim.lr=0.05" in (sweep / "grid.md").read_text()
    assert not (sweep / "analysis.json").exists()  # nothing at the root claims to be one A/B

    # harness.analyze gives the same summary; without --grid it refuses, naming the setting
    assert main([str(sweep), "--grid", "--no-write", "--bootstrap-resamples", "999"]) == 0
    out = capsys.readouterr().out
    assert "optim.lr=0.01" in out and "Holm" in out
    assert main([str(sweep), "--no-write"]) == 2
    err = capsys.readouterr().err
    assert "optim.lr: 0.01 vs 0.05" in err and "--grid" in err


@pytest.mark.slow
def test_a_wider_sweep_in_the_same_folder_resumes_by_seed_and_arm(tmp_path):
    args = ["-m", *TINY, "ab.seeds=[0,1,2,3]", "arm=A,B"]
    first = run_cli([*args, "seed=range(0,3)"], cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    (sweep,) = (tmp_path / "multirun" / "loss_ab").iterdir()
    before = {p: p.read_bytes() for p in sweep.rglob("result.json")}
    assert len(before) == 6
    assert sorted(p.parent.parent.parent.parent.name for p in before) == [
        f"seed={s},arm={a}" for s in range(3) for a in "AB"
    ]

    wider = run_cli([*args, "seed=range(0,4)"], cwd=tmp_path)
    assert wider.returncode == 0, wider.stderr[-3000:]
    assert [p.name for p in (tmp_path / "multirun" / "loss_ab").iterdir()] == [sweep.name]
    log = wider.stdout + wider.stderr
    assert log.count(": skipped, completed with the same config and code") == 6
    after = list(sweep.rglob("result.json"))
    assert len(after) == 8
    for path, content in before.items():
        assert path.read_bytes() == content
    analysis = read_json(sweep / "analysis.json")
    assert analysis["comparisons"]["B"]["n_pairs"] == 4 and analysis["identity"]["copies"] == []


# -- issue 19, item 4: does the effect depend on the grid value? (synthetic result files, no training) --


def _grid_of(tmp_path, shifts: dict, *, n_seeds=8, same_noise=False):
    """Result files of a grid over optim.lr: at each lr, arm B is shifted by shifts[lr] points."""
    from harness import results

    from . import _results_factory as F

    for i, (lr, shift) in enumerate(shifts.items()):
        items = F.make_results(F.accuracies(n_seeds, shift=shift, rng_seed=0 if same_noise else i))
        for r in items:
            r["config"]["optim"] = {"lr": lr}
            r["config_hash"] = results.config_digest(r["config"])
            r["base_hash"] = results.config_digest(r["config"], exclude_factor=r["factor"])
        F.write_results(tmp_path / f"optim.lr={lr}", items)
    return tmp_path


@pytest.mark.slow
def test_a_grid_says_whether_the_effect_depends_on_the_grid_value(tmp_path):
    import numpy as np
    from scipy.stats import alexandergovern, ttest_1samp
    from statsmodels.stats.meta_analysis import combine_effects

    from harness.analysis.grid import analyze_grid_dir
    from harness.stats.meta.random_effects import effect_slope, random_effects

    # the gain shrinks as lr grows; every point decided (an undecided one adds a seeds-needed search:
    # stats/power/seeds_needed.py, ~10 s a point under load)
    root = _grid_of(tmp_path, {0.01: 3.0, 0.02: 2.0, 0.04: 1.0})
    summary = analyze_grid_dir(root)
    block = summary["across_points"]["arms"]["B"]
    assert summary["across_points"]["numeric_key"] == "optim.lr" and block["conditions"] == 3
    # the per-point effects and standard errors are the points' own paired ones
    y, se = [], []
    for point in summary["points"]:
        own = read_json(root / point["folder"] / "analysis.json")["comparisons"]["B"]
        d = np.array([b - a for _, a, b in own["pairs"]])
        y.append(d.mean())
        se.append(d.std(ddof=1) / np.sqrt(len(d)))
    assert block["effects"] == pytest.approx(y) and block["standard_errors"] == pytest.approx(se, rel=1e-9)
    # Cochran's Q as statsmodels computes it; the pooled estimate and slope as harness.stats.meta.random_effects gives them
    sm = combine_effects(np.array(y), np.array(se) ** 2)
    assert block["heterogeneity"]["q"] == pytest.approx(sm.q)
    # the decision: Alexander-Govern on the per-seed differences (each point its own seed variance)
    diffs = [np.array([b - a for _, a, b in read_json(root / p["folder"] / "analysis.json")["comparisons"]["B"]["pairs"]])
             for p in summary["points"]]
    assert block["heterogeneity"]["pvalue"] == pytest.approx(alexandergovern(*diffs).pvalue, rel=1e-6)
    assert block["heterogeneity"]["differs"]
    # each (point, arm) p-value Holm-adjusted over the grid, by the one Holm of harness.stats
    from harness.stats import holm

    raw = [point["comparisons"]["B"]["pvalue"] for point in summary["points"]]
    assert [point["comparisons"]["B"]["pvalue_holm_grid"] for point in summary["points"]] == holm(raw).tolist()
    assert holm(raw).tolist() == pytest.approx(multipletests(raw, method="holm")[1])
    # the average: a t over the 3 effects; the random-effects estimate beside it
    assert block["pooled"]["estimate"] == pytest.approx(np.mean(y)) and "not a random sample" in block["pooled"]["label"]
    assert block["pooled"]["pvalue"] == pytest.approx(ttest_1samp(y, 0.0).pvalue)
    re = random_effects(y, np.array(se) ** 2)
    assert block["pooled"]["random_effects"]["estimate"] == pytest.approx(re.estimate)
    # the slope: least squares of the effects on lr; the REML meta-regression beside it
    assert block["slope"]["per_unit"] == pytest.approx(np.polyfit([0.01, 0.02, 0.04], y, 1)[0])
    assert block["slope"]["per_unit"] < 0
    slope = effect_slope(y, np.array(se) ** 2, [0.01, 0.02, 0.04])
    assert block["slope"]["meta_regression"]["per_unit"] == pytest.approx(slope.slope)
    grid = read_json(root / "grid.json")
    assert grid["across_points"]["arms"]["B"]["heterogeneity"]["q"] == pytest.approx(sm.q)
    md = (root / "grid.md").read_text()
    assert "Does the effect depend on the grid value?" in md and "per unit of optim.lr" in md and "Cochran's Q" in md
    assert (root / "grid.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the figure gains a forest plot per arm beside the effects (the same grid: one analysis, not two)
    from matplotlib.image import imread

    from harness.analysis.grid import write_figure

    del summary["across_points"]  # the figure as it was before issue 19: one panel
    write_figure(summary, tmp_path / "plain.png")
    assert imread(root / "grid.png").shape[1] > imread(tmp_path / "plain.png").shape[1]


def test_a_constant_effect_shows_no_heterogeneity_and_two_points_give_no_slope(tmp_path):
    from harness.analysis.grid import analyze_grid_dir

    # the same per-seed values at both points: the effects are equal, Q = 0
    summary = analyze_grid_dir(_grid_of(tmp_path, {0.01: 0.5, 0.05: 0.5}, same_noise=True), write=False)
    block = summary["across_points"]["arms"]["B"]
    h = block["heterogeneity"]
    assert h["q"] == pytest.approx(0.0, abs=1e-9) and h["q_pvalue"] == pytest.approx(1.0)
    assert h["pvalue"] == pytest.approx(1.0) and not h["differs"]
    assert h["tau"] == 0.0 and "at least 3 distinct values" in block["slope"]["not_computed"]
    # with 2 points: mean +- t(1) sd sqrt(3/2) of the two (equal) effects, a zero-width interval here
    low, high = block["pooled"]["prediction_interval"]
    assert low == pytest.approx(high) == pytest.approx(block["pooled"]["estimate"])


@pytest.mark.slow
def test_a_grid_over_named_settings_pools_them_without_a_slope(tmp_path):
    """Several tasks in one sweep (data=digits,synthetic,...): a key whose values are names gets the
    heterogeneity test and the average, never a slope."""
    import numpy as np

    from harness import results
    from harness.analysis.grid import analyze_grid_dir

    from . import _results_factory as F

    for i, (name, shift) in enumerate({"digits": 0.8, "synthetic": 0.3, "svhn": 0.5}.items()):
        items = F.make_results(F.accuracies(6, shift=shift, rng_seed=10 + i))
        for r in items:
            r["config"]["data"] = {"name": name}
            r["config_hash"] = results.config_digest(r["config"])
            r["base_hash"] = results.config_digest(r["config"], exclude_factor=r["factor"])
        F.write_results(tmp_path / f"data={name}", items)
    summary = analyze_grid_dir(tmp_path)
    across = summary["across_points"]
    block = across["arms"]["B"]
    assert across["numeric_key"] is None and "slope" not in block and block["conditions"] == 3
    assert block["pooled"]["estimate"] == pytest.approx(np.mean(block["effects"]))
    assert "better on" in block["sentence"] and "across 3 grid points" in block["sentence"]
    assert "Does the effect depend on the grid value?" in (tmp_path / "grid.md").read_text()


@pytest.mark.slow
def test_every_grid_point_is_certified_in_its_own_folder(tmp_path):
    # one certificate.json per sweep folder certified the point that wrote it last; the others were
    # "not certified", with a hint (rerun with repro.certificate=true) that named a new folder, trained
    # every unit again and certified one point again
    grid = ["optim.lr=0.01,0.05", "seed=range(0,3)"]
    first = run_cli(["-m", *TINY, *grid], cwd=tmp_path)  # TINY: repro.certificate=false
    assert first.returncode == 0, first.stderr[-3000:]
    (sweep,) = (tmp_path / "multirun" / "loss_ab").iterdir()
    trained = {p: p.read_bytes() for p in sweep.rglob("result.json")}
    certified = [o for o in TINY if o != "repro.certificate=false"] + ["repro.certificate=true"]
    again = run_cli(["-m", *certified, *grid], cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert [p.name for p in (tmp_path / "multirun" / "loss_ab").iterdir()] == [sweep.name]  # the same folder
    assert {p: p.read_bytes() for p in sweep.rglob("result.json")} == trained  # no unit trained again
    for lr in ("0.01", "0.05"):
        point = sweep / f"optim.lr={lr}"
        assert read_json(point / "certificate.json")["reproducible"] is True
        analysis = read_json(point / "analysis.json")
        assert analysis["certificate"]["reproducible"] is True and not analysis["certificate"].get("stale")
    assert not (sweep / "certificate.json").exists()
