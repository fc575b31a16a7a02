#!/usr/bin/env bash
# Runs the whole test suite (test.sh) while a competing load keeps every core busy, as on a
# shared CI runner: a test that passes only on a quiet machine hides what a loaded production
# host does, and one that fails because the machine is slow proves nothing about warren.
#
#   bash build-support/scripts/test-under-load.sh [runs] [-- cargo test arguments]
#
# runs          how many runs in a row must pass (default 3); it stops at the first failure
# LOAD_PER_CORE busy processes per core (default 2: a load average of about 3 per core
#               with the suite's own work, the 8-15 seen on two shared cores)
#
# The load is plain busy loops (no package to install), stopped when this script exits,
# however it exits. Each run's output goes to target/test-under-load/run-N.log.
set -euo pipefail
cd "$(dirname "$0")/../.."

runs=3
if [ $# -gt 0 ] && [ "$1" != "--" ]; then runs=$1; shift; fi
[ "${1:-}" = "--" ] && shift

cores=$(nproc)
per_core=${LOAD_PER_CORE:-2}
busy=()
stop_load() {
    for pid in "${busy[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap stop_load EXIT
for _ in $(seq 1 $((cores * per_core))); do
    bash -c 'while :; do :; done' &
    busy+=($!)
done
echo "test-under-load: ${#busy[@]} busy processes on $cores cores; $runs runs" >&2

logs=target/test-under-load
mkdir -p "$logs"
for run in $(seq 1 "$runs"); do
    started=$(date +%s)
    log="$logs/run-$run.log"
    if bash build-support/scripts/test.sh "$@" >"$log" 2>&1; then
        echo "test-under-load: run $run passed in $(($(date +%s) - started)) s" \
            "(load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    else
        echo "test-under-load: run $run FAILED after $(($(date +%s) - started)) s; see $log" >&2
        grep -E "^test .* FAILED|^failures:|panicked at" "$log" | head -40 >&2 || true
        exit 1
    fi
done
echo "test-under-load: $runs runs in a row passed" >&2
