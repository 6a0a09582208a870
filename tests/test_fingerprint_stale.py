"""Proofs that cannot go stale: a parameter moved after run.watch is followed or refused by name,
the digest's memory is proportional to a chunk, and packed parameters are aligned."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from harness.experiment.runner import run_one
from harness.results import write_json
from harness.tools.diff import diff
from harness.training import fingerprint as F

from .conftest import FAST, REPO, compose_cfg
from .digest_ref import digests, digests1, step_digest_hex  # noqa: F401 - fixtures

ONE = [o for o in FAST if not o.startswith("ab.seeds")] + ["ab.seeds=[0]"]


def _result(tmp_path, name: str, fn: str, lr: float) -> dict:
    from harness.experiment.arms import arm_configs

    arm = arm_configs(compose_cfg(ONE + [f"train.fn=tests.convert_fns.{fn}", f"+train.kwargs.lr={lr}"]))["A"]
    result, _ = run_one(arm, 0, "A")
    write_json(tmp_path / name / "result.json", result)
    return result


def test_a_conversion_after_watch_is_followed_and_diff_sees_the_parameters_differ(tmp_path, capsys):
    a = _result(tmp_path, "lr0.1", "converted_after_watch", 0.1)
    b = _result(tmp_path, "lr0.2", "converted_after_watch", 0.2)
    assert a["status"] == b["status"] == "completed", (a["error"], b["error"])
    params = a["fingerprints"]["steps"]["params"]
    assert len(set(params)) == len(params)  # every step's digest reads the trained weights
    diff.main([str(tmp_path / "lr0.1"), str(tmp_path / "lr0.2")])
    out = capsys.readouterr().out
    assert "identical at every step" not in out
    assert "parameters:             first differ at step 1" in out


def test_parameters_replaced_after_watch_are_refused_by_name(tmp_path):
    r = _result(tmp_path, "replaced", "replaced_after_watch", 0.1)
    assert r["status"] == "failed" and r["error"]["type"] == "RunUsageError"
    assert "run.watch" in r["error"]["message"] and "assign=True" in r["error"]["message"]


def test_followed_storage_gives_the_digest_of_the_new_values(digests):
    model = torch.nn.Linear(4, 3)
    F.flatten_parameters(list(model.parameters()))
    recorder = F.StepRecorder(list(model.parameters()), 2, torch.device("cpu"))
    model.to(torch.float64)
    with torch.no_grad():
        model.weight.add_(1.0)
    recorder.record(torch.tensor(0.0))
    assert recorder.finish()["params"] == [step_digest_hex(list(model.parameters()))]


def test_packed_parameters_are_aligned_and_keep_their_values(digests1):
    model = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Linear(5, 7), torch.nn.Linear(7, 1))
    before = [p.detach().clone() for p in model.parameters()]
    digest = F.hexdigest(F.tensors_digest(list(model.parameters())))
    flat = F.flatten_parameters(list(model.parameters()))
    assert flat is not None
    for p, old in zip(model.parameters(), before):
        assert p.data_ptr() % F.ALIGN_BYTES == 0
        assert torch.equal(p, old)
    recorder = F.StepRecorder(list(model.parameters()), 1, torch.device("cpu"))
    assert recorder.flat is not None  # the packed fast path
    recorder.record(torch.tensor(0.0))
    assert recorder.finish()["params"] == [F.hexdigest(F.tensors_digest(list(model.parameters())).numpy())]
    assert F.hexdigest(F.tensors_digest(list(model.parameters()))) == digest


def _reference(tensors, chunk):
    """The digest written out: per element size, sum of bits * (table[i % chunk] + 2 * STRIDE * (i // chunk))."""
    table = F._weights(chunk, torch.device("cpu"))
    groups = {}
    for t in tensors:
        groups.setdefault(t.element_size(), []).append(F._bits(t).to(torch.int64))
    out = []
    for size in sorted(groups):
        bits = torch.cat(groups[size])
        i = torch.arange(bits.numel())
        out.append((bits * (table[i % chunk] + 2 * F._STRIDE * (i // chunk))).sum())
    return torch.stack(out)


def test_chunked_digest_is_the_documented_sum_and_sees_a_swap_across_chunks(monkeypatch):
    t = [torch.randn(1000, generator=torch.Generator().manual_seed(1)), torch.randn(77, dtype=torch.float64),
         torch.randn(3, 5).t(), torch.arange(10, dtype=torch.uint8), torch.randn(130)]
    assert torch.equal(F.tensors_digest(t), _reference(t, F.CHUNK))  # below a chunk: one table, as before
    monkeypatch.setattr(F, "CHUNK", 64)
    assert torch.equal(F.tensors_digest(t), _reference(t, 64))
    moved = t[0].clone()
    moved[[10, 74]] = moved[[74, 10]]  # the same place in two chunks: the block term tells them apart
    assert not torch.equal(F.tensors_digest([moved] + t[1:]), F.tensors_digest(t))


_MEASURE = """
import resource, sys, torch
from harness.training import fingerprint as F
F.CHUNK = 1 << 16
big = torch.randn(1 << 24)  # 64 MiB of float32
F.tensors_digest([torch.ones(4)])  # the weight table and torch's lazy setup, outside the measurement
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
F.tensors_digest([big])
rec = F.StepRecorder([big], 1, torch.device("cpu"))
rec.record(torch.tensor(0.0))
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


@pytest.mark.slow
def test_digest_memory_is_proportional_to_a_chunk_not_to_the_model():
    # torch's CPU allocator is invisible to tracemalloc, so the peak resident size of a fresh process
    # is measured: the old digest added an int64 copy, weights and product per parameter (> 256 MiB)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", _MEASURE], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    extra = int(out.stdout.strip().splitlines()[-1])
    assert extra < 16 * 2**20, f"the digest of a 64 MiB tensor raised the peak by {extra / 2**20:.0f} MiB"
