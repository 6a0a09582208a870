"""From result files to the analysis: which runs count, are they paired, and what do they say.

``analyze(results)`` takes result dicts (the contract in harness/results/) and returns the content of
analysis.json; ``analyze_dir(root)`` loads a folder tree of result.json files, analyses it and
writes analysis.json, report.md and analysis.png beside them. analyze() is gather() (gather.py: the
checks, with selection.py and identity/ underneath, and what the statistics read, made compact)
then decide() (decide.py: the statistics of harness/stats/ and analysis.json's content). Which
values are compared with which, and what is refused:

- a failed run, or one whose metric is missing or not a finite number, is excluded and named;
- a run without a partner of the same seed in the baseline arm is unpaired: dropped and named;
- arms of one seed must share the fingerprints the results' ``pairing`` says they share;
- results of more than one experiment, or of two configurations in one arm, are not mixed;
- results of different identities (config outside the factor, code, the environment that decides
  the bits) are not compared unless asked to, and then what differs is recorded (comparability.py);
- the same (seed, arm) in several files counts once when the copies are bit-identical, and is
  refused, with the files named, when they differ; a copy relabelled as another seed is refused;
- a certificate.json made for another configuration is not reported as current.

The output is deterministic (seeded resampling, no timestamps, no absolute paths), so analysing
the same files twice gives a byte-identical analysis.json.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from harness.analysis.identity import copies
from harness.analysis.identity.certificate import certificate_for
from harness.analysis.render.outputs import write_together
from harness.analysis.decide import StatisticsApart, decide
from harness.analysis.gather import CHOICES, Gathered, declared, fill_later, gather
from harness.config import declaration as declaration_io
from harness.config.declaration import Declaration
from harness.config.metric_spec import DeclarationError
from harness import results as results_io
from harness.analysis.selection import AnalysisError, _one_experiment

ANALYSIS_NAME = "analysis.json"
REPORT_NAME = "report.md"
FIGURE_NAME = "analysis.png"
CERTIFICATE_NAME = "certificate.json"


def analyze(results: list[dict], declaration: Declaration | None = None, *, unreadable=(),
            extra: dict | None = None, allow_mixed_identity: bool = False, **choices) -> dict:
    """The analysis dict (analysis.json) of result dicts; AnalysisError when they cannot be compared.

    ``declaration`` says what to analyse (harness/config/declaration.py): the primary metric, which decides
    the verdict, every declared metric with its direction and unit, the margin, alpha, the baseline.
    Without it, the declaration the results' recorded configs make is used. ``choices`` (metric,
    margin, alpha, baseline, direction, directions, bootstrap_resamples, bootstrap_seed) make an
    ALTERNATIVE analysis: analysis.json then lists each departure from the declaration. Nothing is
    guessed from a metric's name. Results of more than one identity (comparability.py) are refused
    unless ``allow_mixed_identity``.
    """
    return decide(gather(results, declaration, unreadable=unreadable, extra=extra,
                         allow_mixed_identity=allow_mixed_identity, **choices))


def alternative_name(choices: Mapping) -> str:
    """The folder an alternative analysis is written to: alternatives/<key=value,...>."""
    import re

    parts = []
    for key in CHOICES:
        value = choices.get(key)
        if value is None:
            continue
        if isinstance(value, Mapping):
            value = "+".join(f"{k}-{getattr(v, 'value', v)}" for k, v in sorted(value.items()))
        parts.append(f"{key}={value}")
    return re.sub(r"[^A-Za-z0-9_.=,+-]", "_", ",".join(parts)) or "alternative"


def analyze_dir(root, *, write: bool = True, declaration: Declaration | None = None, apart: bool = False,
                **kw) -> dict:
    """Analyse every result.json under ``root`` as declared; write analysis.json, report.md, analysis.png.

    The declaration is ``declaration``, else root's declaration.json, else the one the results'
    recorded configs make. Choices that depart from it (``metric=``, ``margin=``, ...: see
    analyze()) make an alternative analysis, written to alternatives/<choices>/ in root, never over
    the declared files.

    Raises results.ResultsError when root does not exist and AnalysisError when nothing under it
    can be analysed. A ``certificate.json`` in root (the reproducibility certificate) is included
    as ``certificate`` when it was made for these results, else as a "not certified" record.
    When the declared analysis is refused, an earlier analysis.json, report.md and analysis.png that
    described other results are moved to superseded/analysis-<time>/ (they would look current).

    ``apart``: compute the statistics in a second Python process, which imports scipy while this one
    reads the results, and computes them while this one makes what they do not read (the curves, the
    inputs digest); the same analysis, sooner with a second core free (python -m harness.analyze).
    """
    root = Path(root)
    folder = root if root.is_dir() else root.parent
    if write and (folder / "race.json").is_file():  # its analysis is the race's own (harness.experiment.adaptive.race_report)
        raise AnalysisError(f"{folder} holds a race (race.json): its analysis.json and report.md are the race's "
                            "own and are not replaced by an A/B analysis; run python -m harness.analyze on it "
                            "to reproduce them, or pass write=False.")
    statistics = StatisticsApart() if apart else None  # it imports scipy while the results are read here
    try:
        with results_io.gc_paused():  # millions of objects without cycles: see results.gc_paused
            gathered, choices, digest = _gather_dir(root, folder, write, declaration, kw,
                                                    hand_over=statistics.send if statistics else None)
        try:
            analysis = fill_later(statistics.decide(gathered), gathered) if statistics else decide(gathered)
        except AnalysisError as e:
            moved = (set_aside_stale_outputs(folder, (), digest=digest)
                     if write and not gathered.decl.is_alternative and digest is not None else None)
            if moved:
                raise AnalysisError(f"{e} {_moved(folder, moved)}") from None
            raise
    finally:
        if statistics:
            statistics.close()
    if write:
        target = folder
        if analysis["departures"]:
            target = folder / ALTERNATIVES / alternative_name(choices)
            analysis["written_to"] = target.relative_to(folder).as_posix()
        write_outputs(analysis, target)
    return analysis


def _gather_dir(root: Path, folder: Path, write: bool, declaration, kw: dict,
                hand_over=None) -> tuple[Gathered, dict, str | None]:
    """(root's results gathered, the analysis choices in ``kw``, the inputs digest of every result read
    when earlier outputs may have to be set aside after a refusal in decide(), else None).
    ``hand_over(gathered)`` is called before the results read are let go."""
    kw = dict(kw)
    loaded, unreadable = _load(root, folder)
    if declaration is None:
        try:
            declaration = declaration_io.read(folder)
        except DeclarationError as e:
            raise AnalysisError(str(e)) from None
    extra = dict(kw.pop("extra", None) or {})
    certificate = folder / CERTIFICATE_NAME
    if certificate.is_file() and "certificate" not in extra:
        try:
            extra["certificate"] = certificate_for(results_io.read_json(certificate), loaded.results)
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
            unreadable.append((CERTIFICATE_NAME, f"not valid JSON ({e})"))
    sequential = folder / "sequential.json"  # the looks of a sequential run (harness/experiment/adaptive/sequential.py)
    if sequential.is_file() and "sequential" not in extra:
        try:
            extra["sequential"] = results_io.read_json(sequential)
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
            unreadable.append(("sequential.json", f"not valid JSON ({e})"))
    unreadable += list(kw.pop("unreadable", ()))
    choices = {k: kw.pop(k) for k in CHOICES if k in kw}
    alternative = True  # until the declaration is read: a refusal then sets nothing aside
    try:
        _one_experiment(loaded.results)
        declaration = declared(loaded.results, declaration, choices)
        alternative = declaration.is_alternative
        later = [] if hand_over is not None else None  # what the statistics do not read: made once handed over
        gathered = gather(loaded.results, declaration, unreadable=unreadable, extra=extra, later=later, **kw)
    except AnalysisError as e:
        moved = set_aside_stale_outputs(folder, loaded.results) if write and not alternative else None
        if moved:
            raise AnalysisError(f"{e} {_moved(folder, moved)}") from None
        raise
    digest = None  # only to set earlier outputs aside, should decide() refuse: computed where they are
    if write and not alternative and any((folder / name).is_file() for name in OUTPUT_NAMES):
        digest = copies.inputs_digest(loaded.results)
    if hand_over is not None:
        hand_over(gathered)
        for fill in later:  # while the statistics are computed apart
            fill(gathered)
    return gathered, choices, digest


def _moved(folder: Path, moved: Path) -> str:
    return (f"The earlier analysis in {folder} described other results; it was moved to "
            f"{moved.relative_to(folder).as_posix()}/ so that it does not look current.")


ALTERNATIVES = "alternatives"  # alternative analyses go to alternatives/<choices>/, never over the declared files


def write_outputs(analysis: dict, folder: Path) -> None:
    """analysis.json, report.md and analysis.png in folder, replaced together or not at all
    (outputs.write_together; a failure raises OutputsNotWritten, which says nothing was replaced)."""
    from harness.analysis.render.markdown import write_markdown
    from harness.analysis.render.figures import write_figure  # matplotlib is only needed when writing

    write_together(folder, {ANALYSIS_NAME: lambda path: results_io.write_json(path, analysis),
                            REPORT_NAME: lambda path: write_markdown(analysis, path),
                            FIGURE_NAME: lambda path: write_figure(analysis, path, named=folder / FIGURE_NAME)})


def _load(root: Path, folder: Path):
    """Every result under root, with ``_path`` relative to folder; AnalysisError when there are none."""
    loaded = results_io.load_tree(root)
    unreadable = [(_relative(path, folder), reason) for path, reason in loaded.unreadable]
    if not loaded.results:
        if unreadable:
            listed = "; ".join(f"{path}: {reason}" for path, reason in unreadable)
            raise AnalysisError(f"No readable result.json under {root}: {listed}.")
        raise AnalysisError(f"No result.json files under {root}.")
    prefix = str(folder) + "/"
    for r in loaded.results:  # named in messages and in analysis.json, never as absolute paths
        path = r["_path"]
        r["_path"] = path[len(prefix):] if path.startswith(prefix) else _relative(path, folder)
    return loaded, unreadable


OUTPUT_NAMES = (ANALYSIS_NAME, REPORT_NAME, FIGURE_NAME)


def set_aside_stale_outputs(folder: Path, results, names=OUTPUT_NAMES, *, digest: str | None = None) -> Path | None:
    """Move earlier analysis outputs that describe other results than ``results`` aside.

    They stay where they are when analysis.json's inputs digest matches these results' (or the
    ``digest`` given: copies.inputs_digest of them), i.e. the analysis was refused for
    another reason, e.g. a bad option. Returns the folder they went to.
    """
    present = [folder / name for name in names if (folder / name).is_file()]
    if not present:
        return None
    try:
        old = results_io.read_json(folder / names[0])
        if (old.get("identity") or {}).get("inputs_digest") == (digest or copies.inputs_digest(results)):
            return None
    except (OSError, ValueError, AttributeError):
        pass
    import os
    from datetime import datetime, timezone

    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    dest = folder / "superseded" / f"analysis-{stamp}"
    dest.mkdir(parents=True, exist_ok=True)
    for path in present:
        os.replace(path, dest / path.name)
    return dest


# -- small helpers ------------------------------------------------------------------------------


def _relative(path, folder: Path) -> str:
    path = Path(path)
    try:  # the parent resolved, the entry itself not followed: it may be a symlink loop
        return (path.parent.resolve() / path.name).relative_to(folder.resolve()).as_posix()
    except (ValueError, OSError, RuntimeError):
        return path.name


__all__ = ["analyze", "analyze_dir"]
