"""Same seed, same data, twice: do the two runs stay bit-identical?

Pairs of runs, each pair from one seed on the same synthetic CIFAR-shaped batches in the same order:
  default               PyTorch's default mode with cudnn.benchmark on (harness mode=off)
  deterministic         harness mode=strict, fill_uninitialized_memory on
  deterministic_nofill  harness mode=strict, fill_uninitialized_memory off
  threads               (with --threads-b N) deterministic, run B with N threads instead of --threads
For each pair: the first step at which the loss bits or the parameter digests (harness.training.fingerprint)
differ, max |Δw| per step and at the end, and both loss curves. And across the two deterministic
pairs: does filling uninitialized memory change the final weights (it must not)? The reference result, on a GPU:
the default pair parts ways at step 1 and ends far apart; the deterministic pairs stay identical.

On a CPU the default pair is usually identical too: CPU kernels are deterministic at a fixed thread
count. There the source of divergence is the thread count; --threads 1 --threads-b 2 shows it (and
shows that deterministic mode does not make different thread counts agree: the harness pins them).

The two runs of a pair train in lockstep in one process (mode switched with
harness.training.determinism.configure before each run's step), so max |Δw| is exact at every step without
storing weights. They share one process's cudnn.benchmark choices: what parts them here is a
nondeterministic kernel, not a different algorithm pick; two separate processes can only differ more.

GPU:  python scripts/replicate_divergence.py --out results/
CPU:  python scripts/replicate_divergence.py --device cpu --model small_cnn --channels 1 \
          --image-size 8 --batch 64 --threads 1 --threads-b 2 --out results/
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os

import _bench_common as common  # first: puts the repo root on sys.path and imports harness before torch
import torch
from harness.training.determinism import Settings, configure, resolve_device
from harness.training.fingerprint import StepRecorder, model_fingerprint, state_tensors

N_BATCHES = 32  # distinct batches, cycled in a fixed order: the same for every run


@dataclasses.dataclass
class Pair:
    name: str
    label: str
    a: Settings
    b: Settings


def make_pairs(args) -> list[Pair]:
    t = args.threads
    pairs = []
    # (pair name, mode of both runs); the reference calls the benchmark pair "default mode"
    for name, mode in (("default", "benchmark"), ("deterministic", "deterministic"),
                       ("deterministic_nofill", "deterministic_nofill")):
        settings = common.mode_settings(mode, t)
        pairs.append(Pair(name, common.MODE_LABELS[mode], settings, settings))
    if args.threads_b is not None:
        a = common.mode_settings("deterministic", t)
        pairs.append(Pair("threads", f"deterministic, {t} vs {args.threads_b} threads", a,
                          dataclasses.replace(a, threads=args.threads_b)))
    return pairs


class Run:
    """One training run: its model, optimizer and the per-step fingerprints of its state."""

    def __init__(self, settings: Settings, args, device: torch.device):
        self.settings = settings
        configure(settings, device)  # the mode it is built in, too
        self.model = common.build_model(args, device)
        self.optimizer = common.make_optimizer(self.model)
        self.params = list(self.model.parameters())
        # Parameters and BatchNorm statistics: every tensor that decides the next step.
        self.recorder = StepRecorder(state_tensors(self.model), args.steps, device)


def first_difference(a: list[str], b: list[str]) -> int | None:
    """1-based index of the first position where the two sequences differ, None if none does."""
    for i, (x, y) in enumerate(zip(a, b), start=1):
        if x != y:
            return i
    return None


@torch.no_grad()
def max_abs_diff(pa: list[torch.Tensor], pb: list[torch.Tensor]) -> torch.Tensor:
    """max |w_a - w_b| over all parameters, as a device scalar (no host sync)."""
    return torch.stack([(a.float() - b.float()).abs().max() for a, b in zip(pa, pb)]).max()


def run_pair(pair: Pair, args, device: torch.device, batches) -> dict:
    runs = [Run(pair.a, args, device), Run(pair.b, args, device)]
    init = [model_fingerprint(r.model) for r in runs]
    if init[0] != init[1]:  # pairing is proven, not assumed
        raise RuntimeError(f"pair {pair.name}: the two runs start from different weights ({init})")
    bf16 = args.precision == "bf16"
    delta = torch.zeros(args.steps, device=device)
    for step in range(args.steps):
        x, y = batches[step % len(batches)]
        for run in runs:
            configure(run.settings, device)
            loss = common.train_step(run.model, run.optimizer, x, y, bf16)
            run.recorder.record(loss)
        delta[step] = max_abs_diff(runs[0].params, runs[1].params)
    a, b = (r.recorder.finish() for r in runs)
    first_loss = first_difference(a["loss"], b["loss"])
    first_params = first_difference(a["params"], b["params"])
    firsts = [s for s in (first_loss, first_params) if s is not None]
    delta = delta.cpu().tolist()
    return {
        "name": pair.name,
        "label": pair.label,
        "settings_a": dataclasses.asdict(pair.a),
        "settings_b": dataclasses.asdict(pair.b),
        "identical": not firsts,
        "first_divergent_step": min(firsts) if firsts else None,
        "first_loss_difference": first_loss,
        "first_param_difference": first_params,
        "final_max_abs_dw": delta[-1],
        "final_loss_a": a["loss_values"][-1],
        "final_loss_b": b["loss_values"][-1],
        "final_fingerprint_a": model_fingerprint(runs[0].model),
        "final_fingerprint_b": model_fingerprint(runs[1].model),
        "curves": {"loss_a": a["loss_values"], "loss_b": b["loss_values"], "max_abs_dw": delta},
    }


def sentence(p: dict, steps: int) -> str:
    if p["identical"]:
        return (f"- **{p['name']}** ({p['label']}): bit-identical at all {steps} steps "
                "(loss bits and parameter digests).")
    def at(step):
        return "never" if step is None else f"at step {step}"

    return (f"- **{p['name']}** ({p['label']}): part ways at step {p['first_divergent_step']} "
            f"(loss bits first differ {at(p['first_loss_difference'])}, parameter digests "
            f"{at(p['first_param_difference'])}); max |Δw| at the end {p['final_max_abs_dw']:.3g}.")


def default_identical_note(device: torch.device) -> str:
    """Said whenever the default-mode pair came out identical, so nobody reads it as a GPU result."""
    if device.type == "cpu":
        return ("NOTE: the default-mode pair happened to be bit-identical. On a CPU this is expected: "
                "CPU kernels are deterministic at a fixed thread count, so default mode does not part "
                "two runs. The source of divergence on a CPU is the thread count: run with "
                "--threads-b N to see a pair that differs only in it.")
    return ("NOTE: the default-mode pair happened to be bit-identical: every kernel this model used "
            "was deterministic on this GPU in this run (both runs also share one process's "
            "cudnn.benchmark choices). This is not a guarantee: another model, size or GPU can differ.")


def report(pairs: list[dict], head: dict, args, device: torch.device) -> str:
    lines = [f"# Divergence of same-seed runs — {args.model} on {device.type}", ""]
    lines += common.header_lines(head)
    lines.append(f"- {args.steps} steps, precision {args.precision}, seed {args.seed}, "
                 f"{N_BATCHES} fixed batches cycled in order")
    lines += ["", "| pair | run A | run B | bit-identical | first divergent step | max \\|Δw\\| at end "
              "| final loss A | final loss B |", "| --- | --- | --- | --- | ---: | ---: | ---: | ---: |"]
    for p in pairs:
        ra = f"{p['settings_a']['mode']}, {p['settings_a']['threads']} thr"
        rb = f"{p['settings_b']['mode']}, {p['settings_b']['threads']} thr"
        first = "—" if p["first_divergent_step"] is None else str(p["first_divergent_step"])
        lines.append(f"| {p['name']} | {ra} | {rb} | {'yes' if p['identical'] else 'no'} | {first} "
                     f"| {p['final_max_abs_dw']:.3g} | {p['final_loss_a']:.6g} | {p['final_loss_b']:.6g} |")
    lines.append("")
    lines += [sentence(p, args.steps) for p in pairs]
    fill = fill_check(pairs)
    lines.append(f"- fill_uninitialized_memory on vs off: the final weights are "
                 f"{'DIFFERENT' if fill['changes_bits'] else 'bit-identical'} "
                 f"({fill['fingerprint_on']} vs {fill['fingerprint_off']}).")
    if pairs[0]["identical"]:
        lines += ["", default_identical_note(device)]
    return "\n".join(lines) + "\n"


def fill_check(pairs: list[dict]) -> dict:
    """Does filling uninitialized memory change the result? Run A of each deterministic pair: same
    seed, data, threads; only the fill differs. For a program that never reads memory it did not
    write, it must not."""
    by = {p["name"]: p for p in pairs}
    on, off = by["deterministic"]["final_fingerprint_a"], by["deterministic_nofill"]["final_fingerprint_a"]
    return {"changes_bits": on != off, "fingerprint_on": on, "fingerprint_off": off}


def plot(pairs: list[dict], args, device: torch.device, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_dw) = plt.subplots(1, 2, figsize=(12, 4.5))
    steps = list(range(1, args.steps + 1))
    for i, p in enumerate(pairs):
        color = f"C{i}"
        c = p["curves"]
        ax_loss.plot(steps, c["loss_a"], color=color, label=f"{p['name']} A")
        ax_loss.plot(steps, c["loss_b"], color=color, linestyle="--", label=f"{p['name']} B")
        if p["identical"]:
            # Δw = 0 has no place on a log axis: say it in the legend instead of drawing nothing.
            ax_dw.plot([], [], color=color, label=f"{p['name']}: identical (Δw = 0 at every step)")
        else:
            ax_dw.plot(steps, c["max_abs_dw"], color=color,
                       label=f"{p['name']}: first differs at step {p['first_divergent_step']}")
    ax_loss.set(xlabel="step", ylabel="training loss", title="loss curves (A solid, B dashed)")
    ax_dw.set(xlabel="step", ylabel="max |w_A − w_B|", yscale="log", title="divergence of the pair")
    ax_loss.legend(fontsize=8)
    ax_dw.legend(fontsize=8)
    fig.suptitle(f"{args.model}, {device.type}, {args.precision}, seed {args.seed}, batch {args.batch}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.add_common_args(parser)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    parser.add_argument("--threads-b", type=int, default=None,
                        help="add a pair whose run B uses this many threads (the CPU's source of divergence)")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be >= 1")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    device = resolve_device(args.device)
    pairs = make_pairs(args)
    configure(pairs[0].a, device)
    head = common.header(args, device, pairs[0].a)
    batches = common.make_batches(args, N_BATCHES, device)

    results = []
    for pair in pairs:
        results.append(run_pair(pair, args, device, batches))
        print(sentence(results[-1], args.steps), flush=True)

    text = report(results, head, args, device)
    print()
    print(text)
    out = common.out_dir(args.out)
    if out is not None:
        # Numbers first: they are the result, the figure only shows them.
        with open(os.path.join(out, "divergence.md"), "w") as f:
            f.write(text + "\n![divergence](divergence.png)\n")
        with open(os.path.join(out, "divergence.json"), "w") as f:
            json.dump({"header": head, "steps": args.steps, "precision": args.precision,
                       "fill_check": fill_check(results), "pairs": results}, f, indent=1)
        try:
            plot(results, args, device, os.path.join(out, "divergence.png"))
        except ImportError as e:  # the tables are written; only the figure needs matplotlib
            print(f"no divergence.png: {e} (pip install matplotlib to draw it)")
        print(f"wrote {out}/divergence.md, divergence.json and divergence.png")


if __name__ == "__main__":
    main()
