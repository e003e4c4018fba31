#!/usr/bin/env bash
# Runs a local watchd demo:
#   1. installs missing dependencies and builds the release binaries;
#   2. starts etcd on 127.0.0.1:$ETCD_PORT (default 2379), or uses the etcd
#      already listening there;
#   3. starts the demo writer (watchd-loadtest demo), which fills a demo
#      cluster (nodes and their Leases, Deployments, ReplicaSets, pods, a
#      kube-proxy DaemonSet, Services, EndpointSlices, Endpoints, ConfigMaps,
#      Secrets, Events, CRDs and custom resources) and keeps changing it;
#   4. starts watchd serve on 127.0.0.1:$WATCHD_PORT (default 8080), waits for
#      /readyz, and prints how to try it with kubectl.
# Stays in the foreground until Ctrl-C, then stops every process it started.
# Logs and etcd's data live in ${TMPDIR:-/tmp}/watchd-demo.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

ETCD_PORT="${ETCD_PORT:-2379}"
ETCD_PEER_PORT="${ETCD_PEER_PORT:-$((ETCD_PORT + 1))}"
WATCHD_PORT="${WATCHD_PORT:-8080}"
DEMO_DIR="${TMPDIR:-/tmp}/watchd-demo"
ETCD_URL="http://127.0.0.1:${ETCD_PORT}"
WATCHD_URL="http://127.0.0.1:${WATCHD_PORT}"
KUBECTL_HINT=/usr/lib/google-cloud-sdk/bin/kubectl.1.33
# Where cargo puts the binaries: CARGO_TARGET_DIR when set, as cargo itself decides.
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

say() { printf 'demo: %s\n' "$*"; }
die() {
    printf 'demo: %s\n' "$*" >&2
    exit 1
}

# --- process bookkeeping ---------------------------------------------------
PIDS=()   # PIDs this script started, in start order
NAMES=()  # matching names, for messages
LOGS=()   # matching log files

cleanup() {
    trap - EXIT INT TERM
    local i pid
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
        pid="${PIDS[$i]}"
        if kill -0 "$pid" 2>/dev/null; then
            say "stopping ${NAMES[$i]} (pid $pid)"
            kill -TERM "$pid" 2>/dev/null || true
        fi
    done
    # Give them 5 s to exit, then SIGKILL whatever is left.
    local deadline=$((SECONDS + 5))
    for pid in "${PIDS[@]}"; do
        while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start NAME LOGFILE COMMAND... : runs COMMAND in the background, logging to LOGFILE.
# setsid puts it in its own session, so Ctrl-C reaches only this script, which
# then stops the processes in order (setsid does not fork here: same PID).
start() {
    local name="$1" logfile="$2"
    shift 2
    setsid "$@" </dev/null >"$logfile" 2>&1 &
    PIDS+=("$!")
    NAMES+=("$name")
    LOGS+=("$logfile")
    say "started $name (pid $!), log: $logfile"
}

# --- tiny HTTP probe (bash /dev/tcp, no curl needed) ------------------------
# http_get PORT PATH: prints the raw response from 127.0.0.1:PORT, fails if nothing answers.
http_get() {
    # shellcheck disable=SC2016 # $1/$2 belong to the inner shell
    timeout 3 bash -c '
        exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
        printf "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nConnection: close\r\n\r\n" "$2" "$1" >&3
        cat <&3' _ "$1" "$2" 2>/dev/null
}

# port_in_use PORT: whether something accepts TCP connections on 127.0.0.1:PORT.
port_in_use() {
    # shellcheck disable=SC2016 # $1 belongs to the inner shell
    timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$1" 2>/dev/null
}

# wait_http NAME PORT PATH SECONDS PID: waits until PATH answers 200; fails if PID exits or time runs out.
wait_http() {
    local name="$1" port="$2" path="$3" seconds="$4" pid="$5" status
    local deadline=$((SECONDS + seconds))
    while true; do
        status="$(http_get "$port" "$path" | head -n 1 || true)"
        case "$status" in "HTTP/1."[01]" 200"*) return 0 ;; esac
        if ! kill -0 "$pid" 2>/dev/null; then
            say "$name exited during startup" >&2
            return 1
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            say "$name did not answer 200 on 127.0.0.1:$port$path within ${seconds}s" >&2
            return 1
        fi
        sleep 0.2
    done
}

# show_log_tail INDEX: prints the last lines of a started process's log.
show_log_tail() {
    printf -- '--- last lines of %s ---\n' "${LOGS[$1]}" >&2
    tail -n 20 "${LOGS[$1]}" >&2 || true
}

# --- 1. dependencies and build ---------------------------------------------
say "checking dependencies"
scripts/install-deps.sh
say "building release binaries (cargo build --release -p watchd -p watchd-loadtest)"
cargo build --release -p watchd -p watchd-loadtest

mkdir -p "$DEMO_DIR"

# watchd's port must be free before anything is started.
if port_in_use "$WATCHD_PORT"; then
    die "port $WATCHD_PORT on 127.0.0.1 is already taken, so watchd cannot listen there.
      Stop what uses it, or pick another: WATCHD_PORT=18080 $0"
fi

# --- 2. etcd ---------------------------------------------------------------
if port_in_use "$ETCD_PORT"; then
    version="$(http_get "$ETCD_PORT" /version || true)"
    if [[ "$version" == *'"etcdserver"'* ]]; then
        say "an etcd already answers on $ETCD_URL; using it"
    else
        die "port $ETCD_PORT on 127.0.0.1 is taken by something that is not etcd.
      Stop it, or pick another port: ETCD_PORT=12379 $0"
    fi
else
    if port_in_use "$ETCD_PEER_PORT"; then
        die "etcd's peer port $ETCD_PEER_PORT on 127.0.0.1 is taken.
      Pick other ports: ETCD_PORT=12379 ETCD_PEER_PORT=12380 $0"
    fi
    rm -rf "$DEMO_DIR/etcd-data"
    start etcd "$DEMO_DIR/etcd.log" \
        env -u ETCD_PORT -u ETCD_PEER_PORT /usr/bin/etcd \
        --name=watchd-demo \
        --data-dir="$DEMO_DIR/etcd-data" \
        --listen-client-urls="$ETCD_URL" \
        --advertise-client-urls="$ETCD_URL" \
        --listen-peer-urls="http://127.0.0.1:${ETCD_PEER_PORT}" \
        --initial-advertise-peer-urls="http://127.0.0.1:${ETCD_PEER_PORT}" \
        --initial-cluster="watchd-demo=http://127.0.0.1:${ETCD_PEER_PORT}" \
        --logger=zap --log-outputs=stderr
    wait_http etcd "$ETCD_PORT" /health 30 "${PIDS[-1]}" || {
        show_log_tail "$((${#PIDS[@]} - 1))"
        exit 1
    }
    say "etcd is healthy on $ETCD_URL"
fi

# --- 3. the demo writer ----------------------------------------------------
start "demo writer" "$DEMO_DIR/loadtest.log" \
    "$TARGET_DIR/release/watchd-loadtest" demo --etcd-servers="$ETCD_URL"

# --- 4. watchd -------------------------------------------------------------
start watchd "$DEMO_DIR/watchd.log" \
    "$TARGET_DIR/release/watchd" serve --etcd-servers="$ETCD_URL" \
    --http-address="127.0.0.1:${WATCHD_PORT}"
wait_http watchd "$WATCHD_PORT" /readyz 60 "${PIDS[-1]}" || {
    show_log_tail "$((${#PIDS[@]} - 1))"
    exit 1
}

# --- 5. how to use it ------------------------------------------------------
if [ -x "$KUBECTL_HINT" ]; then
    kubectl="$KUBECTL_HINT"
elif command -v kubectl >/dev/null 2>&1; then
    kubectl=kubectl
else
    kubectl=kubectl
    no_kubectl=1
fi

cat <<USAGE

watchd is ready on $WATCHD_URL, serving the demo cluster from etcd at $ETCD_URL.

Try, in another terminal:
  $kubectl --server=$WATCHD_URL get all -A
  $kubectl --server=$WATCHD_URL get pods -A -w
  $kubectl --server=$WATCHD_URL get deploy,rs,svc,endpointslices,leases,events,secrets -A
  $kubectl --server=$WATCHD_URL get crd
  $kubectl --server=$WATCHD_URL get widgets -A --field-selector spec.color=blue
  $kubectl --server=$WATCHD_URL explain pods.spec.containers
  $kubectl --server=$WATCHD_URL explain widgets.spec
  $kubectl --server=$WATCHD_URL auth can-i list pods -A
  $kubectl --server=$WATCHD_URL auth whoami

USAGE
if [ -n "${no_kubectl:-}" ]; then
    echo "(no kubectl found on this machine; the plain HTTP API works too:"
    echo "  curl '$WATCHD_URL/api/v1/pods?limit=5'"
    echo "  curl -N '$WATCHD_URL/api/v1/pods?watch=true' )"
    echo
fi
echo "Logs:"
for i in "${!PIDS[@]}"; do
    printf '  %-12s %s\n' "${NAMES[$i]}" "${LOGS[$i]}"
done
echo
echo "Press Ctrl-C to stop."

# --- 6. stay in the foreground ----------------------------------------------
while true; do
    for i in "${!PIDS[@]}"; do
        if ! kill -0 "${PIDS[$i]}" 2>/dev/null; then
            printf 'demo: %s (pid %s) exited unexpectedly\n' "${NAMES[$i]}" "${PIDS[$i]}" >&2
            show_log_tail "$i"
            exit 1
        fi
    done
    sleep 1
done
