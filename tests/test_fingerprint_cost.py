"""The cheaper recording keeps every bit: the direct TensorBatches loader hands out the DataLoader's
batches in the DataLoader's order, the CPU digest is the documented sum for every float width, and
the non-finite check that reads only new losses still names the first bad step."""

from __future__ import annotations

import hashlib

import pytest
import torch
from torch.utils.data import default_convert

from harness import Run, TensorBatches
from harness.experiment.runner import train_one
from harness.experiment.arms import arm_configs
from harness.training import batches
from harness.training import fingerprint as F
from harness.training.steps import NonFiniteLoss

from .conftest import FAST, compose_cfg
from .digest_ref import digests, digests1, fed, raw_bytes, step_digest_hex  # noqa: F401 - fixtures


def _consume(run: Run, loader, epochs: float) -> list:
    """The batches of ``epochs`` epochs (a fraction: the last one stopped part way)."""
    seen = []
    whole, part = int(epochs), epochs - int(epochs)
    for _ in range(whole):
        seen += list(loader)
    if part:
        for batch in loader:
            seen.append(batch)  # handed out, so fingerprinted
            if len(seen) >= (whole + part) * len(loader):
                break
    return seen


@pytest.mark.parametrize("epochs", [1, 2.5])
def test_the_direct_loader_gives_the_dataloaders_batches_order_and_stream(epochs):
    data = TensorBatches(torch.arange(101.0).reshape(101, 1), torch.arange(101) % 7)
    direct_run, loader_run = Run(3), Run(3)
    direct = direct_run.loader(data, 16, pin_memory=False)
    # a collate_fn of one's own (here the DataLoader's default for batch_size=None) keeps the DataLoader
    through = loader_run.loader(data, 16, collate_fn=default_convert)
    assert direct.direct and not through.direct  # the two paths under comparison
    a, b = _consume(direct_run, direct, epochs), _consume(loader_run, through, epochs)
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        assert type(x) is type(y) is list
        assert all(torch.equal(u, v) and u.dtype == v.dtype for u, v in zip(x, y))
    assert direct_run._order.batches == loader_run._order.batches == len(a)
    assert direct_run._order.hexdigest() == loader_run._order.hexdigest()
    # the data_order stream was drawn from exactly as the DataLoader draws from it
    g1, g2 = direct_run.generator("data_order"), loader_run.generator("data_order")
    assert torch.equal(torch.randint(2**31, (4,), generator=g1), torch.randint(2**31, (4,), generator=g2))


def test_the_built_in_loop_records_the_same_fingerprints_without_the_dataloader(monkeypatch):
    arm = arm_configs(compose_cfg(FAST + ["train.max_steps=40"]))["A"]
    direct = train_one(arm, 0)
    init = batches._FingerprintedLoader.__init__
    monkeypatch.setattr(batches._FingerprintedLoader, "__init__",
                        lambda self, loader, sampler, order, direct=False: init(self, loader, sampler, order, False))
    through = train_one(arm, 0)
    assert direct["fingerprints"] == through["fingerprints"]
    assert direct["metrics"] == through["metrics"]


@pytest.mark.parametrize("serial", [True, False])  # one thread (a small model) / torch's parallel kernels
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_the_packed_cpu_digest_is_the_documented_sum(dtype, serial, monkeypatch, digests1):
    monkeypatch.setattr(F, "SERIAL_MAX", F.SERIAL_MAX if serial else 0)
    g = torch.Generator().manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(9, 33), torch.nn.Linear(33, 5)).to(dtype)
    with torch.no_grad():
        for p in model.parameters():  # large values: the products and sums wrap modulo 2**64
            p.copy_((torch.randn(p.shape, generator=g) * 1e4).to(dtype))
    params = list(model.parameters())
    assert F.flatten_parameters(params) is not None
    recorder = F.StepRecorder(params, 2, torch.device("cpu"))
    assert recorder.flat is not None  # the packed path
    expected = []
    for _ in range(2):
        recorder.record(torch.tensor(1.0))
        expected.append(F.hexdigest(F.tensors_digest(params).numpy()))
        with torch.no_grad():
            params[1][7] = -params[1][7]  # one sign bit flips before the next step
    got = recorder.finish()["params"]
    assert got == expected
    assert got[0] != got[1]


@pytest.mark.parametrize("bad_step, check_every, steps", [(3, 5, 5), (13, 5, 15), (7, 10, 20)])
def test_a_non_finite_loss_is_reported_at_its_own_step(bad_step, check_every, steps):
    run = Run(0, check_every=check_every)
    run.watch(torch.nn.Linear(2, 2), steps)
    with pytest.raises(NonFiniteLoss) as caught:
        for step in range(1, steps + 1):
            run.step(torch.tensor(float("nan") if step == bad_step else 1.0))
    assert caught.value.step == bad_step


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_the_serial_digest_of_random_bits_is_the_widened_dot_product(dtype, digests1):
    # random bit patterns (NaNs, infinities, large magnitudes: the int64 sums wrap) over more
    # elements than numpy's einsum widens at once, in parameters of odd sizes packed with padding
    g = torch.Generator().manual_seed(7)
    sizes = [(301, 97), (97,), (5, 4099), (13,)]
    int_view = F._INT_VIEW[torch.empty((), dtype=dtype).element_size()]
    params = [torch.nn.Parameter(torch.randint(torch.iinfo(int_view).min, torch.iinfo(int_view).max, s,
                                               generator=g, dtype=int_view).view(dtype)) for s in sizes]
    assert F.flatten_parameters(params) is not None
    recorder = F.StepRecorder(params, 1, torch.device("cpu"))
    assert recorder._serial and recorder.flat.numel() > 8192
    widened = torch.dot(recorder.flat_bits.to(torch.int64), recorder.flat_weights)  # the earlier computation
    assert int(recorder._digest()[0]) == int(widened) == int(F.tensors_digest(params)[0])
    recorder.record(torch.tensor(0.5))
    assert recorder.finish()["params"] == [F.hexdigest(F.tensors_digest(params).numpy())]


def test_the_step_buffers_written_through_numpy_keep_every_loss_bit_and_digest_when_they_grow(digests):
    # losses of every kind a loop hands run.step (a NaN with a payload, -0.0, another dtype, a
    # tensor needing grad, shape [1]) past the buffers' first size: the same bits torch's copy gives
    model = torch.nn.Linear(3, 2)
    params = list(model.parameters())
    assert F.flatten_parameters(params) is not None
    recorder = F.StepRecorder(params, 2, torch.device("cpu"))
    assert recorder._np_digests is not None  # the numpy writes under test
    nan = torch.tensor(0x7FC01234, dtype=torch.int32).view(torch.float32)
    losses = [nan, torch.tensor(-0.0), torch.tensor(1.1, dtype=torch.float64), torch.tensor(2.5, dtype=torch.bfloat16),
              (model.weight * 3).sum(), torch.tensor([0.25]), torch.tensor(float("inf"))]
    expected_digests = []
    for loss in losses:
        recorder.record(loss)
        expected_digests.append(step_digest_hex(params))
        with torch.no_grad():
            model.bias.add_(1.0)
    expected_losses = torch.stack([loss.detach().reshape(()).float() for loss in losses])
    got = recorder.finish()
    assert recorder._capacity >= len(losses) > 2  # it grew
    assert got["loss"] == [format(v & 0xFFFFFFFF, "08x") for v in expected_losses.view(torch.int32).tolist()]
    assert got["loss"][0] == "7fc01234"
    assert got["params"] == expected_digests and len(set(expected_digests)) == len(losses)


@pytest.mark.parametrize("make", [
    lambda: torch.randn(8, 1, 5, 5), lambda: torch.randint(0, 10, (8,)), lambda: torch.randn(3, 4).t(),
    lambda: torch.tensor(3.5), lambda: torch.zeros(0, 3), lambda: torch.randn(5).bfloat16(),
    lambda: torch.randn(5).half(), lambda: torch.randn(4, dtype=torch.complex64), lambda: torch.tensor([True, False]),
    lambda: torch.randn(2, 3, requires_grad=True), lambda: torch.randn(6)[::2], lambda: torch.randn(2, 2).double()])
def test_a_tensors_content_digest_is_its_header_and_its_bytes_in_order(make, digests):
    # what content_digest documents, computed the long way: numpy's view of the bytes (the cheap path)
    # must feed the hash exactly the bytes torch's flat byte view holds (version 2: their XXH3-128)
    t = make()
    h = hashlib.blake2b(digest_size=16)
    h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
    h.update(fed(bytes(t.detach().contiguous().reshape(-1).view(torch.uint8).tolist())))
    assert batches.content_digest(t) == h.digest()
