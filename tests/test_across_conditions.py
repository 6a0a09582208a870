"""Issue 19, items 1, 5 and 6: declared conditions (ab.conditions) in one experiment.

The runs use tests/sequential_fns.paired_metric (no training: the statistics and the plumbing are
what is tested): B is A shifted by 3 points, each condition has its own noise (train.kwargs.sd).
"""

from __future__ import annotations

import numpy as np
import pytest

import harness
from harness import HarnessError
from harness.config.declaration import Declaration
from harness.config.metric_spec import DeclarationError
from harness.results import load_tree, read_json
from harness.stats.meta.random_effects import random_effects

from .conftest import compose_cfg, run_cli

CHEAP = [
    "+experiment=loss_ab", "workers=1", "ab.seeds=[0,1,2,3,4,5]", "logger=none", "progress=false", "determinism.threads=1",
    "repro.certificate=false", "train.fn=tests.sequential_fns.paired_metric", "ab.factor=train.kwargs.shift",
    "+train.kwargs.shift=0.0", "+train.kwargs.sd=1.0", "ab.arms={A: 0.0, B: 3.0}",
]
CONDITIONS = "ab.conditions={quiet: ['+train.kwargs.sd=0.3'], mid: ['+train.kwargs.sd=0.6'], noisy: ['+train.kwargs.sd=1.2']}"


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    out = tmp_path_factory.mktemp("conditions") / "exp"
    res = harness.run([*CHEAP, CONDITIONS], out_dir=out, verbose=False)
    return out, res


def test_every_condition_seed_and_arm_runs_and_the_average_is_the_primary_claim(ran):
    out, res = ran
    summary = read_json(out / "analysis.json")
    assert summary == res.analysis and summary["schema"] == "harness.conditions/1"
    assert [r["name"] for r in summary["conditions"]] == ["quiet", "mid", "noisy"]
    declared = read_json(out / "declaration.json")  # the conditions are declared beside the runs
    assert declared["conditions"] == {"quiet": ["+train.kwargs.sd=0.3"], "mid": ["+train.kwargs.sd=0.6"],
                                      "noisy": ["+train.kwargs.sd=1.2"]}
    y, v = [], []
    for r in summary["conditions"]:
        folder = out / f"condition={r['name']}"
        assert r["folder"] == folder.name
        own = read_json(folder / "analysis.json")  # each condition's own plain A/B, verdict and all
        assert own["comparisons"]["B"]["verdict"]["code"] == r["comparisons"]["B"]["verdict"]
        sd = float(r["overrides"][0].split("=")[1])
        runs = load_tree(folder).results
        assert len(runs) == 12 and {x["config"]["train"]["kwargs"]["sd"] for x in runs} == {sd}
        d = np.array([b - a for _, a, b in own["comparisons"]["B"]["pairs"]])
        y.append(d.mean())
        v.append(d.var(ddof=1) / len(d))
    block = summary["across_conditions"]["B"]
    assert block["effects"] == pytest.approx(y) and block["labels"] == ["quiet", "mid", "noisy"]
    assert block["pooled"]["estimate"] == pytest.approx(np.mean(y))
    assert block["pooled"]["random_effects"]["estimate"] == pytest.approx(random_effects(y, v).estimate)
    assert block["better_on"] == {**block["better_on"], "better": 3, "worse": 0, "conditions": 3}
    assert block["sentence"].startswith("B is better than A on average across 3 conditions by +3")
    assert "(tau " in block["sentence"] and "on a new condition expect [" in block["sentence"]
    assert "auto" in block["margin"]  # stats.margin=auto: estimated per condition, none drawn


def test_a_declared_margin_is_read_against_the_average(ran):
    from dataclasses import replace

    from harness.analysis.conditions import analyze_conditions, analyze_conditions_dir
    from harness.config.declaration import read

    out, _ = ran
    _, analyses = analyze_conditions_dir(out, write=False)
    declared = read(out)
    low, high = read_json(out / "analysis.json")["across_conditions"]["B"]["pooled"]["ci"]  # about +3
    for margin, says in ((low - 0.1, "is beyond the declared margin"), (high + 0.1, "is within the declared margin"),
                         ((low + high) / 2, "is not shown")):
        block = analyze_conditions(analyses, replace(declared, margin=margin))["across_conditions"]["B"]
        assert says in block["sentence"].split(". ")[-1] and f"±{margin:g} pts" in block["margin"]


def test_the_report_has_one_table_the_sentence_and_the_forest_plot(ran):
    out, _ = ran
    summary = read_json(out / "analysis.json")
    text = (out / "report.md").read_text()
    assert summary["across_conditions"]["B"]["sentence"] in text
    for row in ("| quiet | +train.kwargs.sd=0.3 | 6 |", "| **average** (t over the 3 effects)",
                "| random effects (REML, Hartung-Knapp)", "| a new condition (prediction interval)",
                "| tau, between-condition sd", "| I^2 |"):
        assert row in text
    assert "does the effect differ between conditions?" in text and "probability of improvement" in text
    assert "(condition=noisy/report.md)" in text  # each condition's own verdict, linked
    from harness.analysis.conditions import screen

    lines = screen(summary)  # the terminal: the claim, what it rests on, then each condition
    assert lines[1] == "  " + summary["across_conditions"]["B"]["sentence"]
    assert lines[3].startswith("declared: the average across 3 conditions is the primary claim (quiet: +train.kwargs.sd=0.3;")
    assert "margin auto;" in lines[3] and [line.split()[0] for line in lines[5:]] == ["quiet", "mid", "noisy"]
    assert (out / "analysis.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_forest_plot_draws_the_average_the_weighted_estimate_the_prediction_and_the_margin(ran):
    from matplotlib.figure import Figure

    from harness.analysis.render import figures

    out, _ = ran
    summary = read_json(out / "analysis.json")
    block = summary["across_conditions"]["B"]
    rows = [(r["name"], r["comparisons"]["B"]["mean_diff"], *r["comparisons"]["B"]["ci"]) for r in summary["conditions"]]
    ax = Figure().subplots()
    figures.forest(ax, rows, block, title="B vs A", unit="pts", margin=0.5)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["quiet", "mid", "noisy", "average (t over conditions)", "random effects (REML, HK)",
                      "new condition (prediction)"]
    assert sorted(line.get_xdata()[0] for line in ax.lines if line.get_linestyle() == "--") == [-0.5, 0.5]
    assert "margin ±0.5" in ax.get_title()
    lo, hi = block["pooled"]["prediction_interval"]
    assert any(list(line.get_xdata()) == [lo, hi] for line in ax.lines)


@pytest.mark.slow
def test_a_condition_is_the_plain_ab_with_its_overrides_and_a_rerun_resumes(ran, capsys):
    out, _ = ran
    before = {p: p.read_bytes() for p in out.rglob("result.json")}
    # the plain A/B with the condition's overrides, into the condition's folder: nothing to run
    harness.run([*[o for o in CHEAP if "kwargs.sd" not in o], "+train.kwargs.sd=0.6"], out_dir=out / "condition=mid")
    assert capsys.readouterr().out.count("skipped, completed with the same config and code") == 12
    harness.run([*CHEAP, CONDITIONS], out_dir=out)  # the whole experiment again: every unit skipped
    assert capsys.readouterr().out.count("skipped, completed with the same config and code") == 36
    assert {p: p.read_bytes() for p in out.rglob("result.json")} == before


@pytest.mark.slow
def test_the_files_are_reproduced_from_disk_and_a_grid_reading_keeps_them(ran):
    from harness.analysis.conditions import analyze_conditions_dir
    from harness.tools.analyze import main

    out, _ = ran
    before = {n: (out / n).read_bytes() for n in ("analysis.json", "report.md")}
    summary, analyses = analyze_conditions_dir(out)
    assert {n: (out / n).read_bytes() for n in before} == before and sorted(analyses) == ["mid", "noisy", "quiet"]
    # the grid view of the same folders (harness.analyze --grid) is written beside, never over, the claim
    assert main([str(out), "--grid"]) == 0
    assert (out / "grid.json").is_file() and (out / "analysis.json").read_bytes() == before["analysis.json"]
    analyze_conditions_dir(out)  # and the conditions' own files are as the run wrote them again
    assert {n: (out / n).read_bytes() for n in before} == before


def test_the_command_line_reproduces_the_claim_and_refuses_flags_that_change_its_basis(ran, capsys):
    from harness.tools.analyze import main

    out, _ = ran
    before = {n: (out / n).read_bytes() for n in ("analysis.json", "report.md")}
    assert main([str(out)]) == 0
    assert "across 3 conditions" in capsys.readouterr().out
    assert {n: (out / n).read_bytes() for n in before} == before
    assert main([str(out), "--margin", "0.5"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--margin would change its basis" in err and "condition=NAME" in err
    assert {n: (out / n).read_bytes() for n in before} == before


def test_a_sweep_is_told_to_sweep_the_overrides_as_a_grid(tmp_path):
    from harness.experiment.execute import execute
    from harness.experiment.arms import ExperimentError

    cfg = compose_cfg([*CHEAP, CONDITIONS])
    with pytest.raises(ExperimentError, match="in one process") as e:
        execute(cfg, tmp_path / "job", multirun=True, overrides=[*CHEAP, CONDITIONS], show_table=False)
    assert "as a grid" in str(e.value) and not list(tmp_path.rglob("result.json"))


@pytest.mark.slow
def test_the_claim_reaches_wandb(ran, tmp_path, monkeypatch):
    from omegaconf import OmegaConf

    from harness.tracking import tracker as tracking

    from . import wandb_reader

    for var in [v for v in __import__("os").environ if v.startswith("WANDB_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("HOME", str(tmp_path))
    out, _ = ran
    summary = read_json(out / "analysis.json")
    cfg = OmegaConf.create({"experiment_name": "x", "logger": {"name": "wandb", "wandb": {
        "project": None, "entity": None, "mode": "offline", "init_timeout": 30.0, "tags": [], "history_every": 1}}})
    t = tracking.open_tracker(cfg, tmp_path / "w", group="conditions:test")
    try:
        t.log_conditions(summary, out)
    finally:
        assert t.close() == []
    (run,) = wandb_reader.read_runs(tmp_path / "w" / "wandb")
    block = summary["across_conditions"]["B"]
    assert run.name == "across conditions" and run.config["conditions"]["noisy"] == ["+train.kwargs.sd=1.2"]
    assert run.summary["across/B/estimate"] == pytest.approx(block["pooled"]["estimate"])
    assert run.summary["across/B/tau"] == pytest.approx(block["heterogeneity"]["tau"])
    assert run.summary["across/B/sentence"] == block["sentence"]
    table = run.table("conditions")
    assert [row[1] for row in table["data"]] == ["quiet", "mid", "noisy", "average (t over conditions)",
                                                  "random effects (REML, HK)"]


# -- refused before any run ----------------------------------------------------------------------


@pytest.mark.parametrize("conditions, says", [
    ("{a: [], b: ['data=synthetic']}", "ab.conditions.a=[] must be a non-empty list"),
    ("{a: ['data=synthetic']}", "needs at least two"),
    ("{a: ['loss.label_smoothing=0.2'], b: ['data=digits']}", "sets the experiment's factor (loss.label_smoothing)"),
    ("{a: ['stats.metric=test_loss'], b: ['data=digits']}", "cannot be put on that scale"),
    ("{a: ['seed=3'], b: ['data=digits']}", "is not a training setting"),
    ("{a: ['synthetic'], b: ['data=digits']}", "is not a config override KEY=VALUE"),
])
def test_bad_conditions_are_refused_when_the_declaration_is_made(conditions, says):
    cfg = compose_cfg(["+experiment=loss_ab", f"ab.conditions={conditions}"])
    with pytest.raises(DeclarationError) as e:
        Declaration.from_config(cfg)
    assert says in str(e.value) and "ab.conditions" in str(e.value)


def test_sequential_mode_with_conditions_is_refused_saying_what_is_supported():
    cfg = compose_cfg(["+experiment=loss_ab_conditions", "ab.sequential.enabled=true", "stats.margin=0.5"])
    with pytest.raises(DeclarationError, match="cannot be combined with ab.sequential.enabled=true") as e:
        Declaration.from_config(cfg)
    assert "Supported: fixed seeds" in str(e.value)


def test_an_unknown_override_is_refused_naming_the_condition_before_any_run(tmp_path):
    with pytest.raises(HarnessError, match=r"ab.conditions.b=\['data.no_such_key=1'\] does not compose") as e:
        harness.run([*CHEAP, "ab.conditions={a: ['+train.kwargs.sd=0.3'], b: ['data.no_such_key=1']}"],
                    out_dir=tmp_path / "exp", verbose=False)
    assert "no_such_key" in str(e.value) and "Nothing was run" in str(e.value)
    assert not list(tmp_path.rglob("result.json"))


def test_the_command_line_refuses_a_bad_condition_with_one_paragraph_and_exit_2(tmp_path):
    proc = run_cli(["+experiment=loss_ab_conditions", "ab.conditions.synthetic=['data=nope']", "logger=none"], cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    err = proc.stderr.strip()
    assert err.startswith("harness: error: ab.conditions.synthetic=['data=nope'] does not compose")
    assert "\n" not in err and "Traceback" not in proc.stderr
    assert not list(tmp_path.rglob("result.json"))


def test_an_accuracy_prediction_interval_stays_within_the_range_an_effect_can_take():
    # three conditions whose effects differ widely: t on 2 df predicts a new one far past +-100 pts
    from harness.analysis import across_conditions as ac

    a = [50.0, 51.0, 49.5, 50.5]
    conditions = [{"label": "x", "value": None, "a": a, "b": [v + 40 + 0.3 * i for i, v in enumerate(a)]},
                  {"label": "y", "value": None, "a": a, "b": [v - 30 - 0.2 * i for i, v in enumerate(a)]},
                  {"label": "z", "value": None, "a": a, "b": [v + 45 - 0.1 * i for i, v in enumerate(a)]}]
    bare = ac.across(conditions, direction="max", alpha=0.05, n_resamples=200)
    lo, hi = bare["pooled"]["prediction_interval"]
    assert lo < -100 and hi > 100 and "prediction_range" not in bare["pooled"]  # no unit: no range known

    pts = ac.across(conditions, direction="max", alpha=0.05, n_resamples=200, unit="pts")
    p = pts["pooled"]
    assert p["prediction_interval"] == [-100.0, 100.0]
    re_low, re_high = p["random_effects"]["prediction_interval"]
    assert -100 <= re_low < re_high <= 100
    assert p["prediction_range"]["computed"]["pooled"] == [lo, hi]
    text = ac.sentence(pts, arm="B", baseline="A", unit="pts")
    assert "expect [-100, +100] pts (the whole range an effect can take" in text
    assert any("cut" in line for line in ac.lines(pts, arm="B", baseline="A", unit="pts"))


def test_the_common_effect_test_decides_only_where_it_holds_alpha():
    # with 5 seeds a condition and 10 conditions Alexander-Govern rejects a common effect in 5.9% of
    # experiments (bench_stats section 7): there its p-value is information, never "the effect varies"
    from harness.analysis import across_conditions as ac

    rng = np.random.default_rng(4)

    def conditions(seeds):
        out = []
        for k in range(10):
            a = 90 + rng.normal(0, 1, seeds)
            out.append({"label": f"c{k}", "value": None, "a": list(a), "b": list(a + 3.0 * k + rng.normal(0, 0.3, seeds))})
        return out

    few = ac.across(conditions(5), direction="max", alpha=0.05, n_resamples=200)
    h = few["heterogeneity"]
    assert h["pvalue"] < 0.05 and not h["differs"] and "not decided with 5 seeds a condition and 10" in h["not_decided"]
    text = ac.sentence(few, arm="B", baseline="A")
    assert "; the effect varies between" not in text and "whether the effect varies between conditions is not decided" in text
    many = ac.across(conditions(10), direction="max", alpha=0.05, n_resamples=200)["heterogeneity"]
    assert many["differs"] and "not_decided" not in many
