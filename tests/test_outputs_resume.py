"""Resume says what changed (issue 17, item 8.6): a config change names the keys with their old and
new values; after a rerun for a code change, whether its bits equal the old ones."""

from __future__ import annotations

from harness.experiment.units import run_experiment
from harness.experiment.identity import describe_config_change
from harness.results import read_json, write_json
from tests.conftest import FAST, compose_cfg

ONE = [*FAST, "ab.seeds=[0]", "arm=A", "determinism.threads=1"]
RESULT = "runs/seed=0/arm=A/result.json"


def _run(folder, extra=()):
    messages = []
    run_experiment(compose_cfg([*ONE, *extra]), folder, log=messages.append, certify=False)
    return messages


def test_describe_config_change_names_keys_with_old_and_new_values():
    old = {"optim": {"lr": 0.05, "momentum": 0.9}, "train": {"kwargs": {}}, "seed": 0, "progress": True,
           "repro": {"certificate": True, "keep_step_weights": 0}}
    new = {"optim": {"lr": 0.1, "momentum": 0.9}, "train": {"kwargs": {"clip": 1}}, "seed": 3, "progress": False,
           "repro": {"certificate": False, "keep_step_weights": 2}}
    text = describe_config_change(old, new)
    assert text == "optim.lr: 0.05 -> 0.1; repro.keep_step_weights: 0 -> 2; train.kwargs.clip: (absent) -> 1"
    assert describe_config_change(None, new) == ""  # nothing to compare with


def test_a_config_change_is_logged_with_the_key_and_both_values(tmp_path):
    _run(tmp_path, ["optim.lr=0.05"])
    messages = _run(tmp_path, ["optim.lr=0.1"])
    assert "seed=0 arm=A: rerun, the config changed: optim.lr: 0.05 -> 0.1" in messages, messages


def _as_if_made_by_other_code(folder, final=None):
    path = folder / RESULT
    r = read_json(path)
    r["code_version"] = "0.0.1+000000000000/torch-0"
    r["code"] = {**r["code"], "version": r["code_version"], "harness": "000000000000"}
    if final:
        r["fingerprints"]["final"] = final
    write_json(path, r)
    return r


def test_after_a_rerun_for_a_code_change_the_log_says_bits_unchanged(tmp_path):
    _run(tmp_path)
    old = _as_if_made_by_other_code(tmp_path)
    messages = _run(tmp_path)
    assert "seed=0 arm=A: rerun, the code changed: the harness's own source" in messages, messages
    new = read_json(tmp_path / RESULT)["fingerprints"]["final"]
    assert new == old["fingerprints"]["final"]
    assert f"seed=0 arm=A: after the code change, bits unchanged (final {new}, as before)" in messages, messages


def test_after_a_rerun_for_a_code_change_the_log_says_bits_changed(tmp_path):
    _run(tmp_path)
    _as_if_made_by_other_code(tmp_path, final="0123456789abcdef")
    messages = _run(tmp_path)
    new = read_json(tmp_path / RESULT)["fingerprints"]["final"]
    assert f"seed=0 arm=A: after the code change, bits changed (final 0123456789abcdef -> {new})" in messages, messages


def test_a_config_change_that_leaves_the_bits_alone_is_said_so(tmp_path):
    _run(tmp_path, ["train.log_every=10"])  # in the hash, yet the loop's numbers do not depend on it
    messages = _run(tmp_path, ["train.log_every=5"])
    assert "seed=0 arm=A: rerun, the config changed: train.log_every: 10 -> 5" in messages, messages
    assert any("after the config change, bits unchanged" in m and "did not change this run's numbers" in m
               for m in messages), messages
    changed = _run(tmp_path, ["train.log_every=5", "optim.lr=0.1"])
    assert not any("bits" in m for m in changed), changed  # changed bits are what a config change is for
