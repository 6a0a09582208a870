"""Fixed costs (issue 18, item 3): a bad value is refused before torch is imported and the data loaded;
a no-op rerun of a finished experiment trains nothing, not even the certificate's rerun, when the
certificate on disk was made for the same result, config and code. (Speed itself: scripts/bench_wall.py.)"""

from __future__ import annotations

import subprocess
import sys

import pytest
from harness.experiment import units
from harness.experiment.units import run_experiment
from harness.results import read_json, write_json
from tests.conftest import FAST, REPO, compose_cfg

ONE = [*FAST, "ab.seeds=[0]", "arm=A", "determinism.threads=1", "train.max_steps=5", "data.train_limit=64"]

REFUSE = """
import runpy, sys
sys.argv = ["harness", "+experiment=loss_ab", "train.batch_size=0", "logger=wandb", "progress=false"]
try:
    runpy.run_module("harness", run_name="__main__")
except SystemExit as e:
    print("exit", e.code)
print("loaded", sorted(m for m in ("torch", "sklearn", "wandb") if m in sys.modules))
"""


def test_a_bad_value_is_refused_before_torch_the_data_or_wandb(tmp_path):
    proc = subprocess.run([sys.executable, "-c", REFUSE], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "WANDB_MODE": "offline"})
    assert "train.batch_size=0 must be an integer >= 1" in proc.stderr, proc.stderr
    assert "exit 2" in proc.stdout and "loaded []" in proc.stdout, proc.stdout
    assert not list(tmp_path.rglob("wandb"))  # no tracking run was opened for a config that cannot run


def _invocation(folder, monkeypatch):
    trained = []
    real = units.run_one

    def counting(arm_cfg, seed, arm, **kw):
        trained.append((seed, arm))
        return real(arm_cfg, seed, arm, **kw)

    monkeypatch.setattr(units, "run_one", counting)
    said = []
    run_experiment(compose_cfg(ONE), folder, log=said.append, certify=True)
    return trained, said


def test_a_noop_rerun_keeps_the_certificate_made_for_the_same_result_config_and_code(tmp_path, monkeypatch):
    trained, _ = _invocation(tmp_path, monkeypatch)
    assert trained == [(0, "A"), (0, "A")]  # the run and the certificate's rerun
    cert = read_json(tmp_path / "certificate.json")
    result = read_json(tmp_path / "runs/seed=0/arm=A/result.json")
    assert cert["reproducible"] is True
    assert (cert["final"], cert["code_version"]) == (result["fingerprints"]["final"], result["code_version"])

    trained, said = _invocation(tmp_path, monkeypatch)
    assert trained == []  # nothing trained: the run is skipped and its certificate still holds
    assert any("certificate.json kept" in m for m in said), said
    assert read_json(tmp_path / "certificate.json") == cert


def test_a_certificate_for_another_result_or_one_that_said_no_is_made_again(tmp_path, monkeypatch):
    _invocation(tmp_path, monkeypatch)
    cert = read_json(tmp_path / "certificate.json")
    for changed in ({"final": "0" * 16}, {"code_version": "0.0.1+other"}, {"reproducible": False}):
        write_json(tmp_path / "certificate.json", {**cert, **changed})
        trained, said = _invocation(tmp_path, monkeypatch)
        assert trained == [(0, "A")], changed  # only the certificate's rerun
        assert read_json(tmp_path / "certificate.json") == cert, changed
    del cert["code_version"]  # written before certificates said which code they certify
    write_json(tmp_path / "certificate.json", cert)
    assert _invocation(tmp_path, monkeypatch)[0] == [(0, "A")]


@pytest.mark.slow
def test_a_noop_rerun_skips_preflight_and_leaves_the_analysis_files_alone(tmp_path, monkeypatch):
    from harness.config import preflight as preflight_module
    from harness.experiment.execute import execute

    args = [*FAST, "determinism.threads=1", "train.max_steps=5", "data.train_limit=64"]  # 3 seeds: analysable
    execute(compose_cfg(args), tmp_path, say=lambda m: None, show_table=False)
    figure = tmp_path / "analysis.png"
    before = (figure.stat().st_mtime_ns, (tmp_path / "analysis.json").read_text())

    def must_not_run(*a, **k):
        raise AssertionError("preflight ran although every result is done")

    monkeypatch.setattr(preflight_module, "preflight", must_not_run)
    said = []
    done = execute(compose_cfg(args), tmp_path, say=said.append, show_table=False)
    assert done.analysis is not None and "_unchanged" not in done.analysis
    assert "every run is done with this config and code: nothing to check or train" in said, said
    assert any(m.startswith("analysis unchanged") for m in said), said
    assert (figure.stat().st_mtime_ns, (tmp_path / "analysis.json").read_text()) == before

    # A unit that runs again is new input: the analysis is written again (and preflight runs).
    monkeypatch.undo()
    (tmp_path / "runs/seed=1/arm=B/result.json").unlink()
    said = []
    execute(compose_cfg(args), tmp_path, say=said.append, show_table=False)
    assert not any(m.startswith("analysis unchanged") for m in said), said
    assert figure.stat().st_mtime_ns != before[0]


@pytest.mark.slow
def test_the_code_identity_reads_torchs_version_without_importing_it():
    """A no-op rerun decides what to skip from the code identity; reading torch's version must not
    import torch (seconds), and must give exactly torch.__version__ (else every result would rerun)."""
    import subprocess
    import sys

    probe = ("import sys; from harness.experiment.identity import torch_version; v = torch_version(); "
             "print('torch' in sys.modules); import torch; print(v == torch.__version__)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "True"], out.stderr


DIGITS = """
import sys
import torch
from harness.builtin.data import digits
ds = digits()
print("loaded", sorted(m for m in ("sklearn",) if m in sys.modules))
from sklearn.datasets import load_digits
import numpy as np
b = load_digits()
order = np.random.default_rng(0).permutation(len(b.target))
x = (torch.tensor(b.images, dtype=torch.float32).unsqueeze(1) / 16.0 - 0.5) / 0.5
same = torch.equal(torch.cat([ds.test_x, ds.train_x]), x[torch.from_numpy(order)])
same = same and torch.equal(torch.cat([ds.test_y, ds.train_y]), torch.tensor(b.target)[torch.from_numpy(order)])
print("digits as scikit-learn loads them", same)
"""


@pytest.mark.slow
def test_the_digits_load_without_importing_scikit_learn_and_are_the_same_tensors(tmp_path):
    """Importing scikit-learn (load_digits) costs over a second per process, for every run and every
    worker; its bundled file is read directly."""
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", DIGITS], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "loaded []" in proc.stdout, proc.stdout
    assert "digits as scikit-learn loads them True" in proc.stdout
