"""Digests of tensors in host memory, at memory speed: the digest version a run records.

Version 2 (xxhash installed, as the package requires): a CPU tensor's bytes, in logical order, are
hashed with XXH3 -- the per-step parameter digest and the content of every batch a Run fingerprints
by content (run.consumed, run.ordered). XXH3 reads ~40 GB/s here; the position-weighted int64 sum
(fingerprint.tensors_digest) reads ~2.5 GB/s through its 8-byte-a-value weight table, whose cache
footprint also slows the model's next forward pass, and blake2b ~1.3 GB/s. On a 666k-parameter MLP
those two cost 0.84 ms of a 5.3 ms step; XXH3 costs ~0.07 ms.

Version 1 (no xxhash): the weighted sum and blake2b, as before. Tensors on a GPU are digested on
their device with the weighted sum in both versions (a host hash would need a copy and a sync).
The init and final fingerprints (fingerprint.model_fingerprint) are the weighted sum in both, so
they compare across versions; per-step parameter digests and content data-order digests compare
only within one version (results.digests_version; harness.diff and harness.golden say so).
"""

from __future__ import annotations

from typing import Iterable

import torch

try:
    import xxhash as _xxhash
except ImportError:  # version 1 digests: the package's own fallback, recorded as such
    _xxhash = None


def digests_version() -> int:
    """The digest version this process computes (recorded in each result's fingerprints)."""
    return 2 if _xxhash is not None else 1


def available() -> bool:
    return _xxhash is not None


def host_buffer(t: torch.Tensor):
    """A CPU tensor's values as a buffer in logical order: numpy's view in place where it is
    contiguous (~0.3 µs), a contiguous copy otherwise; dtypes numpy lacks (bfloat16) as bytes,
    through torch's byte view (~3 µs). Detached only when it needs it (each call is a dispatch)."""
    if t.requires_grad:
        t = t.detach()
    if not t.is_contiguous():
        t = t.contiguous()
    try:
        return t.numpy()
    except (TypeError, RuntimeError):
        return t.reshape(-1).view(torch.uint8).numpy()


def buffers_digest(buffers: Iterable) -> int:
    """XXH3-64 of the buffers' bytes in order (one stream: where one ends and the next begins is
    fixed by the shapes, which do not change between the steps compared), an unsigned int."""
    h = _xxhash.xxh3_64()
    for b in buffers:
        h.update(b)
    return h.intdigest()


def bytes_digest(data) -> bytes:
    """XXH3-128 of one buffer (a batch tensor's bytes), 16 bytes: fed to the batch's blake2b in
    place of the bytes themselves, so blake2b reads 16 bytes instead of the whole batch."""
    return _xxhash.xxh3_128_digest(data)
