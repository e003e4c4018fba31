#!/usr/bin/env bash
# Makes sure this machine can build watchd, run its tests and run its demo, and
# installs what is missing. Each need is checked as a capability, by using it, not by
# looking for a binary: a protoc without the well-known .proto files is on the PATH
# but cannot build etcd-client, which is how a new machine once failed.
#
#   scripts/install-deps.sh          check; install what fails (Debian packages, rustup
#                                    components); check again; exit 1 naming what still fails
#   scripts/install-deps.sh --check  check only; exit 1 naming each missing capability
#
# Capabilities and where they come from:
#   protoc-well-known-types  protoc compiles a file importing google/protobuf/descriptor.proto
#                            (protobuf-compiler + libprotobuf-dev; etcd-client's and
#                            watchd's build scripts)
#   etcd                     etcd >= 3.4 answers --version (etcd-server; tests and demo)
#   etcdctl                  etcdctl answers version (etcd-client; tests: snapshots, compaction)
#   cargo-fmt, cargo-clippy  rustup components rustfmt and clippy (the test command)
#   setsid                   util-linux's setsid (the demo's process groups)
#   curl-http2               curl speaking HTTP/2 and TLS (tests: secure serving)
#   font-dejavu              DejaVu Sans readable as a TrueType font (fonts-dejavu-core;
#                            the load generator draws the text of its PNG plots with it)
# Idempotent, and silent when everything is already there.
set -euo pipefail

log() { printf 'install-deps: %s\n' "$*" >&2; }

check_only=0
case "${1:-}" in
"") ;;
--check) check_only=1 ;;
-h | --help)
    sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
*)
    log "unknown argument: $1 (try --help)"
    exit 2
    ;;
esac

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

# --- capability checks: each succeeds only if the capability works ----------
have_protoc_well_known_types() {
    command -v protoc >/dev/null 2>&1 || return 1
    cat >"$scratch/probe.proto" <<'EOF'
syntax = "proto3";
package probe;
import "google/protobuf/descriptor.proto";
import "google/protobuf/timestamp.proto";
message Probe { google.protobuf.FileDescriptorProto d = 1; google.protobuf.Timestamp t = 2; }
EOF
    protoc --proto_path="$scratch" --descriptor_set_out="$scratch/probe.pb" \
        "$scratch/probe.proto" >/dev/null 2>&1
}

have_etcd() {
    local out
    out="$(etcd --version 2>/dev/null)" || return 1
    # "etcd Version: 3.4.23": 3.4 or newer.
    printf '%s\n' "$out" | awk '/^etcd Version:/ { split($3, v, "."); ok = (v[1] > 3 || (v[1] == 3 && v[2] >= 4)) }
        END { exit ok ? 0 : 1 }'
}

have_etcdctl() { ETCDCTL_API=3 etcdctl version >/dev/null 2>&1; }
have_cargo_fmt() { cargo fmt --version >/dev/null 2>&1; }
have_cargo_clippy() { cargo clippy --version >/dev/null 2>&1; }
have_setsid() { setsid true >/dev/null 2>&1; }
have_curl_http2() { curl -V 2>/dev/null | grep -q 'HTTP2' && curl -V | grep -q 'https'; }
# The plots load this file as a TrueType font: it must be there and start with the
# TrueType sfnt version (00 01 00 00), as the font parser reads it.
have_font_dejavu() {
    local font=/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
    [ "$(head -c 4 "$font" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = "00010000" ]
}

# name | check function | how to get it ("apt:<packages>" or "rustup:<component>")
CAPABILITIES=(
    "protoc-well-known-types|have_protoc_well_known_types|apt:protobuf-compiler libprotobuf-dev"
    "etcd|have_etcd|apt:etcd-server"
    "etcdctl|have_etcdctl|apt:etcd-client"
    "cargo-fmt|have_cargo_fmt|rustup:rustfmt"
    "cargo-clippy|have_cargo_clippy|rustup:clippy"
    "setsid|have_setsid|apt:util-linux"
    "curl-http2|have_curl_http2|apt:curl"
    "font-dejavu|have_font_dejavu|apt:fonts-dejavu-core"
)

# Prints the rows whose check fails.
failing() {
    local row name check
    for row in "${CAPABILITIES[@]}"; do
        IFS='|' read -r name check _ <<<"$row"
        "$check" || printf '%s\n' "$row"
    done
}

report() {
    local row name source
    while IFS= read -r row; do
        [ -n "$row" ] || continue
        IFS='|' read -r name _ source <<<"$row"
        log "missing capability: $name (from ${source#*:})"
    done <<<"$1"
}

missing="$(failing)"
[ -n "$missing" ] || exit 0

if [ "$check_only" -eq 1 ]; then
    report "$missing"
    exit 1
fi

# --- install what fails ------------------------------------------------------
apt_packages=()
rustup_components=()
while IFS= read -r row; do
    IFS='|' read -r _ _ source <<<"$row"
    case "$source" in
    apt:*) read -r -a pkgs <<<"${source#apt:}" && apt_packages+=("${pkgs[@]}") ;;
    rustup:*) rustup_components+=("${source#rustup:}") ;;
    esac
done <<<"$missing"

if [ "${#apt_packages[@]}" -gt 0 ]; then
    if ! command -v apt-get >/dev/null 2>&1; then
        report "$missing"
        log "apt-get is not available: install ${apt_packages[*]} (or their equivalents) by hand"
        exit 1
    fi
    sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if ! command -v sudo >/dev/null 2>&1; then
            log "need ${apt_packages[*]}; not root and no sudo: install them by hand"
            exit 1
        fi
        sudo=(sudo)
    fi
    log "installing ${apt_packages[*]}"
    apt_log="$scratch/apt.log"
    if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >"$apt_log" 2>&1 ||
        ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq --no-install-recommends "${apt_packages[@]}" >>"$apt_log" 2>&1; then
        cat "$apt_log" >&2
        log "apt-get failed"
        exit 1
    fi
fi

for component in "${rustup_components[@]}"; do
    if ! command -v rustup >/dev/null 2>&1; then
        log "need the Rust component $component and rustup is not available"
        exit 1
    fi
    log "adding rustup component $component"
    rustup component add "$component" >&2
done

# --- check again: an install that did not give the capability is an error ----
missing="$(failing)"
if [ -n "$missing" ]; then
    report "$missing"
    log "still missing after installing; see above"
    exit 1
fi
