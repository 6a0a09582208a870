"""Fixed costs of a no-op rerun (issue 18, item 3): the analysis is read, not made again, when its
inputs and the harness's code are the bytes it was made from; the code identity finds packages and
their versions without importing them or reading every distribution's file list, with the same
answers as before. (Speed itself: scripts/bench_wall.py.)"""

from __future__ import annotations

import importlib
import subprocess
import sys
from importlib import metadata

import pytest
from harness.experiment import execute as execute_module
from harness.experiment import identity
from harness.experiment.execute import INPUTS_NAME, execute
from harness.results import read_json
from tests.conftest import FAST, REPO, compose_cfg

analyze_module = importlib.import_module("harness.analysis.analyze")  # the package's ``analyze`` is a function
ARGS = [*FAST, "determinism.threads=1", "train.max_steps=5", "data.train_limit=64"]  # 3 seeds: analysable


@pytest.mark.slow
def test_dist_version_names_what_packages_distributions_names_for_every_installed_package():
    table = metadata.packages_distributions()
    for top, dists in table.items():
        before = "unknown version"
        for dist in dists:
            try:
                before = f"{dist}=={metadata.version(dist)}"
                break
            except metadata.PackageNotFoundError:
                continue
        assert identity._dist_version(top) == before, top
    assert identity._dist_version("no_such_package_anywhere") == "unknown version"


@pytest.mark.slow
def test_the_code_identity_of_torch_targets_is_made_without_importing_torch_and_is_unchanged():
    probe = ("import sys; from harness.experiment.identity import code_identity; "
             "a = code_identity(['torch.optim.SGD', 'torch.nn.CrossEntropyLoss']); print('torch' in sys.modules); "
             "import torch, harness.experiment.identity as i; i._CACHE.clear(); "
             "print(code_identity(['torch.optim.SGD', 'torch.nn.CrossEntropyLoss']) == a, a['packages'])")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, cwd=REPO)
    lines = out.stdout.splitlines()
    assert lines[0] == "False", out.stderr
    assert lines[1].startswith("True {'torch': 'torch=="), out.stdout


@pytest.mark.slow
def test_a_noop_rerun_reads_the_analysis_it_made_and_makes_it_again_when_an_input_changed(tmp_path, monkeypatch):
    first = execute(compose_cfg(ARGS), tmp_path, say=lambda m: None, show_table=False)
    assert (tmp_path / INPUTS_NAME).is_file()
    made = []
    real = analyze_module.analyze_dir

    def counting(*a, **k):
        made.append(1)
        return real(*a, **k)

    monkeypatch.setattr(analyze_module, "analyze_dir", counting)
    said = []
    again = execute(compose_cfg(ARGS), tmp_path, say=said.append, show_table=False)
    assert made == []  # read, not made: neither the statistics nor scipy.stats' import
    assert any(m.startswith("analysis unchanged") for m in said), said
    assert again.analysis == read_json(tmp_path / "analysis.json")
    assert again.analysis["comparisons"] == read_json(tmp_path / "analysis.json")["comparisons"]
    assert first.analysis is not None

    cert = tmp_path / "certificate.json"
    cert.write_text(cert.read_text() + "\n")  # other bytes, the same content: an input changed
    execute(compose_cfg(ARGS), tmp_path, say=lambda m: None, show_table=False)
    assert len(made) == 1
    execute(compose_cfg(ARGS), tmp_path, say=lambda m: None, show_table=False)
    assert len(made) == 1  # the note was made again from the new bytes

    monkeypatch.setattr(identity, "_harness_digest", lambda: "other code")  # the analysis code changed
    execute(compose_cfg(ARGS), tmp_path, say=lambda m: None, show_table=False)
    assert len(made) == 2


def test_the_inputs_digest_skips_outputs_logs_and_locks_and_sees_any_other_file(tmp_path):
    (tmp_path / "runs/seed=0/arm=A").mkdir(parents=True)
    (tmp_path / "runs/seed=0/arm=A/result.json").write_text("{}")
    before = execute_module.inputs_digest(tmp_path)
    for name in ("analysis.json", "report.md", "analysis.png", "harness.log", "runs/seed=0/arm=A/.lock", INPUTS_NAME):
        (tmp_path / name).write_text("anything")
    (tmp_path / "wandb").mkdir()
    (tmp_path / "wandb/run.wandb").write_text("x")
    assert execute_module.inputs_digest(tmp_path) == before
    (tmp_path / "runs/seed=0/arm=A/result.json").write_text('{"a": 1}')
    assert execute_module.inputs_digest(tmp_path) != before
