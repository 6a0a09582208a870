"""One identity per adaptive run (sequential or race): config and code checked between batches, on every launcher.

A look decides on results of ONE identity (config_hash and code_version). ``IdentityWatch`` pins what
the results and the code on disk were at the start; a change between batches (an edited training
file picked up by a process-per-job launcher, a changed code_paths file, a config that resolves
differently) stops the run with the files named, and the loop (loop.py) records the looks as they
stood before it. No decision is taken on mixed identities.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional


def expected_identity(arms: dict) -> dict:
    """arm -> (config_hash, code_version): what a result of each arm's config records (resume's rule)."""
    from harness.experiment.identity import config_hash
    from harness.experiment.runner import code_of

    return {a: (config_hash(c), code_of(c)["version"]) for a, c in arms.items()}


def refresh(arms: dict, root: Path, say=print) -> int:
    """Move aside results of another config or code than ``arms``' (arm -> config; resume's rule),
    failed ones too: at the start of a run, before the watch holds it to one identity.

    The plan reads every result file under root, so this is where a changed config or code makes
    a seed run again; a failed run of the same config and code stays (it counts as a failure).
    """
    from harness.experiment.resume import supersede
    from harness.results import find_result_files, read_json

    ident = expected_identity(arms)
    moved = 0
    for path in find_result_files(root) if root.exists() else []:
        try:
            r = read_json(path)
        except (OSError, ValueError):
            continue  # the analysis names unreadable files
        want = ident.get(str(r.get("arm")))
        if want and (r.get("config_hash"), r.get("code_version")) != want:
            dest = supersede(path)
            moved += 1
            say(f"seed={r.get('seed')} arm={r.get('arm')}: result of another config or code moved to {dest}; "
                "it runs again when its seed is reached")
    return moved


# -- one identity per run: checked between batches -------------------------------------------------


def _key(r) -> tuple:
    return (r.get("config_hash"), r.get("code_version"))


def code_now(arms: dict) -> dict:
    """arm -> the code identity of the files as they are on disk now.

    runner.code_of computes it once per process (identity's cache): a run in this process, or in a
    reused pool worker, records the identity its process computed first, so an edit made since
    (of a repro.code_paths file the training function reads, say) never shows in its result.
    Between batches we look again, and leave the cache as the runs use it.
    """
    from harness.experiment import identity as identity
    from harness.experiment.runner import code_of

    saved = dict(identity._CACHE)
    identity._CACHE.clear()
    try:
        return {a: code_of(c) for a, c in arms.items()}
    finally:
        identity._CACHE.clear()
        identity._CACHE.update(saved)


class IdentityWatch:
    """Holds a sequential run to one identity (config_hash and code_version) from batch to batch.

    refresh() sets aside, at the start, results of another config or code than this one's. After
    that, a change stops the run instead: a decision on results of two identities would mix the
    factor with the change. ``problem(loaded)``, called before every look, checks

    - the result files: each arm's results have one identity, the one they had at the first look
      (the first batch's), and the arms share one code_version when their code was the same at the
      start. A launcher that starts a process per job (submitit, SLURM) reads the code anew for
      every job, so an edit shows here, even part-way through a batch;
    - the code on disk now against the code at the start (code_now): runs in this process, or in a
      reused worker, record the identity their process computed once, so their results would not
      show an edit of a file they read (repro.code_paths) or of a module a later job imports.
    """

    def __init__(self, arms: dict, what: str = "sequential run"):
        self.what = what  # what the message says was going on (the race sweeper: "race")
        self.arms = arms  # arm -> its config (Plan.arms, or arms.arm_configs at a sweeper's entry)
        self.start = code_now(self.arms)
        self.shared_code = len({c["version"] for c in self.start.values()}) == 1
        self.expected = expected_identity(self.arms)  # what this process's runs record (refresh's rule)
        self.reference: dict = {}  # arm -> the identity of its results at the first look that had any
        self.looked: set = set()  # the result files at the last look

    def _held_to(self, arm: str, groups: dict) -> tuple:
        if arm in self.reference:
            return self.reference[arm]
        if self.expected[arm] in groups:
            return self.expected[arm]
        return min(groups, key=lambda k: min(_seed_key(r.get("seed")) for r in groups[k]))  # the first seeds'

    def consistent(self, loaded: list) -> list:
        """The results of the run's identity: each arm's at the earlier looks or, before any, the one
        this process records (refresh's). A look on them mixes nothing."""
        run = {a: self.reference.get(a, self.expected[a]) for a in self.arms}
        return [r for r in loaded if run.get(str(r.get("arm"))) == _key(r)]

    def _by_arm(self, loaded: list) -> dict:
        by_arm: dict = {}
        for r in loaded:
            arm = str(r.get("arm"))
            if arm in self.arms:
                by_arm.setdefault(arm, {}).setdefault(_key(r), []).append(r)
        return by_arm

    def problem(self, loaded: list, root: Path) -> Optional[str]:
        """None when the results and the code on disk still have the run's identity; else one paragraph:
        what changed, the result files of each identity, what to do."""
        by_arm = self._by_arm(loaded)
        held = {a: self._held_to(a, g) for a, g in by_arm.items()}
        mixed = any(len(g) > 1 or held[a] not in g for a, g in by_arm.items())
        if self.shared_code and len({k[1] for g in by_arm.values() for k in g}) > 1:
            mixed = True
        try:
            now = code_now(self.arms)
            edited = [_code_change(self.start[a], now[a]) for a in self.arms
                      if now[a]["version"] != self.start[a]["version"]]
        except FileNotFoundError as e:  # a repro.code_paths entry is gone
            edited = [f"the code changed: {e}"]
        if not mixed and not edited:
            self.reference.update(held)
            self.looked = {r.get("_path") for r in loaded}
            return None
        return self._describe(by_arm, held, edited, root, [r for r in loaded if r.get("_path") not in self.looked])

    def _describe(self, by_arm: dict, held: dict, edited: list, root: Path, since: list) -> str:
        from harness.analysis.identity.comparability import config_differences

        what: dict = {}  # what changed -> where it shows (the files on disk, the results)
        for e in edited:
            what.setdefault(e, []).append("on disk since the run started")
        for arm, groups in by_arm.items():
            ref = groups.get(held[arm])
            for key, rs in groups.items():
                if key == held[arm]:
                    continue
                if ref is None:
                    what.setdefault(f"arm {arm}'s results have another identity than at the earlier looks "
                                    f"(config_hash {held[arm][0]}, code_version {held[arm][1]})", [])
                    continue
                old = ref[0]
                if key[0] != held[arm][0]:
                    diff = config_differences([[old], [rs[0]]])
                    what.setdefault("the config changed: " + ("; ".join(
                        f"{k}: {' -> '.join(_short(v) for v in vals)}" for k, vals in list(diff.items())[:8])
                        if diff else f"config_hash {held[arm][0]} -> {key[0]}"), []).append("in the results")
                if key[1] != held[arm][1]:
                    what.setdefault(_code_change(old.get("code"), _recorded_code(rs[0])), []).append("in the results")
        if not what:  # each arm has one identity, but the arms' code differs where it was the same at the start
            firsts = {a: g[held[a]][0] for a, g in by_arm.items()}
            (a0, r0), rest = next(iter(firsts.items())), list(firsts.items())[1:]
            what["the arms' results record different code, where the arms' code was the same at the start: "
                 + "; ".join(f"arm {a} against arm {a0}, {_code_change(r0.get('code'), _recorded_code(r))}"
                             for a, r in rest if _key(r)[1] != _key(r0)[1])] = []
        said = "; ".join(f"{w} ({', '.join(dict.fromkeys(where))})" if where else w for w, where in what.items())
        lines = []
        for arm, groups in by_arm.items():
            for key, rs in sorted(groups.items(), key=lambda kv: kv[0] != held[arm]):
                if arm in self.reference:
                    label = "as at the earlier looks" if key == self.reference[arm] else "another identity"
                else:
                    label = "as at the start" if key == self.expected[arm] else "another identity"
                lines.append(f"arm {arm} seeds {_span([r.get('seed') for r in rs])} ({label}: config_hash {key[0]}, "
                             f"code_version {key[1]}: {_paths(rs, root)})")
        suspect = ""
        recent = [r for r in since if held.get(str(r.get("arm"))) == _key(r)]
        if edited and recent:
            by: dict = {}
            for r in recent:
                by.setdefault(str(r.get("arm")), []).append(r.get("seed"))
            runs = ", ".join(f"arm {a} seeds {_span(v)}" for a, v in by.items())
            suspect = (f" The runs since the last look that record the earlier identity ({runs}) may have been "
                       f"made with the changed files: a process computes its code identity once.")
        return (f"the config or code changed while this {self.what} was going on: {said}. "
                f"The run stopped without a decision: a look at results of two identities would mix the "
                f"factor with the change. Result files under {root}, by identity: {'; '.join(lines)}.{suspect} "
                f"To go on with the config and code as they are now, run the same command again: results of "
                f"another identity are moved to superseded/ and their seeds run again. To keep the earlier "
                f"results instead, restore what changed{', move aside those runs' if suspect else ''} and run "
                f"the same command again.")


def _seed_key(seed):
    return (0, seed) if isinstance(seed, int) else (1, str(seed))


def _recorded_code(r) -> dict:
    """A result's code identity block (a bare one from its code_version when it has none)."""
    return r.get("code") or {"version": r.get("code_version"), "harness": None, "files": {}, "packages": {}, "git": {}}


def _code_change(old, new: dict) -> str:
    """identity.describe_code_change, with each installed package whose version changed named with both
    versions (not the two whole lists of packages)."""
    from harness.experiment.identity import describe_code_change

    if not isinstance(old, dict):
        return describe_code_change(old, new)
    was, now = old.get("packages") or {}, new.get("packages") or {}
    named = [f"installed package {k}: {was.get(k, 'not installed')} -> {now.get(k, 'not installed')}"
             for k in sorted(set(was) | set(now)) if was.get(k) != now.get(k)]
    if not named:
        return describe_code_change(old, new)
    head = "the code changed: "
    rest = describe_code_change({**old, "packages": now}, new)[len(head):]  # what else changed
    if rest.startswith("the code version ("):  # nothing else: the version string moved with the package
        rest = ""
    return head + "; ".join(named + ([rest] if rest else []))


def _short(value) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _span(seeds) -> str:
    """[0, 1, 2, 5] -> '0-2, 5'."""
    ints = sorted({s for s in seeds if isinstance(s, int)})
    parts, i = [], 0
    while i < len(ints):
        j = i
        while j + 1 < len(ints) and ints[j + 1] == ints[j] + 1:
            j += 1
        parts.append(str(ints[i]) if i == j else f"{ints[i]}-{ints[j]}")
        i = j + 1
    others = [str(s) for s in seeds if not isinstance(s, int)]
    return ", ".join(parts + others)


def _paths(rs, root: Path, limit: int = 3) -> str:
    def short(path) -> str:
        try:
            return Path(path).relative_to(root).as_posix()
        except ValueError:
            return str(path)

    paths = sorted(short(r["_path"]) for r in rs if r.get("_path"))
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "") if paths else "no file"
