//! `/livez`, `/readyz`, `/healthz`: named checks, `?verbose`, `?exclude=`, and
//! `/<endpoint>/<check>`, worded as kube-apiserver words them.

use crate::api::query::Params;
use crate::store::Cache;

/// One named check and whether it passes.
struct Check {
    name: &'static str,
    ok: bool,
}

fn checks(endpoint: &str, cache: &Cache) -> Vec<Check> {
    let ping = Check {
        name: "ping",
        ok: true,
    };
    let sync = Check {
        name: "initial-sync",
        ok: cache.is_synced(),
    };
    let watch = Check {
        name: "etcd-watch",
        ok: cache.is_watch_live(),
    };
    // As kube-apiserver's: failing from the moment the server starts to shut down.
    let shutdown = Check {
        name: "shutdown",
        ok: !cache.is_shutting_down(),
    };
    match endpoint {
        "livez" => vec![ping],
        "readyz" => vec![ping, sync, watch, shutdown],
        _ => vec![ping, sync],
    }
}

/// Evaluates a health endpoint: (HTTP status, text body). None if `check` is unknown.
pub fn evaluate(
    endpoint: &str,
    check: Option<&str>,
    params: &Params,
    cache: &Cache,
) -> Option<(u16, String)> {
    // `exclude` may be repeated and each may list several checks, as kube-apiserver accepts.
    let excluded: Vec<&str> = params
        .get_all("exclude")
        .flat_map(|e| e.split(','))
        .filter(|e| !e.is_empty())
        .collect();
    let mut all = checks(endpoint, cache);
    if let Some(c) = check {
        all.retain(|x| x.name == c);
        if all.is_empty() {
            return None;
        }
    }
    all.retain(|x| !excluded.contains(&x.name));
    let ok = all.iter().all(|c| c.ok);
    let verbose = params.get("verbose").is_some() || !ok;
    let mut body = String::new();
    if verbose {
        for c in &all {
            if c.ok {
                body.push_str(&format!("[+]{} ok\n", c.name));
            } else {
                body.push_str(&format!("[-]{} failed: reason withheld\n", c.name));
            }
        }
        for e in &excluded {
            body.push_str(&format!("[+]{e} excluded: ok\n"));
        }
        let label = check.unwrap_or(endpoint);
        body.push_str(&format!(
            "{label} check {}\n",
            if ok { "passed" } else { "failed" }
        ));
    } else {
        body.push_str("ok");
    }
    Some((if ok { 200 } else { 500 }, body))
}
