#!/usr/bin/env bash
# rabbitmq-cluster.sh — run a throw-away three-node RabbitMQ cluster on loopback, without systemd.
#
# Usage: rabbitmq-cluster.sh start|stop|reset|status|kill N|up N|ctl N <rabbitmqctl args...>|env
#
#   start    install rabbitmq-server (Debian package) if missing, start the nodes, join them
#            into one cluster, and wait until it has formed: every node running, listed as
#            running by every node's `rabbitmqctl cluster_status`, and accepting AMQP.
#            Idempotent: nodes already running are left alone, members are not joined again.
#   stop     stop every node (their data dirs stay: `start` brings the same cluster back);
#            also epmd, if this script started it and no node is left registered.
#   reset    stop, then delete CLUSTER_DIR (a fresh cluster on the next start).
#   status   print each node's state and the cluster's running nodes; exit 0 only when the
#            cluster is formed.
#   kill N   kill -9 node N (1-based): no goodbye to clients or peers. Returns once the
#            process is gone.
#   up N     start node N again on its data dir (after `kill N`) and wait until it has
#            rejoined: every node lists it as running, and it accepts AMQP.
#   ctl N    run rabbitmqctl against node N, e.g. `rabbitmq-cluster.sh ctl 2 list_queues`.
#   env      print `export CLUSTER_...` lines: the AMQP URLs and node names.
#
# Settings (environment):
#   CLUSTER_PORT       AMQP port of node 1; node N listens on CLUSTER_PORT + N - 1 (default 5681)
#   CLUSTER_DIR        parent of the nodes' data dirs node1, node2, node3 (default /tmp/rabbitmq-cluster)
#   CLUSTER_DIST_PORT  Erlang distribution port of node 1; node N: + N - 1 (default CLUSTER_PORT + 20000)
#   CLUSTER_MGMT_PORT  management HTTP port of node 1; node N: + N - 1; 0 = plugin off (default 0)
#   CLUSTER_NODE_PREFIX  node N is named PREFIX-<its AMQP port>@localhost (default cluster)
#   CLUSTER_TIMEOUT    seconds to wait for a node, and for the cluster to form (default 120)
#
# Each node is a rabbitmq-local.sh node (the script next to this one) with its own port, data
# dir, node name and distribution port; this script only adds what makes them a cluster: one
# Erlang cookie for all, the joins, and the waits. Like rabbitmq-local.sh it works as root (CI)
# and as an ordinary user once the package is installed, and everything listens on 127.0.0.1.
# It never reuses or touches a broker it did not start (e.g. the shared one on 5672).
#
# Measured on Debian 12, RabbitMQ 3.10.8, two cores busy with builds: a fresh cluster forms in
# 12-16 s (the three nodes boot at once in about 10 s, then two joins of about 2 s each);
# `up N` rejoins in 5-9 s; `stop` takes about 3 s; each node's RSS is 130-150 MB.
# The nodes join with `join_cluster` rather than peer discovery (classic_config): booted at
# once, classic_config nodes queued about 10 s on its formation lock (26 s to form).
set -euo pipefail

CLUSTER_SIZE=3
CLUSTER_PORT=${CLUSTER_PORT:-5681}
CLUSTER_DIR=${CLUSTER_DIR:-/tmp/rabbitmq-cluster}
CLUSTER_DIST_PORT=${CLUSTER_DIST_PORT:-$((CLUSTER_PORT + 20000))}
CLUSTER_MGMT_PORT=${CLUSTER_MGMT_PORT:-0}
CLUSTER_NODE_PREFIX=${CLUSTER_NODE_PREFIX:-cluster}
CLUSTER_TIMEOUT=${CLUSTER_TIMEOUT:-120}
LOCAL=$(dirname "$0")/rabbitmq-local.sh
RMQ_BIN=/usr/lib/rabbitmq/bin
EPMD=$(command -v epmd || echo /usr/lib/erlang/bin/epmd)

log() { echo "[rabbitmq-cluster] $*" >&2; }

node_port() { echo $((CLUSTER_PORT + $1 - 1)); }
node_name() { echo "$CLUSTER_NODE_PREFIX-$(node_port "$1")@localhost"; }
node_dir() { echo "$CLUSTER_DIR/node$1"; }
node_url() { echo "amqp://guest:guest@127.0.0.1:$(node_port "$1")/%2f"; }
nodes() { seq 1 "$CLUSTER_SIZE"; }

# rabbitmq-local.sh, pointed at node N.
node() {
    local n=$1; shift
    local mgmt=0
    [ "$CLUSTER_MGMT_PORT" != 0 ] && mgmt=$((CLUSTER_MGMT_PORT + n - 1))
    RMQ_PORT=$(node_port "$n") RMQ_DIR=$(node_dir "$n") RMQ_NODENAME=$(node_name "$n") \
        RMQ_DIST_PORT=$((CLUSTER_DIST_PORT + n - 1)) RMQ_MGMT_PORT=$mgmt \
        RMQ_TIMEOUT="$CLUSTER_TIMEOUT" RMQ_REUSE=0 bash "$LOCAL" "$@"
}

ctl() { local n=$1; shift; node "$n" ctl "$@"; }
node_start() { node "$1" start; }

# rabbitmq-diagnostics against node N, in the environment rabbitmq-local.sh gives it (cookie).
diag() {
    local n=$1; shift
    (eval "$(node "$n" env)"; "$RMQ_BIN/rabbitmq-diagnostics" -n "$(node_name "$n")" "$@")
}

check_n() {
    case "${1:-}" in
        [1-9]) [ "$1" -le "$CLUSTER_SIZE" ] && return 0 ;;
    esac
    log "no node '${1:-}': nodes are 1..$CLUSTER_SIZE"; exit 2
}

check_ports() {
    local n
    for n in $(nodes); do
        # 5672/25672 are the shared broker's: a cluster must never land on them.
        if [ "$(node_port "$n")" = 5672 ] || [ $((CLUSTER_DIST_PORT + n - 1)) = 25672 ]; then
            log "CLUSTER_PORT=$CLUSTER_PORT would put node $n on the shared broker's ports; pick another"; exit 2
        fi
    done
}

pid_of() { cat "$(node_dir "$1")/rabbit.pid" 2>/dev/null; }
alive() { local pid; pid=$(pid_of "$1") && [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; }

# The nodes node N lists as running, one a line (from `cluster_status --formatter json`,
# parsed with sed: a fresh Debian machine has no jq).
running_on() {
    ctl "$1" -q cluster_status --formatter json 2>/dev/null \
        | sed -n 's/.*"running_nodes":\[\([^]]*\)\].*/\1/p' | tr -d '"' | tr ',' '\n'
}

# FUNC N for each node N given, all at once (each rabbitmqctl call costs a second of CLI
# boot); fails if any failed.
each_node() {
    local f=$1 n pids=() failed=0; shift
    for n in "$@"; do "$f" "$n" & pids+=($!); done
    for n in "${pids[@]}"; do wait "$n" || failed=1; done
    return $failed
}

# Whether node N runs and lists every node as running.
sees_all() {
    local n=$1 m running
    alive "$n" || return 1
    running=$(running_on "$n") || return 1
    for m in $(nodes); do
        grep -qxF "$(node_name "$m")" <<< "$running" || return 1
    done
}

formed() { each_node sees_all $(nodes); }

# Whether node N is already a member of node 1's cluster (its disc nodes include node 1).
member_of_1() {
    ctl "$1" -q cluster_status --formatter json 2>/dev/null \
        | sed -n 's/.*"disk_nodes":\[\([^]]*\)\].*/\1/p' | tr -d '"' | tr ',' '\n' \
        | grep -qxF "$(node_name 1)"
}

accepts_amqp() {
    diag "$1" -q check_port_connectivity >/dev/null || { log "node $1 does not accept AMQP"; return 1; }
}

# Waits until the cluster has formed and node(s) $@ accept AMQP.
await_formed() {
    local deadline=$((SECONDS + CLUSTER_TIMEOUT))
    until formed; do
        if [ $SECONDS -ge $deadline ]; then
            log "the cluster did not form within ${CLUSTER_TIMEOUT}s"; status >&2 || true; return 1
        fi
        sleep 0.5
    done
    each_node accepts_amqp "$@"
}

# rabbitmqctl N ARGS, its output shown only when it fails (start_app on a joining node
# logs errors that are part of joining).
quiet_ctl() {
    local out
    if ! out=$(ctl "$@" 2>&1); then echo "$out" >&2; log "rabbitmqctl ${*:2} on node $1 failed"; return 1; fi
}
stop_app() { quiet_ctl "$1" -q stop_app; }
start_app() { quiet_ctl "$1" -q start_app; }

write_cookie() {
    # One cookie for every node (and for rabbitmqctl, which reads it from the node's HOME):
    # Erlang nodes only talk to nodes with the same one.
    if [ ! -s "$CLUSTER_DIR/cookie" ]; then
        mkdir -p "$CLUSTER_DIR"
        (umask 077; od -An -N16 -tx1 /dev/urandom | tr -d ' \n' > "$CLUSTER_DIR/cookie")
    fi
    local n home
    for n in $(nodes); do
        home=$(node_dir "$n")/home
        mkdir -p "$home"; chmod 700 "$home"
        if ! cmp -s "$CLUSTER_DIR/cookie" "$home/.erlang.cookie" 2>/dev/null; then
            rm -f "$home/.erlang.cookie"
            cp "$CLUSTER_DIR/cookie" "$home/.erlang.cookie"; chmod 400 "$home/.erlang.cookie"
        fi
    done
}

start() {
    check_ports
    node 1 install
    if formed 2>/dev/null; then log "already running: $(urls)"; return 0; fi
    write_cookie
    if [ ! -e "$CLUSTER_DIR/.we-started-epmd" ] && ! "$EPMD" -names >/dev/null 2>&1; then
        touch "$CLUSTER_DIR/.we-started-epmd"
    fi
    local t0=$SECONDS n joining=()
    # The nodes that need to join node 1: blank ones (no database yet), and ones that booted
    # blank in an earlier, failed start and never joined. A node with data of a cluster
    # restarts into it by itself.
    for n in $(nodes); do
        [ "$n" = 1 ] && continue
        if [ -z "$(ls -A "$(node_dir "$n")/mnesia" 2>/dev/null)" ]; then joining+=("$n"); fi
    done
    # All nodes boot at once: booting takes most of the time. (Their output goes straight to
    # stderr: a pipe through, say, sed would be inherited by the node, which outlives this
    # script, and hold the caller's stderr open.)
    if ! each_node "node_start" $(nodes); then
        log "a node did not start; run '$0 stop' to clean up"; return 1
    fi
    log "nodes booted in $((SECONDS - t0))s"
    for n in $(nodes); do
        [ "$n" = 1 ] && continue
        if [[ " ${joining[*]} " != *" $n "* ]] && ! member_of_1 "$n"; then joining+=("$n"); fi
    done
    if [ ${#joining[@]} -gt 0 ]; then
        # stop_app and start_app at once on every joining node; the joins themselves one at
        # a time, as RabbitMQ's docs do them.
        each_node stop_app "${joining[@]}"
        for n in "${joining[@]}"; do quiet_ctl "$n" -q join_cluster "$(node_name 1)"; done
        each_node start_app "${joining[@]}"
        log "node(s) ${joining[*]} joined node 1 at $((SECONDS - t0))s"
    fi
    await_formed $(nodes)
    log "cluster formed in $((SECONDS - t0))s: $(urls)"
}

stop() {
    local n pids=()
    # In parallel: each stop waits for its node to shut down.
    for n in $(nodes); do
        [ -d "$(node_dir "$n")" ] || continue
        node "$n" stop &
        pids+=($!)
    done
    for n in "${pids[@]}"; do wait "$n" || true; done
    if [ -f "$CLUSTER_DIR/.we-started-epmd" ]; then
        # epmd -kill refuses while other nodes are still registered
        if ! ERL_EPMD_ADDRESS=127.0.0.1 "$EPMD" -names 2>/dev/null | grep -q '^name '; then
            ERL_EPMD_ADDRESS=127.0.0.1 "$EPMD" -kill >/dev/null 2>&1 || true
        fi
        rm -f "$CLUSTER_DIR/.we-started-epmd"
    fi
}

kill_node() {
    local n=$1 pid
    if ! alive "$n"; then log "node $n is not running"; return 1; fi
    pid=$(pid_of "$n")
    kill -9 "$pid"
    local deadline=$((SECONDS + 10))
    while kill -0 "$pid" 2>/dev/null; do
        [ $SECONDS -ge $deadline ] && { log "node $n (pid $pid) survived kill -9"; return 1; }
        sleep 0.05
    done
    rm -f "$(node_dir "$n")/rabbit.pid"
    log "killed node $n (pid $pid)"
}

up_node() {
    local n=$1 t0=$SECONDS
    node "$n" start
    await_formed "$n"
    log "node $n rejoined in $((SECONDS - t0))s"
}

urls() {
    local n out=()
    for n in $(nodes); do out+=("$(node_url "$n")"); done
    (IFS=,; echo "${out[*]}")
}

status() {
    local n ok=0
    for n in $(nodes); do
        if alive "$n"; then
            echo "node $n: running, pid $(pid_of "$n"), $(node_name "$n"), amqp 127.0.0.1:$(node_port "$n"), sees: $(running_on "$n" | tr '\n' ' ')"
        else
            echo "node $n: not running ($(node_name "$n"), amqp 127.0.0.1:$(node_port "$n"))"; ok=1
        fi
    done
    if [ $ok = 0 ] && formed; then echo "cluster formed: $(urls)"; return 0; fi
    echo "cluster not formed"; return 1
}

env_lines() {
    local n names=()
    for n in $(nodes); do names+=("$(node_name "$n")"); done
    echo "export CLUSTER_AMQP_URLS=\"$(urls)\""
    echo "export CLUSTER_NODES=\"$(IFS=,; echo "${names[*]}")\""
    echo "export CLUSTER_DIR=\"$CLUSTER_DIR\""
}

cmd=${1:-status}; shift || true
case "$cmd" in
    start)  start ;;
    stop)   stop ;;
    reset)  stop; rm -rf "$CLUSTER_DIR"; log "removed $CLUSTER_DIR" ;;
    status) status ;;
    kill)   check_n "${1:-}"; kill_node "$1" ;;
    up)     check_n "${1:-}"; up_node "$1" ;;
    ctl)    check_n "${1:-}"; ctl "$@" ;;
    env)    env_lines ;;
    *) echo "usage: $0 start|stop|reset|status|kill N|up N|ctl N <args>|env" >&2; exit 2 ;;
esac
