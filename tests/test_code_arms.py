"""Code versions as arms (ab.factor=code): two revisions of a researcher's project, paired by seed.

Every test makes a scratch git repository of its own in tmp_path: a tiny project whose training
function is written against harness.Run, committed, then changed."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import harness
from harness import HarnessError

from .conftest import REPO, run_cli

FIT = textwrap.dedent('''
    """A tiny classifier: the scratch project's training function."""
    import json
    import os

    import torch

    from harness import Run, TensorBatches

    MARKER = 1


    def _edit_once():
        """The test's hook: rewrite a file of the live tree while the experiment runs."""
        edit = os.environ.pop("CODE_ARMS_EDIT", None)
        if edit:
            spec = json.loads(edit)
            with open(spec["path"], "w") as f:
                f.write(spec["text"])


    def fit(cfg, run: Run) -> dict:
        _edit_once()
        g = torch.Generator().manual_seed(0)  # the same data for every seed and arm
        x = torch.randn(96, 4, generator=g)
        y = (x.sum(1) > 0).long()
        loader = run.loader(TensorBatches(x, y), batch_size=16)
        with run.init():
            model = torch.nn.Linear(4, 2)
        run.watch(model, total_steps=6)
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        step = 0
        for xb, yb in loader:
            loss = LOSS
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            run.step(loss)
            step += 1
            if step == 6:
                break
        with torch.no_grad():
            final = torch.nn.functional.cross_entropy(model(x), y).item()
        return {"final_loss": final, "marker": MARKER}
''')
PLAIN_LOSS = "torch.nn.functional.cross_entropy(model(xb), yb)"
SMOOTHED = "torch.nn.functional.cross_entropy(model(xb), yb, label_smoothing=0.2)"
REFACTORED = "_loss(model, xb, yb)\n\n\ndef _loss(model, xb, yb):\n    return torch.nn.functional.cross_entropy(model(xb), yb)\n"

CONF = textwrap.dedent('''
    # @package _global_
    experiment_name: code_ab
    train:
      fn: proj.fit.fit
      max_steps: 6
    stats:
      metric: final_loss
      margin: null
      metrics:
        final_loss: min
        marker: max
    ab:
      factor: code
      arms: {A: main, B: WORKTREE}
      seeds: [0, 1, 2]
    determinism:
      threads: 1
''')
FAST = ["logger=none", "progress=false", "workers=1", "determinism.threads=1",
        "repro.certificate=false"]


def _fit(loss: str, marker: int = 1) -> str:
    text = FIT.replace("MARKER = 1", f"MARKER = {marker}")
    if loss == REFACTORED:
        head, tail = REFACTORED.split("\n", 1)
        return text.replace("loss = LOSS", f"loss = {head}") + tail
    return text.replace("LOSS", loss)


def _git(repo: Path, *args) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A scratch repository: proj/fit.py committed on main, the launch folder, on sys.path."""
    repo = tmp_path / "project"
    (repo / "proj").mkdir(parents=True)
    (repo / "proj" / "__init__.py").write_text("")
    (repo / "proj" / "fit.py").write_text(_fit(PLAIN_LOSS))
    (repo / "conf" / "experiment").mkdir(parents=True)
    (repo / "conf" / "experiment" / "code_ab.yaml").write_text(CONF)
    (repo / ".gitignore").write_text("data/\noutputs/\n__pycache__/\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "plain loss")
    monkeypatch.chdir(repo)
    monkeypatch.syspath_prepend(str(repo))
    yield repo
    for name in [m for m in sys.modules if m == "proj" or m.startswith("proj.")]:
        del sys.modules[name]


def _run(repo: Path, *overrides, out="outputs/exp", experiment="code_ab"):
    return harness.run([f"+experiment={experiment}", *FAST, *overrides], config_dir=repo / "conf", out_dir=repo / out, verbose=False)


def _code(result: dict) -> dict:
    return result["code"]["code_arm"]


@pytest.mark.slow
def test_two_commits_differing_in_a_loss_term_give_a_verdict_with_both_commits(project, caplog):
    caplog.set_level(logging.DEBUG, logger="harness")
    first = _git(project, "rev-parse", "HEAD")
    (project / "proj" / "fit.py").write_text(_fit(SMOOTHED))
    _git(project, "commit", "-qam", "label smoothing")
    second = _git(project, "rev-parse", "HEAD")
    (project / "proj" / "fit.py").write_text(_fit(PLAIN_LOSS, marker=9))  # the live tree: in neither arm
    done = _run(project, f"ab.arms={{A: '{first}', B: main}}")
    by_arm = {r["arm"]: r for r in done.results}
    assert _code(by_arm["A"])["commit"] == first and _code(by_arm["B"])["commit"] == second
    assert {r["metrics"]["marker"] for r in done.results} == {1}  # the commits ran, not the live tree
    comparison = done.analysis["comparisons"]["B"]
    assert comparison["verdict"]["code"] != "identical" and comparison["mean_diff"] > 0  # smoothing raises the loss
    assert done.analysis["pairing_verified"] == ["init", "data_order"]  # equal fingerprints prove the pairing
    assert any(m.startswith("code arms A and B: the numerics differ, first at seed 0 step 1 (loss")
               for m in caplog.messages), caplog.messages
    assert by_arm["A"]["config_hash"] != by_arm["B"]["config_hash"]
    assert by_arm["A"]["base_hash"] == by_arm["B"]["base_hash"]  # everything else equal across arms
    snapshot = project / "outputs" / "exp" / _code(by_arm["B"])["folder"]
    assert "label_smoothing=0.2" in (snapshot / "proj" / "fit.py").read_text()
    assert (snapshot / "proj" / "fit.py").stat().st_mode & 0o222 == 0  # read-only


@pytest.mark.slow
def test_a_pure_refactor_gives_identical(project, caplog):
    (project / "proj" / "fit.py").write_text(_fit(REFACTORED))
    caplog.set_level(logging.DEBUG, logger="harness")
    done = _run(project, out="results/exp")
    assert "code arms A and B: bit-identical numerics: every step's loss and parameters and the final weights " \
           "equal (18 steps compared, in 3 seed(s))" in caplog.messages
    comparison = done.analysis["comparisons"]["B"]
    assert comparison["verdict"]["code"] == "identical"
    assert comparison["final_weights_identical"] is True
    assert _code(next(r for r in done.results if r["arm"] == "B"))["changes"].keys() == {"proj/fit.py"}
    caplog.clear()
    _run(project, out="results/exp")  # a results folder git does not ignore is no part of WORKTREE
    assert not [m for m in caplog.messages if "rerun" in m]
    assert sum(": skipped, " in m for m in caplog.messages) == 6


@pytest.mark.slow
def test_worktree_takes_untracked_files_and_later_edits_do_not_leak(project, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG, logger="harness")
    (project / "proj" / "extra.py").write_text("MARKER = 2\n")  # untracked, not ignored
    (project / "proj" / "fit.py").write_text(_fit(PLAIN_LOSS).replace("MARKER = 1", "from proj.extra import MARKER"))
    # the first unit (seed 0, arm A) edits the live tree: the WORKTREE arm's later units must not see it
    edited = _fit(PLAIN_LOSS, marker=3)
    monkeypatch.setenv("CODE_ARMS_EDIT", json.dumps({"path": str(project / "proj" / "fit.py"), "text": edited}))
    done = _run(project)
    markers = {(r["seed"], r["arm"]): r["metrics"]["marker"] for r in done.results}
    assert markers == {(s, a): {"A": 1, "B": 2}[a] for s in (0, 1, 2) for a in "AB"}
    assert (project / "proj" / "fit.py").read_text() == edited  # the edit happened, during the run
    before = {(r["seed"], r["arm"]): r["created"] for r in done.results}
    first_b = _code(next(r for r in done.results if r["arm"] == "B"))
    head = _git(project, "rev-parse", "HEAD")[:12]
    assert f"code arm B: WORKTREE = {head} + 2 changed or untracked file(s): proj/extra.py, proj/fit.py; " \
           f"snapshot {first_b['folder']}" in caplog.messages

    caplog.clear()
    again = _run(project)  # relaunched after the edit: only WORKTREE's units run again
    markers = {(r["seed"], r["arm"]): r["metrics"]["marker"] for r in again.results}
    assert markers == {(s, a): {"A": 1, "B": 3}[a] for s in (0, 1, 2) for a in "AB"}
    assert all(r["created"] == before[(r["seed"], "A")] for r in again.results if r["arm"] == "A")
    reruns = [m for m in caplog.messages if "rerun" in m]
    assert len(reruns) == 3 and all("arm=B" in m and "WORKTREE's snapshot" in m and "proj/fit.py" in m
                                    for m in reruns), reruns
    assert any("arm=A: skipped" in m for m in caplog.messages)
    second_b = _code(next(r for r in again.results if r["arm"] == "B"))
    assert second_b["folder"] != first_b["folder"]
    assert (project / "outputs" / "exp" / first_b["folder"]).is_dir()  # the earlier snapshot is kept


@pytest.mark.slow
def test_a_command_arm_runs_its_revisions_script_with_the_users_data(project):
    (project / "data").mkdir()
    (project / "data" / "value.txt").write_text("5")  # ignored by git: read from the user's tree
    script = textwrap.dedent('''
        import argparse, json, os
        from helper import BONUS
        p = argparse.ArgumentParser(); p.add_argument("--seed", type=int); a = p.parse_args()
        print("score", float(open("data/value.txt").read()) + BONUS + a.seed)
    ''')
    (project / "train.py").write_text(script)
    (project / "helper.py").write_text("BONUS = 0\n")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "a script")
    (project / "helper.py").write_text("BONUS = 100\n")
    (project / "conf" / "experiment" / "code_cmd.yaml").write_text(textwrap.dedent('''
        # @package _global_
        experiment_name: code_cmd
        train:
          cmd: python train.py
          metrics_from: {stdout: {score: 'score ([0-9.]+)'}}
        stats: {metric: score, margin: null, metrics: {score: max}}
        ab: {factor: code, arms: {A: main, B: WORKTREE}, seeds: [0, 1, 2]}
    '''))
    done = _run(project, experiment="code_cmd")
    scores = {(r["seed"], r["arm"]): r["metrics"]["score"] for r in done.results}
    assert scores == {(s, a): 5 + s + {"A": 0, "B": 100}[a] for s in (0, 1, 2) for a in "AB"}


@pytest.mark.parametrize("arms, words", [
    ("{A: main, B: no-such-branch}", "ab.arms.B='no-such-branch': no commit, branch or tag"),
    ("{A: main, B: {x: 1}}", "ab.arms.B={'x': 1} is not a revision"),
])
def test_bad_revisions_are_refused_before_anything_is_written(project, arms, words):
    with pytest.raises(HarnessError, match="ab.arms.B") as e:
        _run(project, f"ab.arms={arms}")
    assert words in str(e.value)
    assert not (project / "outputs").exists()


@pytest.mark.slow
def test_no_git_repository_is_refused_with_exit_2(tmp_path):
    conf = tmp_path / "conf" / "experiment"
    conf.mkdir(parents=True)
    (conf / "code_ab.yaml").write_text(CONF)
    proc = run_cli(["--config-dir", str(tmp_path / "conf"), "+experiment=code_ab", *FAST, f"hydra.run.dir={tmp_path / 'out'}"],
                   cwd=tmp_path, env={"PYTHONPATH": str(REPO), "GIT_CEILING_DIRECTORIES": str(tmp_path.parent)})
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "ab.factor=code compares revisions of a git repository" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_code_set_without_the_code_factor_is_refused(project):
    with pytest.raises(HarnessError, match="code='main' is set, but ab.factor='train.max_steps'"):
        _run(project, "ab.factor=train.max_steps", "ab.arms={A: 5, B: 6}", "code=main")
    assert not (project / "outputs").exists()


def _sweep(project, *overrides, launcher="basic"):
    extra = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"] if launcher == "joblib" else []
    return run_cli(["--config-dir", str(project / "conf"), "-m", "+experiment=code_ab", *FAST, *extra,
                    f"hydra.sweep.dir={project / 'multi'}", *overrides], cwd=project,
                   env={"PYTHONPATH": str(REPO), "CODE_ARMS_EDIT": os.environ.get("CODE_ARMS_EDIT", "")})


def _results_under(folder: Path) -> dict:
    return {(r["seed"], r["arm"]): r for r in (json.loads(p.read_text()) for p in folder.rglob("result.json"))}


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["basic", "joblib"])
def test_a_sweep_over_code_arms_runs_the_snapshots_made_at_launch(project, monkeypatch, launcher):
    """The launching process reads the revisions once; every job (in this process or a joblib worker)
    runs those snapshots: an edit made by the first job does not reach the later ones, and each run's
    fingerprints are those of the same run in one invocation."""
    (project / "proj" / "fit.py").write_text(_fit(SMOOTHED, marker=2))  # WORKTREE: uncommitted
    monkeypatch.setenv("CODE_ARMS_EDIT", json.dumps({"path": str(project / "proj" / "fit.py"),
                                                     "text": _fit(PLAIN_LOSS, marker=3)}))
    proc = _sweep(project, "seed=0,1,2", launcher=launcher)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "code arm B: WORKTREE = " in proc.stderr
    swept = _results_under(project / "multi")
    assert {k: r["metrics"]["marker"] for k, r in swept.items()} == {(s, a): {"A": 1, "B": 2}[a]
                                                                       for s in (0, 1, 2) for a in "AB"}
    assert (project / "proj" / "fit.py").read_text() == _fit(PLAIN_LOSS, marker=3)  # the edit happened
    assert {r["code"]["code_arm"]["folder"] for r in swept.values()} <= {
        f"code/{p.name}" for p in (project / "multi" / "code").iterdir() if p.is_dir()}
    analysis = json.loads((project / "multi" / "analysis.json").read_text())
    assert analysis["comparisons"]["B"]["n_pairs"] == 3 and analysis["pairing_verified"] == ["init", "data_order"]

    (project / "proj" / "fit.py").write_text(_fit(SMOOTHED, marker=2))  # the tree as the sweep saw it
    monkeypatch.delenv("CODE_ARMS_EDIT")
    single = {(r["seed"], r["arm"]): r for r in _run(project).results}
    assert {k: r["fingerprints"] for k, r in swept.items()} == {k: r["fingerprints"] for k, r in single.items()}


@pytest.mark.slow
def test_a_sweep_that_sweeps_the_code_arms_themselves_is_refused_before_any_job(project):
    _git(project, "tag", "v1")
    proc = _sweep(project, "ab.arms.B=WORKTREE,v1")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "was not prepared by this sweep's launching process" in proc.stderr and "No job was launched" in proc.stderr
    assert not list((project / "multi").rglob("result.json"))


@pytest.mark.slow
def test_a_revision_whose_train_fn_cannot_import_is_refused_before_any_unit(project):
    (project / "proj" / "fit.py").write_text(_fit(PLAIN_LOSS).replace("def fit(", "def fit_renamed("))
    with pytest.raises(HarnessError, match="ab.arms.B='WORKTREE', the code of that revision: .*train.fn"):
        _run(project)
    assert not (project / "outputs").exists()


@pytest.mark.slow
def test_a_revision_that_changes_the_init_is_expected_to_differ_not_a_failed_pairing(project):
    (project / "proj" / "fit.py").write_text(_fit(PLAIN_LOSS).replace(
        "model = torch.nn.Linear(4, 2)", "torch.randn(3)\n        model = torch.nn.Linear(4, 2)"))
    done = _run(project)
    assert done.analysis is not None and done.analysis["comparisons"]["B"]["verdict"]["code"] != "identical"
    init = done.analysis["pairing"]["checks"]["init"]
    assert init["state"] == "differs" and "as expected: ab.factor changes it" in init["line"]
    assert done.analysis["pairing"]["checks"]["data_order"]["state"] == "equal"


@pytest.mark.slow
def test_packages_installed_inside_the_project_stay_importable(project, monkeypatch):
    """A virtual environment inside the project (git ignores it) is no part of any snapshot: its
    packages are imported from where they are installed."""
    site = project / ".venv" / "lib" / "site-packages"
    (site / "helperpkg").mkdir(parents=True)
    (site / "helperpkg" / "__init__.py").write_text("MARKER = 7\n")
    (project / ".gitignore").write_text("data/\noutputs/\n__pycache__/\n.venv/\n")
    monkeypatch.syspath_prepend(str(site))
    (project / "proj" / "fit.py").write_text(_fit(PLAIN_LOSS).replace(
        "    _edit_once()\n", "    _edit_once()\n    from helperpkg import MARKER\n"))
    done = _run(project)
    markers = {(r["seed"], r["arm"]): (r["status"], r["metrics"].get("marker")) for r in done.results}
    assert markers == {(s, a): ("completed", {"A": 1, "B": 7}[a]) for s in (0, 1, 2) for a in "AB"}
    sys.modules.pop("helperpkg", None)


def _with_submodule(project: Path) -> Path:
    """proj/fit.py reads MARKER from a git submodule, lib/ (its own repository, committed)."""
    lib = project.parent / "libsrc"
    (lib / "sublib").mkdir(parents=True)
    (lib / "sublib" / "__init__.py").write_text("MARKER = 5\n")
    _git(lib, "init", "-q", "-b", "main")
    _git(lib, "add", "-A")
    _git(lib, "commit", "-q", "-m", "lib")
    _git(project, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    (project / "proj" / "fit.py").write_text(_fit(PLAIN_LOSS).replace(
        "MARKER = 1", "import sys as _sys\n_sys.path.insert(0, __file__.rsplit('/proj/', 1)[0] + '/lib')\n"
                      "from sublib import MARKER"))
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "the marker comes from a submodule")
    return project / "lib"


@pytest.mark.slow
def test_a_submodule_is_part_of_each_arms_snapshot(project):
    lib = _with_submodule(project)
    (lib / "sublib" / "__init__.py").write_text("MARKER = 6\n")  # WORKTREE: an uncommitted edit inside the submodule
    done = _run(project)
    markers = {(r["seed"], r["arm"]): r["metrics"]["marker"] for r in done.results}
    assert markers == {(s, a): {"A": 5, "B": 6}[a] for s in (0, 1, 2) for a in "AB"}
    b = _code(next(r for r in done.results if r["arm"] == "B"))
    assert "lib/sublib/__init__.py" in b["changes"]
    snapshot = project / "outputs" / "exp" / b["folder"]
    assert (snapshot / "lib" / "sublib" / "__init__.py").read_text() == "MARKER = 6\n"


@pytest.mark.slow
def test_a_revision_whose_submodule_is_not_checked_out_is_refused_before_any_unit(project):
    _with_submodule(project)
    _git(project, "submodule", "deinit", "-q", "-f", "lib")
    with pytest.raises(HarnessError, match=r"ab.arms.A='main': its submodule lib is at commit .* git submodule update"):
        _run(project)
    assert not (project / "outputs").exists()
