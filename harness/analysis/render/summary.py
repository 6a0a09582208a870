"""The verdict screen: what the terminal shows after a run or a re-analysis, verdict first.

One screen: the verdict of each comparison (in sequential mode, the sequential decision; the fixed-N
reading is labelled as information), the declaration it rests on (metric, unit, direction, margin,
alpha, baseline), a departure line when the analysis is an alternative, the runs and their
pairing, the arms, and what was left out. Every table is in report.md (and on the terminal with
``tables=true``, or ``python -m harness.analyze DIR --tables``). Reads the analysis dict only.
"""

from __future__ import annotations

from harness.stats import ZERO_END


class Fmt:
    """Numbers in the metric's units: accuracy in points to 2 decimals, anything else 4 digits."""

    def __init__(self, analysis: dict):
        self.points = analysis.get("unit") == "pts"
        self.unit = " pts" if self.points else ""

    def value(self, x) -> str:
        if x is None:
            return "—"
        return f"{x:.2f}" if self.points else f"{x:.4g}"

    def signed(self, x) -> str:
        if x is None:
            return "—"
        return f"{x:+.2f}" if self.points else f"{x:+.4g}"

    def interval(self, ci) -> str:
        if not ci or (ci[0] is None and ci[1] is None):
            return "—"
        # an end JSON holds as null is infinite (analysis.json writes no inf): said on the same line
        # an end at 0 up to the arithmetic that found it reads "0" (stats.verdict_words._ends says why)
        scale = sum(abs(x) for x in ci if x is not None)
        ends = [("-inf" if i == 0 else "+inf") if x is None else "0" if abs(x) <= ZERO_END * scale else self.signed(x)
                for i, x in enumerate(ci)]
        text = f"[{ends[0]}, {ends[1]}]{self.unit}"
        if None in ci:
            text += " (infinite end: too few pairs for the exact sign-flip test to bound that side)"
        return text


def title(analysis: dict) -> str:
    """One line per comparison with its verdict: the figure's title and the image's alt text."""
    parts = []
    f = Fmt(analysis)
    for name, c in analysis["comparisons"].items():
        parts.append(f"{name} vs {c['baseline']}: {c['verdict']['code'].replace('_', ' ')} "
                     f"({f.signed(c['mean_diff'])}{f.unit})")
    return "; ".join(parts)


SHOW_LEFT_OUT = 6  # runs left out, named on the screen; report.md names them all


def is_sequential(analysis: dict) -> bool:
    seq = analysis.get("sequential")
    return isinstance(seq, dict) and isinstance(seq.get("arms"), dict)


def verdicts(analysis: dict) -> list[str]:
    """The verdict sentence of each comparison: the sequential decision in sequential mode."""
    if analysis.get("schema") == "harness.conditions/1":  # ab.conditions: the claim across them
        return [b.get("sentence") or b.get("not_computed", "") for b in analysis["across_conditions"].values()]
    if is_sequential(analysis):
        return [a["sentence"] for a in analysis["sequential"]["arms"].values()]
    # an arm with too few finished pairs for a size can still be decided on its diverged pairs
    rank_only = [n["verdict"]["sentence"] for n in analysis.get("not_compared") or [] if n.get("verdict")]
    return [c["verdict"]["sentence"] for c in analysis.get("comparisons", {}).values()] + rank_only


def declaration_line(analysis: dict) -> str:
    """What the verdict rests on, as declared (or as this alternative analysis chose)."""
    f = Fmt(analysis)
    words = "higher is better" if analysis.get("direction") == "max" else "lower is better"
    unit = f"{analysis['unit']}, " if analysis.get("unit") else ""
    m = analysis["margin"]
    if is_sequential(analysis):
        d = analysis["sequential"].get("design") or {}
        margin = f"±{f.value(d['margin'])}{f.unit} declared before the data" if d.get("margin") else "none (better or worse than 0)"
        alpha = d.get("alpha", analysis["alpha"])
        looks = [str(n) for n in d.get("looks") or []]
        shown = ", ".join(looks) if len(looks) <= 6 else f"{', '.join(looks[:3])}, ... {looks[-1]}"
        design = f"; sequential, looks at {shown} seeds, {d.get('spending')} spending"
    else:
        margin = margin_line(m, f, analysis["metric"])
        alpha, design = analysis["alpha"], ""
    decl = analysis.get("declaration") or {}
    arms = ", ".join(f"{k}={v}" for k, v in (decl.get("arms") or {}).items())
    said = "analysed with (an alternative, not the declaration)" if analysis.get("departures") else "declared"
    from harness.ledger.record import fdr_words  # the level the ledger gave (stats.fdr)

    level = fdr_words(decl.get("fdr")) if not analysis.get("departures") else ""
    return (f"{said}: metric {analysis['metric']} ({unit}{words}); margin {margin}; {level or f'alpha {alpha:g}'}; "
            f"baseline {analysis['baseline']}; factor {analysis.get('factor')}" + (f" ({arms})" if arms else "") + design)


def margin_line(m: dict, f, metric: str) -> str:
    """The margin an analysis used, and when it was declared (or that there is none, or it was estimated)."""
    if m["source"] == "auto":
        return (f"auto, ESTIMATED FROM THE DATA: ±{f.value(m['value'])}{f.unit} ('beyond' against "
                f"±{f.value(m['high'])}, 'equivalent' against ±{f.value(m['low'])})")
    if m["source"] == "none":
        return f"none for {metric} (better or worse than 0 only; no equivalence claim)"
    return f"±{f.value(m['value'])}{f.unit} {m.get('declared') or 'declared before the data'}"


def lines(analysis: dict) -> list[str]:
    """The screen, one string a line (no markup)."""
    f = Fmt(analysis)
    out = [f"{analysis.get('experiment')}: {'sequential decision' if is_sequential(analysis) else 'verdict'}"]
    out += [f"  {v}" for v in verdicts(analysis)]
    if analysis.get("departures"):
        out.append("ALTERNATIVE ANALYSIS, not the declared one: " + "; ".join(analysis["departures"])
                   + (f" (written to {analysis['written_to']}/)" if analysis.get("written_to") else ""))
    out.append(declaration_line(analysis))
    if is_sequential(analysis):
        for name, c in analysis.get("comparisons", {}).items():
            out.append(f"fixed-N reading of {name} vs {c['baseline']} on the same seeds (information only: it "
                       f"does not account for the looks): {c['verdict']['code']}, {f.signed(c['mean_diff'])}{f.unit}")
    arms = analysis["arms"]
    n = {a["n"] for a in arms.values()}
    seeds = f"{n.pop()} seeds" if len(n) == 1 else "seeds " + ", ".join(f"{k} {a['n']}" for k, a in arms.items())
    down = (analysis.get("diverged") or {}).get("counts") or {}
    if any(down.values()):  # the finished runs above; the diverged ones said beside them
        rule = analysis["diverged"]["rule"]
        seeds += (" finished (diverged: " + ", ".join(f"{k} {v}" for k, v in down.items() if v)
                  + (", counted as worst" if rule == "worst" else ", left out") + ")")
    out.append(f"runs: {seeds} x {len(arms)} arms; {pairing_line(analysis)}")
    cert = analysis.get("certificate")
    if isinstance(cert, dict) and cert.get("line"):
        out.append(str(cert["line"]))
    out.append("  " + "   ".join(f"{name} {f.value(a['mean'])} ± {f.value(a['std'])}{f.unit}" for name, a in arms.items()))
    for name, c in analysis.get("comparisons", {}).items():
        iv = c["intervals"]["zero"]
        out.append(f"  {name} - {c['baseline']} = {f.signed(c['mean_diff'])}{f.unit}, {_pct(iv['level'])} CI "
                   f"{f.interval([iv['low'], iv['high']])}, {c['n_pairs']} pairs, sd of differences "
                   f"{f.value(c['noise']['std_diff'])}{f.unit}")
    ident = analysis.get("identity") or {}
    if ident.get("allowed_mixed"):  # said on the screen, not only in the tables
        differs = "; ".join(f"{arm} vs {c['baseline']}: {', '.join(c['differs']) or 'nothing'}"
                            for arm, c in (ident.get("comparisons") or {}).items())
        out.append(f"MIXED IDENTITY, compared anyway (--allow-mixed-identity): {differs}; a difference mixes "
                   f"the factor with these parts")
    left = [f"seed {e['seed']} arm {e['arm']}: {e['reason']}" for e in analysis.get("excluded") or []]
    left += [f"{n['arm']} vs {n['baseline']} not compared: {n['reason']}" for n in analysis.get("not_compared") or []]
    left += [f"{u['path']} unreadable: {u['reason']}" for u in analysis.get("unreadable") or []]
    if left:  # what the verdict does not rest on, named on the screen
        out.append(f"LEFT OUT ({len(left)}):")
        out += [f"  - {line}" for line in left[:SHOW_LEFT_OUT]]
        if len(left) > SHOW_LEFT_OUT:
            out.append(f"  ... and {len(left) - SHOW_LEFT_OUT} more (report.md names each)")
    if analysis.get("data_unverified"):
        out.append(f"data not verified: {analysis['data_unverified']} run(s) (data.verify=false)")
    if analysis.get("examples_set_aside"):
        out.append(set_aside_line(analysis["examples_set_aside"]))
    return out


def set_aside_line(note: dict) -> str:
    """Said once for every run whose per-example record no declared metric owns (results.set_aside_note)."""
    return (f"per-example records set aside in {note['runs']} of {note['of']} runs ({note['why']}): the runs and "
            f"their metrics are kept, the records are in result.json's examples_set_aside, unused by this "
            f"analysis; to use them, {note['fix']}")


def pairing_line(analysis: dict) -> str:
    """What the pairing rests on, said as it is: proven by fingerprints that covered the whole
    training, by seed only for a black box, or not proven (each missing or partial fingerprint named,
    with what fills it). Each fingerprint's own line says what it covers."""
    block = analysis.get("pairing") or {}
    checks = block.get("checks") or {}
    if block.get("basis") and block.get("basis") != "fingerprints":
        return f"pairing: {block['basis']}"
    said = "; ".join(c["line"] for c in checks.values())
    if analysis.get("pairing_verified"):
        return f"pairing verified: {said}"
    if any(c["state"] in ("missing", "partial") for c in checks.values()):
        return f"pairing NOT verified: {said}"
    # nothing the results say arms must share (results from another tool): what was recorded, as it is
    return "pairing: no shared fingerprints to verify" + "".join(
        f"; {c['line']}" for c in checks.values() if c["state"] != "missing")


def _pct(level: float) -> str:
    return f"{100 * level:.2f}".rstrip("0").rstrip(".") + "%"
