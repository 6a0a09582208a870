"""Digest version 2 (harness/training/host_digest.py): parameters and batches in host memory hashed
with XXH3. Every bit still counts, packing changes nothing, a run records its version, and results
of two versions are compared on what both computed alike -- never called different for it."""

from __future__ import annotations

import copy

import pytest
import torch

from harness import Run
from harness.analysis.analyze import analyze
from harness.analysis import AnalysisError
from harness.experiment.runner import train_one
from harness.experiment.units import certificate
from harness.experiment.runner import run_one
from harness.experiment.arms import arm_configs
from harness.results import write_json
from harness.tools.diff import diff
from harness.tools.golden import golden
from harness.tools.golden.golden_words import check_message
from harness.training import fingerprint as F

from . import _results_factory as factory
from .conftest import FAST, compose_cfg
from .digest_ref import digests, step_digest_hex  # noqa: F401 - a fixture


def _models(dtype):
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Conv2d(2, 5, 3), torch.nn.Flatten(), torch.nn.Linear(5 * 4 * 4, 7)).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_a_steps_digest_is_the_xxh3_of_the_parameters_bytes_packed_or_not(dtype):
    model = _models(dtype)
    packed = copy.deepcopy(model)
    assert F.flatten_parameters(list(packed.parameters())) is not None  # with zero padding between them
    recorders = [F.StepRecorder(list(m.parameters()), 3, torch.device("cpu")) for m in (model, packed)]
    expected = []
    for step in range(3):
        for m, recorder in zip((model, packed), recorders):
            with torch.no_grad():
                m[0].weight.view(-1)[step] += 1  # a different parameter value each step
            recorder.record(torch.tensor(1.0))
        expected.append(step_digest_hex(list(model.parameters())))
    got = [r.finish()["params"] for r in recorders]
    assert got[0] == got[1] == expected and len(set(expected)) == 3


def test_every_bit_of_every_parameter_and_their_order_change_the_digest():
    model = _models(torch.float32)
    params = list(model.parameters())
    F.flatten_parameters(params)
    recorder = F.StepRecorder(params, 64, torch.device("cpu"))
    recorder.record(torch.tensor(0.0))
    seen = {recorder.finish()["params"][0]}
    for p in params:
        bits = p.data.view(-1).view(torch.int32)
        for position in (0, bits.numel() - 1):
            for bit in (0, 31):
                bits[position] ^= 1 << bit if bit < 31 else -(2**31)
                one = F.StepRecorder(params, 1, torch.device("cpu"))
                one.record(torch.tensor(0.0))
                seen.add(one.finish()["params"][0])
                bits[position] ^= 1 << bit if bit < 31 else -(2**31)  # back
    w = params[0].data.view(-1)
    w[[0, 1]] = w[[1, 0]].clone()  # two values swapped
    one = F.StepRecorder(params, 1, torch.device("cpu"))
    one.record(torch.tensor(0.0))
    seen.add(one.finish()["params"][0])
    assert len(seen) == 1 + len(params) * 4 + 1


def test_a_parameter_that_is_not_contiguous_is_read_anew_at_every_step():
    model = _models(torch.float32).to(memory_format=torch.channels_last)
    assert not model[0].weight.is_contiguous()
    recorder = F.StepRecorder(list(model.parameters()), 3, torch.device("cpu"))
    expected = []
    for step in range(3):
        with torch.no_grad():
            model[0].weight.mul_(1.5)  # in place: the same memory, other values
        recorder.record(torch.tensor(0.0))
        expected.append(step_digest_hex(list(model.parameters())))
    assert recorder.finish()["params"] == expected and len(set(expected)) == 3


def test_a_layout_change_after_watch_is_followed_with_the_digest_of_the_same_values():
    model = _models(torch.float32)
    recorder = F.StepRecorder(list(model.parameters()), 3, torch.device("cpu"))
    recorder.record(torch.tensor(0.0))
    model.to(memory_format=torch.channels_last)  # the conv weight's bytes move, its values do not
    assert not model[0].weight.is_contiguous()
    recorder.record(torch.tensor(0.0))
    with torch.no_grad():
        model[0].weight.add_(1.0)  # and trains on in its new layout
    recorder.record(torch.tensor(0.0))
    first, second, third = recorder.finish()["params"]
    assert first == second != third == step_digest_hex(list(model.parameters()))
    assert recorder.followed_at == 2


def test_a_run_records_its_digest_version_and_each_version_gives_its_own_steps(digests):
    arm = arm_configs(compose_cfg(FAST + ["train.max_steps=8", "determinism.threads=1"]))["A"]
    result = train_one(arm, 0)
    fp = result["fingerprints"]
    assert fp["digests"] == digests
    assert len(fp["steps"]["params"]) == 8 and len(set(fp["steps"]["params"])) == 8


def _run(tmp_path, name, overrides=()):
    arm = arm_configs(compose_cfg(FAST + ["train.max_steps=6", "determinism.threads=1", *overrides]))["A"]
    result, _ = run_one(arm, 0, "A")
    assert result["status"] == "completed", result["error"]
    write_json(tmp_path / name / "result.json", result)
    return result


def _as_version_1(result):
    """The same run as an older harness recorded it: other per-step parameter digests and data order."""
    old = copy.deepcopy(result)
    fp = old["fingerprints"]
    fp.pop("digests")
    fp["steps"] = {"loss": list(fp["steps"]["loss"]), "params": [h[::-1] for h in fp["steps"]["params"]]}
    fp["data_order"] = fp["data_order"][::-1]
    return old


def test_diff_and_golden_compare_two_versions_on_what_both_computed_alike(tmp_path, capsys):
    new = _run(tmp_path, "new")
    old = _as_version_1(new)
    write_json(tmp_path / "old" / "result.json", old)
    assert diff.main([str(tmp_path / "old"), str(tmp_path / "new")]) == 0
    out = capsys.readouterr().out
    assert "bit-identical" in out and "digest version 1 against 2" in out

    record = golden.golden_record(old, [], [])
    cmp = golden.compare(record, new)
    assert cmp["identical"] and cmp["data_order_equal"] is None and cmp["first_params_step"] is None
    assert "golden check passed" in check_message("g.json", record, new, cmp)
    assert "digest version 1 against 2" in check_message("g.json", record, new, cmp)
    assert certificate(old, new)["reproducible"]

    # within one version the same edits are differences: the comparisons above were not blind
    tampered = {**_as_version_1(new), "fingerprints": {**_as_version_1(new)["fingerprints"], "digests": 2}}
    assert not golden.compare(golden.golden_record(tampered, [], []), new)["identical"]
    assert not certificate(tampered, new)["reproducible"]
    # and a loss bit that differs is found across versions too
    later = _run(tmp_path, "later", ["optim.lr=0.2"])
    cmp = golden.compare(record, later)
    assert not cmp["identical"] and cmp["first_loss_step"] == 2
    assert "FAILED" in check_message("g.json", record, later, cmp)


def test_arms_hashed_in_two_versions_leave_the_data_order_unverified_never_violated():
    values = factory.accuracies(6, shift=0.5)
    items = factory.make_results(values)
    for r in items:
        if r["arm"] == "B":  # rerun by this harness: another data-order digest of the same batches
            r["fingerprints"].update(digests=2, data_order=r["fingerprints"]["data_order"][::-1])
    analysis = analyze(items)
    check = analysis["pairing"]["checks"]["data_order"]
    assert check["state"] == "missing" and "digest versions" in check["line"]
    assert "data_order" not in analysis["pairing_verified"]
    for r in items:  # the same difference within one version is a violation
        r["fingerprints"]["digests"] = 2
    with pytest.raises(AnalysisError, match="Pairing violated"):
        analyze(items)


def test_a_stand_alone_run_records_the_version_too(digests):
    run = Run(0)
    model = torch.nn.Linear(3, 2)
    run.watch(model, 2)
    for batch in run.ordered([torch.ones(4, 3), torch.zeros(4, 3)]):
        loss = model(batch).sum()
        run.step(loss)
    fp = run.finish({"x": 1.0})["fingerprints"]
    assert fp["digests"] == digests and fp["batches"] == 2
