#!/usr/bin/env bash
# postgres-local.sh — a throw-away PostgreSQL server on loopback, without systemd, for the
# tests that write to a database (tests/broker/tests/inbox.rs).
#
# Usage: postgres-local.sh start|stop|url
#
#   start  reuse a server that already answers on 127.0.0.1:$PG_PORT; otherwise install
#          Debian's `postgresql` if it is missing, create a cluster in $PG_DIR (trust
#          authentication on loopback only, user `postgres`, database `test`) and start it.
#          Idempotent.
#   stop   stop the cluster this script started.
#   url    print the URL the tests use (`DATABASE_URL`).
#
# Settings (environment):
#   PG_DIR      the cluster's data and socket dir   (default /tmp/postgres-local)
#   PG_PORT     port on 127.0.0.1                   (default 5432)
#   PG_TIMEOUT  seconds to wait for startup         (default 60)
#
# PostgreSQL refuses to run as root: as root, the cluster belongs to the `postgres` user the
# package creates. Installing needs root (or passwordless sudo).
set -euo pipefail

PG_DIR=${PG_DIR:-/tmp/postgres-local}
PG_PORT=${PG_PORT:-5432}
PG_TIMEOUT=${PG_TIMEOUT:-60}

log() { echo "[postgres-local] $*" >&2; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo "$@"
    else log "need root to run: $*"; return 1; fi
}

# Runs a PostgreSQL program as the cluster's owner: `postgres` when this script runs as root.
as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

answers() {
    timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PG_PORT" 2>/dev/null
}

bin_dir() {
    ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1
}

install() {
    [ -n "$(bin_dir)" ] && return 0
    log "installing Debian's postgresql"
    if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql; then
        as_root apt-get update
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql
    fi
}

start() {
    if answers; then
        log "a server already answers on 127.0.0.1:$PG_PORT: reusing it"
        return 0
    fi
    install
    local bin
    bin=$(bin_dir)
    mkdir -p "$PG_DIR"
    [ "$(id -u)" = 0 ] && chown postgres "$PG_DIR"
    if [ ! -f "$PG_DIR/data/PG_VERSION" ]; then
        as_owner "$bin/initdb" -D "$PG_DIR/data" -U postgres --auth=trust >/dev/null
    fi
    as_owner "$bin/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/log" -w -t "$PG_TIMEOUT" \
        -o "-h 127.0.0.1 -p $PG_PORT -k $PG_DIR" start >/dev/null
    if ! as_owner "$bin/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = 'test'" | grep -q 1; then
        as_owner "$bin/createdb" -h 127.0.0.1 -p "$PG_PORT" -U postgres test
    fi
    log "started on 127.0.0.1:$PG_PORT ($PG_DIR)"
}

stop() {
    local bin
    bin=$(bin_dir)
    [ -n "$bin" ] && [ -f "$PG_DIR/data/postmaster.pid" ] \
        && as_owner "$bin/pg_ctl" -D "$PG_DIR/data" -m fast stop >/dev/null
    return 0
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    url) echo "postgres://postgres@127.0.0.1:$PG_PORT/test" ;;
    *) echo "usage: $0 start|stop|url" >&2; exit 2 ;;
esac
