"""Where exactly do two runs part ways? ``python -m harness.diff A B``.

A and B are result.json files or run folders (a folder holding result.json, and weights.pt when the
run was made with repro.save_weights or repro.keep_step_weights). The report names:

- what differs in the configuration and the environment (the usual suspects: threads, torch, device);
- whether the initial weights and the data order match;
- the first step whose loss bits differ and the first whose parameter digest differs;
- with weights.pt on both sides: max |Δw| per state-dict entry and overall, of the final weights;
- with per-step weights on both sides (repro.keep_step_weights=N): max |Δw| after each of the first
  N steps, drawn on a log scale -- the "butterfly" curve: one changed bit grows step by step until
  the runs are as far apart as two seeds.

- with --ops: both runs replayed to the step where they part, and the first aten op whose outputs
  differ (module, call site, input bits, max |Δ|; tools/diff/ops.py).

Configuration differences come before the numbers, layers largest |Δw| first; "bit-identical" names
the configuration difference when there is one. Exit status: 0 identical, 1 different, 2 bad
input. No Hydra here: only the files are read (--ops reruns the recorded configs).
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from harness import HarnessError
from harness.results import differences
from harness.tools.args import add_config_dir, parse_args
from harness.tools.diff.butterfly import write_plot
from harness.tools.diff.diff_words import format_report
from harness.results import (READABLE_SCHEMAS, RESULT_NAME, SCHEMA, digests_version, find_result_files, load_steps,
                             read_json, write_json)

EXIT_SAME, EXIT_DIFFERENT, EXIT_BAD_INPUT = 0, 1, 2
WEIGHTS_NAME = "weights.pt"
PLOT_NAME = "butterfly.png"


class DiffError(ValueError, HarnessError):
    """The inputs cannot be compared; the message says which and why."""


@dataclass
class RunFiles:
    """One run's files as the diff reads them (not harness.Run, the object a training function gets)."""

    path: Path  # the result.json
    result: dict
    weights: Optional[dict]  # weights.pt, or None when the run did not save it

    @property
    def label(self) -> str:
        r = self.result
        threads = r.get("env", {}).get("threads")
        return f"seed {r.get('seed')}, arm {r.get('arm')}, {len(_steps(r)['loss'])} steps, {threads} thread(s)"


# -- reading ------------------------------------------------------------------------------------


def load_run(arg: str) -> RunFiles:
    """A result.json, or a folder holding exactly one (directly or below it)."""
    path = Path(arg)
    if not path.exists():
        raise DiffError(f"{arg}: no such file or folder. Give a result.json file or the run folder that holds it.")
    if path.is_dir():
        direct = path / RESULT_NAME
        found = [direct] if direct.is_file() else find_result_files(path)
        if not found:
            raise DiffError(f"{arg}: no {RESULT_NAME} in this folder or below it. Give one run's result.json or its folder.")
        if len(found) > 1:
            shown = ", ".join(str(p.parent) for p in found[:3]) + (", ..." if len(found) > 3 else "")
            raise DiffError(
                f"{arg} holds {len(found)} runs ({shown}); harness.diff compares two single runs. "
                f"Give one run's folder, e.g. {found[0].parent}."
            )
        path = found[0]
    try:
        result = read_json(path)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DiffError(f"{path}: not a readable JSON file ({e}).") from None
    if not isinstance(result, dict) or result.get("schema") not in READABLE_SCHEMAS:
        raise DiffError(f"{path}: not a harness result file (expected \"schema\": \"{SCHEMA}\").")
    if result.get("status") != "completed":
        error = (result.get("error") or {}).get("message", "no error recorded")
        raise DiffError(f"{path}: this run did not complete ({result.get('status')}: {error}), so it has no fingerprints to compare.")
    return RunFiles(path, result, _load_weights(path.parent / WEIGHTS_NAME))


def _load_weights(path: Path) -> Optional[dict]:
    if not path.is_file():
        return None
    import torch

    try:
        weights = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - a truncated or foreign file: say which, do not crash
        raise DiffError(f"{path}: cannot be read as saved weights ({type(e).__name__}: {e}).") from None
    if not isinstance(weights, dict) or not isinstance(weights.get("final"), dict):
        raise DiffError(
            f"{path}: not a harness weights file (expected {{'final': state_dict, 'steps': tensor or None}}, "
            "as written with repro.save_weights=true)."
        )
    return weights


def _steps(result: dict) -> dict:
    return load_steps(result)


def loss_value(bits: str) -> float:
    """The float32 whose bits are these 8 hex digits (as fingerprint.StepRecorder writes them)."""
    return struct.unpack(">f", bytes.fromhex(bits))[0]


# -- comparing ----------------------------------------------------------------------------------


def digest_parts(fa: dict, fb: dict, sa: dict, sb: dict) -> dict:
    """What compares only within one digest version, compared where both sides share one: the first
    step whose parameter digests differ and whether the data orders are equal (None: not compared)."""
    versions = [digests_version(fa), digests_version(fb)]
    same = versions[0] == versions[1]
    return {"digests": versions,
            "first_params_step": first_difference(sa["params"], sb["params"]) if same else None,
            "data_order_equal": fa.get("data_order") == fb.get("data_order") if same else None}


def first_difference(a: list, b: list) -> Optional[int]:
    """1-based index of the first unequal entry; a longer list differs right after the shorter ends."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i + 1
    return min(len(a), len(b)) + 1 if len(a) != len(b) else None


def weight_deltas(wa: dict, wb: dict) -> dict:
    """max |Δw| per state-dict entry and overall; entries present on one side only are listed."""
    per_layer, mismatched = {}, []
    for name in wa:
        if name not in wb:
            mismatched.append(f"{name} (only in A)")
        elif wa[name].shape != wb[name].shape:
            mismatched.append(f"{name} (shape {tuple(wa[name].shape)} vs {tuple(wb[name].shape)})")
        elif wa[name].numel():
            per_layer[name] = float((wa[name].double() - wb[name].double()).abs().max())
    mismatched += [f"{name} (only in B)" for name in wb if name not in wa]
    overall = max(per_layer.values(), default=0.0)
    return {"per_layer": per_layer, "overall": overall, "mismatched": mismatched}


def step_deltas(sa, sb) -> Optional[list[float]]:
    """max |Δw| after each kept step (rows of the [N, n_params] step-weight tensors)."""
    if sa is None or sb is None or sa.shape[1:] != sb.shape[1:]:
        return None
    n = min(len(sa), len(sb))
    return (sa[:n].double() - sb[:n].double()).abs().amax(dim=1).tolist()


def compare(a: RunFiles, b: RunFiles) -> dict:
    """Everything that tells where two runs part ways, as a JSON-ready dict."""
    ra, rb = a.result, b.result
    fa, fb = ra["fingerprints"], rb["fingerprints"]
    sa, sb = _steps(ra), _steps(rb)
    parts = digest_parts(fa, fb, sa, sb)
    loss_step = first_difference(sa["loss"], sb["loss"])
    params_step = parts["first_params_step"]
    common = min(len(sa["loss"]), len(sb["loss"]))
    dloss = [abs(loss_value(x) - loss_value(y)) for x, y in zip(sa["loss"][:common], sb["loss"][:common])]
    report = {
        "a": str(a.path),
        "b": str(b.path),
        "steps": [len(sa["loss"]), len(sb["loss"])],
        "config_differences": [list(d) for d in differences(ra.get("config"), rb.get("config"))],
        "env_differences": [list(d) for d in differences(ra.get("env"), rb.get("env"))],
        "code_version": [ra.get("code_version"), rb.get("code_version")],
        "init_equal": fa.get("init") == fb.get("init"),
        "data_order_equal": parts["data_order_equal"],
        "digests": parts["digests"],
        "final_equal": fa.get("final") == fb.get("final"),
        "first_loss_step": loss_step,
        "first_params_step": params_step,
        "loss_at_first_difference": None,
        "abs_dloss": dloss,
        "weights": None,
        "weights_note": None,
        "step_weights": None,
        "step_weights_note": None,
    }
    if loss_step is not None and loss_step <= common:
        x, y = sa["loss"][loss_step - 1], sb["loss"][loss_step - 1]
        report["loss_at_first_difference"] = {"a": [x, loss_value(x)], "b": [y, loss_value(y)]}

    missing = [name for name, run in (("A", a), ("B", b)) if run.weights is None]
    if missing:
        report["weights_note"] = (
            f"no {WEIGHTS_NAME} beside {' and '.join(missing)}: rerun with repro.save_weights=true "
            "for max |Δw| per layer"
        )
        report["step_weights_note"] = "per-step weights need repro.keep_step_weights=N on both runs"
    else:
        report["weights"] = weight_deltas(a.weights["final"], b.weights["final"])
        curve = step_deltas(a.weights.get("steps"), b.weights.get("steps"))
        if curve is None:
            report["step_weights_note"] = (
                "no per-step weights on both sides (repro.keep_step_weights=N keeps the first N steps)"
            )
        else:
            nonzero = [i + 1 for i, d in enumerate(curve) if d > 0]
            report["step_weights"] = {"max_abs_dw": curve, "first_nonzero_step": nonzero[0] if nonzero else None}

    w = report["weights"]
    report["identical"] = (
        loss_step is None
        and params_step is None
        and report["final_equal"]
        and report["init_equal"]
        and report["data_order_equal"] is not False
        and (w is None or (w["overall"] == 0 and not w["mismatched"]))
    )
    return report


# -- showing ------------------------------------------------------------------------------------


def ops_lines(report: dict, a: RunFiles, b: RunFiles, recorder: str = "auto") -> list:
    """--ops: the first aten op whose outputs differ, at the step where the runs part (tools/diff/ops.py)."""
    from harness.tools.diff import ops

    steps = [s for s in (report["first_params_step"], report["first_loss_step"]) if s is not None]
    if not report["init_equal"] or not steps:
        report["ops"] = None
        why = "the initial weights differ (step 0)" if not report["init_equal"] else "every step's bits match"
        return [f"  ops:                    not replayed: {why}; the op replay looks inside a training step"]
    try:
        loc = ops.locate(a.result, b.result, min(steps), recorder)
    except ops.OpsError as e:
        report["ops"] = None
        return [f"  ops:                    not available: {e}"]
    report["ops"] = ops.to_json(loc)
    return ops.format_ops(loc, (_steps(a.result)["loss"], _steps(b.result)["loss"]))


# -- command line -------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m harness.diff",
        description="Where do two runs part ways? Exit status 0: identical, 1: different, 2: bad input.",
    )
    p.add_argument("a", metavar="A", help="result.json, or the run folder holding it (and weights.pt)")
    p.add_argument("b", metavar="B", help="the run to compare with")
    p.add_argument("--plot", metavar="PATH", default=None,
                   help=f"where to draw the butterfly curve (default: {PLOT_NAME} in A's run folder)")
    p.add_argument("--no-plot", action="store_true", help="draw nothing")
    p.add_argument("--json", metavar="PATH", default=None, help="also write the full report as JSON")
    p.add_argument("--ops", action="store_true",
                   help="replay both runs to the step where they part and name the first aten op whose outputs differ")
    p.add_argument("--recorder", choices=("auto", "debug_mode", "own"), default="auto",
                   help="for --ops: PyTorch's DebugMode (auto: where torch has it) or the harness's own dispatch mode")
    add_config_dir(p, help="taken as the other tools take it, and not used: the diff reads only the two runs' files")
    return p


def main(argv=None) -> int:
    args = parse_args(parser(), argv)
    if args.config_dir:
        print("harness.diff: note: --config-dir is not used: the diff reads only the two runs' files.", file=sys.stderr)
    try:
        a, b = load_run(args.a), load_run(args.b)
    except DiffError as e:
        print(f"harness.diff: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    report = compare(a, b)
    plot = None
    if not report["identical"] and not args.no_plot:
        target = Path(args.plot) if args.plot else a.path.parent / PLOT_NAME
        try:
            plot = target if write_plot(report, target) else None
        except OSError as e:
            print(f"harness.diff: error: cannot write the plot to {target}: {e}. Pass --plot PATH or --no-plot.", file=sys.stderr)
            return EXIT_BAD_INPUT
    report["plot"] = str(plot) if plot else None
    print(format_report(report, a, b, plot))
    if args.ops and not report["identical"]:
        print("\n".join(ops_lines(report, a, b, args.recorder)))
    if args.json:
        try:
            write_json(args.json, report)
        except OSError as e:
            print(f"harness.diff: error: cannot write {args.json}: {e}.", file=sys.stderr)
            return EXIT_BAD_INPUT
    return EXIT_SAME if report["identical"] else EXIT_DIFFERENT


if __name__ == "__main__":
    sys.exit(main())
