"""What a tracker says when it closes: where the offline runs are and how to upload them, what
was not logged and why (harness/tracking/tracker.py's WandbTracker.close)."""

from __future__ import annotations

import logging

from harness.tracking.options import offline_runs

log = logging.getLogger("harness.tracking")


def closing_words(tracker) -> list[str]:
    """Warnings to print once (a run that could not be logged online or at all) and, logged at info
    level, the `wandb sync` hint for runs logged offline."""
    out = []
    where = tracker.options["dir"] / "wandb"
    offline = [n for n, mode in tracker.logged if mode == "offline"]
    sweep_state = None if tracker.in_sweep else tracker.gate.read()
    if tracker.in_sweep:
        # One job of a sweep: the online failure was said once, when it happened, by the job
        # that paid for it; the `wandb sync` hint is the sweep's (its analysis, at the end).
        pass
    elif tracker.gate.sweep_id is not None:
        # The sweep's own tracker: one hint for every job's offline runs and the analysis.
        patterns, count = offline_runs(tracker.root, where)
        failed = sweep_state is not None and not sweep_state.get("ok", True)
        why = tracker.online_failure or (sweep_state.get("reason") if failed else None)
        if why and count:
            out.append(f"wandb: this sweep could not log online ({why}); its {count} run(s) were logged "
                       f"offline. Upload them later with: wandb sync {' '.join(patterns)}")
        elif count:
            log.info(f"wandb: {count} run(s) of this sweep logged offline; upload with: "
                     f"wandb sync {' '.join(patterns)}")
        tracker.gate.remove()
    elif tracker.online_failure and offline:
        out.append(
            f"wandb: not logged online ({tracker.online_failure}): {_names(offline)}. They were logged "
            f"offline under {where}; upload them later with: wandb sync {where}/offline-run-*"
        )
    if tracker.not_logged:
        why = tracker.broken + (f"; online before that: {tracker.online_failure}" if tracker.online_failure else "")
        out.append(f"wandb: not logged ({why}): {_names(tracker.not_logged)}. "
                   f"The results are complete in {tracker.out_dir}.")
    elif tracker.broken:
        out.append(f"wandb: {tracker.broken}.")
    out.extend(tracker.problems)
    if offline and not tracker.online_failure and not tracker.in_sweep and tracker.gate.sweep_id is None:
        log.info(f"wandb: {len(offline)} run(s) logged offline under {where}; "
                 f"upload with: wandb sync {where}/offline-run-*")
    return out


def _names(names: list[str]) -> str:
    return ", ".join(names) if names else "nothing"
