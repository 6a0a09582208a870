"""A second user-style project, end to end: the tools say what was declared, and nothing is guessed.

tests/user_project is a researcher's project as the harness sees one: its primary metric ``q`` is
an error rate in points where LOWER is better (a name that says nothing), its margin is declared
(2 points), it records its per-example outcomes for ``q``, and it logs sparsely (keys at different
steps, one key only in some runs). The experiment, a re-analysis without flags, an alternative
analysis, the noise audit and a golden must all read the declaration.
"""

from __future__ import annotations

import os

import pytest

from harness.results import read_json

from .conftest import REPO, run_cli

pytestmark = pytest.mark.slow  # every test here spawns the harness or takes seconds

PROJECT = REPO / "tests" / "user_project"
ENV = {"PYTHONPATH": f"{PROJECT}{os.pathsep}{REPO}"}
BASE = ["--config-dir", str(PROJECT / "conf"), "+experiment=user_ab", "workers=1", "logger=none", "progress=false"]
DECLARED = ("analysis.json", "report.md", "analysis.png")


def _cli(args, module="harness"):
    return run_cli(args, env=ENV, module=module)


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    out = tmp_path_factory.mktemp("user") / "run"
    proc = _cli([*BASE, f"hydra.run.dir={out}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc.stdout + proc.stderr


def test_the_run_analyses_what_the_project_declared(experiment):
    out, printed = experiment
    a = read_json(out / "analysis.json")
    assert (a["metric"], a["direction"], a["unit"]) == ("q", "min", "pts")
    assert a["margin"] == {**a["margin"], "value": 2.0, "source": "given"}
    assert a["test_set_noise"]["available"] is True  # from the declaration, not from a name
    assert a["test_set_noise"]["n_examples"] == 300
    assert set(a["directions"]) == {"q", "nll"}  # what the project declares, and nothing else (issue 33)
    assert {"train_loss", "q"} <= set(a["curves"]["A"]) and "lr" in a["curves"]["B"]  # sparse logging drawn
    assert (out / "analysis.png").stat().st_size > 0
    screen = " ".join(printed.split())
    assert "declared: metric q (pts, lower is better); margin ±2.00 pts declared before the data" in screen
    assert "Traceback" not in printed and "Warning" not in printed


def test_reanalysis_without_flags_gives_the_identical_verdict_and_margin(experiment):
    out, _ = experiment
    before = {name: (out / name).read_bytes() for name in DECLARED[:2]}
    proc = _cli([str(out)], module="harness.analyze")
    assert proc.returncode == 0, proc.stderr
    assert {name: (out / name).read_bytes() for name in before} == before
    a = read_json(out / "analysis.json")
    assert a["departures"] == [] and a["margin"]["value"] == 2.0
    assert "ALTERNATIVE" not in proc.stdout


def test_an_alternative_margin_leaves_the_declared_files_untouched(experiment):
    out, _ = experiment
    before = {name: (out / name).read_bytes() for name in DECLARED}
    proc = _cli([str(out), "--margin", "auto"], module="harness.analyze")
    assert proc.returncode == 0, proc.stderr
    screen = " ".join(proc.stdout.split())
    assert "ALTERNATIVE ANALYSIS, not the declared one: margin auto (declared: 2)" in screen
    # its basis is not what was declared, and the line that states it says so
    assert "analysed with (an alternative, not the declaration): metric q" in screen and "declared: metric" not in screen
    assert {name: (out / name).read_bytes() for name in DECLARED} == before
    alt = read_json(out / "alternatives" / "margin=auto" / "analysis.json")
    assert alt["margin"]["source"] == "auto" and alt["metric"] == "q"


@pytest.mark.solo  # the noise audit reruns with 2 and 3 threads: the counts are the point
def test_noise_audit_and_golden_work_with_the_declared_metric(tmp_path):
    tiny = ["ab.seeds=[0,1]", "train.max_steps=15"]
    proc = _cli(["--repeats", "2", "--out", str(tmp_path / "audit"), "--config-dir", str(PROJECT / "conf"),
                 "+experiment=user_ab", "logger=none", "progress=false", *tiny], module="harness.noise_audit")
    assert proc.returncode == 0, proc.stderr[-3000:]
    audit = read_json(tmp_path / "audit" / "noise_audit.json")
    assert (tmp_path / "audit" / "noise_audit.txt").read_text().startswith("noise audit: train.fn userproj.fit.fit,")
    assert audit["metric"] == "q"
    golden = tmp_path / "golden.json"
    proc = _cli(["save", str(golden), *BASE, *tiny], module="harness.golden")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "q " in proc.stdout and "pts" in proc.stdout  # the declared metric, in its declared unit
    proc = _cli(["check", str(golden), "--config-dir", str(PROJECT / "conf")], module="harness.golden")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert read_json(golden)["metrics"]["q"] >= 0
