#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for the tests of the SLURM path (tests/test_slurm.py).
#
#   sudo scripts/slurm_local.sh start   # install (Debian's packages) if needed, start munge, slurmctld, slurmd
#   sudo scripts/slurm_local.sh status  # sinfo, and the config in use
#   sudo scripts/slurm_local.sh stop    # stop the daemons this script started, remove their folder
#
# As root, without systemd (a container, CI): munged runs as user munge, slurmctld and slurmd with
# -f CONF, everything under one temporary folder (SLURM_LOCAL_DIR, default /tmp/harness-slurm). The
# node is this host with its CPUs, one partition "debug". ProctrackType=proctrack/linuxproc and
# TaskPlugin=task/none need no cgroups. Accounting as on a real cluster: slurmdbd on a MariaDB
# server of its own (data in the same folder, listening on 127.0.0.1:3306), so that sacct answers.
# submitit polls sacct for job states: without accounting it reports UNKNOWN, and a job that ends
# without a result (scancel, node failure) then looks unfinished for ever.
#
# The tests find the cluster through $SLURM_CONF (this script prints the line to export) or the
# default file it writes, $SLURM_LOCAL_DIR/slurm.conf.
set -euo pipefail

DIR="${SLURM_LOCAL_DIR:-/tmp/harness-slurm}"
CONF="$DIR/slurm.conf"

need_root() {
    [ "$(id -u)" = 0 ] || { echo "slurm_local.sh: run as root (it starts munged as user munge and the SLURM daemons)." >&2; exit 2; }
}

install() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
        && command -v sbatch >/dev/null && command -v slurmdbd >/dev/null && command -v mariadbd >/dev/null; then
        return
    fi
    echo "slurm_local.sh: installing slurmctld, slurmd, slurm-client, munge, slurmdbd and mariadb-server (apt-get)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        slurmctld slurmd slurm-client munge slurmdbd mariadb-server >/dev/null
}

write_conf() {
    local host cpus
    host="$(hostname -s)"
    cpus="$(nproc)"
    mkdir -p "$DIR"/{state,spool,log}
    cat > "$CONF" <<EOF
ClusterName=harness
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobAcctGatherType=jobacct_gather/none
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=300
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
    # slurmdbd reads slurmdbd.conf beside $SLURM_CONF; it must be 0600 and owned by SlurmUser.
    cat > "$DIR/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
LogFile=$DIR/log/slurmdbd.log
PidFile=$DIR/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StoragePort=3306
StorageUser=slurm
StoragePass=harness-local
StorageLoc=slurm_acct_db
EOF
    chmod 0600 "$DIR/slurmdbd.conf"
}

start_accounting() {
    # MariaDB with its data here (as user mysql), then slurmdbd, then the cluster's record.
    mkdir -p "$DIR/mysql" /run/mysqld
    chown mysql:mysql "$DIR/mysql" /run/mysqld
    chmod 0755 "$DIR"
    if ! mariadb -e "select 1" >/dev/null 2>&1; then
        [ -d "$DIR/mysql/mysql" ] || mariadb-install-db --user=mysql --datadir="$DIR/mysql" --skip-test-db >/dev/null
        mariadbd --user=mysql --datadir="$DIR/mysql" --socket=/run/mysqld/mysqld.sock \
            --pid-file="$DIR/mysql/mariadb.pid" --bind-address=127.0.0.1 --port=3306 \
            --log-error="$DIR/mysql/mariadb.log" >/dev/null 2>&1 &
        for _ in $(seq 1 120); do mariadb -e "select 1" >/dev/null 2>&1 && break; sleep 0.25; done
    fi
    mariadb -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
        CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'harness-local';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
    if ! { [ -f "$DIR/slurmdbd.pid" ] && kill -0 "$(cat "$DIR/slurmdbd.pid")" 2>/dev/null; }; then
        SLURM_CONF="$CONF" slurmdbd
    fi
    for _ in $(seq 1 60); do SLURM_CONF="$CONF" sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.5; done
    SLURM_CONF="$CONF" sacctmgr -i add cluster harness >/dev/null 2>&1 || true  # "already exists" on a restart
}

start_munge() {
    if pgrep -u munge -x munged >/dev/null; then return; fi
    mkdir -p /run/munge /var/log/munge /var/lib/munge /etc/munge
    [ -s /etc/munge/munge.key ] || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
    chown -R munge:munge /run/munge /var/log/munge /var/lib/munge /etc/munge
    chmod 0700 /etc/munge /var/lib/munge /var/log/munge
    chmod 0400 /etc/munge/munge.key
    chmod 0755 /run/munge
    su -s /bin/sh munge -c "munged --force"
}

wait_for_node() {
    local i
    for i in $(seq 1 60); do
        if SLURM_CONF="$CONF" sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
            return 0
        fi
        sleep 0.5
    done
    echo "slurm_local.sh: the node did not come up in 30 s; logs in $DIR/log/" >&2
    SLURM_CONF="$CONF" sinfo >&2 || true
    return 1
}

case "${1:-}" in
    start)
        need_root
        t0=$(date +%s.%N)
        install
        write_conf
        start_munge
        start_accounting
        [ -f "$DIR/slurmctld.pid" ] && kill -0 "$(cat "$DIR/slurmctld.pid")" 2>/dev/null || slurmctld -f "$CONF"
        [ -f "$DIR/slurmd.pid" ] && kill -0 "$(cat "$DIR/slurmd.pid")" 2>/dev/null || slurmd -f "$CONF"
        wait_for_node
        t1=$(date +%s.%N)
        echo "slurm_local.sh: up in $(python3 -c "print(f'{$t1 - $t0:.1f}')") s (node $(hostname -s), partition debug, accounting by slurmdbd)."
        echo "export SLURM_CONF=$CONF"
        ;;
    status)
        SLURM_CONF="$CONF" sinfo
        echo "SLURM_CONF=$CONF"
        ;;
    stop)
        need_root
        for name in slurmd slurmctld slurmdbd mysql/mariadb; do
            if [ -f "$DIR/$name.pid" ]; then
                pid="$(cat "$DIR/$name.pid")"
                kill "$pid" 2>/dev/null || true
                for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
            fi
        done
        rm -rf "$DIR"
        echo "slurm_local.sh: stopped (munged left running: other users of munge may need it)."
        ;;
    *)
        echo "usage: $0 start|status|stop   (as root; SLURM_LOCAL_DIR picks the folder, default /tmp/harness-slurm)" >&2
        exit 2
        ;;
esac
