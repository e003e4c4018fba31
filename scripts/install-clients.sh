#!/usr/bin/env bash
# Installs the real Kubernetes clients that the compatibility tests
# (tests/clients_python.rs, tests/clients_node.rs) run against watchd, and the gRPC
# building blocks of the generic reflection client (tests/clients_grpc_reflection.rs),
# at pinned versions, into folders the tests own (.tools/ is ignored by git):
#   - .tools/python: the Python client `kubernetes` (pip --target), for python3 >= 3.10;
#   - .tools/python-grpc: `grpcio`, `grpcio-reflection` and `protobuf` (pip --target, a
#     folder of their own so the `kubernetes` folder stays as pinned), for python3 >= 3.10;
#   - .tools/node:   `@kubernetes/client-node` (npm --prefix), for node 20
#     (2.x needs undici 8, which needs node >= 22.19, so 1.x is pinned).
# kube-rs needs no install: it is a Cargo dev-dependency.
# Idempotent, and silent when the pinned versions are already there.
set -euo pipefail

PYTHON_KUBERNETES_VERSION="37.0.2"
NODE_CLIENT_VERSION="1.4.0"
# The newest releases, all with CPython 3.10+ x86_64 wheels; grpcio-reflection 1.85.1 needs
# grpcio >= 1.85.1 and protobuf >= 7.35.1, < 8. grpcio's own dependency
# (typing-extensions) is left to pip, as the kubernetes client's are.
PYTHON_GRPC_PACKAGES=(grpcio==1.85.3 grpcio-reflection==1.85.1 protobuf==7.36.2)

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$(pwd)"
python_dir="$root/.tools/python"
node_dir="$root/.tools/node"
python_grpc_dir="$root/.tools/python-grpc"

log() { printf 'install-clients: %s\n' "$*" >&2; }

# Runs a command with its output kept in a temp file, shown only if it fails.
quietly() {
    local out status
    out="$(mktemp)"
    status=0
    "$@" >"$out" 2>&1 || status=$?
    if [ "$status" -ne 0 ]; then
        cat "$out" >&2
        log "failed ($status): $*"
    fi
    rm -f "$out"
    return "$status"
}

# --- Python: kubernetes ----------------------------------------------------
python_installed_version() {
    local meta="$python_dir/kubernetes-$PYTHON_KUBERNETES_VERSION.dist-info/METADATA"
    [ -f "$meta" ] && [ -f "$python_dir/kubernetes/__init__.py" ] &&
        sed -n 's/^Version: //p' "$meta"
}

if [ "$(python_installed_version || true)" != "$PYTHON_KUBERNETES_VERSION" ]; then
    command -v python3 >/dev/null 2>&1 || {
        log "python3 not found"
        exit 1
    }
    log "installing Python kubernetes==$PYTHON_KUBERNETES_VERSION into .tools/python"
    rm -rf "$python_dir"
    mkdir -p "$python_dir"
    # --target keeps it out of the system's site-packages; the tests set PYTHONPATH.
    quietly python3 -m pip install --disable-pip-version-check --no-input \
        --no-warn-conflicts --root-user-action=ignore --quiet \
        --target "$python_dir" "kubernetes==$PYTHON_KUBERNETES_VERSION"
fi

# --- Python: grpcio, grpcio-reflection, protobuf --------------------------
# Whether every pinned package is there: its dist-info folder (named with underscores)
# has the pinned version.
python_grpc_installed() {
    local spec name version meta
    for spec in "${PYTHON_GRPC_PACKAGES[@]}"; do
        name="${spec%%==*}"
        version="${spec#*==}"
        meta="$python_grpc_dir/${name//-/_}-$version.dist-info/METADATA"
        if [ ! -f "$meta" ] || [ "$(sed -n 's/^Version: //p' "$meta")" != "$version" ]; then
            return 1
        fi
    done
}

if ! python_grpc_installed; then
    command -v python3 >/dev/null 2>&1 || {
        log "python3 not found"
        exit 1
    }
    log "installing Python ${PYTHON_GRPC_PACKAGES[*]} into .tools/python-grpc"
    rm -rf "$python_grpc_dir"
    mkdir -p "$python_grpc_dir"
    # Wheels only: without one for this Python, fail now rather than compile grpcio's C++
    # for many minutes.
    quietly python3 -m pip install --disable-pip-version-check --no-input \
        --no-warn-conflicts --root-user-action=ignore --quiet --only-binary=:all: \
        --target "$python_grpc_dir" "${PYTHON_GRPC_PACKAGES[@]}"
fi

# --- Node: @kubernetes/client-node -----------------------------------------
node_installed_version() {
    local pkg="$node_dir/node_modules/@kubernetes/client-node/package.json"
    [ -f "$pkg" ] && node -p "require(process.argv[1]).version" "$pkg" 2>/dev/null
}

if [ "$(node_installed_version || true)" != "$NODE_CLIENT_VERSION" ]; then
    for tool in node npm; do
        command -v "$tool" >/dev/null 2>&1 || {
            log "$tool not found"
            exit 1
        }
    done
    log "installing @kubernetes/client-node@$NODE_CLIENT_VERSION into .tools/node"
    rm -rf "$node_dir"
    mkdir -p "$node_dir"
    quietly npm install --prefix "$node_dir" --save-exact --no-audit --no-fund \
        --loglevel=error "@kubernetes/client-node@$NODE_CLIENT_VERSION"
fi
