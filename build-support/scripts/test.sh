#!/usr/bin/env bash
# Runs warren's whole test suite, the command the README and CI use.
#
# Runtime tests talk to a real RabbitMQ. Unless AMQP_URL names one, this starts a broker on
# 127.0.0.1:5672 with rabbitmq-local.sh: it reuses one that already answers there, and on a
# fresh Debian machine installs rabbitmq-server from Debian's packages first.
#
# The diagram tests render `warren diagram --format dot` with Graphviz; when `dot` is missing
# this installs Debian's `graphviz` package (as rabbitmq-local.sh installs rabbitmq-server:
# apt-get as root, or through passwordless sudo).
set -euo pipefail
cd "$(dirname "$0")/../.."

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo "$@"
    else echo "test.sh: need root to run: $*" >&2; return 1; fi
}

if ! command -v dot >/dev/null; then
    echo "test.sh: installing graphviz (Graphviz dot, for the diagram tests)" >&2
    if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends graphviz; then
        as_root apt-get update
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends graphviz
    fi
fi

if [ -z "${AMQP_URL:-}" ]; then
    RMQ_MGMT_PORT=0 bash build-support/scripts/rabbitmq-local.sh start >/dev/null
    export AMQP_URL="amqp://guest:guest@127.0.0.1:5672/%2f"
fi

cargo test --workspace --locked --no-fail-fast "$@"
