#!/usr/bin/env python3
"""Drives the official Python Kubernetes client (`kubernetes`) against watchd.

Run by tests/clients_python.rs with PYTHONPATH=.tools/python (installed by
scripts/install-clients.sh). Usage:

    python_client.py list URL NAMESPACE
    python_client.py watch URL NAMESPACE TIMEOUT_SECONDS
    python_client.py watch-expired URL NAMESPACE RESOURCE_VERSION [--no-timeout]
    python_client.py secure-list URL NAMESPACE TOKEN CA_FILE

Every result is one JSON document per line on stdout; the program exits 0 when
it did what it was asked, non-zero otherwise (with a JSON line saying why).
Every wait is bounded: each HTTP request by `_request_timeout`, the whole run by
an alarm.
"""

import json
import signal
import sys
import traceback

# The whole run may take no longer than this (seconds).
RUN_LIMIT = 60
# Connect and read timeouts of every request (seconds).
CONNECT_TIMEOUT = 5
READ_TIMEOUT = 20


def emit(**fields):
    """Prints one result line and flushes it, so the test sees it at once."""
    print(json.dumps(fields, sort_keys=True), flush=True)


def fail(message, code=2):
    emit(op="error", message=message)
    sys.exit(code)


def on_alarm(_signum, _frame):
    fail(f"run limit of {RUN_LIMIT} s exceeded", 3)


try:
    import kubernetes
    from kubernetes import client, watch
    from kubernetes.client.rest import ApiException
except ImportError as e:  # pragma: no cover - reported to the Rust test
    fail(f"cannot import the Python kubernetes client ({e}); run scripts/install-clients.sh", 4)


def core_api(url):
    """A CoreV1Api that talks plain HTTP to `url`, with no credentials."""
    cfg = client.Configuration(host=url)
    cfg.verify_ssl = False
    return client.CoreV1Api(client.ApiClient(cfg))


def cmd_secure_list(url, namespace, token, ca_file):
    """Over https with a bearer token and the server's CA, as a kubeconfig gives them:
    lists pods of NAMESPACE, then lists nodes (which the test's user may not)."""
    cfg = client.Configuration(host=url)
    cfg.verify_ssl = True
    cfg.ssl_ca_cert = ca_file
    cfg.api_key = {"authorization": token}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    api = client.CoreV1Api(client.ApiClient(cfg))
    timeout = (CONNECT_TIMEOUT, READ_TIMEOUT)
    list_summary("secure_list", api.list_namespaced_pod(namespace, _request_timeout=timeout))
    try:
        api.list_node(_request_timeout=timeout)
        fail("a forbidden list did not raise")
    except ApiException as e:
        emit(op="forbidden", status=e.status, body=json.loads(e.body) if e.body else None)


def pod_summary(pod):
    """What the test checks of a deserialized V1Pod."""
    meta = pod.metadata
    return {
        "namespace": meta.namespace,
        "name": meta.name,
        "resourceVersion": meta.resource_version,
        "uid": meta.uid,
        "labels": meta.labels or {},
        "creationTimestamp": meta.creation_timestamp.isoformat() if meta.creation_timestamp else None,
        "containers": [c.name for c in (pod.spec.containers if pod.spec else [])],
        "phase": pod.status.phase if pod.status else None,
    }


def list_summary(op, pod_list):
    emit(
        op=op,
        type=type(pod_list).__name__,
        kind=pod_list.kind,
        apiVersion=pod_list.api_version,
        resourceVersion=pod_list.metadata.resource_version,
        items=[pod_summary(p) for p in pod_list.items],
    )


def cmd_list(url, namespace):
    api = core_api(url)
    timeout = (CONNECT_TIMEOUT, READ_TIMEOUT)
    list_summary("list_all", api.list_pod_for_all_namespaces(_request_timeout=timeout))
    list_summary("list_namespace", api.list_namespaced_pod(namespace, _request_timeout=timeout))
    try:
        api.read_namespaced_pod("does-not-exist", namespace, _request_timeout=timeout)
        fail("read of a missing pod did not raise")
    except ApiException as e:
        emit(op="read_missing", status=e.status, body=json.loads(e.body) if e.body else None)
    pod = api.read_namespaced_pod(list_first_name(api, namespace), namespace, _request_timeout=timeout)
    emit(op="read", type=type(pod).__name__, pod=pod_summary(pod))


def list_first_name(api, namespace):
    items = api.list_namespaced_pod(namespace, _request_timeout=(CONNECT_TIMEOUT, READ_TIMEOUT)).items
    if not items:
        fail(f"no pods in namespace {namespace}")
    return items[0].metadata.name


def cmd_watch(url, namespace, timeout_seconds):
    """Lists, prints `ready` with the list's resourceVersion, then watches from it."""
    api = core_api(url)
    initial = api.list_namespaced_pod(namespace, _request_timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
    start_rv = initial.metadata.resource_version
    emit(op="ready", resourceVersion=start_rv, names=[p.metadata.name for p in initial.items])
    w = watch.Watch()
    count = 0
    for event in w.stream(
        api.list_namespaced_pod,
        namespace,
        allow_watch_bookmarks=True,
        resource_version=start_rv,
        timeout_seconds=timeout_seconds,
        _request_timeout=(CONNECT_TIMEOUT, timeout_seconds + READ_TIMEOUT),
    ):
        count += 1
        if count > 1000:
            fail("more than 1000 watch events")
        etype = event["type"]
        obj = event["object"]
        if etype == "BOOKMARK":
            raw = event["raw_object"]
            emit(
                op="event",
                type=etype,
                objectType=type(obj).__name__,
                kind=raw.get("kind"),
                apiVersion=raw.get("apiVersion"),
                resourceVersion=raw.get("metadata", {}).get("resourceVersion"),
                annotations=raw.get("metadata", {}).get("annotations"),
            )
        else:
            summary = pod_summary(obj)
            emit(op="event", type=etype, objectType=type(obj).__name__, **summary)
    # The stream ended because the server closed it after timeoutSeconds.
    emit(op="watch_end", events=count, resourceVersion=w.resource_version)


def cmd_watch_expired(url, namespace, resource_version, with_timeout):
    """Watches from a resourceVersion that is too old; expects the client's 410 ApiException."""
    api = core_api(url)
    w = watch.Watch()
    kwargs = {
        "resource_version": resource_version,
        "allow_watch_bookmarks": True,
        "_request_timeout": (CONNECT_TIMEOUT, READ_TIMEOUT),
    }
    if with_timeout:
        kwargs["timeout_seconds"] = 5
    events = []
    try:
        for event in w.stream(api.list_namespaced_pod, namespace, **kwargs):
            events.append(event["type"])
            if len(events) > 100:
                break
    except ApiException as e:
        emit(op="exception", status=e.status, reason=e.reason, events=events)
        return
    fail(f"watch from a too old resourceVersion ended without an ApiException; events {events}")


def main(argv):
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(RUN_LIMIT)
    emit(op="client", version=kubernetes.__version__, python=sys.version.split()[0])
    if len(argv) < 3:
        fail(__doc__)
    cmd, url, namespace = argv[0], argv[1], argv[2]
    if cmd == "list":
        cmd_list(url, namespace)
    elif cmd == "watch" and len(argv) == 4:
        cmd_watch(url, namespace, int(argv[3]))
    elif cmd == "secure-list" and len(argv) == 5:
        cmd_secure_list(url, namespace, argv[3], argv[4])
    elif cmd == "watch-expired" and len(argv) in (4, 5):
        cmd_watch_expired(url, namespace, argv[3], "--no-timeout" not in argv[4:])
    else:
        fail(__doc__)
    emit(op="done")


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except SystemExit:
        raise
    except ApiException as e:
        fail(f"ApiException status={e.status} reason={e.reason} body={e.body}")
    except Exception as e:  # noqa: BLE001 - any failure is reported as a JSON line
        fail(f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
