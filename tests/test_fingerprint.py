"""Fingerprints: exact, order-sensitive, and unchanged by the flat-parameter fast path."""

import torch

import harness.training.run as context
from harness.training import fingerprint as F
from harness.experiment.runner import train_one
from harness.experiment.arms import arm_configs

from .conftest import FAST, compose_cfg


def test_digest_sees_one_ulp_and_a_swap():
    a = torch.randn(1000, generator=torch.Generator().manual_seed(0))
    ref = F.hexdigest(F.tensors_digest([a]))
    ulp = a.clone()
    ulp[3] = torch.nextafter(ulp[3], torch.tensor(10.0))
    swapped = a.clone()
    swapped[[1, 2]] = swapped[[2, 1]]
    assert len({ref, F.hexdigest(F.tensors_digest([ulp])), F.hexdigest(F.tensors_digest([swapped]))}) == 3
    assert F.hexdigest(F.tensors_digest([a.clone()])) == ref


def test_flat_parameters_keep_the_bits_and_the_digest(monkeypatch):
    arm = arm_configs(compose_cfg(FAST + ["train.max_steps=40"]))["A"]
    flat = train_one(arm, 0)
    monkeypatch.setattr(context, "flatten_parameters", lambda params: None)
    separate = train_one(arm, 0)
    assert flat["fingerprints"]["final"] == separate["fingerprints"]["final"]
    assert flat["fingerprints"]["steps"] == separate["fingerprints"]["steps"]
