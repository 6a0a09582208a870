"""harness/tracking/tracker.py: what reaches wandb, read back from the offline files; and that a wandb
failure never stops an experiment or loses a result.

Most tests drive the tracker directly with synthetic result dicts (a wandb service start is
~1-2 s); two run the real experiment in a subprocess (offline, and online against a server that
does not answer).
"""

from __future__ import annotations

import copy
import json
import logging
import os
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from harness.tracking import tracker as tracking
from harness.tracking.options import TrackingConfigError
from harness.results import load_steps

from . import wandb_reader

REPO = Path(__file__).resolve().parent.parent
UNREACHABLE = {"WANDB_BASE_URL": "http://127.0.0.1:9", "WANDB_API_KEY": "f" * 40}  # port 9: discard, closed


# -- helpers ------------------------------------------------------------------------------------


def float32_bits(x: float) -> str:
    return format(struct.unpack("<I", struct.pack("<f", x))[0], "08x")


def as_float32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def synthetic_result(seed: int, arm: str, n_steps: int = 5, status: str = "completed") -> dict:
    """A result.json dict as experiment.py writes it (results.py's contract), with made-up numbers."""
    losses = [2.3 / (1 + 0.01 * i) + 0.001 * seed for i in range(n_steps)]
    config = {"experiment_name": "loss_ab", "seed": seed, "arm": arm,
              "loss": {"label_smoothing": 0.1 if arm == "B" else 0.0}, "train": {"epochs": 1}}
    result = {
        "schema": "harness.result/1", "experiment": "loss_ab", "seed": seed, "arm": arm,
        "factor": "loss.label_smoothing", "factor_value": config["loss"]["label_smoothing"],
        "status": status, "error": None,
        "metrics": {"test_accuracy": 97.5 + seed, "test_loss": 0.08, "train_loss": losses[-1],
                    "n_test": 450, "n_train": 1347},
        "fingerprints": {"init": f"{seed:016x}", "data_order": "00000000000000dd", "final": f"{seed + 99:016x}",
                         "steps": {"loss": [float32_bits(v) for v in losses], "params": ["0" * 16] * n_steps}},
        "pairing": {"init": True, "data_order": True},
        "curve": {"step": [n_steps], "train_loss": [losses[-1]]},
        "env": {"torch": "2.14.1", "threads": 2, "device": "cpu"},
        "timing": {"train_seconds": 1.25, "steps": n_steps, "steps_per_s": n_steps / 1.25,
                   "ms_per_step": 1250 / n_steps, "total_seconds": 1.5},
        "config": config, "config_hash": "c" * 16, "base_hash": "b" * 16,
        "code_version": "0.1.0+test", "created": "2026-01-01T00:00:00+00:00",
    }
    if status == "failed":
        result["error"] = {"type": "NonFiniteLoss", "message": "loss became nan at step 3", "step": 3}
        result["metrics"] = {}
        result["fingerprints"]["steps"]["loss"] = result["fingerprints"]["steps"]["loss"][:2]
    return result


# The shape of harness/analysis/analyze.py's analysis.json, trimmed to what the tracker reads.
ANALYSIS = {
    "schema": "harness.analysis/1", "experiment": "loss_ab", "factor": "loss.label_smoothing",
    "metric": "test_accuracy", "baseline": "A", "alpha": 0.05,
    "margin": {"value": 0.5, "source": "given", "description": "0.5 pts"},
    "arms": {"A": {"n": 3, "mean": 97.5}, "B": {"n": 3, "mean": 98.0}},
    "comparisons": {"B": {
        "arm": "B", "baseline": "A", "n_pairs": 3, "mean_baseline": 97.5, "mean_arm": 98.0, "mean_diff": 0.5,
        "t": {"pvalue": 0.04, "ci": [0.1, 0.9]}, "bootstrap": {"ci": [0.2, 0.8]},
        "wilcoxon": {"pvalue": 0.25}, "permutation": {"pvalue": 0.25}, "holm": {"t": 0.04},
        "minimum_effect": {"pvalue": 0.5}, "tost": {"pvalue": 0.6}, "d_z": 2.1,
        "verdict": {"code": "differs", "sentence": "B differs from A by +0.5 pts."},
        "pairs": [[0, 97.0, 97.5], [1, 97.5, 98.0], [2, 98.0, 98.5]],
    }},
    "excluded": [],
}


def wandb_config(mode=None, init_timeout=30.0, history_every=1):
    return OmegaConf.create({"logger": {"name": "wandb", "wandb": {
        "project": None, "entity": None, "mode": mode, "init_timeout": init_timeout, "tags": [],
        "history_every": history_every}}})


def wandb_children() -> list[int]:
    """pids of wandb service processes started by this process."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            name, rest = stat.read_text().rsplit(")", 1)
        except OSError:
            continue
        if name.endswith("(wandb-core") and int(rest.split()[1]) == os.getpid():
            found.append(int(stat.parent.name))
    return found


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No WANDB_* from the caller's shell, and a fresh $HOME to prove nothing is written there."""
    for var in list(os.environ):
        if var.startswith("WANDB_"):
            monkeypatch.delenv(var)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture
def trackers():
    """Open trackers, closed at the end even when a test fails half-way."""
    opened = []
    yield opened
    for t in opened:
        t.close()


def open_tracker(trackers, cfg, out: Path):
    t = tracking.open_tracker(cfg, out, group="loss_ab:test")
    trackers.append(t)
    return t


def open_tracker_from_config(trackers, cfg, out: Path, sweep_root=None):
    """A tracker whose group comes from the config and the environment, as in the real runs."""
    t = tracking.open_tracker(cfg, out, sweep_root=sweep_root)
    trackers.append(t)
    return t


def subprocess_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(PYTHONPATH=str(REPO), **extra)
    return env


def run_harness(out: Path, *overrides: str, env: dict) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "harness", "+experiment=loss_ab", "ab.seeds=[0,1,2]", "train.epochs=1",
           f"hydra.run.dir={out}", "progress=false", "logger.wandb.history_every=1",
           "determinism.threads=1", *overrides]  # auto could pin 2 threads, then share the cores (the thread trap)
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


# -- the tracker, driven directly ----------------------------------------------------------------


def test_runs_and_analysis_read_back_from_offline_files(clean_env, trackers, tmp_path):
    out = tmp_path / "exp"
    results = [synthetic_result(0, "A", n_steps=600), synthetic_result(0, "B"),
               synthetic_result(1, "A", status="failed")]
    (out / "runs").mkdir(parents=True)
    for r in results:
        folder = out / "runs" / f"seed={r['seed']}" / f"arm={r['arm']}"
        folder.mkdir(parents=True)
        (folder / "result.json").write_text(json.dumps(r))
    (out / "analysis.json").write_text(json.dumps(ANALYSIS))
    (out / "report.md").write_text("# report\n")

    tracker = open_tracker(trackers, wandb_config(), out)
    for r in results:
        tracker.log_run(copy.deepcopy(r))
    tracker.log_analysis(ANALYSIS, out)
    assert tracker.close() == []
    assert wandb_children() == []  # the service is gone
    assert "WANDB_CACHE_DIR" not in os.environ  # restored for the next job in this process
    assert not any(clean_env.rglob("*")), "wandb wrote under $HOME"

    runs = {r.name: r for r in wandb_reader.read_runs(out / "wandb")}
    assert set(runs) == {"seed=0 arm=A", "seed=0 arm=B", "seed=1 arm=A", "analysis"}

    first = runs["seed=0 arm=A"]
    # 600 steps of history make the file span several 32 KiB blocks (records split across them)
    assert first.path.stat().st_size > 2 * wandb_reader.BLOCK
    assert (first.project, first.group, first.job_type) == ("harness", "loss_ab:test", "A")
    assert first.config["loss"] == {"label_smoothing": 0.0}
    assert (first.config["seed"], first.config["arm"], first.config["factor_value"]) == (0, "A", 0.0)
    assert first.config["env"] == results[0]["env"]
    losses = [row["train/loss"] for row in first.history if "train/loss" in row]
    assert [row["_step"] for row in first.history] == list(range(1, 601))
    expected = [as_float32(2.3 / (1 + 0.01 * i)) for i in range(600)]
    assert losses == expected  # bit-exact: decoded from the float32 bits, not from a rounded value
    assert first.history[-1]["metrics/test_accuracy"] == 97.5
    assert all("metrics/test_accuracy" not in row for row in first.history[:-1])
    s = first.summary
    assert s["status"] == "completed"
    assert (s["metrics/test_accuracy"], s["metrics/n_test"]) == (97.5, 450)
    assert s["fingerprints/init"] == "0000000000000000"
    assert s["fingerprints/data_order"] == "00000000000000dd"
    assert s["fingerprints/final"] == f"{99:016x}"
    assert (s["timing/train_seconds"], s["timing/steps"]) == (1.25, 600)
    assert first.exit_code == 0

    failed = runs["seed=1 arm=A"]
    assert failed.summary["status"] == "failed"
    assert failed.summary["error"]["message"] == "loss became nan at step 3"
    assert failed.exit_code == 1
    assert [row["_step"] for row in failed.history] == [1, 2]  # the steps it took before failing

    analysis = runs["analysis"]
    assert analysis.job_type == "analysis" and analysis.group == "loss_ab:test"
    table = analysis.table("comparisons")
    row = dict(zip(table["columns"], table["data"][0]))
    assert len(table["data"]) == 1
    assert row["arm"] == "B" and row["baseline"] == "A" and row["n"] == 3
    assert (row["mean_diff"], row["ci_low"], row["ci_high"]) == (0.5, 0.1, 0.9)
    assert (row["p_t"], row["p_wilcoxon"], row["verdict"]) == (0.04, 0.25, "differs")
    assert analysis.summary["verdict"] == "differs"
    assert analysis.summary["verdict_sentence"] == "B differs from A by +0.5 pts."
    assert analysis.summary["B_vs_A/ci_high"] == 0.9
    assert analysis.config["margin"]["value"] == 0.5
    [artifact] = [a for a in analysis.artifacts if a["type"] == "analysis"]
    assert sorted(artifact["files"]) == sorted(
        ["analysis.json", "report.md", "runs/seed=0/arm=A/result.json", "runs/seed=0/arm=B/result.json",
         "runs/seed=1/arm=A/result.json"])


def test_reader_rejects_a_corrupted_record(clean_env, trackers, tmp_path):
    tracker = open_tracker(trackers, wandb_config(), tmp_path)
    tracker.log_run(synthetic_result(0, "A"))
    tracker.close()
    [path] = list((tmp_path / "wandb").rglob("run-*.wandb"))
    assert wandb_reader.read_run(path).name == "seed=0 arm=A"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(wandb_reader.WandbFileError, match="CRC|order"):
        wandb_reader.read_run(path)


@pytest.mark.slow
def test_online_failure_goes_offline_once_and_names_the_runs(clean_env, trackers, tmp_path, monkeypatch):
    for var, value in UNREACHABLE.items():
        monkeypatch.setenv(var, value)
    import wandb

    modes = []
    real_init = wandb.init
    monkeypatch.setattr(wandb, "init", lambda **kw: modes.append(kw["mode"]) or real_init(**kw))
    tracker = open_tracker(trackers, wandb_config(mode="online", init_timeout=3), tmp_path)
    for seed in range(3):
        tracker.log_run(synthetic_result(seed, "A"))
    warnings = tracker.close()

    assert modes == ["online", "offline", "offline", "offline"]  # online tried once, never again
    assert len(warnings) == 1
    assert "not logged online" in warnings[0]
    assert all(f"seed={s} arm=A" in warnings[0] for s in range(3))
    assert "wandb sync" in warnings[0]
    names = sorted(r.name for r in wandb_reader.read_runs(tmp_path / "wandb"))
    assert names == ["seed=0 arm=A", "seed=1 arm=A", "seed=2 arm=A"]
    assert wandb_children() == []


def test_wandb_that_cannot_start_gives_up_once_and_never_raises(clean_env, trackers, tmp_path, monkeypatch):
    import wandb

    calls = []

    def broken_init(**kw):
        calls.append(kw["name"])
        raise OSError("the service could not start")

    monkeypatch.setattr(wandb, "init", broken_init)
    tracker = open_tracker(trackers, wandb_config(), tmp_path)
    tracker.log_run(synthetic_result(0, "A"))
    tracker.log_run(synthetic_result(0, "B"))
    tracker.log_analysis(ANALYSIS, tmp_path)
    [warning] = tracker.close()
    assert calls == ["seed=0 arm=A"]
    assert "OSError: the service could not start" in warning
    assert "seed=0 arm=A, seed=0 arm=B, analysis" in warning


def test_a_run_that_fails_to_log_is_finished_and_the_next_one_is_logged(clean_env, trackers, tmp_path):
    bad = synthetic_result(0, "A")
    bad["fingerprints"]["steps"]["loss"][1] = "not-hex!"
    tracker = open_tracker(trackers, wandb_config(), tmp_path)
    tracker.log_run(bad)
    tracker.log_run(synthetic_result(0, "B"))
    [warning] = tracker.close()
    assert "seed=0 arm=A was logged only in part" in warning
    assert str(tmp_path / "runs" / "seed=0" / "arm=A" / "result.json") in warning  # names the file
    runs = {r.name: r for r in wandb_reader.read_runs(tmp_path / "wandb")}
    assert runs["seed=0 arm=A"].exit_code == 1
    assert runs["seed=0 arm=B"].exit_code == 0 and len(runs["seed=0 arm=B"].history) == 5


def test_disabled_mode_writes_nothing(clean_env, trackers, tmp_path):
    tracker = open_tracker(trackers, wandb_config(mode="disabled"), tmp_path)
    tracker.log_run(synthetic_result(0, "A"))
    tracker.log_analysis(ANALYSIS, tmp_path)
    assert tracker.close() == []
    assert not list(tmp_path.rglob("*.wandb"))


def test_precedence_config_over_environment_over_default(tmp_path):
    out = tmp_path / "out"
    opts = tracking.resolve_options(wandb_config(), out, environ={})
    assert (opts["mode"], opts["project"], opts["dir"]) == ("offline", "harness", out.absolute())
    assert opts["settings"]["console"] == "off"

    env = {"WANDB_MODE": "online", "WANDB_PROJECT": "p", "WANDB_DIR": "/elsewhere", "WANDB_CONSOLE": "wrap",
           "WANDB__DISABLE_STATS": "false"}
    opts = tracking.resolve_options(wandb_config(), out, environ=env)
    assert (opts["mode"], opts["project"], opts["dir"]) == ("online", "p", Path("/elsewhere"))
    assert "console" not in opts["settings"] and "x_disable_stats" not in opts["settings"]

    explicit = wandb_config(mode="disabled")
    explicit.logger.wandb.project = "mine"
    opts = tracking.resolve_options(explicit, out, environ=env)
    assert (opts["mode"], opts["project"]) == ("disabled", "mine")

    assert tracking.resolve_options(wandb_config(), out, environ={"WANDB_MODE": "dryrun"})["mode"] == "offline"
    assert tracking.resolve_options(wandb_config(), out, environ={"WANDB_DISABLED": "true"})["mode"] == "disabled"


def test_logger_none_never_imports_wandb(tmp_path):
    code = (
        "import sys; from omegaconf import OmegaConf; from harness import tracking\n"
        "t = tracking.open_tracker(OmegaConf.create({'logger': {'name': 'none'}}), sys.argv[1], group='g')\n"
        "t.log_run({'seed': 0, 'arm': 'A'}); t.log_analysis({}, sys.argv[1])\n"
        "assert t.close() == [] and type(t).__name__ == 'NullTracker'\n"
        "assert 'wandb' not in sys.modules, 'wandb was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=REPO, env=subprocess_env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


# -- the real experiment ------------------------------------------------------------------------


@pytest.mark.slow
def test_experiment_offline_end_to_end(tmp_path):
    out = tmp_path / "exp"
    done = run_harness(out, env=subprocess_env(HOME=str(tmp_path / "home")))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not [line for line in (done.stdout + done.stderr).splitlines() if "WARNING" in line and "wandb" in line]
    assert not list((tmp_path / "home").rglob("*wandb*")), "wandb wrote under $HOME"

    runs = {r.name: r for r in wandb_reader.read_runs(out / "wandb")}
    assert set(runs) == {f"seed={s} arm={a}" for s in range(3) for a in "AB"} | {"analysis"}
    result = json.loads((out / "runs" / "seed=1" / "arm=B" / "result.json").read_text())
    run = runs["seed=1 arm=B"]
    assert run.job_type == "B" and run.group == runs["analysis"].group
    assert run.config["loss"]["label_smoothing"] == 0.1 and run.config["env"] == result["env"]
    steps = load_steps(result)["loss"]  # result.json packs them (harness.result/2)
    assert [row["_step"] for row in run.history] == list(range(1, len(steps) + 1))
    assert [float32_bits(row["train/loss"]) for row in run.history] == steps
    assert run.summary["metrics/test_accuracy"] == result["metrics"]["test_accuracy"]
    assert run.summary["fingerprints/final"] == result["fingerprints"]["final"]

    analysis = json.loads((out / "analysis.json").read_text())
    [comparison] = tracking.comparisons_of(analysis)
    table = runs["analysis"].table("comparisons")
    row = dict(zip(table["columns"], table["data"][0]))
    assert row["verdict"] == comparison["verdict"]["code"] == runs["analysis"].summary["verdict"]
    assert row["mean_diff"] == comparison["mean_diff"]
    assert runs["analysis"].summary["figure"]["_type"] == "image-file"


def _online_attempts(root: Path) -> list[Path]:
    """Every online attempt wandb made under a tree: each leaves a wandb/run-<date>-<id>/ folder
    (an offline run is an offline-run-*/ folder instead)."""
    return [p for p in root.rglob("wandb/run-*") if p.is_dir()]


@pytest.mark.slow
def test_unreachable_server_is_paid_once_per_sweep_and_loses_no_result(tmp_path):
    sweep = tmp_path / "sweep"
    # two jobs (one per arm, three seeds each), each with its own tracker, then the sweep's analysis
    cmd = [sys.executable, "-m", "harness", "-m", "+experiment=loss_ab", "ab.seeds=[0,1,2]", "arm=A,B",
           "train.max_steps=10", "data.train_limit=256", "progress=false", "repro.certificate=false",
           "logger.wandb.mode=online", "logger.wandb.init_timeout=3", "determinism.threads=1", f"hydra.sweep.dir={sweep}"]
    done = subprocess.run(cmd, cwd=REPO, env=subprocess_env(HOME=str(tmp_path / "home"), **UNREACHABLE),
                          capture_output=True, text=True, timeout=600)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    for s in range(3):
        for a in "AB":
            result = json.loads(next(sweep.glob(f"*/runs/seed={s}/arm={a}/result.json")).read_text())
            assert result["status"] == "completed"
    for name in ("analysis.json", "report.md", "analysis.png"):
        assert (sweep / name).is_file()
    # the timeout was paid once: one online attempt in the whole sweep (2 jobs and the sweep's
    # analysis), not one per job; test_online_gate_* covers jobs that start at once (a pool)
    attempts = _online_attempts(sweep)
    assert len(attempts) == 1, attempts
    # said once, when it happened, and one `wandb sync` hint for the whole sweep at its end
    assert log.count("could not start a run online") == 1, log[-4000:]
    [hint] = [line for line in log.splitlines() if "wandb sync" in line]
    assert "this sweep could not log online" in hint and "its 7 run(s) were logged offline" in hint
    assert f"{sweep}/wandb/offline-run-*" in hint and f"{sweep}/*/wandb/offline-run-*" in hint
    # what did not go online went offline, ready for `wandb sync`
    runs = wandb_reader.read_runs(sweep)
    assert sorted(r.name for r in runs) == sorted([f"seed={s} arm={a}" for s in range(3) for a in "AB"] + ["analysis"])
    assert len({r.group for r in runs}) == 1
    assert not list(sweep.rglob("harness-online-*")), "the sweep's end removes its shared state"


def test_online_gate_jobs_at_once_wait_for_the_one_that_tries(tmp_path):
    """Jobs of a pool start together: one tries online, the others wait for its outcome."""
    first, second, later = (tracking.OnlineGate(tmp_path, "s1", wait_s=60) for _ in range(3))
    assert first.decide() == ("try", None) and first.probing
    answer = []
    waiter = threading.Thread(target=lambda: answer.append(second.decide()))
    waiter.start()
    first.record(False, "CommError: timed out", tmp_path / "0")
    waiter.join(timeout=30)
    assert not waiter.is_alive()
    [(verdict, why)] = answer
    assert verdict == "offline" and "CommError: timed out" in why and str(first.state_file) in why
    assert later.decide()[0] == "offline" and not second.probing and not later.probing
    # another sweep (another id) in the same folder does not read this sweep's outcome
    assert tracking.OnlineGate(tmp_path, "s2", wait_s=60).decide() == ("try", None)
    # and without a sweep id (a single run) there is nothing to share
    assert tracking.OnlineGate(tmp_path, None, wait_s=60).decide() == ("try", None)


def test_group_is_stable_and_config_beats_wandb_variables_beats_default(tmp_path, monkeypatch):
    folder = tmp_path / "multirun" / "loss_ab" / "default"
    folder.mkdir(parents=True)
    cfg = wandb_config()
    cfg.experiment_name = "loss_ab"
    groups = set()
    for cwd in (tmp_path, folder, folder.parent):  # the same folder seen from three directories
        monkeypatch.chdir(cwd)
        groups.add(tracking.resolve_options(cfg, Path(os.path.relpath(folder)), environ={})["group"])
    [group] = groups
    assert group.startswith("loss_ab:default:") and len(group) <= 128 and ".." not in group
    other = tmp_path / "elsewhere" / "default"  # another folder of the same name: another group
    assert tracking.resolve_options(cfg, other, environ={})["group"] != group
    # a job of a sweep is grouped with its sweep
    assert tracking.resolve_options(cfg, folder / "3", environ={}, sweep_root=folder)["group"] == group

    env = {"WANDB_RUN_GROUP": "env-group", "WANDB_NAME": "env-name", "WANDB_JOB_TYPE": "env-job"}
    opts = tracking.resolve_options(cfg, folder, environ=env)
    assert (opts["group"], opts["name_prefix"], opts["job_type"]) == ("env-group", "env-name", "env-job")
    cfg.logger.wandb.group, cfg.logger.wandb.name = "cfg-group", "cfg-name"
    opts = tracking.resolve_options(cfg, folder, environ=env)
    assert (opts["group"], opts["name_prefix"]) == ("cfg-group", "cfg-name")


@pytest.mark.parametrize("key, value, allowed", [
    ("group", "g" * 129, "at most 128 characters"),
    ("name", "", "non-empty string"),
    ("tags", ["ok", "t" * 65], "at most 64 characters"),
    ("init_timeout", 0, "> 0"),
    ("history_every", 0, ">= 1"),
])
def test_bad_wandb_settings_are_refused_naming_the_key(tmp_path, key, value, allowed):
    cfg = wandb_config()
    cfg.logger.wandb[key] = value
    with pytest.raises(TrackingConfigError) as refused:
        tracking.open_tracker(cfg, tmp_path)
    assert f"logger.wandb.{key}=" in str(refused.value) and allowed in str(refused.value)


def test_wandb_variables_reach_the_runs_unless_the_config_sets_them(clean_env, trackers, tmp_path, monkeypatch):
    for var, value in {"WANDB_RUN_GROUP": "env-group", "WANDB_NAME": "nightly", "WANDB_JOB_TYPE": "train"}.items():
        monkeypatch.setenv(var, value)
    tracker = open_tracker_from_config(trackers, wandb_config(), tmp_path / "env")
    tracker.log_run(synthetic_result(0, "A"))
    assert tracker.close() == []
    [run] = wandb_reader.read_runs(tmp_path / "env" / "wandb")
    assert (run.group, run.name, run.job_type) == ("env-group", "nightly seed=0 arm=A", "train")

    cfg = wandb_config()
    cfg.logger.wandb.group, cfg.logger.wandb.name, cfg.logger.wandb.tags = "mine", "cfg", ["a", "b"]
    tracker = open_tracker_from_config(trackers, cfg, tmp_path / "cfg")
    tracker.log_run(synthetic_result(0, "A"))
    assert tracker.close() == []
    [run] = wandb_reader.read_runs(tmp_path / "cfg" / "wandb")
    assert (run.group, run.name, run.tags) == ("mine", "cfg seed=0 arm=A", ["a", "b"])


def test_one_analysis_run_per_results_folder_a_rerun_replaces_it(clean_env, trackers, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="harness")
    first = copy.deepcopy(ANALYSIS)
    second = copy.deepcopy(ANALYSIS)
    second["comparisons"]["B"]["verdict"] = {"code": "equivalent", "sentence": "B is equivalent to A."}
    for analysis in (first, second):  # the first run, then a resume of the same folder
        tracker = open_tracker_from_config(trackers, wandb_config(), tmp_path)
        tracker.log_analysis(analysis, tmp_path)
        assert tracker.close() == []
    [run] = wandb_reader.read_runs(tmp_path / "wandb")
    assert run.name == "analysis" and run.run_id == f"analysis-{tracking.folder_id(tmp_path)}"
    assert run.summary["verdict"] == "equivalent"
    assert sum("replaces its earlier offline copy" in r.getMessage() for r in caplog.records) == 1


def test_a_sweep_of_offline_jobs_gives_one_sync_hint(clean_env, trackers, tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="harness")
    monkeypatch.setenv(tracking.SWEEP_ENV, "test-sweep")
    for job in range(2):  # two jobs of a sweep (each in its own folder), then the sweep's analysis
        tracker = open_tracker_from_config(trackers, wandb_config(), tmp_path / str(job), sweep_root=tmp_path)
        tracker.log_run(synthetic_result(job, "A"))
        assert tracker.close() == []
    tracker = open_tracker_from_config(trackers, wandb_config(), tmp_path, sweep_root=tmp_path)
    tracker.log_analysis(ANALYSIS, tmp_path)
    assert tracker.close() == []
    [hint] = [r.getMessage() for r in caplog.records if "wandb sync" in r.getMessage()]
    assert "3 run(s) of this sweep" in hint
    assert f"{tmp_path}/wandb/offline-run-*" in hint and f"{tmp_path}/*/wandb/offline-run-*" in hint


def test_history_every_thins_the_loss_curve_but_keeps_the_last_step(trackers, tmp_path):
    tracker = open_tracker(trackers, wandb_config(history_every=10), tmp_path)
    tracker.log_run(synthetic_result(0, "A", n_steps=35))
    assert tracker.close() == []
    (run,) = wandb_reader.read_runs(tmp_path / "wandb")
    assert [row["_step"] for row in run.history] == [10, 20, 30, 35]
    assert run.history[-1]["metrics/test_accuracy"] == 97.5
