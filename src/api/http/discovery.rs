//! Legacy discovery (`/api`, `/apis`, `/api/v1`, `/apis/<g>`, `/apis/<g>/<v>`) and
//! `/version`, built from the resources served now.

use http::{header, Response, StatusCode};
use serde_json::{json, Value};

use super::body::Body;
use crate::config;

use crate::api::status::ApiError;
use crate::store::ResourceIndex;

/// `/api`.
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn group_versions(index: &ResourceIndex) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for s in index.stores() {
        let gv = (s.info.group.clone(), s.info.version.clone());
        if !s.info.group.is_empty() && !out.contains(&gv) {
            out.push(gv);
        }
    }
    out
}

fn group_json(group: &str, versions: &[&str]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({
        "name": group,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis`.
pub fn api_group_list(index: &ResourceIndex) -> Value {
    let gvs = group_versions(index);
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for (g, v) in &gvs {
        match groups.iter_mut().find(|(name, _)| name == g) {
            Some((_, vs)) => vs.push(v),
            None => groups.push((g.clone(), vec![v])),
        }
    }
    json!({
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": groups.iter().map(|(g, vs)| group_json(g, vs)).collect::<Vec<_>>(),
    })
}

/// `/apis/<group>`.
pub fn api_group(index: &ResourceIndex, group: &str) -> Result<Value, ApiError> {
    let versions: Vec<String> = group_versions(index)
        .into_iter()
        .filter(|(g, _)| g == group)
        .map(|(_, v)| v)
        .collect();
    if versions.is_empty() {
        return Err(ApiError::PathNotFound(format!(
            "the server could not find the requested resource (group {group})"
        )));
    }
    let vs: Vec<&str> = versions.iter().map(String::as_str).collect();
    let mut v = group_json(group, &vs);
    v["kind"] = json!("APIGroup");
    v["apiVersion"] = json!("v1");
    Ok(v)
}

/// `/api/v1` or `/apis/<group>/<version>`.
pub fn api_resource_list(
    index: &ResourceIndex,
    group: &str,
    version: &str,
) -> Result<Value, ApiError> {
    let resources: Vec<Value> = index
        .stores()
        .iter()
        .filter(|s| s.info.group == group && s.info.version == version)
        .map(|s| {
            let mut r = json!({
                "name": s.info.resource,
                "singularName": s.info.singular,
                "namespaced": s.info.namespaced,
                "kind": s.info.kind,
                "verbs": crate::api::CACHED_VERBS,
            });
            if !s.info.short_names.is_empty() {
                r["shortNames"] = json!(s.info.short_names);
            }
            if !s.info.categories.is_empty() {
                r["categories"] = json!(s.info.categories);
            }
            r
        })
        .collect();
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    if resources.is_empty() && !(group.is_empty() && version == "v1") {
        return Err(ApiError::PathNotFound(format!(
            "the server could not find the requested resource (groupVersion {group_version})"
        )));
    }
    Ok(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }))
}

/// The version watchd reports as its server's (`/version`'s `gitVersion`, the OpenAPI
/// documents' `info.version`): the Kubernetes API level it implements, and its own.
pub fn git_version() -> String {
    format!("v1.34.0+watchd-{}", env!("CARGO_PKG_VERSION"))
}

/// `/version`: the Kubernetes API level watchd implements.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "34",
        "gitVersion": git_version(),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, go_arch()),
    })
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// Aggregated discovery (`apidiscovery.k8s.io/<version>` APIGroupDiscoveryList): the core
/// group for `/api` (`core`), every other group for `/apis`.
pub fn aggregated(index: &ResourceIndex, version: &str, core: bool) -> Value {
    // (group, [(version, [resource])]) in discovery order.
    type Groups = Vec<(String, Vec<(String, Vec<Value>)>)>;
    let mut groups: Groups = Vec::new();
    for s in index.stores() {
        let info = &s.info;
        if info.group.is_empty() != core {
            continue;
        }
        let mut r = json!({
            "resource": info.resource,
            "responseKind": {"group": info.group, "version": info.version, "kind": info.kind},
            "scope": if info.namespaced { "Namespaced" } else { "Cluster" },
            "singularResource": info.singular,
            "verbs": crate::api::CACHED_VERBS,
        });
        if !info.short_names.is_empty() {
            r["shortNames"] = json!(info.short_names);
        }
        if !info.categories.is_empty() {
            r["categories"] = json!(info.categories);
        }
        let gi = match groups.iter().position(|(name, _)| *name == info.group) {
            Some(i) => i,
            None => {
                groups.push((info.group.clone(), Vec::new()));
                groups.len() - 1
            }
        };
        let versions = &mut groups[gi].1;
        match versions.iter_mut().find(|(v, _)| *v == info.version) {
            Some((_, rs)) => rs.push(r),
            None => versions.push((info.version.clone(), vec![r])),
        }
    }
    let items: Vec<Value> = groups
        .into_iter()
        .map(|(name, versions)| {
            let mut meta = json!({"creationTimestamp": null});
            if !name.is_empty() {
                meta["name"] = json!(name);
            }
            json!({
                "metadata": meta,
                "versions": versions.into_iter().map(|(v, resources)| json!({
                    "version": v,
                    "resources": resources,
                    "freshness": "Current",
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    })
}

/// The upstream's discovery, with what only the cache serves added: `/apis` gains the
/// groups the upstream does not list (in either format). Anything but a 200 is
/// replaced by the cache's own answer (None).
pub(super) async fn merge_discovery(
    state: &super::ApiState,
    path: &str,
    response: Response<Body>,
) -> Option<Response<Body>> {
    use futures_util::StreamExt;
    if response.status() != StatusCode::OK {
        return None;
    }
    if path.trim_end_matches('/') != "/apis" {
        return Some(response);
    }
    let (mut parts, body) = response.into_parts();
    let mut bytes = Vec::new();
    match body.into_stream() {
        Ok(mut frames) => {
            while let Some(frame) = frames.next().await {
                for seg in frame.into_segments() {
                    bytes.extend_from_slice(&seg);
                }
                if bytes.len() > config::MAX_DISCOVERY_BYTES {
                    return None;
                }
            }
        }
        Err(full) => {
            for seg in full.into_segments()? {
                bytes.extend_from_slice(&seg);
            }
        }
    }
    let mut upstream: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let index = state.read.cache.resources();
    type NameOf = fn(&serde_json::Value) -> Option<&str>;
    let (list, ours, name_of): (&str, serde_json::Value, NameOf) =
        if content_type.contains("apidiscovery.k8s.io") {
            let version = if content_type.contains("v=v2beta1") {
                "v2beta1"
            } else {
                "v2"
            };
            ("items", aggregated(&index, version, false), |g| {
                g["metadata"]["name"].as_str()
            })
        } else {
            ("groups", api_group_list(&index), |g| g["name"].as_str())
        };
    let theirs = upstream.get_mut(list)?.as_array_mut()?;
    let known: std::collections::HashSet<String> = theirs
        .iter()
        .filter_map(|g| name_of(g).map(str::to_string))
        .collect();
    for g in ours[list].as_array().into_iter().flatten() {
        if name_of(g).is_some_and(|n| !known.contains(n)) {
            theirs.push(g.clone());
        }
    }
    let merged = serde_json::to_vec(&upstream).ok()?;
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.remove(header::ETAG);
    Some(Response::from_parts(parts, Body::full(merged)))
}
