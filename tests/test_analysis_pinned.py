"""The analysis of realistic result trees, pinned: a faster analysis must say exactly the same.

The trees come from scripts/bench_analyze.py's own writer at small size (the loss_ab experiment's
real config, per-example records, curves, packed step fingerprints), then altered the way real
folders are: failed and diverged runs, a metric its record contradicts, runs without a curve or
with a curve at other steps, an unpaired run, a bit-identical copy, a third arm, two identities
(refused, allowed, and --grid), a hash that disagrees with its config, conflicting copies, the
previous result format, and an experiment across conditions.

Each case's outputs (analysis.json as sorted JSON text, report.md, the verdict screen; or the
refusal's message) are reduced to one sha256. PINNED holds the digests as the code before the
speed work of issue 33 §3 (main at b642032) produced them, written by running
``PYTHONPATH=. python tests/test_analysis_pinned.py`` on that code. A change that is meant to change
what an analysis says (a statistic, a sentence, the declaration's defaults) regenerates them the
same way and says so in its commit; a change meant only to be faster must leave them as they are.
They are taken with OpenBLAS held to its Haswell kernels (PINNED_BLAS, see the test): generate them
with ``OPENBLAS_CORETYPE=Haswell OPENBLAS_NUM_THREADS=1 PYTHONPATH=. python tests/test_analysis_pinned.py``.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # every test here spawns the harness or takes seconds

REPO = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_analyze", REPO / "scripts" / "bench_analyze.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _files(root: Path) -> dict[Path, dict]:
    return {p: json.loads(p.read_text()) for p in sorted(root.rglob("result.json"))}


def _write(path: Path, result: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))


def _run(root: Path, seed: int, arm: str) -> Path:
    return root / "runs" / f"seed={seed}" / f"arm={arm}" / "result.json"


def _edit(root: Path, seed: int, arm: str, change) -> None:
    path = _run(root, seed, arm)
    result = json.loads(path.read_text())
    change(result)
    _write(path, result)


def _failed(kind: str, message: str):
    def change(r):
        r.update(status="failed", error={"type": kind, "message": message, "step": 17})
        r["metrics"] = {}
    return change


def _rewritten(bench, root: Path, n_files: int, version: int = 2) -> Path:
    root.mkdir(parents=True)
    bench.write_tree(root, n_files, version)
    return root


def build(tmp: Path) -> dict[str, Path]:
    """Every case's folder (written into tmp)."""
    from harness.results import config_digest

    bench = _bench()
    trees = {}
    trees["plain"] = _rewritten(bench, tmp / "plain", 24)
    trees["v1"] = _rewritten(bench, tmp / "v1", 16, version=1)

    messy = trees["messy"] = _rewritten(bench, tmp / "messy", 28)
    _edit(messy, 1, "B", _failed("NonFiniteLoss", "loss became nan at step 17"))  # diverged
    _edit(messy, 2, "A", _failed("RuntimeError", "CUDA out of memory"))  # a failure, not an outcome
    _edit(messy, 3, "B", lambda r: r["metrics"].update(test_accuracy=float("nan")))  # not JSON: unreadable, named
    _edit(messy, 4, "A", lambda r: r["metrics"].pop("test_accuracy"))
    _edit(messy, 5, "B", lambda r: r["metrics"].update(test_accuracy=r["metrics"]["test_accuracy"] + 1.0))
    _edit(messy, 6, "A", lambda r: r.pop("curve"))  # the curve from the per-step losses
    _edit(messy, 6, "B", lambda r: r.pop("curve"))
    _edit(messy, 7, "A", lambda r: r.update(curve={"step": [5, 15, 25], "train_loss": [0.9, 0.5, 0.25],
                                                   "val_loss": [1.0, None, 0.5]}))
    _edit(messy, 9, "B", lambda r: r["metrics"].update(test_loss=None))
    _run(messy, 8, "B").unlink()  # seed 8 arm A is unpaired
    copy_of = messy / "older" / "seed=10" / "arm=A" / "result.json"  # a bit-identical copy
    copy_of.parent.mkdir(parents=True)
    shutil.copy(_run(messy, 10, "A"), copy_of)

    three = trees["three_arms"] = _rewritten(bench, tmp / "three_arms", 20)
    for path, r in _files(three).items():
        if r["arm"] == "B":
            c = copy.deepcopy(r)
            c.update(arm="C", factor_value=0.2)
            c["metrics"]["test_accuracy"] = r["metrics"]["test_accuracy"] - 0.1 * (r["seed"] % 3)
            c["examples"] = None
            c["config"]["arm"] = "C"
            c["config"]["loss"]["label_smoothing"] = 0.2
            c["config"]["ab"]["arms"] = {"A": 0.0, "B": 0.1, "C": 0.2}
            c["config_hash"] = config_digest({k: v for k, v in c["config"].items()})
            c["fingerprints"]["final"] = f"{r['seed']:04x}c" + c["fingerprints"]["final"][5:]
            _write(path.parent.parent / "arm=C" / "result.json", c)

    mixed = trees["mixed"] = _rewritten(bench, tmp / "mixed", 24)
    for seed in range(6, 12):
        for arm in "AB":
            _edit(mixed, seed, arm, lambda r: r["env"].update(threads=2))

    swept = trees["grid"] = _rewritten(bench, tmp / "grid", 24)  # two settings of optim.lr, 6 seeds each

    def faster(r):
        r["config"]["optim"]["lr"] = 0.1
        r["config_hash"] = config_digest(r["config"])
        r["base_hash"] = config_digest(r["config"], exclude_factor=r["factor"])
    for seed in range(6, 12):
        for arm in "AB":
            _edit(swept, seed, arm, faster)

    wrong = trees["wrong_hash"] = _rewritten(bench, tmp / "wrong_hash", 12)
    _edit(wrong, 2, "B", lambda r: r.update(config_hash="0123456789abcdef"))

    conflict = trees["conflict"] = _rewritten(bench, tmp / "conflict", 12)
    other = conflict / "older" / "seed=3" / "arm=A" / "result.json"
    other.parent.mkdir(parents=True)
    shutil.copy(_run(conflict, 3, "A"), other)
    _edit(conflict, 3, "A", lambda r: r["metrics"].update(test_accuracy=50.0))

    conditions = trees["conditions"] = tmp / "conditions"
    from harness.config.declaration import Declaration
    from tests.conftest import compose_cfg

    conditions.mkdir()
    Declaration.from_config(compose_cfg(["+experiment=loss_ab_conditions", "logger=none"])).write(conditions)
    (conditions / "condition=digits_wide").mkdir()  # no results: named as not analysed
    for i, name in enumerate(("digits", "synthetic")):
        folder = _rewritten(bench, conditions / f"condition={name}", 16 + 4 * i)
        if i:
            for seed in range(10):
                _edit(folder, seed, "B", lambda r: r["metrics"].update(test_accuracy=r["metrics"]["test_accuracy"] - 0.5))
    return trees


_TMP = ["/nowhere"]  # the folder the trees are in: left out of what is digested


def _digest(*texts) -> str:
    h = hashlib.sha256()
    for t in texts:
        h.update(t.replace(_TMP[0], "TMP").encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def _analysis_digest(analysis: dict) -> str:
    from rich.console import Console

    from harness.analysis.render import markdown, report

    screen = io.StringIO()
    report.render_table(analysis, Console(file=screen, width=120, color_system=None), tables=True)
    return _digest(json.dumps(analysis, sort_keys=True, default=repr), markdown.markdown(analysis), screen.getvalue())


def _refusal(call) -> str:
    from harness.analysis import AnalysisError

    try:
        call()
    except AnalysisError as e:
        return "refused " + _digest(str(e))
    return "not refused"


def digests(tmp: Path) -> dict[str, str]:
    """case -> the digest of what its analysis says (see the module's docstring)."""
    from harness.analysis import conditions, grid
    from harness.analysis.analyze import analyze, analyze_dir
    from harness.config import declaration as declaration_io
    from harness.results import load_tree

    trees = build(tmp)
    _TMP[0] = str(tmp)
    out = {}
    for name in ("plain", "v1", "messy", "three_arms"):
        out[name] = _analysis_digest(analyze_dir(trees[name], write=False))
    out["plain apart"] = _analysis_digest(analyze_dir(trees["plain"], write=False, apart=True))
    out["messy metric"] = _analysis_digest(analyze_dir(trees["messy"], write=False, metric="test_loss"))
    decl = declaration_io.read(trees["messy"])

    def in_memory():  # with a completed run whose metric is NaN (a file cannot hold one): diverged
        results = load_tree(trees["messy"]).results
        next(r for r in results if (r["seed"], r["arm"]) == (11, "B"))["metrics"]["test_accuracy"] = float("nan")
        return results
    out["messy in memory"] = _analysis_digest(analyze(in_memory(), decl))
    out["messy exclude"] = _analysis_digest(analyze(in_memory(), replace(decl, diverged="exclude")))
    out["messy fail"] = _refusal(lambda: analyze(load_tree(trees["messy"]).results, replace(decl, diverged="fail")))
    out["mixed"] = _refusal(lambda: analyze_dir(trees["mixed"], write=False))
    out["mixed allowed"] = _analysis_digest(analyze_dir(trees["mixed"], write=False, allow_mixed_identity=True))
    out["mixed grid"] = _refusal(lambda: grid.analyze_grid_dir(trees["mixed"], write=False))
    summary = grid.analyze_grid_dir(trees["grid"], write=False)
    out["grid"] = _digest(json.dumps(summary, sort_keys=True, default=repr), "\n".join(grid._lines(summary)))
    out["wrong hash"] = _refusal(lambda: analyze_dir(trees["wrong_hash"], write=False))
    out["conflict"] = _refusal(lambda: analyze_dir(trees["conflict"], write=False))
    summary, analyses = conditions.analyze_conditions_dir(trees["conditions"], write=False)
    out["conditions"] = _digest(json.dumps(summary, sort_keys=True, default=repr), conditions.markdown(summary),
                                "\n".join(conditions.screen(summary)),
                                *(_analysis_digest(a) for _, a in sorted(analyses.items())))
    return out


PINNED = {
    "plain": "b1d74bc57b308b0c",
    "v1": "0b354354f8ca39ec",
    "messy": "c69b1095ce5e9c62",
    "three_arms": "e2bf14c59c216683",
    "plain apart": "b1d74bc57b308b0c",
    "messy metric": "3b822f402821c90f",
    "messy in memory": "0ccf6fbc9408e3e8",
    "messy exclude": "b838a51adb968528",
    "messy fail": "refused eaa2e3bb1f9f147b",
    "mixed": "refused 2c4f80eb9d3da061",
    "mixed allowed": "a5233c4c296f77bf",
    "mixed grid": "refused 5dfc73dea2a44484",
    "grid": "aa9eaedde9d05e94",
    "wrong hash": "refused f94bc41b2652320c",
    "conflict": "refused 1e6807e46cd74a4c",
    "conditions": "96b7343b9dd8330e",
}


# The analysis's matrix products (power averages, trends, sign patterns) go through OpenBLAS, whose
# kernels for the CPU at hand add in their own order: the last bits of a p-value differ between an
# AVX2 and an AVX-512 host. The digests are taken in a process held to one kernel set that every
# x86-64 host with AVX2 runs (and one BLAS thread), so they are the same on every such host.
PINNED_BLAS = {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_NUM_THREADS": "1"}


def test_the_analysis_of_realistic_trees_says_what_it_said(tmp_path):
    env = {**os.environ, **PINNED_BLAS, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), str(tmp_path)], env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout) == PINNED


if __name__ == "__main__":  # print the digests of this code, in a folder given or a temporary one
    import tempfile

    sys.path.insert(0, str(REPO))
    if len(sys.argv) > 1:
        print(json.dumps(digests(Path(sys.argv[1])), indent=4))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(digests(Path(tmp)), indent=4))
