#!/usr/bin/env bash
# Runs warren's whole test suite, the command the README and CI use.
#
# Runtime tests talk to a real RabbitMQ. Unless AMQP_URL names one, this starts a broker on
# 127.0.0.1:5672 with rabbitmq-local.sh, its management API on 15672: it reuses one that
# already answers there (enabling its management plugin when it is off), and on a fresh
# Debian machine installs rabbitmq-server from Debian's packages first. With AMQP_URL set,
# MANAGEMENT_URL names the management API when it is not on the same host's port 15672.
#
# The diagram tests render `warren diagram --format dot` with Graphviz; when `dot` is missing
# this installs Debian's `graphviz` package (as rabbitmq-local.sh installs rabbitmq-server:
# apt-get as root, or through passwordless sudo). The console's browser tests drive a headless
# Chromium through its WebDriver: Debian's `chromium` and `chromium-driver`, installed the same
# way when missing.
#
# The AsyncAPI tests read every export with the AsyncAPI tools themselves (the official
# parser and modelina, `tests/js/`): Node.js from Debian's `nodejs` and `npm` when `node` is
# missing, then the packages `tests/js/package-lock.json` pins, installed by `npm ci` when
# they are missing or the lockfile changed since.
#
# The inbox tests write to a real PostgreSQL. Unless DATABASE_URL names one, this starts one
# on 127.0.0.1:5432 with postgres-local.sh (reusing one that already answers there, else
# installing Debian's `postgresql` and creating a throw-away cluster with database `test`).
#
# The cross-language tests run a FastStream service (`tests/py/shop.py`): Debian's
# `python3-venv` when `venv` is missing, then a virtualenv at tests/py/.venv with the
# packages `tests/py/requirements.lock` pins by hash, made again when the lockfile changed.
set -euo pipefail
cd "$(dirname "$0")/../.."

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo "$@"
    else echo "test.sh: need root to run: $*" >&2; return 1; fi
}

apt_install() {
    if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"; then
        as_root apt-get update
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"
    fi
}

if ! command -v dot >/dev/null; then
    echo "test.sh: installing graphviz (Graphviz dot, for the diagram tests)" >&2
    apt_install graphviz
fi

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    echo "test.sh: installing Chromium and its driver (for the console's browser tests)" >&2
    apt_install chromium chromium-driver
fi

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "test.sh: installing Node.js (for the AsyncAPI tools in tests/js)" >&2
    apt_install nodejs npm
fi
installed=tests/js/node_modules/.package-lock.json
if [ ! -f "$installed" ] || [ tests/js/package-lock.json -nt "$installed" ]; then
    echo "test.sh: installing tests/js's packages (npm ci, from its lockfile)" >&2
    npm ci --prefix tests/js --no-audit --no-fund >&2
fi

if ! command -v python3 >/dev/null; then
    echo "test.sh: installing Python (for the FastStream service in tests/py)" >&2
    apt_install python3 python3-venv
fi
venv=tests/py/.venv
if [ ! -x "$venv/bin/python" ] || [ tests/py/requirements.lock -nt "$venv/installed" ]; then
    echo "test.sh: installing tests/py's packages (pip, from its lockfile)" >&2
    rm -rf "$venv"
    if ! python3 -m venv "$venv" >/dev/null 2>&1; then
        # Debian keeps venv's pip bootstrap in its own package.
        rm -rf "$venv"
        apt_install python3-venv
        python3 -m venv "$venv"
    fi
    "$venv/bin/pip" install --quiet --disable-pip-version-check --require-hashes \
        -r tests/py/requirements.lock >&2
    touch "$venv/installed"
fi

# Whether something answers HTTP on 127.0.0.1:$1 (bash's /dev/tcp: no curl needed).
answers_http() {
    timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1 && printf 'GET /api/overview HTTP/1.0\r\n\r\n' >&3 && head -c 12 <&3" 2>/dev/null | grep -q '^HTTP/1'
}

if [ -z "${AMQP_URL:-}" ]; then
    # With the management plugin: `warren plan` reads a queue's bindings through it before
    # it migrates the queue (tests/broker/tests/plan.rs, cli/tests/plan.rs).
    bash build-support/scripts/rabbitmq-local.sh start >/dev/null
    export AMQP_URL="amqp://guest:guest@127.0.0.1:5672/%2f"
    # A broker that was already running (reused) may not have it: enabled on the running
    # node, which takes effect at once.
    if ! answers_http 15672; then
        echo "test.sh: enabling rabbitmq_management on the running broker" >&2
        as_root rabbitmq-plugins enable rabbitmq_management >/dev/null
        for _ in $(seq 1 60); do answers_http 15672 && break; sleep 1; done
        answers_http 15672 || { echo "test.sh: the management API does not answer on 15672" >&2; exit 1; }
    fi
fi

if [ -z "${DATABASE_URL:-}" ]; then
    bash build-support/scripts/postgres-local.sh start
    DATABASE_URL=$(bash build-support/scripts/postgres-local.sh url)
    export DATABASE_URL
fi

# The starter as `warren init` writes it, with the feature its comments tell a developer to
# use: its binary and tests link warren-runtime from warren-dylib's shared library.
cargo test --workspace --locked --no-fail-fast --features warren-starter/dynamic-linking "$@"
