"""The tools' command lines: ``--config-dir DIR`` (and ``--config-dir=DIR``, ``-cd``) at any position,
with the Hydra overrides around it kept in their order. One helper for golden, noise_audit, audit, diff."""

from __future__ import annotations

import argparse
import sys


CONFIG_DIR_FLAGS = ("--config-dir", "-cd")


def add_config_dir(p: argparse.ArgumentParser, help: str | None = None) -> None:
    """--config-dir, as python -m harness takes it (shared by the repro tools; read by parse_args)."""
    p.add_argument(*CONFIG_DIR_FLAGS, action="append", default=[], metavar="DIR", help=help or (
        "a folder of your own configs (experiment/, model/, ...), searched before the shipped ones; "
        "anywhere on the command line"))


def parse_args(p: argparse.ArgumentParser, argv=None) -> argparse.Namespace:
    """``p.parse_args(argv)`` for every repro tool (diff, golden, noise_audit, audit), taking
    ``--config-dir DIR`` / ``--config-dir=DIR`` (or ``-cd``) at any position.

    argparse matches a run of positionals once, so ``save FILE --config-dir conf OVERRIDE ...`` left
    the overrides after the flag "unrecognized". The flag is lifted out of argv first (its values go
    to ``args.config_dir``, in order); positionals that an option split from the tool's
    ``overrides`` are appended to them in the order given. It lives here because every repro tool
    imports this module and this module imports none of them.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    dirs, rest, i = [], [], 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            rest += argv[i:]
            break
        flag, eq, value = token.partition("=")
        if flag not in CONFIG_DIR_FLAGS:
            rest.append(token)
            i += 1
            continue
        if not eq:
            value = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("-") else ""
            i += 1
        if not value:
            p.error(f"argument --config-dir/-cd: expected one argument (a folder), as in {flag} DIR")
        dirs.append(value)
        i += 1
    args, extra = p.parse_known_args(rest)
    if extra and isinstance(getattr(args, "overrides", None), list) and not any(e.startswith("-") for e in extra):
        args.overrides += extra
    elif extra:
        p.error("unrecognized arguments: " + " ".join(extra))
    args.config_dir = [*(getattr(args, "config_dir", None) or []), *dirs]
    return args
