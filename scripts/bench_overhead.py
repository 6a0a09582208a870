"""What does the harness's training loop cost over a bare PyTorch loop?

Both build the default model (small CNN on digits), train it for the same steps on the same data and
evaluate it once on the test split, in this one process, under the same determinism settings and
thread count. The harness loop adds the seeded loader, the per-step loss-bit and parameter
fingerprints, the batch-order hash, the curve, the per-example record and its own plumbing (config
copy, _target_ instantiation). What is timed of it is the Run's life, from its construction to the
record ``finish`` returns (so the end-of-run hex digests count too); the unit's setup around it
(determinism settings, environment capture) is not, and the bare loop does none of that either.

The machine this runs on is shared and noisy (one repeat alone spreads +-15%), so the two loops run
in adjacent pairs, in alternating order (bare first, then harness first, ...), and each pair gives
one ratio harness/bare: drift hits both members of a pair alike. Reported: the median ms/step of
each loop, and the median of the pair ratios with a distribution-free interval for it (the order
statistics a sign test gives, with their exact coverage), for three clocks: wall time, this
process's CPU time (all threads) and the main thread's CPU time (what a busy machine inflates
least). PASS/FAIL compares each median ratio with the issue's target (<= 1.05); the wall line is
the issue's figure.

``--pieces`` instead times the recording's parts on the main thread's CPU clock (µs a call, and
as a share of a bare step): where the harness's cost is, beside cProfile's view.
``--phases`` times each step's phases in both loops (thread CPU, through torch's global module
and optimizer hooks): the forward pass, loss + backward, the optimizer step, and the rest (the
recording, the loader), once with the parameter digest and once with it replaced by a constant;
what the digest costs the model's own kernels (the cache it takes from them) shows there.

    python scripts/bench_overhead.py [--steps 330] [--pairs 15] [--threads 2] [--pieces | --phases]
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's harness

import harness  # noqa: E402,F401  - CUBLAS_WORKSPACE_CONFIG before torch
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import harness.training.run as run_module  # noqa: E402
from harness.builtin.models import SmallCNN  # noqa: E402
from harness.config import compose  # noqa: E402
from harness.experiment.runner import train_one  # noqa: E402
from harness.training.determinism import configure, settings_from  # noqa: E402
from harness.training.batches import cached_dataset  # noqa: E402

TARGET = 1.05  # the recording costs at most 5% of a step
CLOCKS = {"wall": time.perf_counter, "cpu (process)": time.process_time, "cpu (main thread)": time.thread_time}


def _now() -> dict:
    return {name: clock() for name, clock in CLOCKS.items()}


def _ms_per_step(t0: dict, steps: int) -> dict:
    t1 = _now()
    return {name: 1000 * (t1[name] - t0[name]) / steps for name in CLOCKS}


class TimedRun(run_module.Run):
    """The harness's Run, timed on every clock from its construction to the record finish returns."""

    def __init__(self, *args, **kwargs):
        self._bench_t0 = _now()
        super().__init__(*args, **kwargs)

    def finish(self, metrics) -> dict:
        out = super().finish(metrics)
        out["timing"]["bench"] = _ms_per_step(self._bench_t0, self.steps)
        return out


def harness_loop(cfg, seed: int) -> dict:
    """ms/step on each clock of one harness run (train_one with the built-in loop)."""
    out = train_one(cfg, seed)
    if "bench" not in out["timing"]:
        raise SystemExit("bench_overhead: the runner did not build its Run from harness.training.run.Run, so the "
                         "Run's life cannot be timed; update TimedRun's hook.")
    return out["timing"]["bench"]


def bare_loop(cfg, ds, steps: int, seed: int) -> dict:
    """The loop a researcher would write by hand, nothing recorded: ms/step on each clock."""
    t0 = _now()
    torch.manual_seed(seed)
    model = SmallCNN(in_channels=ds.in_channels, num_classes=ds.num_classes, image_size=ds.image_size,
                     width=cfg.model.width, hidden=cfg.model.hidden, dropout=cfg.model.dropout)
    o = cfg.optim
    opt = torch.optim.SGD(model.parameters(), lr=o.lr, momentum=o.momentum, nesterov=o.nesterov, weight_decay=o.weight_decay)
    g = torch.Generator().manual_seed(seed)
    n, bs = len(ds.train_y), cfg.train.batch_size
    step = 0
    while step < steps:
        perm = torch.randperm(n, generator=g)
        for i in range(0, n, bs):
            idx = perm[i : i + bs]
            x, y = ds.train_x[idx], ds.train_y[idx]
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step >= steps:
                break
    loss.item()
    evaluate(model, ds, cfg.train.eval_batch_size)
    return _ms_per_step(t0, steps)


@torch.no_grad()
def evaluate(model, ds, batch_size: int) -> tuple[float, float]:
    """Test loss and accuracy, as the built-in loop evaluates (by hand: no Run)."""
    model.eval()
    total, hits = 0.0, 0
    for i in range(0, len(ds.test_y), batch_size):
        x, y = ds.test_x[i : i + batch_size], ds.test_y[i : i + batch_size]
        logits = model(x)
        total += float(F.cross_entropy(logits, y, reduction="sum"))
        hits += int((logits.argmax(1) == y).sum())
    model.train()
    return total / len(ds.test_y), 100.0 * hits / len(ds.test_y)


def median_interval(values: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """(low, high, coverage): the order statistics x(k) <= median <= x(n+1-k) with the largest k whose
    exact coverage under the sign test, 1 - 2 P(Binomial(n, 1/2) < k), is still >= level (k = 1,
    the whole range, when even that falls short: its coverage is then below level)."""
    xs, n = sorted(values), len(values)
    k = 1
    while k < n + 1 - k and 1 - 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n >= level:
        k += 1
    coverage = 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n
    return xs[k - 1], xs[n - k], coverage


def pieces(cfg, ds, steps: int) -> None:
    """Thread-CPU µs a call of each part of a step's recording, and of a run's fixed costs."""
    from harness.training.fingerprint import StepRecorder, flatten_parameters

    torch.manual_seed(0)
    model = SmallCNN(in_channels=ds.in_channels, num_classes=ds.num_classes, image_size=ds.image_size,
                     width=cfg.model.width, hidden=cfg.model.hidden, dropout=cfg.model.dropout)
    params = list(model.parameters())
    flatten_parameters(params)
    rec = StepRecorder(params, 1 << 16, torch.device("cpu"))
    loss = torch.tensor(1.5)

    def per_call(fn, n: int = 2000) -> float:
        fn()
        t0 = time.thread_time()
        for _ in range(n):
            fn()
        return 1e6 * (time.thread_time() - t0) / n

    def record():
        rec.steps = 0
        rec.record(loss)

    def run_us(fn, n: int) -> float:  # thread-CPU µs of one whole run of n steps, the least of 5
        return 1000 * n * min(fn()["cpu (main thread)"] for _ in range(5))

    one = cfg.copy()
    one.train.max_steps = 1
    bare_one = run_us(lambda: bare_loop(cfg, ds, 1, 0), 1)
    bare_step = (run_us(lambda: bare_loop(cfg, ds, steps, 0), steps) - bare_one) / (steps - 1)
    fixed = run_us(lambda: harness_loop(one, 0), 1) - bare_one
    parts = {
        "run.step's recording (record)": per_call(record),
        "  parameter digest (_digest)": per_call(rec._digest),
        "  pointer check": per_call(lambda: list(map(torch.Tensor.data_ptr, rec.params)) != rec._pointers),
        "  loss write": per_call(lambda: rec.losses.__setitem__(0, loss.detach())),
        f"a run's fixed costs / {steps} steps": fixed / steps,
    }
    print(f"bench_overhead --pieces: main-thread CPU, a bare step {bare_step:.0f} µs, {torch.get_num_threads()} threads; "
          f"a run's fixed costs {fixed / 1000:.1f} ms over a bare 1-step run")
    for name, us in parts.items():
        print(f"  {name:36s} {us:7.1f} µs  ({100 * us / bare_step:5.2f}% of a bare step)")


class _Phases:
    """Thread-CPU ns of each phase of every step of the model being trained, by torch's global hooks:
    forward (its top module's pre-hook to hook), loss + backward (to the optimizer's pre-hook), the
    optimizer step, and the rest until the next forward (the recording, the loader)."""

    def __init__(self):
        self.times: dict[str, list[int]] = {}
        self._top = self._mark = None
        from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        self._handles = [register_module_forward_pre_hook(self._forward_starts),
                         register_module_forward_hook(self._forward_ends),
                         register_optimizer_step_pre_hook(lambda *a: self._lap("loss + backward")),
                         register_optimizer_step_post_hook(lambda *a: self._lap("optimizer step"))]

    def _lap(self, phase: str) -> None:
        now = time.thread_time_ns()
        if self._mark is not None:
            self.times.setdefault(phase, []).append(now - self._mark)
        self._mark = now

    def _forward_starts(self, module, args):
        if isinstance(module, SmallCNN) and module.training and self._top is None:
            self._top = module
            if self._mark is not None and "optimizer step" in self.times:
                self._lap("the rest (recording, loader)")
            self._mark = time.thread_time_ns()

    def _forward_ends(self, module, args, out):
        if module is self._top:
            self._top = None
            self._lap("forward")

    def close(self) -> None:
        for h in self._handles:
            h.remove()


def phases(cfg, ds, steps: int, pairs: int) -> None:
    """Median thread-CPU µs of each phase, bare loop against harness loop, with and without the digest."""
    from harness.training import host_digest
    from harness.training.fingerprint import StepRecorder

    real, real_host = StepRecorder._serial_digest, host_digest.buffers_digest  # digest versions 1 and 2
    for label, digest, host in (("with the parameter digest", real, real_host),
                                ("its digest replaced by a constant", lambda self: 0, lambda buffers: 0)):
        StepRecorder._serial_digest, host_digest.buffers_digest = digest, host
        times: dict[str, dict[str, list[int]]] = {"bare": {}, "harness": {}}
        try:
            for r in range(pairs):
                for which in (("bare", "harness") if r % 2 == 0 else ("harness", "bare")):
                    clock = _Phases()  # hooks of its own, for this run only
                    try:
                        bare_loop(cfg, ds, steps, r) if which == "bare" else harness_loop(cfg, r)
                    finally:
                        clock.close()
                    for phase, values in clock.times.items():
                        times[which].setdefault(phase, []).extend(values)
        finally:
            StepRecorder._serial_digest, host_digest.buffers_digest = real, real_host
        print(f"bench_overhead --phases ({label}, digest version {host_digest.digests_version()}): median thread-CPU µs a step, {pairs} runs of {steps} steps each, "
              f"{torch.get_num_threads()} threads")
        for phase in ("forward", "loss + backward", "optimizer step", "the rest (recording, loader)"):
            b = statistics.median(times["bare"].get(phase, [0]))
            h = statistics.median(times["harness"].get(phase, [0]))
            print(f"  {phase:30s} bare {b / 1000:8.1f}  harness {h / 1000:8.1f}  ({h / b if b else float('nan'):.3f}x)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=330, help="optimizer steps per run (330 = 15 digits epochs of 22 batches, the default)")
    p.add_argument("--pairs", "--repeats", type=int, default=15, help="adjacent (bare, harness) pairs")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--pieces", action="store_true", help="time the recording's parts instead (thread CPU)")
    p.add_argument("--phases", action="store_true", help="time each step's phases in both loops instead")
    args = p.parse_args()

    cfg = compose([
        "+experiment=loss_ab", "arm=A", f"train.max_steps={args.steps}", f"determinism.threads={args.threads}",
        "device=cpu", "logger=none",
    ])
    configure(settings_from(cfg))
    ds = cached_dataset(cfg.data)  # the same cached copy the harness loop reads
    run_module.Run = TimedRun  # the runner looks the Run up at each call
    if args.pieces:
        pieces(cfg, ds, args.steps)
        return
    if args.phases:
        phases(cfg, ds, args.steps, min(args.pairs, 6))
        return

    # warm-up both (allocator, kernels, imports the first run does)
    cfg_warm = cfg.copy()
    cfg_warm.train.max_steps = 20
    bare_loop(cfg, ds, 20, 0)
    harness_loop(cfg_warm, 0)

    bare, harn = [], []
    for r in range(args.pairs):
        for which in (("bare", "harness") if r % 2 == 0 else ("harness", "bare")):
            gc.collect()  # outside the timing: a collection lands in neither loop's figures
            if which == "bare":
                bare.append(bare_loop(cfg, ds, args.steps, r))
            else:
                harn.append(harness_loop(cfg, r))

    print(f"bench_overhead: small_cnn on digits, batch {cfg.train.batch_size}, {args.steps} steps a run, {args.pairs} "
          f"pairs in alternating order, {torch.get_num_threads()} threads, mode "
          f"{getattr(cfg.determinism.mode, 'value', cfg.determinism.mode)}, torch {torch.__version__}")
    for clock in CLOCKS:
        b = [v[clock] for v in bare]
        h = [v[clock] for v in harn]
        ratios = [hv / bv for hv, bv in zip(h, b)]
        med = statistics.median(ratios)
        low, high, coverage = median_interval(ratios)
        print(f"  {clock:18s}: bare {statistics.median(b):6.3f} ms/step, harness {statistics.median(h):6.3f}; "
              f"pair ratio median {med:.3f}, {100 * coverage:.1f}% interval [{low:.3f}, {high:.3f}] "
              f"(target <= {TARGET}): {'PASS' if med <= TARGET else 'FAIL'}")
        if clock == "wall":
            print(f"      bare runs   : {', '.join(f'{v:.3f}' for v in b)}")
            print(f"      harness runs: {', '.join(f'{v:.3f}' for v in h)}")


if __name__ == "__main__":
    main()
