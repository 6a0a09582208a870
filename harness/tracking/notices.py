"""What a unit's trainer callbacks noted for the terminal (integrations/wandb_hook.py: a trainer's own
wandb logger turned off, or logging into the harness's run of the unit), said once per invocation
for all its units, and the project the user's logger names kept where the harness can.

A unit's result carries its notices (``result["notices"]``); the tracker reads them as it logs the
unit (``Notices.heed``) and says each distinct one once when it closes (``Notices.said``), with the
number of units. The harness's wandb runs go to the project the user's logger names when the
harness's own project is its default (neither ``logger.wandb.project`` nor ``$WANDB_PROJECT``) and
no run has been opened yet: one experiment's runs stay in one project. Otherwise the line says why
not, and how to log there.
"""

from __future__ import annotations

from collections import Counter
from typing import Optional


class Notices:
    """The notices of the units a tracker logged, counted, and the project chosen from them."""

    def __init__(self):
        self.counts: Counter = Counter()  # (logger, "off" | "shared", the logger's project) -> units
        self.why_not: dict[str, str] = {}  # a logger's project -> why the harness's runs are not in it

    def heed(self, result: dict, tracker=None) -> None:
        """Count ``result``'s notices; with a WandbTracker, take the first project a logger names
        where that keeps every run of the experiment in one project (see the module doc)."""
        for notice in result.get("notices") or []:
            if not isinstance(notice, dict):
                continue
            project = notice.get("project") or None
            self.counts[(str(notice.get("logger")), str(notice.get("wandb")), project)] += 1
            if tracker is not None and project and project not in self.why_not:
                why = _why_not(tracker, project, shared=notice.get("wandb") == "shared")
                if why is None:
                    tracker.options["project"] = project
                    tracker.options["project_from"] = "the trainer's logger"
                self.why_not[project] = why or ""

    def said(self, project: Optional[str]) -> list[str]:
        """One line per distinct notice, each said once (counted afresh after). ``project``: the
        harness's wandb project (None: logger=none)."""
        out = []
        counts, self.counts = self.counts, Counter()
        for (logger, mode, named), n in counts.items():
            units = f"{n} unit{'s' if n != 1 else ''}"
            head = f"{logger}" + (f" (project {named!r})" if named else "")
            if mode == "shared":
                head += f" logged into the harness's wandb run of each of {units}"
            else:
                head += f" was turned off in {units} (wandb disabled while the trainer ran)"
            if project is None:
                out.append(f"{head}; logger=none: the harness logged no wandb run for them.")
                continue
            where = f"in project {project!r}"
            why = self.why_not.get(named) if named and named != project else None
            if mode == "shared":
                line = f"{head}, {where}"
            else:
                line = f"{head}: each unit's one wandb run is the harness's, {where}"
            if named and not why:
                line += " (the logger's)"
            elif why:
                line += f", not {named!r}: {why}"
            out.append(line + ".")
        return out


def _why_not(tracker, project: str, shared: bool) -> Optional[str]:
    """Why the harness's runs cannot go to ``project``, or None when they can."""
    options = tracker.options
    ours = options["project"]
    if project == ours:
        return None
    if options.get("project_from"):  # given (logger.wandb.project, $WANDB_PROJECT), or an earlier unit's
        return f"the harness's project comes from {options['project_from']} and wins"
    if tracker.in_sweep or tracker.gate.sweep_id is not None:
        return (f"the jobs of a sweep log into one project; set logger.wandb.project={project} to log there")
    if tracker.logged or tracker._early or tracker.not_logged:
        when = ("the harness opens a unit's run before its Trainer starts, before the logger's project is known"
                if shared else "the harness had opened runs before a unit named it")
        return f"{when}; set logger.wandb.project={project} to log there"
    return None
