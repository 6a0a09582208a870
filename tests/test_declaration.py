"""What you declared is what gets analysed: the declaration, re-analysis, alternatives, the screen.

One typed declaration (harness/config/declaration.py) is made from the composed config, written beside the
runs, and read by every tool; a re-analysis without flags reproduces the declared analysis; a flag
that changes the basis is an alternative that names its departures and never replaces the declared
files; the factor's own key is the arms'; the terminal leads with the verdict.
"""

from __future__ import annotations

import json

import pytest

import harness
from harness.tools.analyze import main as analyze_main
from harness import HarnessError
from harness.config.declaration import DECLARATION_NAME, Declaration
from harness.config.metric_spec import DeclarationError
from harness.results import read_json

from .conftest import FAST, compose_cfg, run_cli

TINY = [*FAST, "determinism.threads=1", "train.max_steps=20", "repro.certificate=false"]
DECLARED = [*TINY, "ab.seeds=[0,1,2,3,4]", "stats.margin=0.5", "stats.alpha=0.1"]
OUTPUTS = ("analysis.json", "report.md", "analysis.png")


def test_the_declaration_is_made_once_from_the_config_with_units_and_examples():
    d = Declaration.from_config(compose_cfg([*FAST, "stats.margin=0.5", "+stats.metrics.val_bpc={direction: min, unit: bpc}"]))
    assert (d.factor, list(d.arms), d.baseline, d.seeds) == ("loss.label_smoothing", ["A", "B"], "A", (0, 1, 2))
    assert (d.metric, d.margin, d.alpha, d.sequential) == ("test_accuracy", 0.5, 0.05, None)
    assert d.primary.unit == "pts" and d.primary.examples and d.primary.example_scale == 100.0
    assert (d.metrics["val_bpc"].direction, d.metrics["val_bpc"].unit, d.metrics["val_bpc"].examples) == ("min", "bpc", False)
    assert d.metrics["test_loss"].unit == ""  # nothing guessed from a name
    assert Declaration.from_dict(json.loads(json.dumps(d.to_dict()))) == d


@pytest.mark.parametrize("overrides, words", [
    (["stats.metric=val_bpc"], "'val_bpc' has no declared direction"),
    (["+stats.metrics.val_bpc=down"], "stats.metrics.val_bpc.direction='down' must be max"),
    (["+stats.metrics.val_bpc={direction: min, units: bpc}"], "unknown key(s) units; allowed: direction"),
    (["stats.margin=-1"], "stats.margin=-1 must be a number >= 0"),
    (["+stats.metrics.val_hit={direction: max, examples: true}"], "is declared in points (unit: pts"),
    (["stats.baseline=Z"], "stats.baseline='Z' is not an arm; the arms are A, B"),
    (["ab.sequential.enabled=true"], "stats.margin=auto cannot be used in sequential mode"),
    (["ab.sequential.margin=0.3"], "the margin is declared once, for every mode, at stats.margin"),
])
def test_a_bad_declaration_names_the_key_and_what_is_allowed(overrides, words):
    with pytest.raises(DeclarationError) as e:
        Declaration.from_config(compose_cfg([*FAST, *overrides]))
    assert words in str(e.value)


@pytest.mark.slow
def test_setting_the_factors_own_key_is_refused_pointing_to_the_arms(tmp_path):
    proc = run_cli([*TINY, "loss.label_smoothing=1.5", f"hydra.run.dir={tmp_path / 'cli'}"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "'loss.label_smoothing=1.5' sets the experiment's factor (loss.label_smoothing)" in proc.stderr
    assert "ab.arms.NAME=VALUE" in proc.stderr and not (tmp_path / "cli" / "runs").exists()
    with pytest.raises(HarnessError, match="sets the experiment's factor"):
        harness.run([*TINY, "loss.label_smoothing=1.5"], out_dir=tmp_path / "api", verbose=False)
    sweep = run_cli(["-m", *TINY, "loss.label_smoothing=0.1,0.2", f"hydra.sweep.dir={tmp_path / 'sweep'}"])
    assert sweep.returncode == 2 and "sets the experiment's factor" in sweep.stderr and "No job was launched" in sweep.stderr


@pytest.fixture(scope="module")
def declared_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("declared") / "run"
    res = harness.run(DECLARED, out_dir=out, verbose=False)
    return out, res


def test_reanalysis_without_flags_reproduces_the_declared_analysis(declared_run, capsys):
    out, res = declared_run
    declared = read_json(out / DECLARATION_NAME)
    assert declared["margin"] == 0.5 and declared["alpha"] == 0.1 and declared["metric"] == "test_accuracy"
    first = {name: (out / name).read_bytes() for name in ("analysis.json", "report.md")}
    assert analyze_main([str(out)]) == 0
    raw = capsys.readouterr().out
    screen = " ".join(raw.split())  # the console wraps lines at its width
    assert {name: (out / name).read_bytes() for name in first} == first  # byte-identical
    a = read_json(out / "analysis.json")
    assert a["departures"] == [] and a["margin"]["source"] == "given" and a["margin"]["value"] == 0.5
    assert a["alpha"] == 0.1
    assert "declared: metric test_accuracy (pts, higher is better); margin ±0.50 pts declared before the data" in screen
    assert "ALTERNATIVE" not in screen
    # the screen leads with the verdict; the tables stay in report.md
    assert raw.startswith("loss_ab: verdict\n") and screen.index(" ".join(res.verdict.split())) == len("loss_ab: verdict ")
    assert "Noise floor" not in screen and "## Noise floor" in (out / "report.md").read_text()


def test_an_alternative_analysis_names_its_departures_and_never_replaces_the_declared_files(declared_run, capsys):
    out, _ = declared_run
    before = {name: (out / name).read_bytes() for name in OUTPUTS}
    assert analyze_main([str(out), "--margin", "auto", "--alpha", "0.05"]) == 0
    screen = capsys.readouterr().out
    assert ("ALTERNATIVE ANALYSIS, not the declared one: margin auto (declared: 0.5); alpha 0.05 (declared: 0.1)"
            in " ".join(screen.split()))
    assert {name: (out / name).read_bytes() for name in OUTPUTS} == before
    alt = read_json(out / "alternatives" / "margin=auto,alpha=0.05" / "analysis.json")
    assert alt["departures"] == ["margin auto (declared: 0.5)", "alpha 0.05 (declared: 0.1)"]
    assert alt["margin"]["source"] == "auto"
    # the same through the Python API
    res = harness.analyze_folder(out, metric="test_loss")
    assert res.to_dict()["departures"] == [  # test_accuracy's margin is not test_loss's (issue 33)
        "metric test_loss (declared: test_accuracy)",
        "margin none for test_loss (the declared margin 0.5 is test_accuracy's; give one for test_loss with --margin)"]
    assert (out / "alternatives" / "metric=test_loss" / "analysis.json").is_file()
    assert {name: (out / name).read_bytes() for name in OUTPUTS} == before


def test_tables_on_the_terminal_behind_a_flag(declared_run, capsys):
    out, _ = declared_run
    assert analyze_main([str(out), "--no-write", "--tables"]) == 0
    assert "Noise floor" in capsys.readouterr().out


@pytest.mark.slow
def test_a_sweep_writes_the_declaration_once_and_its_analysis_reads_it(tmp_path):
    sweep = tmp_path / "sweep"
    proc = run_cli(["-m", *TINY, "stats.margin=0.5", "seed=0,1,2", f"hydra.sweep.dir={sweep}"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert read_json(sweep / DECLARATION_NAME)["margin"] == 0.5
    assert read_json(sweep / "analysis.json")["margin"]["value"] == 0.5
