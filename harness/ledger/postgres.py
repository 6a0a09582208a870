"""The ledger in PostgreSQL (``ledger.url``): one database for a team, the same tables and rules.

Every write transaction first takes one transaction-level advisory lock, so writers run one after
another as SQLite's BEGIN IMMEDIATE makes them (the level of a new test reads every test before it);
readers are not blocked. The tables are made on first use. psycopg (``pip install "psycopg[binary]"``)
is imported only here.
"""

from __future__ import annotations

from harness.config.ledger_spec import is_url, shown
from harness.ledger.store import Ledger, LedgerError, LedgerRefused

LOCK_KEY = 32_032_032  # pg_advisory_xact_lock's key: the harness ledger's writers


class PostgresLedger(Ledger):
    ID = "BIGSERIAL PRIMARY KEY"

    def __init__(self, url: str, *, create: bool = True):
        try:
            import psycopg
        except ImportError:
            raise LedgerError(f"ledger.url={shown(url)} needs psycopg: pip install \"psycopg[binary]\".") from None
        self.psycopg, self.url, self.path = psycopg, url, shown(url)
        self.errors, self.unavailable = (psycopg.DatabaseError, LedgerRefused), (psycopg.OperationalError,)
        with self._transaction(check=True):
            pass

    def _connect(self):
        from psycopg.rows import dict_row

        try:
            return self.psycopg.connect(self.url, autocommit=True, row_factory=dict_row)
        except self.psycopg.Error as e:
            raise LedgerError(f"the ledger {self.path} cannot be reached ({self._said(e)}).") from None

    def _said(self, error) -> str:
        return shown(str(error).strip())  # the server's words, without a password ($PGPASSWORD's included)

    def _begin(self, con) -> None:
        con.execute("BEGIN")
        con.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))

    def _tables(self, con) -> set:
        return {r["table_name"] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")}

    def _columns(self, con, table: str) -> set:
        return {r["column_name"] for r in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = %s", (table,))}

    def _integrity(self, con) -> str:
        return "ok"  # the server keeps its own files whole

    def _sql(self, text: str) -> str:
        return text.replace("?", "%s")


def open_ledger(where, *, create: bool = True) -> Ledger:
    """The ledger at a path (SQLite) or a postgresql:// URL."""
    return PostgresLedger(where, create=create) if is_url(where) else Ledger(where, create=create)
