"""python -m harness.ledger: every claim the project made, the online FDR's next level, and the offline view.

    python -m harness.ledger [--ledger PATH] [--experiment NAME] [--metric NAME] [--since TIME]
                             [--alternatives] [--offline bh|by] [--level Q] [--method M] [--figure PNG] [--json]
                             [--wandb DIR]

The claims as a table (alternatives only with --alternatives: they are never counted as claims),
each online FDR stream of the ledger (tests, rejections, the next alpha_t), and with --offline which
claims survive Benjamini-Hochberg (bh) or Benjamini-Yekutieli (by, any dependence) at --level over
all the claims listed: for a paper's table. --wandb DIR writes them as a wandb run's tables (offline
unless $WANDB_MODE says otherwise; wandb sync sends it). A ledger not made yet has no claims (and is not made).
Exit status 0; 2 for bad input or a ledger that cannot be read (the file is named, never rebuilt).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from harness.config.ledger_spec import url_problem
from harness.ledger.postgres import open_ledger
from harness.config.ledger_spec import is_url, shown
from harness.ledger.store import LedgerError
from harness.stats.fdr.online import ALL_METHODS, NAMES
from harness.stats.fdr.asynchronous import next_alpha

EXIT_OK, EXIT_BAD_INPUT = 0, 2
_OFFLINE = {"bh": "Benjamini-Hochberg", "by": "Benjamini-Yekutieli"}


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one paragraph and exit status 2, as the other harness commands
        usage = " ".join(self.format_usage().split()[1:])
        print(f"harness.ledger: {message}. Usage: {usage} "
              "(python -m harness.ledger --help says what each option does).", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m harness.ledger", description=__doc__.split("\n\n")[0])
    p.add_argument("--ledger", default=None,
                   help="the ledger file, or a postgresql:// URL (default: outputs/ledger.sqlite, or $HARNESS_LEDGER)")
    p.add_argument("--experiment", help="only this experiment's claims")
    p.add_argument("--metric", help="only claims about this metric")
    p.add_argument("--since", help="only claims recorded at or after this UTC time (e.g. 2026-12-01)")
    p.add_argument("--alternatives", action="store_true", help="list alternative analyses too (never counted)")
    p.add_argument("--offline", choices=sorted(_OFFLINE), help="which claims survive BH or BY over all listed")
    p.add_argument("--level", type=float, default=0.1, help="the FDR level of --offline (default 0.1)")
    p.add_argument("--method", choices=ALL_METHODS, help="say the next alpha_t of this online method at --level too")
    p.add_argument("--figure", metavar="PNG", help="write a figure of each stream's alpha_t and rejections there")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--wandb", metavar="DIR", help="also write the claims as a wandb run under DIR/wandb (offline by "
                                                  "default: $WANDB_MODE decides)")
    return p


def offline(pvalues, method: str, level: float) -> list[bool]:
    """Which of ``pvalues`` survive BH / BY at ``level`` (scipy.stats.false_discovery_control)."""
    from scipy.stats import false_discovery_control

    if not pvalues:
        return []
    return [bool(q <= level) for q in false_discovery_control(pvalues, method=method)]


def streams(ledger, extra=None) -> list[dict]:
    """Each (method, level) stream of the ledger's tests: its tests, rejections and next alpha_t."""
    out, keys = [], []
    for t in ledger.tests() if ledger is not None else []:
        if (t["method"], t["level"]) not in keys:
            keys.append((t["method"], t["level"]))
    if extra and extra not in keys:
        keys.append(extra)
    for method, level in keys:
        tests = ledger.tests(method, level) if ledger is not None else []
        out.append({"method": method, "level": level, "tests": len(tests),
                    "decided": sum(t["pvalue"] is not None for t in tests),
                    "rejected": sum(bool(t["rejected"]) for t in tests),
                    "next_alpha": next_alpha(method, [t["pvalue"] for t in tests], [bool(t["rejected"]) for t in tests],
                                             level=level, decision_times=[t.get("decision_time") for t in tests])})
    return out


def _number(x, digits: int = 3) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}g}"


def _table(claims, survive) -> list[str]:
    head = ["#", "recorded (UTC)", "experiment", "claim", "effect", "interval", "p raw", "p decision", "alpha",
            "verdict"] + (["offline"] if survive is not None else [])
    rows = [head]
    for i, c in enumerate(claims):
        interval = f"[{_number(c['ci_low'])}, {_number(c['ci_high'])}]"
        row = [str(c["id"]), c["recorded_at"][:19].replace("T", " "), c["experiment"],
               c["claim"] + (" (alternative)" if c["alternative"] else ""), _number(c["effect"]), interval,
               _number(c["p_raw"]), _number(c["p_decision"]), _number(c["alpha"]), c["verdict"]]
        rows.append(row + ([("survives" if survive[i] else "-")] if survive is not None else []))
    widths = [max(len(r[k]) for r in rows) for k in range(len(head))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.ledger is None:
        from harness.ledger.record import default_path

        args.ledger = str(default_path())
    if "://" in args.ledger and not is_url(args.ledger):  # not a file name either: refused, not made
        print(f"harness.ledger: {url_problem(args.ledger, key='--ledger')}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not 0 < args.level < 1:
        parser().error(f"--level {args.level:g} must be between 0 and 1 (an FDR level, e.g. 0.1)")
    try:
        if is_url(args.ledger) or Path(args.ledger).exists():
            ledger = open_ledger(args.ledger, create=False)
            claims = ledger.claims(experiment=args.experiment, metric=args.metric, since=args.since,
                                   alternatives=args.alternatives)
        else:  # no claim made yet: said, and nothing is created
            ledger, claims = None, []
        online = streams(ledger, (args.method, args.level) if args.method else None)
    except LedgerError as e:
        print(f"harness.ledger: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.figure:
        from harness.ledger.figure import write_stream_figure

        write_stream_figure(ledger.tests() if ledger is not None else [], args.figure)
    if args.wandb:
        from harness.ledger.wandb_table import log_claims

        run = log_claims(claims, online, args.wandb, shown(args.ledger))
        print(f"wandb: the claims written to {run}", file=sys.stderr)
    counted = [c for c in claims if not c["alternative"] and c["p_decision"] is not None]
    survive = None
    if args.offline:
        kept = dict(zip([c["id"] for c in counted], offline([c["p_decision"] for c in counted], args.offline,
                                                            args.level)))
        survive = [kept.get(c["id"], False) for c in claims]
    if args.json:
        print(json.dumps({"ledger": shown(args.ledger), "claims": claims, "online": online,
                          "offline": None if survive is None else {"method": args.offline, "level": args.level,
                                                                   "survive": [c["id"] for c, s in zip(claims, survive) if s]}},
                         indent=1))
        return EXIT_OK
    print(f"ledger {shown(args.ledger)}{'' if ledger else ' (not made yet)'}: {len(counted)} claim(s)" + (f" ({len(claims) - len(counted)} alternatives or "
                                                          "undecided rows, not counted)" if len(claims) > len(counted) else ""))
    if claims:
        print("\n".join(_table(claims, survive)))
    for s in online:
        print(f"online FDR: {NAMES[s['method']]} at FDR {s['level']:g}: {s['tests']} tests ({s['decided']} decided), "
              f"{s['rejected']} rejected; the next experiment is tested at alpha_t = {s['next_alpha']:.4g}")
    if survive is not None:
        ids = [str(c["id"]) for c, s in zip(claims, survive) if s]
        print(f"offline {_OFFLINE[args.offline]} at FDR {args.level:g} over {len(counted)} claims: {len(ids)} survive"
              + (f" (# {', '.join(ids)})" if ids else ""))
    return EXIT_OK
