#!/usr/bin/env node
// Runs an informer of the official JavaScript Kubernetes client (@kubernetes/client-node)
// against watchd, for tests/clients_node.rs.
//
// Usage: node node_informer.mjs URL NAMESPACE
//
// The client is loaded from $NODE_CLIENT_PREFIX (default: <repo>/.tools/node, where
// scripts/install-clients.sh installs it). The program
//   1. builds a KubeConfig with KubeConfig.loadFromOptions (cluster `server: URL`,
//      skipTLSVerify, a user without credentials),
//   2. starts makeInformer() on the pods of NAMESPACE (list, then watch),
//   3. prints `{"op":"ready",...}` once start() resolved (listed and watching),
//   4. prints one `{"op":"event","type":"add|update|delete",...}` line per callback,
//   5. on a `stop` line on stdin (or stdin closing), prints the informer's cache as
//      `{"op":"state",...}`, stops it and exits 0.
// Every line on stdout is one JSON document. It exits non-zero (with an `error` line) on
// failure, and after RUN_LIMIT_MS whatever happens.

import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';

const RUN_LIMIT_MS = 90_000;

function emit(fields) {
    process.stdout.write(JSON.stringify(fields) + '\n');
}

function fail(message, code = 2) {
    emit({ op: 'error', message: String(message) });
    process.exit(code);
}

const limit = setTimeout(() => fail(`run limit of ${RUN_LIMIT_MS} ms exceeded`, 3), RUN_LIMIT_MS);

async function loadClient() {
    const here = dirname(fileURLToPath(import.meta.url));
    const prefix = process.env.NODE_CLIENT_PREFIX || resolve(here, '..', '..', '.tools', 'node');
    const require = createRequire(join(prefix, 'package.json'));
    let entry;
    let version;
    try {
        entry = require.resolve('@kubernetes/client-node');
        version = require('@kubernetes/client-node/package.json').version;
    } catch (e) {
        fail(`@kubernetes/client-node not found under ${prefix} (${e.message}); run scripts/install-clients.sh`, 4);
    }
    const k8s = await import(pathToFileURL(entry).href);
    return { k8s, version };
}

function summary(obj) {
    const meta = obj.metadata || {};
    return {
        namespace: meta.namespace,
        name: meta.name,
        resourceVersion: meta.resourceVersion,
        uid: meta.uid,
        labels: meta.labels || {},
        phase: obj.status ? obj.status.phase : undefined,
        // Objects from the list come through the generated deserializer (V1Pod);
        // watch events are plain objects.
        isV1Pod: obj instanceof Object && obj.constructor && obj.constructor.name === 'V1Pod',
    };
}

async function main() {
    const [url, namespace] = process.argv.slice(2);
    if (!url || !namespace) {
        fail('usage: node_informer.mjs URL NAMESPACE');
    }
    const { k8s, version } = await loadClient();
    emit({ op: 'client', version, node: process.version });

    const kc = new k8s.KubeConfig();
    kc.loadFromOptions({
        clusters: [{ name: 'watchd', server: url, skipTLSVerify: true }],
        users: [{ name: 'anonymous' }],
        contexts: [{ name: 'watchd', cluster: 'watchd', user: 'anonymous' }],
        currentContext: 'watchd',
    });
    const api = kc.makeApiClient(k8s.CoreV1Api);
    const path = `/api/v1/namespaces/${namespace}/pods`;
    const informer = k8s.makeInformer(kc, path, () => api.listNamespacedPod({ namespace }));

    let events = 0;
    let stopping = false;
    for (const type of [k8s.ADD, k8s.UPDATE, k8s.DELETE]) {
        informer.on(type, (obj) => {
            events += 1;
            if (events > 10_000) {
                fail('more than 10000 informer events');
            }
            emit({ op: 'event', type, ...summary(obj) });
        });
    }
    informer.on(k8s.CONNECT, () => emit({ op: 'connect' }));
    informer.on(k8s.ERROR, (err) => {
        if (stopping) {
            // stop() aborts the open watch request, which the informer reports as an error.
            return;
        }
        emit({
            op: 'informer_error',
            message: String(err && err.message ? err.message : err),
            statusCode: err ? err.statusCode || err.code : undefined,
        });
    });

    await informer.start();
    emit({
        op: 'ready',
        resourceVersion: informer.latestResourceVersion(),
        names: informer.list(namespace).map((o) => o.metadata.name).sort(),
    });

    const lines = createInterface({ input: process.stdin });
    const stop = async () => {
        if (stopping) {
            return;
        }
        stopping = true;
        const items = informer
            .list(namespace)
            .map((o) => ({ name: o.metadata.name, resourceVersion: o.metadata.resourceVersion }))
            .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
        emit({ op: 'state', resourceVersion: informer.latestResourceVersion(), items });
        await informer.stop();
        clearTimeout(limit);
        emit({ op: 'done' });
        process.exit(0);
    };
    lines.on('line', (line) => {
        if (line.trim() === 'stop') {
            stop().catch((e) => fail(e));
        }
    });
    lines.on('close', () => {
        stop().catch((e) => fail(e));
    });
}

main().catch((e) => fail(e && e.stack ? e.stack : e));
