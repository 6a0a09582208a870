"""content_digest hashes a batch's bytes in place: the same digest as hashing a copy of them."""

import hashlib

import numpy as np
import pytest
import torch

from harness.training.batches import OrderDigest, content_digest

from .digest_ref import digests, fed  # noqa: F401 - a fixture


def _by_copy(x, h) -> None:
    """The definition, written with explicit copies (tobytes) as it was before hashing in place."""
    if isinstance(x, torch.Tensor):
        t = x.detach().to("cpu").contiguous().reshape(-1)
        h.update(f"T{t.dtype}{tuple(x.shape)}".encode())
        h.update(fed(t.view(torch.uint8).numpy().tobytes()))
    elif isinstance(x, np.ndarray):
        a = np.ascontiguousarray(x)
        h.update(f"A{a.dtype}{a.shape}".encode())
        h.update(fed(a.tobytes()))
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


def test_a_batch_hashed_in_place_has_the_digest_of_its_copied_bytes(digests):
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


# -- a batch on a GPU: digested there, folded in later (no host copy per batch) -------------------


@pytest.fixture
def as_if_on_a_gpu(monkeypatch):
    """CPU tensors take the path a GPU's tensors take (this machine has none): digested on their
    device, copied to the host only when folded in."""
    from harness.training import batches

    monkeypatch.setattr(batches, "_read_on_host", lambda t: False)


def _order_of(batches, flush=256, plain_at=None) -> str:
    order = OrderDigest()
    order.FLUSH = flush
    for i, batch in enumerate(batches):
        if i == plain_at:
            order.update(b"indices of a plain batch")
        order.update_content(batch)
    return order.hexdigest()


def _device_batches(n=7):
    g = torch.Generator().manual_seed(5)
    return [(torch.randn(4, 3, generator=g), {"ids": torch.randint(0, 9, (4,), generator=g), "n": i}) for i in range(n)]


def test_device_batches_fingerprint_their_order_and_content(as_if_on_a_gpu):
    batches = _device_batches()
    reference = _order_of(batches)
    assert _order_of(_device_batches()) == reference  # the same batches: the same digest
    swapped = [batches[1], batches[0], *batches[2:]]
    assert _order_of(swapped) != reference
    changed = _device_batches()
    changed[3][0][2, 1] = torch.nextafter(changed[3][0][2, 1], torch.tensor(9.0))  # one ULP of one value
    assert _order_of(changed) != reference
    reshaped = _device_batches()
    reshaped[2] = (reshaped[2][0].reshape(3, 4), reshaped[2][1])
    assert _order_of(reshaped) != reference
    assert _order_of(batches, plain_at=3) != _order_of(batches, plain_at=4)  # a plain batch keeps its place


def test_when_device_digests_are_folded_in_does_not_change_the_digest(as_if_on_a_gpu):
    batches = _device_batches(11)
    assert {_order_of(batches, flush=f) for f in (1, 3, 256)} == {_order_of(batches)}
    assert _order_of(batches, plain_at=5, flush=2) == _order_of(batches, plain_at=5)


def test_device_batches_are_copied_to_the_host_once_per_fold_not_once_per_batch(as_if_on_a_gpu, monkeypatch):
    _order_of(_device_batches(1))  # once per process and device: the digest's weight table goes to the device
    copies = []
    real_cpu, real_to = torch.Tensor.cpu, torch.Tensor.to

    def counting_cpu(self, *a, **k):
        copies.append(self.shape)
        return real_cpu(self, *a, **k)

    def counting_to(self, *a, **k):
        if any(str(x) == "cpu" for x in (*a, *k.values())):
            copies.append(self.shape)
        return real_to(self, *a, **k)

    monkeypatch.setattr(torch.Tensor, "cpu", counting_cpu)
    monkeypatch.setattr(torch.Tensor, "to", counting_to)
    order = OrderDigest()
    for batch in _device_batches(40):
        order.update_content(batch)
    assert copies == []  # nothing waited for the device while the batches were consumed
    order.hexdigest()
    assert len(copies) == 1  # all 40 batches' digests in one copy
    assert order.batches == 40


def test_host_batches_keep_their_digest():
    """The CPU path is unchanged: a batch's data_order entry is content_digest's bytes."""
    batches = _device_batches(3)
    order = OrderDigest()
    for batch in batches:
        order.update_content(batch)
    expected = hashlib.blake2b(digest_size=8)
    for batch in batches:
        expected.update(content_digest(batch))
    assert order.hexdigest() == expected.hexdigest()
