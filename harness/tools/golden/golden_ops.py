"""The op level of a golden: where its bits first part, named by the aten op (tools/diff/ops.py).

``golden save --ops`` also stores the op stream of step 1 (names, modules, shapes and exact bit
hashes; no tensors): after an upgrade, a replay of the golden's config on the new stack gives the
new stack's bits on both sides, so only a stored stream can show which op the upgrade changed.
Most upgrades part a run's parameters at step 1 (any reduction that now adds in another order).

``golden check --ops`` compares the stored stream with this machine's replay of the rerun when the
golden parts at the stored step; otherwise it replays both the golden's config and the rerun here
up to the first divergent step (as ``harness.diff --ops``), and says which it did.
"""

from __future__ import annotations

from harness.results import load_steps
from harness.tools.diff import ops

STORED_STEP = 1


def _golden_run(golden: dict) -> dict:
    return {"config": golden["config"], "seed": golden["seed"], "arm": golden["arm"]}


def stored_stream(result: dict) -> dict:
    """For save --ops: step 1 of this run, replayed and recorded (hashes, not tensors)."""
    rep = ops.replay(result, STORED_STEP)
    return {"step": STORED_STEP, "recorder": rep.recorder, "loss_bits": rep.loss_bits,
            "stream": [ops.plain(op) for op in rep.ops]}


def _recorder_kind(stored: dict) -> str:
    """Which recorder made a stored stream: "own" or "debug_mode" (its name says)."""
    return "own" if stored["recorder"].startswith(ops.OwnRecorder.name) else "debug_mode"


def check_lines(golden: dict, result: dict, step: int) -> list:
    """check --ops: the first op whose bits differ between the golden and this rerun."""
    if step == 0:
        return ["  ops: not replayed: the initial weights differ (step 0); the op replay looks inside a training step."]
    stored = golden.get("ops")
    losses = (golden["fingerprints"]["steps"]["loss"], load_steps(result)["loss"])
    try:
        kind = _recorder_kind(stored) if stored else None
        if stored and stored["step"] == step and ops.recorder_available(kind):
            # the same recorder as at save time: the two recorders see different op streams (ours
            # also sees detach), so a stream from one never lines up with a replay by the other
            now = ops.replay(result, step, kind)
            found = ops.first_difference([ops.Op(**o) for o in stored["stream"]], now.ops)
            loc = {"step": step, "recorder": now.recorder, "ops": [len(stored["stream"]), len(now.ops)],
                   "found": found, "replay_losses": [stored["loss_bits"], now.loss_bits]}
            where = [f"  ops: A is the op stream stored in the golden at save time (recorder: {stored['recorder']}); "
                     f"B is this machine's replay"]
        else:
            loc = ops.locate(_golden_run(golden), result, step)
            why = ("no op stream stored (save --ops stores step 1's)" if not stored
                   else f"the golden stores step {stored['step']}'s" if stored["step"] != step
                   else f"the golden's stream was recorded by {stored['recorder']}, which this torch lacks")
            where = [f"  ops: A and B both replayed on this machine ({why}): a difference the stack alone made "
                     "does not show here"]
    except ops.OpsError as e:
        return [f"  ops: not available: {e}"]
    return where + ops.format_ops(loc, losses)
