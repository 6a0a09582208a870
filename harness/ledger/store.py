"""The ledger's file: one SQLite database per project (``ledger.path``, default outputs/ledger.sqlite).

Two tables. ``claims``: one row per claim of every analysis written (a comparison of an arm with the
baseline), unique on (folder, declaration, claim): re-analysing a folder under the same declaration
adds nothing; an alternative analysis is a row flagged ``alternative`` whose claim names its
departures, never counted as a new claim. ``tests``: one row per experiment declared with an online
FDR method (``stats.fdr``), in declaration order: its alpha_t, then its decision p and rejection once
analysed. Every write is one ``BEGIN IMMEDIATE`` transaction (the database's write lock is taken
before anything is read), so experiments, sweep jobs and SLURM jobs that write at once on a shared
file system neither lose nor duplicate a row. A file that is not a ledger, or a damaged one, is
refused with its name, never rebuilt.
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from harness import HarnessError

SCHEMA = "harness.ledger/1"
BUSY_TIMEOUT_S = 120  # a writer waits this long for another's transaction (a sweep of 40 jobs at once)

CLAIM_COLUMNS = ("recorded_at", "folder", "experiment", "declaration", "code", "metric", "baseline", "arm", "claim",
                 "effect", "ci_low", "ci_high", "ci_level", "p_raw", "p_decision", "verdict", "alpha", "alternative",
                 "departures", "test")
TEST_COLUMNS = ("id", "declared_at", "folder", "experiment", "declaration", "method", "level", "alpha", "pvalue",
                "rejected", "decided_at", "decision_time")
# Added to the tests of a ledger made before them (the asynchronous rules need each test's end):
# a test decided then counts as known to the next one, as the synchronous rules had it.
_ADDED = {"decided_at": "TEXT", "decision_time": "INTEGER"}

# One text for SQLite and PostgreSQL (postgres.py): ID is each one's auto-increment key, and
# DOUBLE PRECISION keeps every digit of alpha_t in both (PostgreSQL's REAL is 4 bytes).
_TABLES = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tests (
    id ID, declared_at TEXT NOT NULL, folder TEXT NOT NULL, experiment TEXT NOT NULL,
    declaration TEXT NOT NULL, method TEXT NOT NULL, level DOUBLE PRECISION NOT NULL,
    alpha DOUBLE PRECISION NOT NULL, pvalue DOUBLE PRECISION, rejected INTEGER, decided_at TEXT,
    decision_time INTEGER, UNIQUE (folder, declaration));
CREATE TABLE IF NOT EXISTS claims (
    id ID, recorded_at TEXT NOT NULL, folder TEXT NOT NULL, experiment TEXT NOT NULL,
    declaration TEXT NOT NULL, code TEXT, metric TEXT NOT NULL, baseline TEXT NOT NULL, arm TEXT NOT NULL,
    claim TEXT NOT NULL, effect DOUBLE PRECISION, ci_low DOUBLE PRECISION, ci_high DOUBLE PRECISION,
    ci_level DOUBLE PRECISION, p_raw DOUBLE PRECISION, p_decision DOUBLE PRECISION, verdict TEXT NOT NULL,
    alpha DOUBLE PRECISION NOT NULL, alternative INTEGER NOT NULL, departures TEXT NOT NULL,
    test INTEGER REFERENCES tests (id), UNIQUE (folder, declaration, claim));
INSERT INTO meta (key, value) VALUES ('schema', '{SCHEMA}') ON CONFLICT DO NOTHING
"""


class LedgerError(HarnessError):
    """The ledger cannot be read or written as asked; the message names the file."""


class LedgerRefused(HarnessError):
    """A database that is not a harness ledger (raised inside the check, said as a LedgerError)."""


class _Queries:
    """A connection whose execute() takes ``?`` placeholders, whatever the backend's own."""

    def __init__(self, con, sql):
        self.con, self.sql = con, sql

    def execute(self, text: str, args=()):
        return self.con.execute(self.sql(text), args)


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


class Ledger:
    """One ledger file. ``Ledger(path)`` checks an existing file (``create=False``: it must exist).
    A backend is these few methods: _connect, _begin, _tables, _columns, _integrity, _sql (postgres.py)."""

    ID = "INTEGER PRIMARY KEY AUTOINCREMENT"
    errors = (sqlite3.DatabaseError, LedgerRefused)
    unavailable = (sqlite3.OperationalError,)

    def __init__(self, path, *, create: bool = True):
        self.path = Path(path)
        if not self.path.exists():
            if not create:
                raise LedgerError(f"there is no ledger at {self.path}: an experiment run with ledger.path={self.path} "
                                  "makes it (the default is outputs/ledger.sqlite under the launch directory).")
            self.path.parent.mkdir(parents=True, exist_ok=True)
        elif not self.path.is_file():
            raise LedgerError(f"{self.path} is not a file, so it cannot be the ledger.")
        with self._transaction(check=True):
            pass

    def _connect(self) -> sqlite3.Connection:
        try:
            con = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as e:
            raise LedgerError(f"the ledger {self.path} cannot be opened ({e}).") from None
        con.row_factory = sqlite3.Row
        return con

    def _begin(self, con) -> None:
        con.execute("BEGIN IMMEDIATE")  # the write lock before anything is read

    def _tables(self, con) -> set:
        return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def _integrity(self, con) -> str:
        return con.execute("PRAGMA quick_check").fetchone()[0]

    def _columns(self, con, table: str) -> set:
        return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}

    def _sql(self, text: str) -> str:
        return text

    def _said(self, error) -> str:
        """The database's error as a message quotes it."""
        return str(error)

    @contextmanager
    def _transaction(self, check: bool = False):
        """One write transaction: the write lock first, then reads and writes, then commit; anything
        raised rolls it back. The database's own errors come out as a LedgerError naming the ledger."""
        con, open_ = self._connect(), False
        try:
            self._begin(con)
            open_ = True
            if check:
                self._check(con)
            yield _Queries(con, self._sql)
            con.execute("COMMIT")
            open_ = False
        except self.errors as e:
            if isinstance(e, self.unavailable):  # locked past the timeout, read-only, disk full: not damage
                raise LedgerError(f"the ledger {self.path} could not be written ({self._said(e)}).") from None
            raise LedgerError(f"{self.path} is not a readable harness ledger ({self._said(e)}); it is left as it is. Move it "
                              "aside (or restore it from a backup) to start another ledger there.") from None
        finally:
            if open_:
                try:
                    con.execute("ROLLBACK")
                except self.errors:
                    pass
            con.close()

    def _check(self, con) -> None:
        names = self._tables(con)
        if names and not {"meta", "tests", "claims"} <= names:
            raise LedgerRefused(f"it holds other tables ({', '.join(sorted(names))})")
        if names:
            row = con.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            value = None if row is None else (row["value"] if isinstance(row, dict) else row[0])
            if value != SCHEMA:
                raise LedgerRefused(f"its schema is {value or 'missing'}, not {SCHEMA}")
            problem = self._integrity(con)
            if problem != "ok":
                raise LedgerRefused(f"integrity check: {problem}")
            have = self._columns(con, "tests")
            for column, kind in _ADDED.items():
                if column not in have:
                    con.execute(f"ALTER TABLE tests ADD COLUMN {column} {kind}")
        else:
            for statement in filter(str.strip, _TABLES.replace(" ID,", f" {self.ID},").split(";")):
                con.execute(statement)

    # -- claims ----------------------------------------------------------------------------------

    def append_claims(self, rows) -> int:
        """Add claim rows (dicts with CLAIM_COLUMNS but recorded_at); the number added. A row whose
        (folder, declaration, claim) is already there is not added again."""
        added = 0
        stamp = now()
        with self._transaction() as con:
            for row in rows:
                values = {**row, "recorded_at": stamp}
                cur = con.execute(f"INSERT INTO claims ({', '.join(CLAIM_COLUMNS)}) "
                                  f"VALUES ({', '.join('?' * len(CLAIM_COLUMNS))}) ON CONFLICT DO NOTHING",
                                  [values.get(c) for c in CLAIM_COLUMNS])
                added += cur.rowcount
        return added

    def claims(self, *, experiment: str | None = None, metric: str | None = None, since: str | None = None,
               alternatives: bool = False) -> list[dict]:
        where, args = ["1 = 1"], []
        for column, value in (("experiment", experiment), ("metric", metric)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if since is not None:
            where.append("recorded_at >= ?")
            args.append(since)
        if not alternatives:
            where.append("alternative = 0")
        with self._transaction() as con:
            rows = con.execute(f"SELECT * FROM claims WHERE {' AND '.join(where)} ORDER BY id", args).fetchall()
        return [dict(r) for r in rows]

    # -- the online FDR stream -------------------------------------------------------------------

    def reserve_test(self, *, folder: str, experiment: str, declaration: str, method: str, level: float,
                     alpha_for) -> tuple[dict, int]:
        """The test row of (folder, declaration), made now when there is none, with the level
        ``alpha_for(earlier tests of this method and level)`` gives; (row, its position in that stream, from 1)."""
        with self._transaction() as con:
            stream = [dict(r) for r in con.execute(
                "SELECT * FROM tests WHERE method = ? AND level = ? ORDER BY id", (method, level))]
            for position, row in enumerate(stream, 1):
                if row["folder"] == folder and row["declaration"] == declaration:
                    return row, position
            alpha = float(alpha_for(stream))
            row = dict(con.execute("INSERT INTO tests (declared_at, folder, experiment, declaration, method, level, "
                                   "alpha) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING *",
                                   (now(), folder, experiment, declaration, method, level, alpha)).fetchone())
        return row, len(stream) + 1

    def settle_test(self, test_id: int, pvalue: float, rejected: bool) -> None:
        """Record a test's decision p and rejection, once: the first declared analysis decides it. Its
        decision time (onlineFDR's decision.times, Zrnic et al.'s E_t) is the number of tests of its
        stream declared by now: the tests declared after this transaction are the ones that know it."""
        with self._transaction() as con:
            con.execute("UPDATE tests SET pvalue = ?, rejected = ?, decided_at = ?, decision_time = (SELECT COUNT(*) "
                        "FROM tests AS t WHERE t.method = tests.method AND t.level = tests.level) "
                        "WHERE id = ? AND pvalue IS NULL", (pvalue, int(rejected), now(), test_id))

    def withdraw_test(self, test_id: int) -> bool:
        """Remove a reserved test that was never decided, because nothing ran for it (a refused run):
        the stream reads as if it had never been declared. False when it was decided already."""
        with self._transaction() as con:
            gone = con.execute("DELETE FROM tests WHERE id = ? AND pvalue IS NULL", (test_id,)).rowcount
        return bool(gone)

    def tests(self, method: str | None = None, level: float | None = None) -> list[dict]:
        where, args = ["1 = 1"], []
        if method is not None:
            where.append("method = ?")
            args.append(method)
        if level is not None:
            where.append("level = ?")
            args.append(level)
        with self._transaction() as con:
            rows = con.execute(f"SELECT * FROM tests WHERE {' AND '.join(where)} ORDER BY id", args).fetchall()
        return [dict(r) for r in rows]
