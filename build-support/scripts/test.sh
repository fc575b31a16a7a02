#!/usr/bin/env bash
# Runs warren's whole test suite, the command the README and CI use.
#
# Runtime tests talk to a real RabbitMQ. Unless AMQP_URL names one, this starts a broker on
# 127.0.0.1:5672 with rabbitmq-local.sh: it reuses one that already answers there, and on a
# fresh Debian machine installs rabbitmq-server from Debian's packages first.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ -z "${AMQP_URL:-}" ]; then
    RMQ_MGMT_PORT=0 bash build-support/scripts/rabbitmq-local.sh start >/dev/null
    export AMQP_URL="amqp://guest:guest@127.0.0.1:5672/%2f"
fi

cargo test --workspace --locked "$@"
