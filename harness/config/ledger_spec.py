"""The ledger's address, checked before anything is written: ``ledger.url`` and ``ledger.path``.

ledger.url is a PostgreSQL URL (``postgresql://`` or libpq's alias ``postgres://``) and nothing
else: any other scheme would be taken for a file name. It may not hold a password: the URL is
recorded with the config (experiment.json, every result's config, Hydra's .hydra/ files, the output
folder's name), so a password there would be written into files and shown on screens. libpq finds
one itself: $PGPASSWORD, ~/.pgpass ($PGPASSFILE), or a service file ($PGSERVICEFILE, ``?service=``).
ledger.path is a file; a URL there is refused. ``shown`` masks a URL's password in any message.
"""

from __future__ import annotations

import os
import re
from urllib.parse import parse_qsl

SCHEMES = ("postgresql://", "postgres://")  # libpq's URI prefixes (PostgreSQL docs, "Connection URIs")

# user:password@ as libpq reads it: the credentials end at the first '@' before any '/'
_USERINFO_PASSWORD = re.compile(r"(://[^:@/]*):([^@/]*)@")
# password=... as a URL's query or a key=value connection string says it (sslpassword: a key's passphrase)
_KEYWORD_PASSWORD = re.compile(r"(\b(?:ssl)?password\s*=\s*)('[^']*'|[^\s&#]*)", re.IGNORECASE)

HOW_TO_GIVE_A_PASSWORD = (
    "Give the URL without it (postgresql://USER@HOST/DB) and the password as PostgreSQL's own clients "
    "take it: the PGPASSWORD environment variable, a line HOST:PORT:DB:USER:PASSWORD in ~/.pgpass (mode "
    "0600; PGPASSFILE names another file), or a service in ~/.pg_service.conf (PGSERVICEFILE names "
    "another) used as postgresql:///?service=NAME (docs/statistics.md, the ledger).")


def is_url(where) -> bool:
    return isinstance(where, str) and where.startswith(SCHEMES)


def shown(text: str) -> str:
    """``text`` (a URL, or a message quoting one) with every password masked, $PGPASSWORD's too."""
    text = _KEYWORD_PASSWORD.sub(r"\1***", _USERINFO_PASSWORD.sub(r"\1:***@", str(text)))
    secret = os.environ.get("PGPASSWORD")  # (one of a few letters would mask half the words, and hide little)
    return text.replace(secret, "***") if secret and len(secret) >= 4 else text


def has_password(url: str) -> bool:
    """Whether a URL holds a password: user:PASSWORD@ or ?password= / ?sslpassword= (not empty)."""
    userinfo = _USERINFO_PASSWORD.search(url)
    if userinfo and userinfo.group(2):
        return True
    query = url.partition("?")[2].partition("#")[0]
    return any(k.lower() in ("password", "sslpassword") and v for k, v in parse_qsl(query, keep_blank_values=True))


def url_problem(url, key: str = "ledger.url") -> str | None:
    """Why ``url`` cannot be a ledger's URL (None: it can), naming ``key``."""
    if not is_url(url):
        return (f"{key}={shown(url)} is not a PostgreSQL URL: {key} takes postgresql://USER@HOST[:PORT]/DB "
                f"(or postgres://…), and a SQLite ledger is a file, ledger.path=FILE.")
    if has_password(url):
        return (f"{key}={shown(url)} holds a password, and the URL is recorded with the experiment "
                "(experiment.json, each result's config, Hydra's .hydra/ files, the folder's name), so it is "
                f"refused. {HOW_TO_GIVE_A_PASSWORD}")
    return None


def ledger_problem(settings) -> str | None:
    """Why the config's ``ledger`` node cannot be used (None: it can); checked even with
    ledger.enabled=false, since the node is recorded with the config all the same."""
    settings = settings or {}
    url, path = settings.get("url"), settings.get("path")
    if url:
        return url_problem(str(url))
    if path and "://" in str(path):
        return (f"ledger.path={shown(path)} is a URL, not a file: a PostgreSQL ledger is "
                "ledger.url=postgresql://USER@HOST/DB; ledger.path takes a file (default outputs/ledger.sqlite).")
    return None
