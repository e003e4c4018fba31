#!/usr/bin/env bash
# Installs what watchd's build, tests and demo need, each only if it is missing:
#   - Debian packages etcd-server (/usr/bin/etcd), etcd-client (/usr/bin/etcdctl)
#     and protobuf-compiler (protoc, used by build.rs);
#   - the rustfmt and clippy components (through rustup, if rustup exists).
# Idempotent, and silent when everything is already there.
set -euo pipefail

log() { printf 'install-deps: %s\n' "$*" >&2; }

# --- Debian packages -------------------------------------------------------
missing=()
[ -x /usr/bin/etcd ] || missing+=(etcd-server)
[ -x /usr/bin/etcdctl ] || missing+=(etcd-client)
command -v protoc >/dev/null 2>&1 || missing+=(protobuf-compiler)

if [ "${#missing[@]}" -gt 0 ]; then
    if ! command -v apt-get >/dev/null 2>&1; then
        log "missing ${missing[*]} and apt-get is not available; install them by hand"
        exit 1
    fi
    sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if ! command -v sudo >/dev/null 2>&1; then
            log "missing ${missing[*]}; not root and no sudo: install them by hand"
            exit 1
        fi
        sudo=(sudo)
    fi
    log "installing ${missing[*]}"
    apt_log="$(mktemp)"
    if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >"$apt_log" 2>&1 ||
        ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$apt_log" 2>&1; then
        cat "$apt_log" >&2
        rm -f "$apt_log"
        log "apt-get failed"
        exit 1
    fi
    rm -f "$apt_log"
fi

# --- Rust components -------------------------------------------------------
if command -v rustup >/dev/null 2>&1; then
    cargo fmt --version >/dev/null 2>&1 || {
        log "adding rustup component rustfmt"
        rustup component add rustfmt >&2
    }
    cargo clippy --version >/dev/null 2>&1 || {
        log "adding rustup component clippy"
        rustup component add clippy >&2
    }
fi
