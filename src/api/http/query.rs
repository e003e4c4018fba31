//! Parsing a request path into a [`Route`], and percent-decoding.

use crate::api::query::percent_decode;
use crate::api::status::ApiError;

/// What a path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/api`.
    ApiVersions,
    /// `/apis`.
    ApiGroupList,
    /// `/apis/<group>`.
    ApiGroup(String),
    /// `/api/v1` or `/apis/<group>/<version>`.
    ResourceList { group: String, version: String },
    /// A resource collection or object.
    Resource(ResourcePath),
    /// `/version`.
    Version,
    /// `/livez`, `/readyz`, `/healthz`, optionally with one check.
    Health {
        endpoint: &'static str,
        check: Option<String>,
    },
    /// `/metrics`.
    Metrics,
    /// `/openapi/v2`, `/openapi/v3` and `/openapi/v3/<group-version>`.
    OpenApi(OpenApiPath),
    /// Anything else.
    Unknown,
}

/// Which OpenAPI document a path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenApiPath {
    /// `/openapi/v2`.
    V2,
    /// `/openapi/v3`: the list of group-versions.
    V3Root,
    /// `/openapi/v3/api/v1`, `/openapi/v3/apis/<group>/<version>`: the path below
    /// `/openapi/v3/`.
    V3(String),
}

/// A path under a group version naming a collection or one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    /// API group (empty for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Plural resource.
    pub resource: String,
    /// Namespace from `/namespaces/<ns>/...`.
    pub namespace: Option<String>,
    /// Object name.
    pub name: Option<String>,
    /// Subresource (only `status` is served, as the object itself).
    pub subresource: Option<String>,
    /// The deprecated `/watch/` path prefix was used.
    pub legacy_watch: bool,
}

impl ResourcePath {
    /// The verb, as kube-apiserver's request info names it: a path naming an object is a
    /// get whatever `watch` says; only the legacy `/watch/` path watches one object.
    pub fn verb(&self, params: &crate::api::query::Params) -> &'static str {
        if self.legacy_watch || (self.name.is_none() && params.is_watch().unwrap_or(false)) {
            "watch"
        } else if self.name.is_some() {
            "get"
        } else {
            "list"
        }
    }

    /// The authorization attributes of `user` asking this path with `params`.
    pub fn attributes(
        &self,
        user: crate::auth::UserInfo,
        params: &crate::api::query::Params,
    ) -> crate::auth::Attributes {
        crate::auth::Attributes::resource(
            user,
            self.verb(params),
            &self.group,
            &self.version,
            &self.resource,
            self.subresource.as_deref(),
            self.namespace.as_deref(),
            self.name.as_deref(),
            params.get("fieldSelector"),
        )
    }
}

/// A path's segments as routing reads them: split at `/`, empty ones dropped, each
/// percent-decoded.
fn segments(path: &str) -> Result<Vec<String>, ApiError> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(|s| percent_decode(s, false))
        .collect()
}

/// The path routing serves, written canonically (`//metrics` and `/%6detrics` are
/// `/metrics`): what a non-resource request is authorized and audited as, so that an
/// authorizer decides on the path that is served, not on a spelling of it.
pub fn canonical_path(path: &str) -> Result<String, ApiError> {
    Ok(format!("/{}", segments(path)?.join("/")))
}

/// Parses a path into a route.
pub fn route(path: &str) -> Result<Route, ApiError> {
    let segs = segments(path)?;
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    Ok(match s.as_slice() {
        ["api"] => Route::ApiVersions,
        ["apis"] => Route::ApiGroupList,
        ["apis", g] => Route::ApiGroup(g.to_string()),
        ["api", v] => Route::ResourceList {
            group: String::new(),
            version: v.to_string(),
        },
        ["apis", g, v] => Route::ResourceList {
            group: g.to_string(),
            version: v.to_string(),
        },
        ["api", v, rest @ ..] => resource_route("", v, rest),
        ["apis", g, v, rest @ ..] => resource_route(g, v, rest),
        ["version"] => Route::Version,
        ["metrics"] => Route::Metrics,
        ["openapi", "v2"] => Route::OpenApi(OpenApiPath::V2),
        ["openapi", "v3"] => Route::OpenApi(OpenApiPath::V3Root),
        ["openapi", "v3", gv @ ..] => Route::OpenApi(OpenApiPath::V3(gv.join("/"))),
        [e @ ("livez" | "readyz" | "healthz")] => Route::Health {
            endpoint: health_name(e),
            check: None,
        },
        [e @ ("livez" | "readyz" | "healthz"), check] => Route::Health {
            endpoint: health_name(e),
            check: Some(check.to_string()),
        },
        _ => Route::Unknown,
    })
}

fn health_name(e: &str) -> &'static str {
    match e {
        "livez" => "livez",
        "readyz" => "readyz",
        _ => "healthz",
    }
}

fn resource_route(group: &str, version: &str, rest: &[&str]) -> Route {
    let (legacy_watch, rest) = match rest {
        ["watch", tail @ ..] => (true, tail),
        _ => (false, rest),
    };
    let mk = |ns: Option<&str>, resource: &str, name: Option<&str>, sub: Option<&str>| {
        Route::Resource(ResourcePath {
            group: group.to_string(),
            version: version.to_string(),
            resource: resource.to_string(),
            namespace: ns.map(str::to_string),
            name: name.map(str::to_string),
            subresource: sub.map(str::to_string),
            legacy_watch,
        })
    };
    match rest {
        // `/namespaces/<ns>/<resource>...` unless it is the namespace object itself.
        ["namespaces", ns, r] if *r != "status" && *r != "finalize" => mk(Some(ns), r, None, None),
        ["namespaces", ns, r, name] => mk(Some(ns), r, Some(name), None),
        ["namespaces", ns, r, name, sub] => mk(Some(ns), r, Some(name), Some(sub)),
        [r] => mk(None, r, None, None),
        [r, name] => mk(None, r, Some(name), None),
        [r, name, sub] => mk(None, r, Some(name), Some(sub)),
        _ => Route::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_paths_are_the_paths_routing_serves() {
        for (raw, canonical) in [
            ("/metrics", "/metrics"),
            ("//metrics", "/metrics"),
            ("/%6detrics", "/metrics"),
            ("/healthz//ping/", "/healthz/ping"),
            ("/", "/"),
        ] {
            assert_eq!(canonical_path(raw).unwrap(), canonical, "{raw}");
        }
        assert!(matches!(route("/%6detrics").unwrap(), Route::Metrics));
        assert!(canonical_path("/%zz").is_err());
    }

    #[test]
    fn routes_cover_namespaced_cluster_and_discovery_paths() {
        let r = route("/api/v1/namespaces/default/pods/web").unwrap();
        let Route::Resource(p) = r else { panic!() };
        assert_eq!(
            (
                p.namespace.as_deref(),
                p.resource.as_str(),
                p.name.as_deref()
            ),
            (Some("default"), "pods", Some("web"))
        );
        let Route::Resource(p) = route("/api/v1/namespaces/kube-system").unwrap() else {
            panic!()
        };
        assert_eq!(
            (p.resource.as_str(), p.name.as_deref()),
            ("namespaces", Some("kube-system"))
        );
        let Route::Resource(p) = route("/apis/apps/v1/deployments").unwrap() else {
            panic!()
        };
        assert_eq!((p.group.as_str(), p.name), ("apps", None));
        let Route::Resource(p) = route("/api/v1/watch/namespaces/a/pods").unwrap() else {
            panic!()
        };
        assert!(p.legacy_watch);
        assert_eq!(
            route("/apis/apps/v1").unwrap(),
            Route::ResourceList {
                group: "apps".into(),
                version: "v1".into()
            }
        );
        assert_eq!(
            route("/readyz/etcd").unwrap(),
            Route::Health {
                endpoint: "readyz",
                check: Some("etcd".into())
            }
        );
        assert_eq!(route("/nope").unwrap(), Route::Unknown);
    }
}
