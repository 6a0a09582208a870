#!/usr/bin/env bash
# A PostgreSQL server of its own on this machine, for the tests of the ledger's ledger.url path
# (tests/test_ledger_postgres.py).
#
#   sudo scripts/postgres_local.sh start   # install (Debian's packages) if needed, make a cluster, start it
#   sudo scripts/postgres_local.sh stop    # stop it and remove its folder
#
# As root, without systemd: the cluster runs as user postgres under one temporary folder
# (PG_LOCAL_DIR, default /tmp/harness-pg), on its unix socket there and port 5433 (not the system
# cluster's), with trust authentication on that socket only. It prints the URL the tests read from
# $HARNESS_TEST_POSTGRES_URL:  postgresql://postgres@/harness_ledger?host=/tmp/harness-pg&port=5433
set -euo pipefail

DIR="${PG_LOCAL_DIR:-/tmp/harness-pg}"
PORT="${PG_LOCAL_PORT:-5433}"

[ "$(id -u)" = 0 ] || { echo "postgres_local.sh: run as root (it runs the server as user postgres)." >&2; exit 2; }
BIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)"

case "${1:-}" in
start)
    if [ -z "$BIN" ]; then
        apt-get update -qq  # a fresh machine's package lists may be empty or old
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql >/dev/null
        BIN="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
    fi
    if [ ! -f "$DIR/data/PG_VERSION" ]; then
        mkdir -p "$DIR" && chown postgres "$DIR"
        su postgres -s /bin/sh -c "$BIN/initdb -D $DIR/data -U postgres --auth=trust >$DIR/initdb.log"
    fi
    # already up (an earlier start whose stop never ran): use it; a stale pid file alone does not count
    su postgres -s /bin/sh -c "$BIN/pg_ctl -D $DIR/data status" >/dev/null 2>&1 || \
    su postgres -s /bin/sh -c "$BIN/pg_ctl -D $DIR/data -l $DIR/server.log -w \
        -o \"-k $DIR -p $PORT -c listen_addresses=''\" start" >/dev/null
    su postgres -s /bin/sh -c "$BIN/psql -h $DIR -p $PORT -Atc \"SELECT 1 FROM pg_database WHERE datname='harness_ledger'\" \
        | grep -q 1 || $BIN/createdb -h $DIR -p $PORT harness_ledger"
    echo "export HARNESS_TEST_POSTGRES_URL='postgresql://postgres@/harness_ledger?host=$DIR&port=$PORT'"
    ;;
stop)
    [ -n "$BIN" ] && [ -f "$DIR/data/postmaster.pid" ] && su postgres -s /bin/sh -c "$BIN/pg_ctl -D $DIR/data -w stop" >/dev/null || true
    rm -rf "$DIR"
    ;;
*)
    echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
