"""``python -m harness.judge``: one sequential A/B of a candidate revision against a baseline, as one JSON object.

``python -m harness.judge --baseline REV [--candidate WORKTREE|REV] <overrides>`` runs the harness with
``ab.factor=code`` (arm A the baseline's commit, arm B the candidate) and ``ab.sequential.enabled=true``
at the level the ledger's online FDR gives this judgement, then prints one JSON object on stdout and
exits 0 keep, 1 discard, 3 undecided, 2 bad input (one paragraph on stderr, and as "error" in the JSON).
The harness's own output goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from harness import HarnessError
from harness.results import read_json
from harness.tools.judge.baseline import (BASELINE_ARM, CANDIDATE_ARM, baseline_units, config_key, group_folder,
                                          new_judgement_folder, reuse_baseline)
from harness.integrations.revisions.git import RevisionError, revision_digest
from harness.tools.judge.kept import reuse_kept
from harness.tools.judge.online import METHODS, claim_id, ledger_of, reserve, settle, withdraw
from harness.tools.judge.verdict import BAD_INPUT, EXIT, FUTILITY_FROM, FUTILITY_RULE, KEEP, judgement

WORKTREE = "WORKTREE"
# set by the judge: an override of one of them would change what is judged, or how
OWN_KEYS = ("ab.factor", "ab.arms", "stats.baseline", "ab.sequential.enabled", "ab.sequential.alpha", "stats.alpha",
            "stats.fdr",
            "hydra.run.dir", "hydra.sweep.dir", "ledger.path", "ledger.url", "ledger.enabled", "code")


class BadInput(ValueError, HarnessError):
    """The judge cannot run as asked; the message names the argument or key and what is allowed."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise BadInput(f"python -m harness.judge: {message}. Usage: python -m harness.judge --baseline REV "
                       "[--candidate WORKTREE|REV] [--results DIR] [--config-dir DIR] [--ledger PATH] "
                       "[--fdr lord++|saffron|...] [--level 0.1] <hydra overrides>.")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m harness.judge", description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline", required=True, help="the baseline's git revision (a kept candidate's commit, next time)")
    p.add_argument("--candidate", default=WORKTREE, help="WORKTREE (default: the working tree now) or a revision")
    p.add_argument("--results", default="outputs/judge", help="the judgements' folder (default outputs/judge)")
    p.add_argument("--config-dir", default=None, help="the project's Hydra config folder, as for python -m harness")
    p.add_argument("--ledger", default=None, help="the ledger (default $HARNESS_LEDGER, else outputs/ledger.sqlite)")
    p.add_argument("--fdr", default="saffron", help=f"the online FDR method of the stream: {', '.join(METHODS)} "
                   "(addis keeps the most for a new loop: docs/code-arms.md)")
    p.add_argument("--level", type=float, default=0.1, help="the declared FDR level of the keeps (default 0.1)")
    p.add_argument("overrides", nargs="*", help="Hydra overrides, as for python -m harness")
    return p


def _git(*args) -> str:
    done = subprocess.run(["git", *args], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else ""


def _commit(name: str, flag: str) -> str:
    commit = _git("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}")
    if not commit:
        raise BadInput(f"{flag}={name!r}: no commit, branch or tag of the repository has that name. {flag} names a git "
                       "revision (a commit, a branch such as main, a tag)"
                       f"{' or WORKTREE (the working tree as it is now)' if flag == '--candidate' else ''}.")
    return commit


def _checked(args) -> None:
    if args.fdr not in METHODS:
        raise BadInput(f"--fdr={args.fdr!r} is not an online FDR method of the ledger; allowed: {', '.join(METHODS)}.")
    if not 0 < args.level < 1:
        raise BadInput(f"--level={args.level!r} is not an FDR level; give a number between 0 and 1, such as 0.1.")
    for o in args.overrides:
        key = o.split("=", 1)[0].lstrip("+~")
        if any(key == k or key.startswith(k + ".") for k in OWN_KEYS):
            raise BadInput(f"the override {o!r} sets {key}, which the judge sets itself (the arms are --baseline and "
                           "--candidate; the level comes from the ledger: --fdr and --level). Leave it out; allowed "
                           "are the experiment's other keys, ab.sequential.max_seeds and stats.margin among them.")
    if args.config_dir and not Path(args.config_dir).is_dir():
        raise BadInput(f"--config-dir={args.config_dir!r} is not a folder.")
    if not _git("rev-parse", "--show-toplevel"):
        raise BadInput("python -m harness.judge compares revisions of a git repository, but the launch folder "
                       f"{Path.cwd()} is in none. Run it from inside the project's repository.")


def _composes(args, baseline: str, candidate: str):
    """The config the harness will be given, composed here (a misspelt key, a missing group option is
    refused) before the ledger reserves a level, where Hydra's refusal would end the run with exit 1 and
    only its last line ("Set the environment variable HYDRA_FULL_ERROR=1 ...") to say why."""
    from harness.config.compose import compose, compose_error

    try:
        return compose([*args.overrides, "ab.factor=code", f"ab.arms={{A: '{baseline}', B: '{candidate}'}}",
                        "stats.baseline=A", "ab.sequential.enabled=true"], [args.config_dir] if args.config_dir else [])
    except Exception as e:  # noqa: BLE001 - Hydra's and OmegaConf's errors: the overrides do not compose
        raise BadInput(f"the overrides {' '.join(args.overrides) or '(none)'} do not compose a config: "
                       f"{compose_error(e)} Nothing ran and the ledger is unchanged.") from None


def _futility_defaults(overrides, cfg) -> list:
    """The judge's futility rule and its futility-only looks (verdict.py), where the overrides leave them:
    the looks only with the rule "better" and a futility level above 0 in the composed config ``cfg``."""
    given = {o.split("=", 1)[0].lstrip("+~") for o in overrides}
    out = [] if "ab.sequential.futility_rule" in given else [f"ab.sequential.futility_rule={FUTILITY_RULE}"]
    s = cfg.ab.sequential
    rule = s.futility_rule if "ab.sequential.futility_rule" in given else FUTILITY_RULE
    if s.futility_from is None and rule == "better" and s.futility > 0:
        out.append(f"ab.sequential.futility_from={FUTILITY_FROM}")
    return out


def _run_harness(args, folder: Path, baseline: str, candidate: str, alpha_t: float, ledger, cfg) -> tuple[int, str]:
    from harness.config.ledger_spec import is_url

    where = f"ledger.url={ledger}" if is_url(ledger) else f"ledger.path={Path(ledger).resolve()}"
    rule = _futility_defaults(args.overrides, cfg)
    argv = [sys.executable, "-m", "harness", *(["--config-dir", str(Path(args.config_dir).resolve())]
                                                if args.config_dir else []),
            *args.overrides, "ab.factor=code", f"ab.arms={{A: '{baseline}', B: '{candidate}'}}", "stats.baseline=A",
            "ab.sequential.enabled=true", *rule, f"stats.alpha={alpha_t!r}", f"hydra.run.dir={folder}", where]
    # the harness's output, relayed to stderr as it comes (stdout is the judgement's JSON); its last
    # paragraph kept, to say why when it ends without an analysis
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1) as proc:
        tail: list[str] = []
        ended = False  # a blank line ended the paragraph: the next line starts another
        for line in proc.stdout:
            sys.stderr.write(line)
            if line.startswith("Set the environment variable HYDRA_FULL_ERROR"):
                continue  # Hydra's closing hint, not the reason: the paragraph before it is
            if not line.strip():
                ended = True
            else:
                tail, ended = ([] if ended else tail[-20:]) + [line.strip()], False
    return proc.returncode, " ".join(tail)


def judge(argv=None) -> tuple[dict, int]:
    """The judgement's JSON object and exit code. Raises BadInput before anything is written."""
    args = parser().parse_args(argv)
    _checked(args)
    baseline = _commit(args.baseline, "--baseline")
    candidate = WORKTREE if args.candidate == WORKTREE else _commit(args.candidate, "--candidate")
    cfg = _composes(args, baseline, candidate)
    key = config_key(args.overrides, args.config_dir)
    try:  # (read before the ledger reserves a level: a baseline that cannot be read is bad input)
        baseline_digest = revision_digest(_git("rev-parse", "--show-toplevel"), baseline)
    except RevisionError as e:
        raise BadInput(f"--baseline {args.baseline}: {e}") from None
    group = group_folder(Path(args.results), baseline, key)
    ledger = ledger_of(args.ledger)
    folder = new_judgement_folder(group, candidate[:12])
    test = reserve(ledger, folder, "judge", f"{baseline}:{candidate}:{key}:{folder.name}", args.fdr, args.level)
    copied = reuse_baseline(group, folder)
    # a kept WORKTREE candidate committed as this baseline: its units, when the commit holds the judged files
    copied.update(reuse_kept(Path(args.results), key, baseline, baseline_digest, folder, copied))
    rc, said = _run_harness(args, folder, baseline, candidate, test["alpha_t"], ledger, cfg)
    analysis_path = folder / "analysis.json"
    if not analysis_path.is_file():
        if rc == 2 and _nothing_ran(folder, copied) and withdraw(ledger, test["test"]):
            shutil.rmtree(folder)  # only copies of earlier judgements' results and the refused run's logs
            raise BadInput(f"the harness refused the run, so nothing ran: {said or '(it said nothing)'} "
                           "The judgement's ledger level was withdrawn and its folder removed: nothing changed.")
        settle(ledger, test["test"], None, False)
        raise BadInput(f"the harness exited {rc} without an analysis in {folder}: {said or '(it said nothing)'} "
                       f"The judgement's ledger test {test['test']} is settled as not kept.")
    out = judgement(read_json(analysis_path), test["alpha_t"], CANDIDATE_ARM)
    kept = out["verdict"] == KEEP
    settle(ledger, test["test"], out["p"], kept)
    out.update(baseline={"revision": args.baseline, "commit": baseline, "units": baseline_units(folder, copied, out["seeds"])},
               candidate={"revision": args.candidate, "commit": None if candidate == WORKTREE else candidate},
               ledger={**test, "claim_id": claim_id(ledger, folder)}, results=str(folder.resolve()))
    return out, EXIT[out["verdict"]]


def _nothing_ran(folder: Path, copied: dict) -> bool:
    """Whether every result in ``folder`` is one the judge copied in unchanged (no unit of its own ran)."""
    results = list((folder / "runs").glob("seed=*/arm=*/result.json"))

    def copied_unchanged(r: Path) -> bool:
        seed = int(r.parent.parent.name.split("=", 1)[1])
        return r.parent.name == f"arm={BASELINE_ARM}" and copied.get(seed) == r.read_bytes()
    return len(results) == len(copied) and all(copied_unchanged(r) for r in results)


def main(argv=None) -> int:
    try:
        out, code = judge(argv)
    except BadInput as e:
        print(f"harness.judge: {e}", file=sys.stderr)
        print(json.dumps({"verdict": None, "error": str(e)}))
        return BAD_INPUT
    print(json.dumps(out, default=str))
    return code
