"""A package's version that changes between batches stops a sequential run and a race, named (issue 30, item 4).

The training function lives in a package "installed" in a site-packages folder of the test's own
(``fakelib``, with its dist-info), so its version is part of every run's code identity
(``code.packages``). At one seed of the first batch the function upgrades it, as a ``pip install -U``
in another shell would: the dist-info becomes version 2.0. The runs of this process keep the
identity computed at the start; the look between batches reads the installed versions again, and
must stop, naming the package and both versions, without a decision.
"""

from __future__ import annotations

import textwrap

import pytest
from harness.results import read_json

from .conftest import REPO, run_cli

pytestmark = pytest.mark.slow  # every test here spawns the harness or takes seconds

FAKELIB = '''
"""A training library installed in site-packages; ``upgrade_at_seed`` upgrades it to 2.0 mid-run."""
import pathlib

import numpy as np
import torch


def train(cfg, run, shift=0.0, upgrade_at_seed=-1):
    with run.init():
        weight = torch.randn(1)
    run.watch([weight], total_steps=1)
    weight += shift
    run.step(torch.tensor(1.0))
    if run.seed == upgrade_at_seed:
        site = pathlib.Path(__file__).resolve().parents[1]
        old, new = site / "fakelib-1.0.dist-info", site / "fakelib-2.0.dist-info"
        if old.exists():
            old.rename(new)
            (new / "METADATA").write_text("Metadata-Version: 2.1\\nName: fakelib\\nVersion: 2.0\\n")
    common = np.random.default_rng([run.seed, 7]).normal(0.0, 3.0)
    own = np.random.default_rng([run.seed, 11, int(round(shift * 1000)) + 10**6]).normal(0.0, 0.5)
    return {"test_accuracy": 50.0 + shift + common + own, "n_test": 100}
'''


def _install(tmp_path):
    site = tmp_path / "site-packages"
    (site / "fakelib").mkdir(parents=True)
    (site / "fakelib" / "__init__.py").write_text(textwrap.dedent(FAKELIB))
    info = site / "fakelib-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakelib\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("fakelib\n")
    return {"PYTHONPATH": f"{REPO}:{site}"}


COMMON = ["+experiment=loss_ab", "logger=none", "progress=false", "determinism.threads=1", "repro.certificate=false",
          "train.fn=fakelib.train", "+train.kwargs.shift=0.0"]
SAID = "installed package fakelib: fakelib==1.0 -> fakelib==2.0"


def test_a_sequential_run_stops_when_a_package_version_changes_between_batches(tmp_path):
    env = _install(tmp_path)
    out = tmp_path / "seq"
    proc = run_cli([*COMMON, "workers=1", "ab.factor=train.kwargs.shift", "ab.arms.A=0.0", "ab.arms.B=0.3",
                    "ab.sequential.enabled=true", "ab.sequential.max_seeds=20", "stats.margin=null",
                    "+train.kwargs.upgrade_at_seed=7", f"hydra.run.dir={out}"], env=env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    err = " ".join(proc.stderr.split())
    assert "sequential run stopped: the config or code changed" in err and "Traceback" not in err
    assert SAID in err, err[-2000:]
    seq = read_json(out / "sequential.json")
    assert seq["status"] == "stopped" and SAID in seq["stopped"]
    assert all(a["decision"] == "continue" for a in seq["arms"].values())
    records = {r["code"]["packages"]["fakelib"] for r in (read_json(p) for p in out.rglob("result.json"))}
    assert records == {"fakelib==1.0"}  # every run recorded the version of the start: the look saw the change


def test_a_race_stops_when_a_package_version_changes_between_batches(tmp_path):
    env = _install(tmp_path)
    out = tmp_path / "race"
    proc = run_cli(["-m", "hydra/sweeper=harness_race", *COMMON, "stats.margin=1.0", "ab.race.min_seeds=4",
                    "ab.race.seeds_per_look=2", "ab.race.max_seeds=15", "+train.kwargs.upgrade_at_seed=3",
                    "train.kwargs.shift=0.0,0.3,-0.3", f"hydra.sweep.dir={out}"], env=env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    err = " ".join(proc.stderr.split())
    assert "race stopped: the config or code changed while this race was going on" in err, err[-3000:]
    assert SAID in err and "Traceback" not in err
    race = read_json(out / "race.json")
    assert race["status"] == "stopped" and SAID in race["stopped"]
