"""A scratch git repository of a tiny model, and the code edits a research loop makes in it (bench_judge --repo).

The project: ``tiny/model.py``, a two-layer MLP with dropout trained by SGD for a few dozen steps on a
fixed synthetic classification task (``train.fn: tiny.model.fit``, metric: the held-out loss, lower is
better). Its seed noise is real: the harness's init, data-order and model streams of each seed.

Each candidate edit is a real change of ``tiny/model.py`` in the working tree (the loop commits a kept
one), of one of these kinds:
- null, "note": a constant nobody reads (the same bits: the judge reads identical results);
- null, "rewrite": the loss written another, algebraically equal way (log_softmax + gather), or back;
- null, "reorder": one more draw from the init stream before the model is built (a different init of
  the same distribution: different bits, no expected effect);
- small positive, "lr up": the learning rate times LR_UP (the model is under-trained at the start), with
  one more init draw (a real edit changes the random draws too, so that the paired difference carries
  the seed noise; a bare lr change moves every seed alike, many sds at once). Kept lr edits compound,
  so the rate stops at LR_MAX, below which each step still helps (measured, 16 paired seeds each: the
  held-out loss falls with every step from 0.05 to 0.3); an "lr up" at LR_MAX is only its init draw, a
  "reorder", and is counted as the null edit it is;
- harmful, "dropout up": the dropout rate plus DROPOUT_UP.
The effect of each kind is measured beforehand (``calibrate``: many paired seeds of the edit against
the first baseline, in-process), in the metric's units and in units of the sd of the paired difference.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

MODEL = textwrap.dedent('''
    """The scratch project's tiny model: a two-layer MLP on a fixed synthetic task."""
    import torch

    from harness import Run, TensorBatches

    LR = 0.05
    HIDDEN = 16
    DROPOUT = 0.2
    STEPS = 40
    EXTRA_DRAWS = 0


    def _data():
        g = torch.Generator().manual_seed(0)  # the same task for every seed and arm
        x = torch.randn(512, 8, generator=g)
        w = torch.randn(8, generator=g)
        y = ((x @ w + 0.5 * torch.randn(512, generator=g)) > 0).long()
        return x[:256], y[:256], x[256:], y[256:]


    def _loss(out, y):
        return torch.nn.functional.cross_entropy(out, y)


    def fit(cfg, run: Run) -> dict:
        x, y, xt, yt = _data()
        loader = run.loader(TensorBatches(x, y), batch_size=32)
        with run.init():
            if EXTRA_DRAWS:
                torch.rand(EXTRA_DRAWS)
            model = torch.nn.Sequential(torch.nn.Linear(8, HIDDEN), torch.nn.Tanh(), torch.nn.Dropout(DROPOUT),
                                        torch.nn.Linear(HIDDEN, 2))
        run.watch(model, total_steps=STEPS)
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        step = 0
        while step < STEPS:
            for xb, yb in loader:
                loss = _loss(model(xb), yb)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                run.step(loss)
                step += 1
                if step == STEPS:
                    break
        model.eval()
        with torch.no_grad():
            return {"test_loss": torch.nn.functional.cross_entropy(model(xt), yt).item()}
''').lstrip()
CONF = textwrap.dedent('''
    # @package _global_
    experiment_name: tiny
    train:
      fn: tiny.model.fit
      max_steps: 40
    stats:
      metric: test_loss
      margin: null
      metrics:
        test_loss: min
    ab:
      factor: code
      arms: {A: main, B: WORKTREE}
      seeds: [0, 1, 2]
''').lstrip()
# the harness's settings of every run in the scratch repository: nothing but the units
FAST = ["+experiment=tiny", "logger=none", "progress=false", "workers=1", "determinism.threads=1",
        "repro.certificate=false"]
PLAIN_LOSS = "torch.nn.functional.cross_entropy(out, y)"
GATHER_LOSS = "-torch.log_softmax(out, 1).gather(1, y[:, None]).mean()"
LR_UP, DROPOUT_UP = 1.35, 0.25  # LR_UP: +0.72 sd of the paired difference (40 seeds), the simulated loops' +0.7
LR_MAX = 0.2
KINDS = {"null": ("note", "rewrite", "reorder"), "small positive": ("lr up",), "harmful": ("dropout up",)}
MODEL_PATH = "tiny/model.py"


def git(repo: Path, *args) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "loop", "GIT_AUTHOR_EMAIL": "loop@scratch",
           "GIT_COMMITTER_NAME": "loop", "GIT_COMMITTER_EMAIL": "loop@scratch"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def make_repo(repo: Path) -> str:
    """The scratch project, committed on main; its commit."""
    (repo / "tiny").mkdir(parents=True)
    (repo / "tiny" / "__init__.py").write_text("")
    (repo / MODEL_PATH).write_text(MODEL)
    (repo / "conf" / "experiment").mkdir(parents=True)
    (repo / "conf" / "experiment" / "tiny.yaml").write_text(CONF)
    (repo / ".gitignore").write_text("outputs/\n__pycache__/\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the tiny model")
    return git(repo, "rev-parse", "HEAD")


def _constant(text: str, name: str) -> float:
    return float(re.search(rf"^{name} = (.+)$", text, re.M).group(1))


def _set(text: str, name: str, value) -> str:
    return re.sub(rf"^{name} = .+$", f"{name} = {value!r}", text, count=1, flags=re.M)


def edited(text: str, kind: str, index: int) -> str:
    """``tiny/model.py``'s text after an edit of ``kind`` (the loop's ``index``-th edit)."""
    if kind == "note":
        return text + f"\nNOTE_{index} = {index}  # a constant nobody reads\n"
    if kind == "rewrite":
        return (text.replace(PLAIN_LOSS, GATHER_LOSS) if PLAIN_LOSS in text
                else text.replace(GATHER_LOSS, PLAIN_LOSS))
    if kind == "reorder":
        return _set(text, "EXTRA_DRAWS", int(_constant(text, "EXTRA_DRAWS")) + 1)
    if kind == "lr up":
        lr = _constant(text, "LR")
        return edited(_set(text, "LR", round(min(lr * LR_UP, LR_MAX), 6)) if lr < LR_MAX else text, "reorder", index)
    if kind == "dropout up":
        return _set(text, "DROPOUT", round(min(0.9, _constant(text, "DROPOUT") + DROPOUT_UP), 6))
    raise ValueError(f"no edit kind {kind!r}")


def class_of(kind: str) -> str:
    return next(c for c, kinds in KINDS.items() if kind in kinds)


def apply(repo: Path, kind: str, index: int) -> str:
    """Make the edit in the working tree; the kind it really is ("lr up" at LR_MAX is a "reorder")."""
    path = repo / MODEL_PATH
    text = path.read_text()
    if kind == "lr up" and _constant(text, "LR") >= LR_MAX:
        kind = "reorder"
    path.write_text(edited(text, kind, index))
    return kind


def discard(repo: Path) -> None:
    """The working tree back to the last commit (the judgements' outputs/ are ignored: kept)."""
    git(repo, "checkout", "-q", "--", ".")
    git(repo, "clean", "-fdq", "-e", "outputs/")


def paired_differences(repo: Path, seeds: int, out: Path) -> list[float]:
    """B - A of test_loss per seed: the working tree (B) against HEAD (A), in process."""
    import harness

    cwd, path = os.getcwd(), list(sys.path)
    os.chdir(repo)
    sys.path.insert(0, str(repo))  # as python -m harness puts its launch folder first
    try:
        done = harness.run([*FAST, "ab.arms={A: HEAD, B: WORKTREE}", f"ab.seeds=[{','.join(map(str, range(seeds)))}]"],
                           config_dir=repo / "conf", out_dir=out, verbose=False)
    finally:
        os.chdir(cwd)
        sys.path[:] = path
    by = {(r["seed"], r["arm"]): r["metrics"]["test_loss"] for r in done.results if r["status"] == "completed"}
    return [by[(s, "B")] - by[(s, "A")] for s in range(seeds) if (s, "A") in by and (s, "B") in by]


def calibrate(repo: Path, seeds: int, out: Path) -> dict:
    """{kind: {mean, sd, effect_sigma, n}} of each edit kind against the repository's HEAD, from
    ``seeds`` paired seeds. effect_sigma: the improvement (lower loss is better: A - B) over the sd of the
    paired difference (0 when every seed gives the same value)."""
    import statistics

    out_of = {}
    for kinds in KINDS.values():
        for kind in kinds:
            apply(repo, kind, 0)
            d = paired_differences(repo, seeds, out / kind.replace(" ", "_"))
            discard(repo)
            mean, sd = statistics.fmean(d), statistics.stdev(d)
            out_of[kind] = {"mean": mean, "sd": sd, "effect_sigma": -mean / sd if sd > 0 else 0.0, "n": len(d)}
    return out_of
