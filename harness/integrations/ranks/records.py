"""A unit that spans processes: a command arm started through torchrun (``python -m
torch.distributed.run``), each of whose ranks calls ``harness.attach()``.

In the ranks' processes (attach.py): ``world()`` reads which rank this process is from the launcher's
environment (RANK, WORLD_SIZE, LOCAL_RANK). Rank 0 writes the unit's record as a one-process script
does (``attached.json``, its environment in ``attached_env.json``, with the world: size, backend, the
NCCL settings in force); every other rank writes its own record beside it (``attached.rank-R.json``).
Files, not a collective: a rank that never reaches a collective cannot hang the others' records, and
the harness reads them after every rank has ended.

In the harness (command.py): ``combine(record, folder)`` makes one unit record of them. Its data order
covers every rank's shard, in rank order (a digest of the ranks' data-order digests), its batches are
the ranks' sum, its steps and metrics are rank 0's, and ``fingerprints.replicas`` says whether the
ranks' parameters were bit-identical at init, at every recorded step and at the end, as DDP replicas
must be (the gradients are all-reduced before each optimizer step): a rank whose parameters differ is
named, with the first step where they do. ``failed_rank(text)`` finds the rank a launcher named as the
first failure in its output. Torch-free.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from harness import HarnessError

RANK_RECORD = "attached.rank-{rank}.json"  # in HARNESS_RUN_DIR: what rank R > 0 recorded
RANK_ERROR = "attached.rank-{rank}.error.txt"  # the exception a rank's script ended with (attach.py)
# NCCL variables that change which reduction runs, hence the bits; NCCL_DEBUG* only change logging
_NCCL_QUIET = re.compile(r"^NCCL_(DEBUG|DEBUG_FILE|DEBUG_SUBSYS)$")


class RanksFailed(HarnessError):
    """The ranks' records do not make one unit record; the message names the rank."""


@dataclass(frozen=True)
class World:
    rank: int
    size: int
    local_rank: int

    @property
    def spans(self) -> bool:
        """Whether the unit has more than one process."""
        return self.size > 1


def world(env: Mapping = os.environ) -> Optional[World]:
    """This process's place among the unit's ranks, from the launcher's environment; None when no
    launcher set it (a script run as one process)."""
    size, rank = env.get("WORLD_SIZE"), env.get("RANK")
    if size is None or rank is None:
        return None
    try:
        return World(int(rank), int(size), int(env.get("LOCAL_RANK", rank)))
    except ValueError:
        return None


def nccl_settings(env: Mapping = os.environ) -> dict:
    """The NCCL_* variables in force (NCCL_ALGO, NCCL_PROTO, ...), logging ones left out."""
    return {k: env[k] for k in sorted(env) if k.startswith("NCCL_") and not _NCCL_QUIET.match(k)}


def world_block(w: World, backend: Optional[str], env: Mapping = os.environ) -> dict:
    """What the unit's env records of its processes: size, backend, NCCL settings (when any)."""
    block = {"world_size": w.size, "backend": backend}
    nccl = nccl_settings(env)
    if nccl or backend == "nccl":
        block["nccl"] = nccl
    return block


def world_words(block) -> Optional[str]:
    """The identity's value for a unit's world: None for one process (nothing recorded, or a world of
    one), else e.g. "2 processes (gloo)" or "2 processes (nccl; NCCL_ALGO=Ring)"."""
    if not isinstance(block, Mapping):
        return None
    if block.get("world_size") is None:  # a launcher's size decided when it ran, not reported
        return f"torchrun --nproc_per_node={block.get('nproc_per_node')} --nnodes={block.get('nnodes')} (size unknown)"
    if int(block["world_size"]) <= 1:
        return None
    details = [str(block.get("backend") or "backend unknown")]
    details += [f"{k}={v}" for k, v in sorted((block.get("nccl") or {}).items())]
    return f"{int(block['world_size'])} processes ({'; '.join(details)})"


_LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch")


def launched_world(argv) -> Optional[dict]:
    """The world a torchrun command line asks for (--nproc_per_node times --nnodes), for a command
    that reports nothing itself: {"world_size": N, "backend": None} (the backend is the script's,
    unknown; N None where the size is decided at launch: nproc_per_node=gpu), or None when the
    command is not torchrun."""
    argv = [str(a) for a in argv]
    if argv and os.path.basename(argv[0]) == "torchrun":
        options = argv[1:]
    else:
        found = next((i for i, a in enumerate(argv[:-1]) if a == "-m" and argv[i + 1] in _LAUNCHER_MODULES), None)
        if found is None:
            return None
        options = argv[found + 2:]
    values: dict = {}
    i = 0
    while i < len(options) and options[i].startswith("-"):  # the launcher's options end at the script
        name, eq, value = options[i].lstrip("-").replace("-", "_").partition("=")
        if not eq and i + 1 < len(options) and not options[i + 1].startswith("-") \
                and name not in ("standalone", "no_python", "module", "run_path"):
            value, i = options[i + 1], i + 1
        values[name] = value
        i += 1
    nproc, nnodes = values.get("nproc_per_node", "1"), values.get("nnodes", "1")
    if not nproc.isdigit() or not nnodes.isdigit():  # "gpu", "auto", "1:4": decided when it runs
        return {"world_size": None, "backend": None, "nproc_per_node": nproc, "nnodes": nnodes}
    return {"world_size": int(nproc) * int(nnodes), "backend": None}


def rank_record(folder: Path, rank: int) -> Path:
    return Path(folder) / RANK_RECORD.format(rank=rank)


def rank_error(folder: Path, rank: int) -> Path:
    return Path(folder) / RANK_ERROR.format(rank=rank)


def clear(folder: Path) -> None:
    """Remove what the ranks of an earlier run of this unit left (not this run's)."""
    for pattern in ("attached.rank-*.json", "attached.rank-*.error.txt"):
        for path in Path(folder).glob(pattern):
            path.unlink(missing_ok=True)


def combine(record: dict, folder: Path) -> dict:
    """Rank 0's ``record`` with every other rank's fingerprints folded in (see the module doc). A record
    of one process is returned as it is."""
    block = record.get("world")
    size = int(block.get("world_size") or 1) if isinstance(block, Mapping) else 1
    if size <= 1:
        return record
    records = [record]
    for rank in range(1, size):
        path = rank_record(folder, rank)
        try:
            other = json.loads(path.read_text())
        except FileNotFoundError:
            raise RanksFailed(f"rank {rank} of {size} wrote no record ({path.name}): it never called "
                              "harness.attach(), or ended before its run.finish and its exit") from None
        except (OSError, ValueError) as e:
            raise RanksFailed(f"rank {rank} of {size}'s record {path} could not be read as JSON: {e}") from None
        if not isinstance(other, dict) or other.get("error") or not isinstance(other.get("fingerprints"), dict):
            why = other.get("error") if isinstance(other, dict) else None
            raise RanksFailed(f"rank {rank} of {size} recorded no proof: {why or 'its record holds no fingerprints'}")
        records.append(other)
    fps = [r["fingerprints"] for r in records]
    fp = dict(fps[0])
    fp["ranks"] = [{"rank": rank, "data_order": f.get("data_order"), "batches": f.get("batches", 0),
                    "init": f.get("init"), "final": f.get("final"), "steps": len((f.get("steps") or {}).get("params") or [])}
                   for rank, f in enumerate(fps)]
    fp["batches"] = sum(int(f.get("batches") or 0) for f in fps)
    empty = [str(rank) for rank, f in enumerate(fps) if not f.get("data_order")]
    if empty:
        fp["data_order"] = None
        fp["missing"] = {**(fp.get("missing") or {}),
                         "data_order": f"rank {', '.join(empty)} drew no batch through its Run: run.loader, "
                                       "run.ordered or run.consumed on every rank fills it"}
    else:  # every shard, in rank order
        shards = json.dumps([[rank, f["data_order"], int(f.get("batches") or 0)] for rank, f in enumerate(fps)])
        fp["data_order"] = hashlib.blake2b(shards.encode(), digest_size=16).hexdigest()
        if isinstance(fp.get("missing"), dict):
            fp["missing"] = {k: v for k, v in fp["missing"].items() if k != "data_order"} or None
            if fp["missing"] is None:
                del fp["missing"]
    fp["replicas"] = replicas(fps)
    return {**record, "fingerprints": fp}


def replicas(fps: list) -> dict:
    """Whether the ranks' parameters are bit-identical (init, every recorded step, final) to rank 0's,
    and in words which rank differs first where not."""
    head = fps[0]
    differ = []
    for rank, f in enumerate(fps[1:], start=1):
        where = _first_difference(head, f)
        if where is not None:
            differ.append({"rank": rank, "from": where})
    if not differ:
        return {"equal": True, "ranks": len(fps), "says": f"equal across {len(fps)} ranks"}
    says = "; ".join(f"rank {d['rank']}'s parameters differ from rank 0's {d['from']}" for d in differ)
    return {"equal": False, "ranks": len(fps), "differ": differ,
            "says": f"{says}: DDP replicas hold bit-identical parameters, so the ranks' synchronisation broke"}


def _first_difference(a: Mapping, b: Mapping) -> Optional[str]:
    if a.get("init") != b.get("init"):
        return "at init"
    pa, pb = (a.get("steps") or {}).get("params") or [], (b.get("steps") or {}).get("params") or []
    for i, (x, y) in enumerate(zip(pa, pb), start=1):
        if x != y:
            return f"from step {i} (of {len(pa)})"
    if len(pa) != len(pb):
        return f"in their step count ({len(pb)} steps recorded against rank 0's {len(pa)})"
    if a.get("final") != b.get("final"):
        return "at the end"
    return None


def _timeout_words(folder: Path, raised: str, size: Optional[int], timeout_s: Optional[float], owned: bool) -> str:
    """A rank timed out in a collective: how long it waited, and the ranks that did not (those that
    never reached the collective, as far as the ranks' kept exceptions tell). ``owned``: the harness
    opened the process group (train.nproc), so its timeout is train.rank_timeout_s; a script's group
    has the timeout the script gave it, read from the exception where it says (gloo, NCCL)."""
    said = _WAITED.search(raised)
    waited_s = int(said.group(1) or said.group(2)) / 1000 if said else None
    if waited_s is not None and (timeout_s is None or abs(waited_s - timeout_s) > 1e-3):
        limit = (f"the process group's timeout ({waited_s:g} s, the script's own: not train.rank_timeout_s="
                 f"{timeout_s:g} s)" if timeout_s is not None else
                 f"the process group's timeout ({waited_s:g} s; train.rank_timeout_s is null)")
    elif timeout_s is not None:
        limit = f"train.rank_timeout_s={timeout_s:g} s (the process group's timeout"
        limit += ")" if owned or waited_s is not None else ", where the script passed harness.rank_timeout() on)"
    else:
        limit = "the process group's timeout (train.rank_timeout_s is null: torch's default, or the script's own)"
    waited = set()
    for rank in range(size or 0):
        try:
            if "timed out" in rank_error(folder, rank).read_text().lower():
                waited.add(rank)
        except OSError:
            pass
    others = [str(r) for r in range(size or 0) if r not in waited]
    who = (f"rank {', '.join(others)} never reached that collective" if others
           else "another rank never reached that collective")
    return f"it waited in a collective past {limit}: {who} (it hung, or took longer than the timeout)"


# how long a rank waited, as gloo ("Timed out waiting 15000ms for recv") and NCCL ("Timeout(ms)=600000") say it
_WAITED = re.compile(r"waiting (\d+)\s*ms|Timeout\(ms\)=(\d+)")


# torchrun's summary of a failed run: "Root Cause (first observed failure): [0]: ... rank : 1 (local_rank: 1)
#   exitcode : -9 (pid: 123) ..."
_ROOT = re.compile(r"Root Cause \(first observed failure\):(?P<body>.*?)(?:={20,}|\Z)", re.S)
_RANK = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\)")
_EXIT = re.compile(r"exitcode\s*:\s*(-?\d+)")


def failed_rank(text: str) -> Optional[tuple[int, Optional[int]]]:
    """(rank, exit code) of the first failure torchrun reported in its output, or None."""
    found = _ROOT.search(text)
    if found is None:
        return None
    rank, code = _RANK.search(found.group("body")), _EXIT.search(found.group("body"))
    if rank is None:
        return None
    return int(rank.group(1)), (int(code.group(1)) if code else None)


def failure_words(stderr_text: str, folder: Path, ending, size: Optional[int] = None,
                  timeout_s: Optional[float] = None, owned: bool = False) -> Optional[str]:
    """Which rank failed first and how, for a failed unit's message (None: no launcher named one).
    ``ending(code)`` puts an exit code in words (process.ending); ``size``, the unit's ranks where
    known, ``timeout_s``, its train.rank_timeout_s, and ``owned``, whether the harness opened the
    process group, name a collective's timeout (_timeout_words)."""
    found = failed_rank(stderr_text)
    if found is None:
        return None
    rank, code = found
    words = f"rank {rank} failed first"
    if code is not None:
        words += f": it {ending(code)}"
    try:
        raised = rank_error(folder, rank).read_text().strip()
    except OSError:
        raised = ""
    if raised:
        words += f"; it raised {raised.splitlines()[-1]}"
        if "timed out" in raised.lower():
            words += " -- " + _timeout_words(folder, raised, size, timeout_s, owned)
    return words + " (the launcher then ended the other ranks)"
