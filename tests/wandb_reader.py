"""Read an offline wandb run (``run-<id>.wandb``) back into plain Python, for the tests.

wandb 0.31 has no Python reader for its own files (``wandb sync`` is done by the Go core), so this
is the one place that knows the format; it is pinned to wandb 0.31 (pyproject: wandb>=0.31,<0.32).

The format (measured, see the project NOTES): a 7-byte header (``:W&B``, uint16 0xBEE1, uint8
version 0), then 32 KiB blocks. Each block holds records, each with a 7-byte header
``<crc32 uint32, length uint16, type uint8>``; type 1 is a whole record, 2/3/4 the first, a middle
and the last piece of one that spans blocks. A block tail shorter than 7 bytes is zero padding.
The CRC32 covers the type byte then the payload; the assembled payload is a serialized
``wandb.proto.wandb_internal_pb2.Record``.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from wandb.proto import wandb_internal_pb2 as pb

HEADER = struct.Struct("<4sHB")  # ident, magic, version
RECORD_HEADER = struct.Struct("<IHB")  # crc32, length, type
BLOCK = 32 * 1024
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


class WandbFileError(ValueError):
    pass


def records(path: str | Path) -> list[pb.Record]:
    """Every record of a .wandb file, in order; raises WandbFileError on a bad header or CRC."""
    data = Path(path).read_bytes()
    ident, magic, version = HEADER.unpack_from(data, 0)
    if ident != b":W&B" or magic != 0xBEE1 or version != 0:
        raise WandbFileError(f"{path}: not a wandb 0.31 run file (header {ident!r} {magic:#x} v{version})")
    out, pieces, pos = [], None, HEADER.size
    while pos + RECORD_HEADER.size <= len(data):
        room = BLOCK - pos % BLOCK
        if room < RECORD_HEADER.size:  # padding at the end of a block
            pos += room
            continue
        crc, length, kind = RECORD_HEADER.unpack_from(data, pos)
        if crc == 0 and length == 0 and kind == 0:  # the zero-filled unwritten rest of the last block
            break
        payload = data[pos + RECORD_HEADER.size: pos + RECORD_HEADER.size + length]
        if len(payload) != length or zlib.crc32(payload, zlib.crc32(bytes([kind]))) != crc:
            raise WandbFileError(f"{path}: bad CRC or truncated record at byte {pos}")
        pos += RECORD_HEADER.size + length
        if kind in (FULL, FIRST) and pieces is None:
            pieces = [payload]
            if kind == FIRST:
                continue
        elif kind in (MIDDLE, LAST) and pieces is not None:
            pieces.append(payload)
            if kind == MIDDLE:
                continue
        else:
            raise WandbFileError(f"{path}: record piece of type {kind} out of order at byte {pos}")
        record = pb.Record()
        record.ParseFromString(b"".join(pieces))
        out.append(record)
        pieces = None
    return out


@dataclass
class OfflineRun:
    """What one offline run holds; nested keys as nested dicts (summary["comparisons"]["_type"])."""

    path: Path
    run_id: str = ""
    name: str = ""
    project: str = ""
    group: str = ""
    job_type: str = ""
    tags: list[str] = field(default_factory=list)
    config: dict = field(default_factory=dict)
    history: list[dict] = field(default_factory=list)  # one dict per logged row, with "_step"
    summary: dict = field(default_factory=dict)
    artifacts: list[dict] = field(default_factory=list)  # {type, name, files: [paths]}
    exit_code: int | None = None

    def table(self, key: str) -> dict:
        """A wandb.Table logged under ``key``: its JSON file {columns, data} under files/."""
        ref = self.summary.get(key)
        if not isinstance(ref, dict) or ref.get("_type") != "table-file":
            raise KeyError(f"{key!r} is not a table in the summary of {self.path}")
        return json.loads((self.path.parent / "files" / ref["path"]).read_text())


def _path(item) -> list[str]:
    """An item's key path: wandb-core writes nested_key (a table's summary entry is a dict)."""
    return list(item.nested_key) if item.nested_key else [item.key]


def _put(target: dict, item, value) -> None:
    *parents, last = _path(item)
    for part in parents:
        target = target.setdefault(part, {})
    target[last] = value


def _history_value(item):
    kind = item.WhichOneof("value")  # typed values (none/boolean/integer/...) or value_json
    if kind is None:
        return json.loads(item.value_json) if item.value_json else None
    return None if kind == "none" else getattr(item, kind)


def read_run(path: str | Path) -> OfflineRun:
    """Read a run file, or the newest offline run under a folder."""
    path = Path(path)
    if path.is_dir():
        found = sorted(path.rglob("offline-run-*/run-*.wandb"), key=lambda p: p.stat().st_mtime)
        if not found:
            raise WandbFileError(f"no run-*.wandb under {path}")
        path = found[-1]
    run = OfflineRun(path=path)
    for rec in records(path):
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            r = rec.run
            run.run_id, run.name, run.project = r.run_id, r.display_name, r.project
            run.group, run.job_type, run.tags = r.run_group, r.job_type, list(r.tags)
            for item in r.config.update:
                _put(run.config, item, json.loads(item.value_json))
        elif kind == "config":
            for item in rec.config.update:
                _put(run.config, item, json.loads(item.value_json))
        elif kind == "history":
            row: dict = {}
            for item in rec.history.item:
                _put(row, item, _history_value(item))
            run.history.append(row)
        elif kind == "summary":
            for item in rec.summary.update:
                _put(run.summary, item, json.loads(item.value_json))
            for item in rec.summary.remove:
                run.summary.pop(_path(item)[0], None)
        elif kind == "artifact":
            a = rec.artifact
            run.artifacts.append({"type": a.type, "name": a.name, "files": [e.path for e in a.manifest.contents]})
        elif kind == "exit":
            run.exit_code = rec.exit.exit_code
    # wandb keeps its own bookkeeping under "_wandb" in the config; the tests want the user's keys
    run.config.pop("_wandb", None)
    return run


def read_runs(folder: str | Path) -> list[OfflineRun]:
    """Every offline run under a folder, oldest first (an online attempt's run-<id>/ is not one)."""
    paths = sorted(Path(folder).rglob("offline-run-*/run-*.wandb"), key=lambda p: p.stat().st_mtime)
    return [read_run(p) for p in paths]
