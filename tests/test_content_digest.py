"""content_digest hashes a batch's bytes in place: the same digest as hashing a copy of them."""

import hashlib

import numpy as np
import pytest
import torch

from harness.training.batches import OrderDigest, content_digest


def _by_copy(x, h) -> None:
    """The definition, written with explicit copies (tobytes) as it was before hashing in place."""
    if isinstance(x, torch.Tensor):
        t = x.detach().to("cpu").contiguous().reshape(-1)
        h.update(f"T{t.dtype}{tuple(x.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes())
    elif isinstance(x, np.ndarray):
        a = np.ascontiguousarray(x)
        h.update(f"A{a.dtype}{a.shape}".encode())
        h.update(a.tobytes())
    elif isinstance(x, dict):
        h.update(b"{")
        for key in sorted(x, key=str):
            h.update(repr(key).encode())
            _by_copy(x[key], h)
        h.update(b"}")
    elif isinstance(x, (list, tuple)):
        h.update(f"({len(x)}".encode())
        for item in x:
            _by_copy(item, h)
    else:
        h.update(repr(x).encode())


def test_a_batch_hashed_in_place_has_the_digest_of_its_copied_bytes():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(16, 1, 9, 9, generator=g)
    batches = [
        [x, torch.randint(0, 10, (16,), generator=g)],
        {"t": x.transpose(2, 3), "s": x[:, :, ::2], "n": (1, 2.5, "s", None)},  # not contiguous
        x.bfloat16(), x.half()[5], torch.tensor(3.0), torch.zeros(0), torch.ones(3, dtype=torch.bool),
        torch.arange(10)[::3], x.clone().requires_grad_(),
        np.arange(12.0).reshape(3, 4).T, np.array(5), np.zeros((0, 3)), np.array([True, False]),
        np.array(["2020-01-01"], dtype="datetime64[D]"), np.arange(6, dtype=np.int16)[::2],
    ]
    for batch in batches:
        h = hashlib.blake2b(digest_size=16)
        _by_copy(batch, h)
        assert content_digest(batch) == h.digest(), batch


def test_order_digest_hashes_an_index_array_as_its_bytes():
    idx = torch.randperm(50, generator=torch.Generator().manual_seed(0))[:16]
    a, b = OrderDigest(), OrderDigest()
    a.update(idx.numpy())
    b.update(idx.numpy().tobytes())
    assert a.hexdigest() == b.hexdigest() and a.batches == b.batches == 1


def test_a_numpy_array_of_python_objects_is_hashed_by_its_values_not_their_addresses():
    # a batch of strings as numpy holds them (dtype=object): tobytes() gives the objects' addresses,
    # which differ from one run to the next, so the data order could never be shown equal
    words = ["the", "cat", "sat", "on", "the", "mat"]
    a = np.array(words, dtype=object)
    b = np.array(["".join(w) for w in words], dtype=object)  # equal values, other objects
    assert a.tobytes() != b.tobytes()
    assert content_digest(a) == content_digest(b)
    assert content_digest(a) != content_digest(np.array(words[::-1], dtype=object))
    assert content_digest(a) != content_digest(a.reshape(2, 3))
    with pytest.raises(TypeError, match="cannot be fingerprinted"):
        content_digest(np.array([object()], dtype=object))
