"""Every key of the schema either is part of a run's identity or is proven to change no bit of it.

One list (results.CHANGES_NO_BIT) holds the keys that change no result; the identity (config_digest)
and the output folder's name (config.compose.NOT_IN_NAME) both leave them out, so the two cannot drift
apart. Besides them the identity leaves out only a run's coordinates and what is decided outside the
run, each with its reason below. A new schema key that is in neither place fails here."""

from __future__ import annotations

import dataclasses

import harness
from harness.config.compose import NOT_IN_NAME
from harness.config.schema import Config
from harness.experiment.identity import plain
from harness.results import CHANGES_NO_BIT, NOT_IN_IDENTITY, config_digest
from tests.conftest import FAST, compose_cfg

# Left out of the identity though they are no run-time option, each for its reason:
OUTSIDE_THE_RUN = {
    "seed": "a run's coordinate: recorded as the result's own seed, never compared as config",
    "arm": "a run's coordinate: its factor value is in the config at ab.factor",
    "ab": "which runs exist and what each arm places at ab.factor: the placed value is hashed",
    "stats": "the analysis of finished runs: a changed stats key is re-analysed, not retrained",
    "experiment_name": "a label: it names the folder's parent, not anything the run computes",
}


def _probe(value):
    """A different value of the same shape: a mapping gains a key, a leaf becomes a string."""
    return {**value, "probe": 1} if isinstance(value, dict) else "probe"


def test_every_schema_key_is_in_the_identity_or_in_the_one_list():
    keys = [f.name for f in dataclasses.fields(Config)]
    assert set(NOT_IN_IDENTITY) == set(CHANGES_NO_BIT) | set(OUTSIDE_THE_RUN)
    assert not set(CHANGES_NO_BIT) & set(OUTSIDE_THE_RUN)
    assert set(NOT_IN_IDENTITY) <= set(keys), set(NOT_IN_IDENTITY) - set(keys)
    base = plain(compose_cfg(FAST))
    digest = config_digest(base)
    for key in keys:
        changed = config_digest({**base, key: _probe(base.get(key))}) != digest
        assert changed == (key not in NOT_IN_IDENTITY), key


def test_every_repro_key_is_in_the_identity_or_how_a_run_is_checked():
    """repro.certificate, code_paths and code_git say how a run is checked (a rerun, which files and
    whether the git tree identify the code; the code itself is in code_version): no bit of the run."""
    from harness.config.schema import ReproConfig
    from harness.results import REPRO_NOT_IN_IDENTITY

    base = plain(compose_cfg(FAST))
    digest = config_digest(base)
    for f in dataclasses.fields(ReproConfig):
        changed = config_digest({**base, "repro": {**base["repro"], f.name: _probe(base["repro"].get(f.name))}})
        assert (changed != digest) == (f.name not in REPRO_NOT_IN_IDENTITY), f.name


def test_the_one_list_names_no_folder():
    assert set(CHANGES_NO_BIT) <= set(NOT_IN_NAME)


def test_the_keys_of_the_one_list_change_no_bit(tmp_path):
    """One unit trained twice, every key of the one list at another value the second time: the
    same fingerprints (initial weights, data order, every step, final weights) and metrics.

    Why none can change a bit: resume and lock_timeout decide whether a unit runs, not what it
    computes; progress and tables what is printed; workers how many units run side by side (each
    pins its own threads); logger where metrics are sent and ledger where claims are recorded, both
    after the numbers exist."""
    varied = {"resume": ["resume=false"], "lock_timeout": ["lock_timeout=7"], "progress": ["progress=true"],
              "tables": ["tables=false"], "workers": ["workers=auto"],
              "logger": ["logger=wandb", "logger.wandb.mode=disabled"],
              "ledger": ["ledger.enabled=false"]}
    assert set(varied) == set(CHANGES_NO_BIT)
    unit = [*FAST, "seed=0", "arm=A", "train.max_steps=10", "repro.certificate=false"]
    first = harness.run(unit, out_dir=tmp_path / "a", verbose=False).results
    second = harness.run([*unit, *(o for v in varied.values() for o in v)], out_dir=tmp_path / "b",
                         verbose=False).results
    (a,), (b,) = first, second
    assert a["status"] == b["status"] == "completed", (a.get("error"), b.get("error"))
    assert a["fingerprints"] == b["fingerprints"] and a["metrics"] == b["metrics"]
    assert a["config_hash"] == b["config_hash"]
