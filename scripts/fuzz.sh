#!/usr/bin/env bash
# Runs each cargo-fuzz target for a bounded time (default 60 s each):
#   scripts/fuzz.sh [SECONDS] [TARGET ...]
# Installs cargo-fuzz if missing. libFuzzer needs nightly-only compiler flags; on a stable
# toolchain RUSTC_BOOTSTRAP=1 enables them for this run only.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

secs="${1:-60}"
shift || true
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz list)
fi
for t in "${targets[@]}"; do
    echo "== fuzzing $t for ${secs}s"
    RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir fuzz "$t" -- -max_total_time="$secs" -rss_limit_mb=2048
done
