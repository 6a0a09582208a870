"""Re-analyse any tree of result.json files: ``python -m harness.analyze DIR``.

DIR may hold one run, a whole experiment, a multirun sweep, or files copied back from a cluster.
With no flags it reproduces the DECLARED analysis (DIR/declaration.json, else the results'
recorded config): the same metric, margin, alpha, baseline and verdict as the run printed, written
to analysis.json, report.md and analysis.png (unless --no-write). A flag that changes the basis
(--metric, --margin, --alpha, --baseline, --direction, the resampling) makes an ALTERNATIVE
analysis: printed with a line naming each departure, written to DIR/alternatives/<choices>/,
never over the declared files. Bad input gets a one-paragraph message on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.analysis.render import report as report
from harness.analysis.analyze import analyze_dir
from harness.analysis import AnalysisError
from harness.results import ResultsError

EXIT_BAD_INPUT = 2


def _margin(text: str):
    if text == "auto":
        return "auto"
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'must be "auto" or a number in the metric\'s units, got {text!r}') from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def _alpha(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not 0 < value < 0.5:
        raise argparse.ArgumentTypeError(f"must be between 0 and 0.5 (e.g. 0.05), got {text!r}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m harness.analyze",
        description="Analyse the result.json files under DIR: paired tests, margin, verdict.",
    )
    p.add_argument("dir", metavar="DIR", help="folder holding result.json files (searched recursively)")
    alt = " (an alternative analysis when it departs from the declaration)"
    p.add_argument("--metric", default=None, help="key of result.json's metrics (default: the declared stats.metric)" + alt)
    p.add_argument("--direction", choices=("max", "min"), default=None,
                   help="direction of the metric: max (higher is better) or min (lower is better); default: "
                        "the declared one (stats.metrics.<name>); never guessed from the name" + alt)
    p.add_argument("--margin", type=_margin, default=None,
                   help='smallest difference that matters, in the metric\'s units, or "auto" (the pooled seed '
                        'std); default: the declared stats.margin' + alt)
    p.add_argument("--baseline", default=None, help="arm the others are compared with (default: the declared one)" + alt)
    p.add_argument("--alpha", type=_alpha, default=None, help="significance level (default: the declared stats.alpha)" + alt)
    p.add_argument("--bootstrap-resamples", type=int, default=None, help="bootstrap and permutation resamples "
                   "(default: the declared stats.bootstrap_resamples)" + alt)
    p.add_argument("--bootstrap-seed", type=int, default=None, help="seed of the resampling (default: the declared one)" + alt)
    p.add_argument("--no-write", action="store_true", help="print only; write nothing into DIR")
    p.add_argument("--tables", action="store_true", help="print every table, not only the verdict screen "
                   "(report.md always has them all)")
    p.add_argument("--allow-mixed-identity", action="store_true",
                   help="compare arms whose config outside the factor, code or environment differ "
                        "(refused by default); what differs is recorded in analysis.json and the report")
    p.add_argument("--grid", action="store_true",
                   help="DIR holds one A/B at several settings (a sweep over e.g. optim.lr): analyse each "
                        "setting on its own and write grid.json, grid.md and grid.png (Holm across the grid)")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.grid and args.allow_mixed_identity:
        print("harness.analyze: --grid analyses each setting on its own; --allow-mixed-identity compares "
              "across them. Choose one.", file=sys.stderr)
        return EXIT_BAD_INPUT
    if (Path(args.dir) / "race.json").is_file():  # a race folder (hydra/sweeper=harness_race)
        return _race(args)
    options = dict(write=not args.no_write, metric=args.metric, margin=args.margin, baseline=args.baseline,
                   alpha=args.alpha, bootstrap_resamples=args.bootstrap_resamples,
                   bootstrap_seed=args.bootstrap_seed, direction=args.direction)
    try:
        from harness.config.declaration import read as read_declaration
        declared = read_declaration(args.dir) if Path(args.dir).is_dir() else None
        if declared is not None and declared.conditions and not args.grid:  # the claim across ab.conditions
            from harness.analysis.conditions import analyze_conditions_dir, render_conditions
            given = [f"--{k.replace('_', '-')}" for k in ("metric", "direction", "margin", "baseline", "alpha",
                                                           "bootstrap_resamples", "bootstrap_seed") if getattr(args, k) is not None]
            if given:
                print(f"harness.analyze: {args.dir} holds one A/B under the declared ab.conditions: its analysis is "
                      f"the declared claim across them, with no choices; {', '.join(given)} would change its basis. "
                      f"Run without flags, or analyse one condition's folder with them (an alternative written to "
                      f"its alternatives/): python -m harness.analyze {Path(args.dir) / 'condition=NAME'} "
                      f"{' '.join(given)} ...", file=sys.stderr)
                return EXIT_BAD_INPUT
            summary, _ = analyze_conditions_dir(args.dir, write=not args.no_write)
            render_conditions(summary)
            return 0
        if args.grid:
            from harness.analysis.grid import SCHEMA as GRID_SCHEMA
            from harness.analysis.grid import analyze_grid_dir, render_grid

            analysis = analyze_grid_dir(args.dir, **options)
            if analysis.get("schema") == GRID_SCHEMA:
                render_grid(analysis)
                if analysis.get("departures"):
                    print("ALTERNATIVE ANALYSIS, not the declared one: " + "; ".join(analysis["departures"]))
                if not args.no_write:
                    where = Path(args.dir) / analysis.get("written_to", "")
                    print(f"wrote grid.json, grid.md and grid.png into {where}, and each setting's "
                          "analysis into its own folder" + (f" ({analysis['written_to']}/ there)" if analysis.get("written_to") else ""))
                return 0
        else:
            from harness.training.threads import usable_cores

            # With a second core, a second process imports scipy for the statistics while the results
            # are read (10,000 results on 2 cores: 0.6 s sooner idle, 0.2 s sooner beside a busy process).
            # Not decided from the load: a sample of it counts this process's own BLAS threads.
            analysis = analyze_dir(args.dir, allow_mixed_identity=args.allow_mixed_identity,
                                   apart=usable_cores() >= 2, **options)
    except (AnalysisError, ResultsError) as e:
        print(f"harness.analyze: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as e:  # e.g. DIR is read-only: the analysis ran, writing it did not
        print(f"harness.analyze: could not write into {args.dir}: {e}. Use --no-write to only print.", file=sys.stderr)
        return EXIT_BAD_INPUT
    report.render_table(analysis, tables=args.tables)
    if not args.no_write:  # the claims into the project's ledger (an alternative's flagged as one)
        from harness.ledger.record import record_written

        record_written(analysis, Path(args.dir if Path(args.dir).is_dir() else Path(args.dir).parent),
                       warn=lambda w: print(f"harness.analyze: {w}", file=sys.stderr))
        where = Path(args.dir if Path(args.dir).is_dir() else Path(args.dir).parent) / analysis.get("written_to", "")
        written = [n for n in ("analysis.json", "report.md", "analysis.png") if (where / n).is_file()]
        print(f"wrote {', '.join(written)} into {where}"
              + (" (an alternative analysis: the declared files are untouched)" if analysis["departures"] else ""))
    return 0


def _race(args) -> int:
    """A race's declared analysis (harness/experiment/adaptive/race_report.py): no choices to make."""
    from harness.experiment.adaptive.race_report import RaceAnalysisError, analyze_race, report as race_report

    given = [f"--{k.replace('_', '-')}" for k in ("metric", "direction", "margin", "baseline", "alpha",
                                                   "bootstrap_resamples", "bootstrap_seed") if getattr(args, k) is not None]
    given += [f for f, on in (("--grid", args.grid), ("--allow-mixed-identity", args.allow_mixed_identity)) if on]
    if given:
        print(f"harness.analyze: {args.dir} holds a race (race.json): its analysis is the race's, replayed "
              f"from the declaration with no choices; {', '.join(given)} would change the basis of decisions the "
              f"race already took on it. Run without flags (--no-write and --tables are allowed).", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        analysis = analyze_race(args.dir, write=not args.no_write)
    except (RaceAnalysisError, ResultsError) as e:
        print(f"harness.analyze: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as e:
        print(f"harness.analyze: could not write into {args.dir}: {e}. Use --no-write to only print.", file=sys.stderr)
        return EXIT_BAD_INPUT
    text = race_report(analysis["race"])
    print(text if args.tables else text.split("\n\n| look |")[0] + "\n(every look: report.md, or --tables)")
    if not args.no_write:
        print(f"wrote analysis.json, report.md, race.png into {args.dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
