"""The one adaptive loop: read the results, hold the identity, look, write the state, launch the next batch.

Every adaptive run -- the sequential mode and the race, in one process or through Hydra's launcher --
is this loop with a policy (sequential_policy.py, race_policy.py: what a look decides, which state
file it writes, what runs next) and a launcher (in_process.py's units, or the sweepers' jobs in
hydra_plugins/harness_sweeper/hydra_launcher.py). The rules that end a run are defined here once:

- identity: a result or the code on disk of another identity than the run's (identity_watch.py)
  stops it with the looks as they stood before; nothing is analysed (a look would mix identities);
- stall: a batch that left no new result file and no new failed job would repeat forever: the run
  stops, the results kept;
- failure budget: failed runs (recorded in their result files) plus jobs that failed without
  leaving a result, past the policy's max_failures, stop the run;
- whatever ends the loop otherwise (Ctrl-C, an error) leaves the state file "stopped", with why.

A stopped run keeps its results, its state file says "stopped" and why, the caller analyses what
is there (except after an identity stop) and exits non-zero with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional


@dataclass
class Ended:
    """How the loop ended: the last plan (``plan.stopped`` says why it is unsettled), the results
    under the folder, the state block written last, and the identity stop's message if that ended it."""

    plan: object
    loaded: list
    block: Optional[dict]
    identity: Optional[str] = None


def load(root: Path) -> list:
    from harness.results import load_tree

    return load_tree(root).results if root.exists() else []


def stall_problem(root: Path, hint: str, unrecorded: list) -> str:
    """The stall rule's message: a batch that left nothing new would be launched again and again."""
    failed = f" ({'; '.join(unrecorded[-3:])})" if unrecorded else ""
    return f"the last batch left no new result file under {root}{failed}; {hint}"


def budget_problem(p_failed: list, unrecorded: list, budget: int, key: str) -> Optional[str]:
    """The failure budget over both kinds of failure; None within it (or when no job failed without a
    result: the policy's plan names the failed runs past the budget itself)."""
    if not unrecorded or len(unrecorded) + len(p_failed) <= budget:
        return None
    return (f"{len(unrecorded)} job(s) failed before writing a result ({'; '.join(unrecorded[:3])}) and "
            f"{len(p_failed)} run(s) failed, more than {key}={budget}. Fix the cause and run the same "
            f"command again.")


def run_loop(policy, launcher, root: Path, watch, say: Callable[[str], None],
             storage: Callable[[OSError], str] = lambda e: f"could not write {e.filename}: {e.strerror}") -> Ended:
    """Look, write, launch, until the policy's plan is done or a rule stops it (see the module).
    ``storage``: the words for a state file that could not be written (the OSError is raised on)."""
    last = None
    p = None
    written = {"status": None}

    def write(plan, loaded, status):
        try:
            block = policy.write(plan, loaded, status)
        except OSError as e:
            if status == "running":  # one try to leave it "stopped" rather than at the previous look
                plan.stopped = plan.stopped or storage(e)
                try:
                    policy.write(plan, loaded, "stopped")
                except OSError:
                    pass
            written["status"] = None  # no further try on the way out
            raise
        written["status"] = status
        return block

    try:
        while True:
            loaded = load(root)
            changed = watch.problem(loaded, root)
            if changed:  # no look at results of two identities: the looks as they stood before, no analysis
                p = p if p is not None else policy.plan(watch.consistent(loaded))
                policy.halt(p, changed)
                return Ended(p, loaded, write(p, loaded, "stopped"), identity=changed)
            p = policy.plan(loaded)
            unrecorded = launcher.unrecorded
            if not p.stopped and not p.done and last is not None and len(loaded) <= last[0] \
                    and len(unrecorded) == last[1]:
                p.stopped = stall_problem(root, launcher.stall_hint, unrecorded)
            last = (len(loaded), len(unrecorded))
            if not p.stopped:
                p.stopped = budget_problem(p.failed, unrecorded, policy.budget, policy.budget_key)
            write(p, loaded, "running")
            policy.say_looks(p, say)
            if p.stopped or p.done:
                break
            launcher.launch(policy.batch(p, loaded), policy.batch_words(p), say, loaded)
        loaded = load(root)
        return Ended(p, loaded, write(p, loaded, policy.final_status(p)))
    except BaseException as e:
        if written["status"] == "running" and p is not None:
            if not p.stopped:
                p.stopped = ("interrupted (Ctrl-C or a signal)" if isinstance(e, KeyboardInterrupt) else
                             f"ended by {type(e).__name__}: {e}")
            try:
                policy.write(p, load(root), "stopped")
            except Exception:  # noqa: BLE001 - the error being raised already says why
                pass
        raise
