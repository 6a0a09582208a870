"""Where two runs' bits part, down to the aten op: ``python -m harness.diff --ops A B``.

Both runs are replayed from their recorded configs (initial weights and data order come from the
seed, which the fingerprints prove equal) through the runner's ``train_one`` -- any training
function written against ``Run`` -- up to the step where their parameters first differ. That one
step (forward, backward, optimizer update) runs under a dispatch mode that records every aten op:
its name, the module running it (forward and backward: tools/diff/module_stack.py), the call site,
output shapes and dtypes, and an exact hash of its input and output bits (blake2b of the bytes: two
tensors a last bit apart never hash alike). The two op streams are aligned (difflib over
(op, module, phase)) and the first op whose outputs differ is named, with max |Δ| of its outputs.

The recorder is PyTorch's own ``DebugMode`` (torch.utils._debug_mode, private: guarded) where the
installed torch has it, carrying our exact hash as its hook; a ``TorchDispatchMode`` of ours
otherwise. The output says which.

The start and end of the recorded step are found by wrapping ``Run.step`` for the replay's
duration (the Run offers no step hook; see docs/reproducibility.md). Step 1 is recorded from the
model's first forward on, so what a training function does between run.watch and that forward
(moving the first batch, augmenting it) is not in the stream; later steps are recorded whole.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import linecache
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import harness  # noqa: F401 - sets CUBLAS_WORKSPACE_CONFIG before torch is imported

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from harness import HarnessError

KEEP_BYTES = 256 * 2**20  # op outputs kept per replay for max |Δ|; beyond it only hashes
_NOT_HASHED = ("empty", "profiler")  # uninitialised memory: its bits mean nothing


class OpsError(ValueError, HarnessError):
    """The runs cannot be replayed op by op; the message says why."""


def bit_hash(t: torch.Tensor) -> str:
    """An exact hash of a tensor's dtype, shape and bits (any change of any bit changes it)."""
    t = t.detach()
    h = hashlib.blake2b(digest_size=8)
    h.update(f"{t.dtype}{tuple(t.shape)}".encode())
    if t.numel():
        h.update(t.cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _tensors(tree) -> list:
    return [x for x in tree_flatten(tree)[0] if isinstance(x, torch.Tensor)]


def _others(args, kwargs) -> str:
    """The non-tensor arguments (eps, dims, shapes), as text: they can differ when tensors do not."""
    flat = tree_flatten((args, kwargs))[0]
    return ", ".join(repr(x) for x in flat if not isinstance(x, torch.Tensor))


def _call_site() -> Optional[str]:
    """The innermost Python frame outside torch and this module: the line that issued the op."""
    frame = sys._getframe(2)
    torch_dir = str(Path(torch.__file__).parent)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(torch_dir) and name != __file__ and "contextlib" not in name:
            text = linecache.getline(name, frame.f_lineno).strip()
            return f"{_short(name)}:{frame.f_lineno} in {frame.f_code.co_name}" + (f": {text}" if text else "")
        frame = frame.f_back
    return None


def _short(path: str) -> str:
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


@dataclass
class Op:
    index: int
    name: str  # aten.convolution_backward.default
    phase: str  # forward / backward / outside any module
    module: str  # features.0 (torch.nn.modules.conv.Conv2d), or "-"
    site: Optional[str]
    shapes: list
    dtypes: list
    in_hash: str
    others: str
    out_hashes: list
    outputs: Optional[list] = None

    @property
    def key(self) -> tuple:
        return (self.name, self.module, self.phase)


@dataclass
class Capture:
    """What both recorders do around an op: hash the inputs before, the outputs after."""

    modules: object = None  # harness.tools.diff.module_stack.ModuleStack
    ops: list = field(default_factory=list)
    kept: int = 0
    _pending: tuple = ("", "")

    def before(self, func, args, kwargs) -> None:
        self._pending = ("|".join(bit_hash(t) for t in _tensors((args, kwargs))), _others(args, kwargs))

    def after(self, func, result) -> None:
        name = str(func)
        outs = _tensors(result)
        hashed = not any(s in name for s in _NOT_HASHED)
        keep = None
        size = sum(t.numel() * t.element_size() for t in outs)
        if hashed and self.kept + size <= KEEP_BYTES:
            keep, self.kept = [t.detach().cpu().clone() for t in outs], self.kept + size
        where = self.modules.where() if self.modules is not None else None
        phase = self.modules.phase if where else "outside any module"
        self.ops.append(Op(len(self.ops), f"aten.{name}" if not name.startswith("aten") else name, phase,
                           where or "-", _call_site(), [list(t.shape) for t in outs],
                           sorted({str(t.dtype).replace("torch.", "") for t in outs}), self._pending[0],
                           self._pending[1], [bit_hash(t) if hashed else None for t in outs], keep))


class OwnRecorder(TorchDispatchMode):
    """Our TorchDispatchMode: every aten op, forward and backward (autograd carries the mode)."""

    name = "harness's own TorchDispatchMode"

    def __init__(self, capture: Capture):
        super().__init__()
        self.capture = capture

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.capture.before(func, args, kwargs)
        result = func(*args, **kwargs)
        self.capture.after(func, result)
        return result


def debug_mode_recorder(capture: Capture):
    """PyTorch's DebugMode carrying our exact hash as its dispatch hooks; None when torch lacks it."""
    try:  # private: its name, hooks or constructor may change between releases
        from torch.utils._debug_mode import DebugMode

        DebugMode(record_output=False)
        DebugMode.dispatch_hooks
    except Exception:  # noqa: BLE001 - then ours records
        return None

    @contextlib.contextmanager
    def recorder():
        pre = lambda func, types, args, kwargs, call: capture.before(func, args, kwargs)  # noqa: E731
        post = lambda func, types, args, kwargs, result: capture.after(func, result)  # noqa: E731
        with DebugMode(record_output=False) as mode, DebugMode.dispatch_hooks(record_hook=post, pre_log_hook=pre):
            yield mode

    return recorder


def recorder_for(capture: Capture, which: str = "auto"):
    """(name, context manager factory). which: auto (PyTorch's where present), debug_mode, own."""
    if which in ("auto", "debug_mode"):
        rec = debug_mode_recorder(capture)
        if rec is not None:
            return f"PyTorch's DebugMode (torch.utils._debug_mode, torch {torch.__version__}) with an exact bit hash", rec
        if which == "debug_mode":
            raise OpsError(f"torch {torch.__version__} has no torch.utils._debug_mode.DebugMode: use --recorder own.")
    return f"{OwnRecorder.name} (torch {torch.__version__}) with an exact bit hash", lambda: OwnRecorder(capture)


def recorder_available(which: str) -> bool:
    """Whether ``recorder_for(capture, which)`` can record on this torch."""
    return which != "debug_mode" or debug_mode_recorder(Capture()) is not None


# -- replaying one run up to a step -------------------------------------------------------------


@dataclass
class Replay:
    ops: list
    recorder: str
    loss_bits: list  # the replay's loss bits of steps 1..step


def _loss_bits(loss: torch.Tensor) -> str:
    return format(loss.detach().float().reshape(()).view(torch.int32).item() & 0xFFFFFFFF, "08x")


def replay(result: dict, step: int, which: str = "auto") -> Replay:
    """Rerun the run of ``result`` (its recorded config and seed) and record the ops of ``step``."""
    from omegaconf import OmegaConf

    from harness.experiment.runner import train_one
    from harness.tools.diff.module_stack import ModuleStack
    from harness.training import run as run_module
    from harness.training.steps import StopRun

    capture = Capture()
    name, make = recorder_for(capture, which)
    state = {"model": None, "ctx": None, "losses": []}

    def start() -> None:
        capture.modules = ModuleStack(state["model"])
        state["ctx"] = make()
        state["ctx"].__enter__()

    def stop() -> None:
        if state["ctx"] is not None:
            ctx, state["ctx"] = state["ctx"], None
            ctx.__exit__(None, None, None)
            capture.modules.remove()

    def attach(model) -> None:
        state["model"] = model
        if step == 1:  # from the first forward: run.watch's own ops (after this hook) are not training
            handle = model.register_forward_pre_hook(lambda *_: (handle.remove(), start()) and None)

    original = run_module.Run.step

    def step_hook(run, loss):
        stop()  # the harness's own fingerprint of this step is not the training's
        original(run, loss)
        state["losses"].append(_loss_bits(loss))
        if run.steps >= step:
            raise StopRun(run.steps)
        if run.steps == step - 1:
            start()

    cfg = OmegaConf.create(result["config"])
    saved = _torch_state()
    run_module.Run.step = step_hook
    try:
        train_one(cfg, int(result["seed"]), init_hook=attach)
    except StopRun:
        pass
    except Exception as e:  # noqa: BLE001 - the replay failed: say how, do not crash the diff
        raise OpsError(f"replaying {result.get('seed')}/{result.get('arm')} failed: {type(e).__name__}: {e}") from None
    finally:
        stop()
        run_module.Run.step = original
        _restore_torch(saved)
    if len(state["losses"]) < step:
        raise OpsError(f"the replay stopped after {len(state['losses'])} steps, before step {step}.")
    return Replay(capture.ops, name, state["losses"])


def _torch_state() -> tuple:
    return (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled())


def _restore_torch(saved: tuple) -> None:
    torch.set_num_threads(saved[0])
    torch.use_deterministic_algorithms(saved[1], warn_only=saved[2])


# -- aligning two op streams --------------------------------------------------------------------


def max_abs_delta(a: Op, b: Op) -> Optional[dict]:
    """max |Δ| over the outputs of two ops, and how many elements differ; None when not kept."""
    if a.outputs is None or b.outputs is None:
        return None
    worst, differ, total = 0.0, 0, 0
    for x, y in zip(a.outputs, b.outputs):
        if x.shape != y.shape:
            return None
        total += x.numel()
        if x.is_floating_point() or x.is_complex():
            d = (x.double() - y.double()).abs()
            differ += int((d > 0).sum() + (x.isnan() ^ y.isnan()).sum())
            worst = max(worst, float(d.nan_to_num(0.0).max()) if d.numel() else 0.0)
        else:
            ne = x != y
            differ += int(ne.sum())
            worst = max(worst, float((x.double() - y.double()).abs().max()) if x.numel() else 0.0)
    return {"max_abs": worst, "differ": differ, "elements": total}


def first_difference(a: list, b: list) -> dict:
    """The first place, in A's order, where the streams part: an op with other outputs, or ops
    present on one side only (a changed model or code)."""
    ka, kb = [op.key for op in a], [op.key for op in b]
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ka, kb, autojunk=False).get_opcodes():
        if tag == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2)):
                if a[i].out_hashes != b[j].out_hashes:
                    return {"kind": "outputs", "a": a[i], "b": b[j], "before": i, "delta": max_abs_delta(a[i], b[j])}
        else:
            return {"kind": "ops", "a": a[i1:i2], "b": b[j1:j2], "before": i1}
    return {"kind": "none"}


def locate(ra: dict, rb: dict, step: int, which: str = "auto") -> dict:
    """Replay both runs to ``step`` and find the first op whose outputs differ."""
    a, b = replay(ra, step, which), replay(rb, step, which)
    return {"step": step, "recorder": a.recorder, "ops": [len(a.ops), len(b.ops)], "found": first_difference(a.ops, b.ops),
            "replay_losses": [a.loss_bits, b.loss_bits]}


# -- showing ------------------------------------------------------------------------------------


def _op_line(op: Op) -> str:
    shapes = ", ".join("x".join(map(str, s)) or "scalar" for s in op.shapes) or "no tensor"
    return f"{op.name} [{op.phase}] -> {shapes} {'/'.join(op.dtypes)}"


def _replay_check(label: str, recorded: list, replayed: list) -> Optional[str]:
    """None when the replay reproduced the recorded loss bits, else what it did not reproduce."""
    for i, (x, y) in enumerate(zip(recorded, replayed)):
        if x != y:
            return (f"the replay of {label} gives other loss bits than its record at step {i + 1} ({y} vs {x}): this "
                    "machine (or torch) does not reproduce that run, so the ops below are those of the replays")
    return None


def format_ops(loc: dict, recorded_losses: tuple) -> list:
    step, (na, nb) = loc["step"], loc["ops"]
    lines = [f"  ops of step {step} (replayed from the seed; recorder: {loc['recorder']}): {na} aten ops in A, {nb} in B"]
    checks = [_replay_check(lab, rec, rep) for lab, rec, rep in zip("AB", recorded_losses, loc["replay_losses"])]
    if any(checks):
        lines += [f"      note: {c}" for c in checks if c]
    else:
        lines.append(f"      the replays reproduce both runs' recorded loss bits of steps 1-{step}")
    found = loc["found"]
    if found["kind"] == "none":
        lines.append(f"      every op of step {step} gives the same bits on both sides here: the difference is not "
                     "in this machine's replay (another CPU, torch or device made the recorded bits)")
        return lines
    lines.append(f"      the first {found['before']} ops give identical bits on both sides")
    if found["kind"] == "ops":
        a, b = found["a"], found["b"]
        first = (a or b)[0]
        lines.append(f"  first difference: the op streams part ({first.phase}), A and B run other ops:")
        for label, side in (("A", a), ("B", b)):
            shown = "; ".join(f"{_op_line(op)} in {op.module}" for op in side[:3]) + (
                f"; ... {len(side) - 3} more" if len(side) > 3 else "")
            lines.append(f"      {label} runs: {shown or 'nothing here'}")
        if first.site:
            lines.append(f"      call site: {first.site}")
        return lines
    a, b, delta = found["a"], found["b"], found["delta"]
    lines.append(f"  first op whose outputs differ: #{a.index + 1} {_op_line(a)}")
    lines.append(f"      module:     {a.module}")
    lines.append(f"      call site:  {a.site or 'not available (no Python frame)'}")
    if a.in_hash == b.in_hash and a.others == b.others:
        inputs = "equal bits: the op itself computed other bits from the same inputs (e.g. a reduction added in another order)"
    elif a.in_hash == b.in_hash:
        inputs = f"tensor inputs equal bits; other arguments differ: ({a.others}) vs ({b.others})"
    else:
        inputs = "differ (an input came from outside the recorded op stream, e.g. a value set in Python)"
    lines.append(f"      inputs:     {inputs}")
    if delta is None:
        lines.append("      outputs:    differ (max |Δ| not available: the outputs were not kept -- a golden stores "
                     "hashes only, a replay keeps up to 256 MiB of them)")
    else:
        lines.append(f"      outputs:    max |Δ| {delta['max_abs']:.3g}; {delta['differ']} of {delta['elements']} elements differ")
    return lines


def plain(op: Op) -> dict:
    """An op as JSON (its hashes, not its tensors); ``Op(**plain(op))`` reads it back."""
    return {k: v for k, v in op.__dict__.items() if k != "outputs"}


def to_json(loc: dict) -> dict:
    """The located difference without tensors, for --json."""
    found = dict(loc["found"])
    for side in ("a", "b"):
        if side in found:
            found[side] = [plain(o) for o in found[side]] if isinstance(found[side], list) else plain(found[side])
    return {**{k: v for k, v in loc.items() if k != "found"}, "found": found}
