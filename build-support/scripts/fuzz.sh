#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for a set time each, seeded from the repository's own
# contracts and schemas. docs/fuzzing.md says what each target covers.
#
#   build-support/scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# SECONDS_PER_TARGET defaults to 60; TARGETs default to every target. The corpus grows in
# fuzz/corpus/<target> from run to run; a crash is saved under fuzz/artifacts/<target>/ and
# the script exits 1 after running the remaining targets. Replay one with
# `RUSTC_BOOTSTRAP=1 cargo fuzz run <target> <file>` from the repository root.
#
# cargo-fuzz builds with nightly `-Z` flags (AddressSanitizer, coverage). This machine has
# only a stable toolchain, which accepts them when RUSTC_BOOTSTRAP=1. CI does not run this:
# it runs the property tests that stand in for it (`fuzz_smoke`, `decode_smoke`).
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"

seconds="${1:-60}"
shift || true
if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    targets=(contract schema decode)
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

export RUSTC_BOOTSTRAP=1
# Cargo caches what rustc said about the target, keyed on the flags but not on
# RUSTC_BOOTSTRAP: one earlier `cargo fuzz` without it leaves a cached "-Z is nightly only"
# refusal that no later run gets past. Dropping the cache costs one rustc call.
target_dir="${CARGO_TARGET_DIR:-$root/fuzz/target}"
rm -f "$target_dir/.rustc_info.json"

# The codegen targets write inputs into scratch folders under the temporary folder; keep
# them here, where the next run clears them, rather than in /tmp.
export TMPDIR="$root/fuzz/scratch"
rm -rf "$TMPDIR"
mkdir -p "$TMPDIR"

# Seeds: every file of the given kind under the given folders, named by its path so files
# with one name in two folders both make it in. Copies never overwrite a grown corpus.
seed() {
    local target="$1" pattern="$2"
    shift 2
    mkdir -p "fuzz/corpus/$target"
    find "$@" -type f -name "$pattern" -not -path '*/snapshots/*' | while read -r file; do
        cp -n "$file" "fuzz/corpus/$target/seed-$(echo "$file" | tr '/' '_')"
    done
}
seed contract '*.yaml' tests/fixtures examples
seed schema '*.json' tests/fixtures examples
seed schema '*.yaml' examples/orders/schemas tests/fixtures/contracts/shared-schemas
# `decode` reads structured input (the `arbitrary` crate): repository files mean nothing to
# it, so it starts from an empty corpus and its templates for valid payloads.
mkdir -p fuzz/corpus/decode

failed=()
for target in "${targets[@]}"; do
    args=(-max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1)
    if [ -f "fuzz/dicts/$target.dict" ]; then
        args+=(-dict="fuzz/dicts/$target.dict")
    fi
    mkdir -p "fuzz/artifacts/$target"
    log="fuzz/artifacts/$target/last-run.log"
    echo "== $target: ${seconds}s (log: $log)"
    if cargo fuzz run "$target" -- "${args[@]}" >"$log" 2>&1; then
        # libFuzzer's closing line: executions, coverage, corpus size, speed, memory.
        grep -E '^#[0-9]+' "$log" | tail -1 || true
    else
        echo "!! $target found a crash (or failed to run): see $log"
        grep -E 'panicked at|ERROR: libFuzzer|SUMMARY|Test unit written' "$log" | head -5 || true
        failed+=("$target")
    fi
done
rm -rf "$TMPDIR"

if [ "${#failed[@]}" -gt 0 ]; then
    echo "targets with crashes: ${failed[*]}"
    exit 1
fi
echo "no crashes in: ${targets[*]}"
