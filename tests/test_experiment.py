"""The paired A/B core: determinism, pairing, narrowing, threads, data, and bad input."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

import harness
from harness import HarnessError
from harness.experiment.units import check_pairing, run_experiment
from harness.experiment.arms import ExperimentError, PairingError, arm_configs
from harness.results import load_tree, read_json

from .conftest import FAST, TEST_CONF, compose_cfg, run_cli


def _run(tmp: Path, overrides: list[str], **kw):
    cfg = compose_cfg(FAST + overrides)
    return run_experiment(cfg, tmp, log=lambda m: None, **kw)


def _by_key(outcome):
    return {(r["seed"], r["arm"]): r for r in outcome.results}


@pytest.mark.slow
def test_two_runs_give_identical_final_fingerprints(tmp_path):
    first = _by_key(_run(tmp_path / "one", [], certify=False))
    second = _by_key(_run(tmp_path / "two", [], certify=False))
    assert set(first) == {(s, a) for s in (0, 1, 2) for a in ("A", "B")}
    for key, r in first.items():
        assert r["status"] == "completed"
        assert r["fingerprints"]["final"] == second[key]["fingerprints"]["final"]
        assert r["fingerprints"]["steps"] == second[key]["fingerprints"]["steps"]
    # the arms really are different runs
    assert first[(0, "A")]["fingerprints"]["final"] != first[(0, "B")]["fingerprints"]["final"]


def test_arms_share_init_and_data_order_even_when_the_loss_draws_random_numbers(tmp_path):
    # B adds Gaussian noise to the logits: it draws from the RNG during training, A does not.
    outcome = _run(tmp_path, ["ab.factor=loss.logit_noise", "ab.arms={A: 0.0, B: 0.5}", "ab.seeds=[0,1]"], certify=False)
    runs = _by_key(outcome)
    for seed in (0, 1):
        a, b = runs[(seed, "A")]["fingerprints"], runs[(seed, "B")]["fingerprints"]
        assert a["init"] == b["init"]
        assert a["data_order"] == b["data_order"]
        assert a["final"] != b["final"]
        assert a["steps"]["loss"][0] != b["steps"]["loss"][0]  # the noise really was drawn
    assert runs[(0, "A")]["fingerprints"]["init"] != runs[(1, "A")]["fingerprints"]["init"]
    assert runs[(0, "A")]["fingerprints"]["data_order"] != runs[(1, "A")]["fingerprints"]["data_order"]


def test_pairing_violation_is_an_error():
    fp = {"init": "aaaa", "data_order": "bbbb", "final": "cccc"}
    a = {"seed": 0, "arm": "A", "status": "completed", "factor": "loss.label_smoothing",
         "pairing": {"init": True, "data_order": True}, "fingerprints": fp}
    b = {**a, "arm": "B", "fingerprints": {**fp, "init": "dddd"}}
    with pytest.raises(PairingError, match="seed 0: arms A and B have different init"):
        check_pairing([a, b])
    # a factor that changes the model may change init: then it is not checked
    a2 = {**a, "pairing": {"init": False, "data_order": True}}
    check_pairing([a2, {**b, "pairing": a2["pairing"]}])


def test_num_workers_do_not_change_the_bits(tmp_path):
    zero = _by_key(_run(tmp_path / "w0", ["ab.seeds=[0]", "arm=A"], certify=False))
    two = _by_key(_run(tmp_path / "w2", ["ab.seeds=[0]", "arm=A", "train.num_workers=2"], certify=False))
    assert zero[(0, "A")]["fingerprints"]["data_order"] == two[(0, "A")]["fingerprints"]["data_order"]
    assert zero[(0, "A")]["fingerprints"]["final"] == two[(0, "A")]["fingerprints"]["final"]


@pytest.mark.slow
def test_augmentation_is_paired_and_reproducible(tmp_path):
    one = _by_key(_run(tmp_path / "a1", ["ab.seeds=[0]", "data.augment=true"], certify=False))
    two = _by_key(_run(tmp_path / "a2", ["ab.seeds=[0]", "data.augment=true"], certify=False))
    plain = _by_key(_run(tmp_path / "a3", ["ab.seeds=[0]", "arm=A"], certify=False))
    assert one[(0, "A")]["fingerprints"]["final"] == two[(0, "A")]["fingerprints"]["final"]
    assert one[(0, "A")]["fingerprints"]["final"] != plain[(0, "A")]["fingerprints"]["final"]


@pytest.mark.solo  # trains with 2 threads: the count is the point
def test_thread_count_changes_the_bits_and_the_same_count_does_not(tmp_path):
    args = ["ab.seeds=[0]", "arm=A", "train.max_steps=5"]
    t1 = _by_key(_run(tmp_path / "t1", args + ["determinism.threads=1"], certify=False))[(0, "A")]
    t1b = _by_key(_run(tmp_path / "t1b", args + ["determinism.threads=1"], certify=False))[(0, "A")]
    t2 = _by_key(_run(tmp_path / "t2", args + ["determinism.threads=2"], certify=False))[(0, "A")]
    assert t1["env"]["threads"] == 1 and t2["env"]["threads"] == 2
    assert t1["fingerprints"]["final"] == t1b["fingerprints"]["final"]
    assert t1["fingerprints"]["init"] == t2["fingerprints"]["init"]
    assert t1["fingerprints"]["final"] != t2["fingerprints"]["final"]


def test_certificate_reports_bitwise_reproducibility(tmp_path):
    outcome = _run(tmp_path, ["ab.seeds=[0]"])
    assert outcome.certificate["reproducible"] is True
    # the built-in loop counted its 30 steps itself: the line says the proof covers all of them
    assert outcome.certificate["line"].startswith("bitwise reproducible: yes (30 of 30 steps, seed 0")
    assert read_json(tmp_path / "certificate.json") == outcome.certificate


def test_resume_skips_matching_runs_and_reruns_changed_ones(tmp_path):
    first = _run(tmp_path, ["ab.seeds=[0]"], certify=False)
    assert first.skipped == []
    again = _run(tmp_path, ["ab.seeds=[0]"], certify=False)
    assert sorted(again.skipped) == [(0, "A"), (0, "B")]
    messages = []
    changed = run_experiment(compose_cfg(FAST + ["ab.seeds=[0]", "optim.lr=0.02"]), tmp_path,
                             log=messages.append, certify=False)
    assert changed.skipped == []
    assert any("the config changed" in m for m in messages)
    # nothing computed is lost: the old results were moved aside
    assert len(list(tmp_path.glob("runs/seed=0/arm=*/superseded/result.*.json"))) == 2


# -- CLI ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_narrowed_cli_run_matches_the_full_run(tmp_path):
    # the full run in this process, through the Python API (the same execute as the CLI; threads
    # pinned to 1 in FAST): the narrowed CLI run in its own process must give the same bits
    full = harness.run(FAST + ["ab.seeds=[2,3,4]", "repro.certificate=false"], out_dir=tmp_path / "full", verbose=False)
    assert {r["status"] for r in full.results} == {"completed"} and len(full.results) == 6
    one = run_cli(FAST + ["ab.seeds=[2,3,4]", "seed=3", "arm=B", f"hydra.run.dir={tmp_path/'one'}"])
    assert one.returncode == 0, one.stderr
    files = list((tmp_path / "one").rglob("result.json"))
    assert [f.relative_to(tmp_path / "one").as_posix() for f in files] == ["runs/seed=3/arm=B/result.json"]
    want = read_json(tmp_path / "full" / "runs" / "seed=3" / "arm=B" / "result.json")
    assert read_json(files[0])["fingerprints"]["final"] == want["fingerprints"]["final"]


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["train.epoch=3"], "train.epoch"),
        (["train.epochs=many"], "train.epochs"),
        (["determinism.mode=sometimes"], "strict, warn, off"),
        (["ab.factor=loss.smoothing"], "ab.factor='loss.smoothing' does not exist"),
        (["~ab.arms.B"], "needs at least two"),
        (["ab.seeds=[]"], "ab.seeds is empty"),
        (["optim.weight_decay=${loss.label_smoothing}"], "differ outside ab.factor='loss.label_smoothing', at: optim.weight_decay"),
        (["ab.arms={A: 0.0, B: oops}"], "ab.arms.B"),
        (["arm=C"], "arm='C' is not an arm"),
    ],
)
def test_bad_input_fails_clearly(tmp_path, overrides, message):
    # in-process, through the Python API: the CLI prints the same message with exit 2
    # (test_own_code.test_an_unknown_key_of_a_builtin_component_exits_2_naming_it)
    with pytest.raises(HarnessError) as e:
        harness.run(FAST + overrides, out_dir=tmp_path, verbose=False)
    assert message in str(e.value), str(e.value)[-2000:]
    assert not list(tmp_path.rglob("result.json"))


@pytest.mark.slow
def test_cifar10_without_files_says_where_to_put_them(tmp_path):
    proc = run_cli(FAST + ["data=cifar10", f"data.root={tmp_path/'nothing'}", f"hydra.run.dir={tmp_path/'out'}"])
    assert proc.returncode == 2
    assert "no CIFAR-10 files there" in proc.stderr and "data.download=true" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_strict_mode_names_a_nondeterministic_op_and_the_ways_out(tmp_path):
    proc = run_cli(["--config-dir", str(TEST_CONF), *FAST, "model=put", f"hydra.run.dir={tmp_path}"])
    assert proc.returncode == 2
    assert "put_ has no deterministic implementation" in proc.stderr
    assert "determinism.mode=warn" in proc.stderr and "harness.audit" in proc.stderr
    failed = read_json(tmp_path / "runs" / "seed=0" / "arm=A" / "result.json")
    assert failed["status"] == "failed" and failed["error"]["type"] == "NondeterministicOp"
    # warn mode runs it (not bit-exact, but it runs, with torch's warning): through the Python API, in this process
    with pytest.warns(UserWarning, match="put_ does not have a deterministic implementation"):
        ok = harness.run([*FAST, "model=put", "determinism=warn", "ab.seeds=[0]", "arm=A"], config_dir=TEST_CONF,
                         out_dir=tmp_path / "warn", verbose=False)
    assert [r["status"] for r in ok.results] == ["completed"], ok.results[0].get("error")


@pytest.mark.slow
def test_nan_loss_fails_that_run_only(tmp_path):
    proc = run_cli(FAST + ["ab.factor=optim.lr", "ab.arms.A=0.05", "ab.arms.B=0.02", "+ab.arms.C=1e30", "ab.seeds=[0,1,2]",
                           "repro.certificate=false", f"hydra.run.dir={tmp_path}"])
    loaded = load_tree(tmp_path)
    status = {(r["seed"], r["arm"]): r["status"] for r in loaded.results}
    assert len(status) == 9
    for seed in (0, 1, 2):
        assert status[(seed, "A")] == status[(seed, "B")] == "completed"
        assert status[(seed, "C")] == "failed"
    c = read_json(tmp_path / "runs" / "seed=0" / "arm=C" / "result.json")
    assert c["error"]["type"] == "NonFiniteLoss" and c["error"]["step"] >= 1
    assert "metrics" in c and "test_accuracy" not in c["metrics"]
    analysis = read_json(tmp_path / "analysis.json")
    # a diverged run is an outcome (stats.diverged=worst, the default), not a failure: C is decided on
    # its 3 pairs with no finished one (no size), and 3 pairs are too few for the test to reject
    assert analysis["excluded"] == []
    assert list(analysis["comparisons"]) == ["B"]  # B vs A is still reported
    (c_entry,) = analysis["not_compared"]
    assert c_entry["arm"] == "C" and c_entry["verdict"]["code"] == "undecided"
    assert c_entry["verdict"]["sentence"].startswith("diverged: A 0 of 3 seeds, B 0 of 3 seeds, C 3 of 3 seeds")
    assert analysis["multiple_comparisons"]["comparisons"] == 2  # C's claim is one of the family
    assert proc.returncode == 0, proc.stderr[-3000:]


# -- CIFAR-10 through torchvision's own class ------------------------------------------------------


def _write_cifar(root: Path, n_train_per_batch=8, n_test=10):
    """A tiny CIFAR-10 in its own format: pickled dicts with b'data' (N x 3072 uint8) and b'labels'."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)

    def batch(name, n):
        labels = [int(i % 10) for i in range(n)]
        data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
        with open(folder / name, "wb") as f:
            # CIFAR's files are Python 2 pickles: their keys load as str under encoding="latin1"
            pickle.dump({"batch_label": name, "labels": labels, "data": data,
                         "filenames": [f"{i}.png" for i in range(n)]}, f)

    for i in range(1, 6):
        batch(f"data_batch_{i}", n_train_per_batch)
    batch("test_batch", n_test)
    with open(folder / "batches.meta", "wb") as f:
        pickle.dump({"label_names": [f"class{i}" for i in range(10)], "num_vis": 3072}, f)


def test_cifar10_loads_through_torchvision(tmp_path):
    from harness import instantiate

    _write_cifar(tmp_path)
    cfg = compose_cfg(["data=cifar10", f"data.root={tmp_path}", "data.verify=false"])  # tiny, not official
    ds = instantiate(cfg.data)
    assert tuple(ds.train_x.shape) == (40, 3, 32, 32) and tuple(ds.test_x.shape) == (10, 3, 32, 32)
    assert ds.num_classes == 10 and ds.train_y.tolist()[:3] == [0, 1, 2]
    out = _run(tmp_path / "out", ["data=cifar10", f"data.root={tmp_path}", "data.verify=false", "data.train_limit=null",
                                  "ab.seeds=[0]", "train.max_steps=2", "train.batch_size=16"], certify=False)
    assert [r["status"] for r in out.results] == ["completed", "completed"]
    assert out.results[0]["metrics"]["n_test"] == 10


def test_arm_values_merge_into_a_subtree_factor():
    cfg = compose_cfg(FAST + ["ab.factor=loss", "ab.arms={A: {}, B: {focal_gamma: 2.0, label_smoothing: 0.1}}"])
    arms = arm_configs(cfg)
    assert arms["A"].loss.focal_gamma == 0.0 and arms["B"].loss.focal_gamma == 2.0
    assert arms["B"].loss.label_smoothing == 0.1
    with pytest.raises(ExperimentError, match="subtree"):
        arm_configs(compose_cfg(FAST + ["ab.factor=loss", "ab.arms={A: 0.0, B: 0.1}"]))
