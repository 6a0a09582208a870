"""The digests of each version (harness/training/host_digest.py) computed the long way, for tests:
from copies of the bytes, in one piece, with the hash libraries called directly."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import xxhash

from harness.training import fingerprint as F
from harness.training import host_digest


@pytest.fixture(params=[1, 2], ids=["digests1", "digests2"])
def digests(request, monkeypatch):
    """Each digest version in turn: 1 is what a process without xxhash computes."""
    if request.param == 1:
        monkeypatch.setattr(host_digest, "_xxhash", None)
    assert host_digest.digests_version() == request.param
    return request.param


@pytest.fixture
def digests1(monkeypatch):
    """Version 1 only: the position-weighted sum and blake2b, for the tests of that definition."""
    monkeypatch.setattr(host_digest, "_xxhash", None)
    return 1


def raw_bytes(t: torch.Tensor) -> bytes:
    """A tensor's values in logical order, copied out through torch's byte view."""
    return t.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def step_digest_hex(params) -> str:
    """The parameter digest a step records for these values, in the version in force."""
    if host_digest.available():
        value = xxhash.xxh3_64_intdigest(b"".join(raw_bytes(p) for p in params))
        return F.hexdigest(np.array([value], dtype=np.uint64))
    return F.hexdigest(F.tensors_digest(params).numpy())


def fed(raw: bytes) -> bytes:
    """What a batch's hash takes for these bytes: their XXH3-128 in version 2, the bytes in 1."""
    return xxhash.xxh3_128_digest(raw) if host_digest.available() else raw
