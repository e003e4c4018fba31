#!/usr/bin/env bash
# The project's test command (CI runs it through .ci/run):
# installs missing dependencies, then checks formatting, runs clippy with
# warnings denied, and runs every test of the workspace (cargo-nextest when
# installed, cargo test otherwise). Exits non-zero on the first failure.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# A CI run builds once from a clean clone: incremental state would only
# double what the build writes to disk.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

section() { printf '\n===== %s =====\n' "$*"; }

section "dependencies (scripts/install-deps.sh)"
scripts/install-deps.sh
scripts/install-clients.sh
echo "ok"

if command -v shellcheck >/dev/null 2>&1; then
    section "shellcheck"
    shellcheck scripts/*.sh .ci/run
    echo "ok"
fi

section "cargo fmt --all -- --check"
cargo fmt --all -- --check
echo "ok"

section "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

if cargo nextest --version >/dev/null 2>&1; then
    section "cargo nextest run --workspace"
    cargo nextest run --workspace
else
    section "cargo test --workspace"
    cargo test --workspace
fi
