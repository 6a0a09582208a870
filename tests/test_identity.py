"""Issue 13: the analysis compares only results of one identity (config outside the factor, code, the
environment that decides the bits), one run per (seed, arm), and never shows a claim of another
identity as current. Synthetic result files (tests/_results_factory.py): no training here."""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import _results_factory as F  # noqa: E402

from harness import results  # noqa: E402
from harness.tools.analyze import main  # noqa: E402

OPTS = ["--bootstrap-resamples", "999"]


def _items(n=6, shift=0.5, **kw):
    return F.make_results(F.accuracies(n, shift=shift), **kw)


def _set(r, path, value):
    """Change a config key of a result (and nothing else: the recorded hashes stay as they were)."""
    node = r["config"]
    *head, last = path.split(".")
    for k in head:
        node = node.setdefault(k, {})
    node[last] = value


def _analyze(root, *args, capsys):
    code = main([str(root), *OPTS, *args])
    out = capsys.readouterr()
    return code, out.out, out.err


# -- item 1: arms run with different settings -----------------------------------------------------


@pytest.mark.slow
def test_arms_with_different_settings_outside_the_factor_are_refused_naming_files_and_values(tmp_path, capsys):
    items = _items()
    for r in items:
        _set(r, "optim.lr", 0.2 if r["arm"] == "B" else 0.05)
        if r["arm"] == "B":  # what `arm=B optim.lr=0.2` writes: hashes that agree with its config
            r["config_hash"] = results.config_digest(r["config"])
            r["base_hash"] = results.config_digest(r["config"], exclude_factor=F.FACTOR)
        else:
            r["config_hash"] = results.config_digest(r["config"])
            r["base_hash"] = results.config_digest(r["config"], exclude_factor=F.FACTOR)
    root = F.write_results(tmp_path / "exp", items)
    code, out, err = _analyze(root, capsys=capsys)
    assert code == 2, out
    assert "config outside the factor (base_hash)" in err
    assert "optim.lr: 0.05 vs 0.2" in err
    assert "runs/seed=0/arm=A/result.json" in err and "runs/seed=0/arm=B/result.json" in err
    assert "B vs A: config outside the factor" in err
    assert not (root / "analysis.json").exists()

    code, out, err = _analyze(root, "--allow-mixed-identity", capsys=capsys)
    assert code == 0, err
    identity = json.loads((root / "analysis.json").read_text())["identity"]
    assert identity["consistent"] is False and identity["allowed_mixed"] is True
    assert identity["comparisons"]["B"]["differs"] == ["base_hash"]
    assert "identity" in out.lower() and "base_hash" in out  # the table says it loudly too


def test_allow_mixed_identity_is_offered_only_where_it_works(tmp_path, capsys):
    # arm B's own runs hold two learning rates: --allow-mixed-identity would be refused again, so the
    # refusal must not offer it
    items = _items()
    for r in items:
        if r["arm"] == "B" and r["seed"] >= 3:
            _set(r, "optim.lr", 0.2)
            r["config_hash"] = results.config_digest(r["config"])
            r["base_hash"] = results.config_digest(r["config"], exclude_factor=F.FACTOR)
    root = F.write_results(tmp_path / "exp", items)
    code, out, err = _analyze(root, capsys=capsys)
    assert code == 2, out
    assert "compare anyway with --allow-mixed-identity" not in err
    assert "Runs of one arm hold different configurations (arm B:" in err and "seeds 3, 4, 5" in err
    code, out, err = _analyze(root, "--allow-mixed-identity", capsys=capsys)
    assert code == 2  # the flag does not make runs within an arm comparable: why it was not offered


# -- item 2: code and environment -----------------------------------------------------------------


@pytest.mark.parametrize("part, change, label", [
    ("code_version", lambda r: r.update(code_version="0.1.0+other/torch-2.x"), "code (code_version)"),
    ("device", lambda r: r["env"].update(device="cuda:0", device_name="H200"), "device type (env.device)"),
    ("torch", lambda r: r["env"].update(torch="2.13.0"), "torch version (env.torch)"),
    ("capability", lambda r: r["env"].update(cpu_capability="AVX512"), "CPU capability (env.cpu_capability)"),
    ("threads", lambda r: r["env"].update(threads=1), "threads (env.threads)"),
    ("mode", lambda r: r["env"].update(mode="off"), "determinism mode (env.mode)"),
    ("precision", lambda r: r["env"].update(precision="bf16"), "precision"),
])
def test_arms_run_with_other_code_or_environment_are_refused(part, change, label):
    from harness.analysis.analyze import analyze
    from harness.analysis import AnalysisError

    items = _items()
    for r in items:
        r["env"].update(cpu_capability="AVX2", mode="strict", precision="fp32")
        if r["arm"] == "B":
            change(r)
    with pytest.raises(AnalysisError) as e:
        analyze(items, bootstrap_resamples=999)
    assert f"{label}:" in str(e.value)
    assert "for arm B seeds 0, 1, 2, 3, 4, 5" in str(e.value)


def test_an_environment_part_that_is_the_factor_may_differ_between_arms():
    from harness.analysis.analyze import analyze

    items = _items(6)
    for r in items:  # an experiment whose factor is determinism.threads
        threads = 1 if r["arm"] == "A" else 2
        r.update(factor="determinism.threads", factor_value=threads)
        r["config"]["ab"].update(factor="determinism.threads", arms={"A": 1, "B": 2})
        r["config"]["loss"]["label_smoothing"] = 0.0
        _set(r, "determinism.threads", threads)
        r["env"]["threads"] = threads
        r["config_hash"] = results.config_digest(r["config"])
        r["base_hash"] = results.config_digest(r["config"], exclude_factor="determinism.threads")
    a = analyze(items, bootstrap_resamples=999)
    assert a["identity"]["consistent"] is True and a["comparisons"]["B"]["n_pairs"] == 6


# -- item 3: a stale certificate ------------------------------------------------------------------


@pytest.mark.slow
def test_a_certificate_of_another_configuration_is_not_reported_as_current(tmp_path, capsys):
    old = _items()
    root = F.write_results(tmp_path / "exp", old)
    cert = {"reproducible": True, "steps": 66, "seed": 0, "arm": "A", "config_hash": old[0]["config_hash"],
            "line": "bitwise reproducible: yes (66 steps, seed 0, arm A rerun)"}
    (root / "certificate.json").write_text(json.dumps(cert))
    code, out, err = _analyze(root, capsys=capsys)
    assert code == 0 and "bitwise reproducible: yes (66 steps" in (root / "report.md").read_text()

    new = _items()  # the config changed (repro.certificate=false: no new certificate)
    for r in new:
        _set(r, "train.max_steps", 120)
        r["config_hash"] = results.config_digest(r["config"])
        r["base_hash"] = results.config_digest(r["config"], exclude_factor=F.FACTOR)
    F.write_results(root, new)
    code, out, err = _analyze(root, capsys=capsys)
    assert code == 0, err
    report = (root / "report.md").read_text()
    assert "bitwise reproducible: yes" not in report and "bitwise reproducible: yes" not in out
    assert "not certified for these results" in report
    analysis = json.loads((root / "analysis.json").read_text())
    assert analysis["certificate"]["stale"] is True and analysis["certificate"]["reproducible"] is None


# -- item 4: the config changed on fewer seeds ----------------------------------------------------


@pytest.mark.slow
def test_a_config_changed_on_some_seeds_is_refused_and_the_old_analysis_set_aside(tmp_path, capsys):
    root = F.write_results(tmp_path / "exp", _items(6))
    code, _, err = _analyze(root, capsys=capsys)
    assert code == 0, err
    old_files = {name: (root / name).read_bytes() for name in ("analysis.json", "report.md", "analysis.png")}

    new = [r for r in _items(6) if r["seed"] < 3]
    for r in new:
        _set(r, "optim.lr", 0.2)
        r["config_hash"] = results.config_digest(r["config"])
        r["base_hash"] = results.config_digest(r["config"], exclude_factor=F.FACTOR)
    F.write_results(root, new)
    code, _, err = _analyze(root, capsys=capsys)
    assert code == 2
    assert "for arm A seeds 0, 1, 2, arm B seeds 0, 1, 2" in err and "for arm A seeds 3, 4, 5, arm B seeds 3, 4, 5" in err
    assert "optim.lr: 0.2 vs missing" in err  # the factory's old config has no optim block
    for name in old_files:
        assert not (root / name).exists(), f"the old {name} still looks current"
    (aside,) = (root / "superseded").glob("analysis-*")
    assert {p.name: p.read_bytes() for p in aside.iterdir()} == old_files
    assert "moved to superseded/analysis-" in err

    # refused again for a reason that is not about the results: nothing more to set aside
    code, _, err = _analyze(root, "--metric", "nope", capsys=capsys)
    assert code == 2 and len(list((root / "superseded").glob("analysis-*"))) == 1


@pytest.mark.slow
def test_an_analysis_refused_for_a_bad_option_leaves_the_current_outputs(tmp_path, capsys):
    root = F.write_results(tmp_path / "exp", _items(6))
    assert _analyze(root, capsys=capsys)[0] == 0
    before = (root / "analysis.json").read_bytes()
    code, _, err = _analyze(root, "--baseline", "Z", capsys=capsys)
    assert code == 2 and (root / "analysis.json").read_bytes() == before and not (root / "superseded").exists()


# -- item 5: no config_hash, relabelled duplicates -------------------------------------------------


def test_a_result_without_hashes_is_checked_by_its_own_config_block():
    from harness.analysis.analyze import analyze
    from harness.analysis import AnalysisError

    items = _items()
    odd = next(r for r in items if (r["seed"], r["arm"]) == (2, "B"))
    _set(odd, "optim.lr", 0.2)
    del odd["config_hash"], odd["base_hash"]
    with pytest.raises(AnalysisError, match=r"optim.lr: .*0.2"):
        analyze(items, bootstrap_resamples=999)


def test_a_hash_that_disagrees_with_the_config_block_is_named():
    from harness.analysis.analyze import analyze
    from harness.analysis import AnalysisError

    items = _items()
    odd = next(r for r in items if (r["seed"], r["arm"]) == (2, "B"))
    _set(odd, "optim.lr", 0.2)  # edited config, recorded hashes of the original
    with pytest.raises(AnalysisError, match=r"seed 2 arm B\) records config_hash"):
        analyze(items, bootstrap_resamples=999)


def test_a_copy_relabelled_as_a_new_seed_is_refused_naming_both(tmp_path, capsys):
    items = _items(6)
    for arm in "AB":
        source = next(r for r in items if (r["seed"], r["arm"]) == (4, arm))
        fake = copy.deepcopy(source)
        fake["seed"] = 6
        fake["config"]["seed"] = 6
        items.append(fake)
    root = F.write_results(tmp_path / "exp", items)
    code, _, err = _analyze(root, capsys=capsys)
    assert code == 2
    assert "relabelled as a new seed" in err
    assert "seed 4 arm A (runs/seed=4/arm=A/result.json), seed 6 arm A (runs/seed=6/arm=A/result.json)" in err


# -- item 8 (analysis side): one run wherever it is found ------------------------------------------


@pytest.mark.slow
def test_bit_identical_copies_of_a_run_count_once_and_conflicting_ones_are_named(tmp_path, capsys):
    items = _items(6)
    root = tmp_path / "sweep"
    F.write_results(root / "0", [r for r in items if r["seed"] < 3])
    F.write_results(root / "1", [r for r in items if r["seed"] >= 3])
    again = [copy.deepcopy(r) for r in items if r["seed"] in (1, 2)]
    for r in again:
        r["created"] = "2026-12-01T00:00:00+00:00"  # a later copy: other time stamps, same bits
        r["timing"]["train_seconds"] = 9.0
    F.write_results(root / "7", again)
    code, _, err = _analyze(root, capsys=capsys)
    assert code == 0, err
    analysis = json.loads((root / "analysis.json").read_text())
    assert analysis["comparisons"]["B"]["n_pairs"] == 6
    assert {(c["seed"], c["arm"]): (c["kept"], c["copies"]) for c in analysis["identity"]["copies"]} == {
        (s, a): (f"{s // 3}/runs/seed={s}/arm={a}/result.json", [f"7/runs/seed={s}/arm={a}/result.json"])
        for s in (1, 2) for a in "AB"
    }

    bad = copy.deepcopy(next(r for r in items if (r["seed"], r["arm"]) == (2, "B")))
    bad["metrics"]["test_accuracy"] += 1.0
    bad["fingerprints"]["final"] = "0" * 16
    F.write_results(root / "7", [bad])
    code, _, err = _analyze(root, capsys=capsys)
    assert code == 2
    assert "seed 2 arm B in 2 files that differ" in err
    assert "0/runs/seed=2/arm=B/result.json" in err and "7/runs/seed=2/arm=B/result.json" in err


# -- item 11: files others can read ---------------------------------------------------------------


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o027, 0o640)])
def test_written_files_honour_the_umask(tmp_path, mask, mode):
    old = os.umask(mask)
    try:
        results.write_json(tmp_path / "result.json", {"a": 1})
        results.atomic_write(tmp_path / "weights.pt", lambda f: f.write(b"x"))
    finally:
        os.umask(old)
    assert (tmp_path / "result.json").stat().st_mode & 0o777 == mode
    assert (tmp_path / "weights.pt").stat().st_mode & 0o777 == mode


# -- the hashing rule is the experiment's ----------------------------------------------------------


def test_config_digest_of_a_result_config_block_is_the_experiments_config_hash(compose_fn):
    from harness.experiment.identity import config_hash
    from harness.experiment.identity import plain as _plain
    from harness.experiment.arms import arm_configs

    cfg = compose_fn(["+experiment=loss_ab", "logger=none", "optim.lr=0.2", "repro.certificate=false"])
    for name, arm_cfg in arm_configs(cfg).items():
        block = json.loads(json.dumps(_plain(arm_cfg)))  # as result.json holds it
        block["seed"] = 3
        assert results.config_digest(block) == config_hash(arm_cfg)
        assert results.config_digest(block, exclude_factor="loss.label_smoothing") == \
            config_hash(arm_cfg, exclude_factor="loss.label_smoothing")


# -- item 12: a small result.json, the per-step fingerprints in one packed field ---------------------


@pytest.mark.slow
def test_result_files_pack_the_steps_and_version_1_is_still_read(tmp_path, capsys):
    items = _items(6)
    steps = {"loss": [f"{i * 7919 % 2**32:08x}" for i in range(440)],
             "params": [f"{i * 104729 % 2**64:016x}" for i in range(440)]}
    for r in items:
        r["fingerprints"]["steps"] = steps
    v2 = tmp_path / "v2"
    for r in items:
        results.write_result(results.run_dir(v2, r["seed"], r["arm"]) / results.RESULT_NAME, r)
    path = results.run_dir(v2, 0, "A") / results.RESULT_NAME
    on_disk = json.loads(path.read_text())
    assert on_disk["schema"] == "harness.result/2"
    assert isinstance(on_disk["fingerprints"]["steps"]["loss"], str)  # one packed field, not 440 strings
    assert results.load_steps(path) == steps and results.load_steps(on_disk) == steps
    assert items[0]["fingerprints"]["steps"] is steps  # the caller's dict is left as it was

    v1 = tmp_path / "v1"
    for r in items:  # the previous contract: schema 1, two lists of hex strings
        results.write_json(results.run_dir(v1, r["seed"], r["arm"]) / results.RESULT_NAME,
                           {**r, "schema": "harness.result/1"})
    assert path.stat().st_size < 0.6 * (results.run_dir(v1, 0, "A") / results.RESULT_NAME).stat().st_size
    assert results.load_steps(results.run_dir(v1, 0, "A") / results.RESULT_NAME) == steps
    assert _analyze(v1, "--no-write", capsys=capsys)[0] == 0
    assert _analyze(v2, "--no-write", capsys=capsys)[0] == 0


def test_results_of_one_identity_are_one_group_whatever_else_their_environment_records():
    """The identity parts decide (harness.analysis.identity.comparability): environment keys outside them
    (the Python version, the processor name) and their order do not split a sweep."""
    from harness.analysis.analyze import analyze

    items = _items()
    for i, r in enumerate(items):
        r["env"].update(python=f"3.11.{i}", processor=f"cpu {i % 3}")
        if i % 2:
            r["env"] = dict(reversed(list(r["env"].items())))
    a = analyze(items, bootstrap_resamples=999)
    assert a["identity"]["consistent"] is True and len(a["identity"]["groups"]) == 1
    assert a["comparisons"]["B"]["n_pairs"] == len(items) // 2
