//! The typed queries every frontend parses requests into: `ListQuery`, `WatchQuery`,
//! `GetQuery`, validated with kube-apiserver's rules and wording.

use std::time::Duration;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::status::{ApiError, FieldViolation};
use crate::config;
use crate::registry::ResourceInfo;
use crate::selectors::shard::ShardSelector;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::Revision;

/// The query parameters, decoded.
#[derive(Debug, Default)]
pub struct Params(Vec<(String, String)>);

impl Params {
    /// Parameters given as pairs (frontends other than HTTP).
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Params {
        Params(
            pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }

    /// Parses `a=b&c=d`.
    pub fn parse(query: Option<&str>) -> Result<Params, ApiError> {
        let Some(q) = query else {
            return Ok(Params::default());
        };
        if q.len() > config::MAX_QUERY_LEN {
            return Err(ApiError::BadRequest(format!(
                "query string is {} bytes; at most {} are accepted",
                q.len(),
                config::MAX_QUERY_LEN
            )));
        }
        let mut out = Vec::new();
        for pair in q.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            out.push((percent_decode(k, true)?, percent_decode(v, true)?));
        }
        Ok(Params(out))
    }

    /// Every value of `key`, in order (repeated parameters).
    pub fn get_all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn flag(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some("true" | "1" | "True" | "TRUE" | "t" | "T" | "") => Ok(Some(true)),
            Some("false" | "0" | "False" | "FALSE" | "f" | "F") => Ok(Some(false)),
            Some(v) => Err(ApiError::BadRequest(format!(
                "invalid value {v:?} for boolean parameter {key}"
            ))),
        }
    }

    /// Whether a watch is a watch list as kube-apiserver tells one (`sendInitialEvents`
    /// and `allowWatchBookmarks` both true): what it gzips for a client that accepts it.
    pub fn is_watch_list(&self) -> bool {
        self.flag("sendInitialEvents") == Ok(Some(true))
            && self.flag("allowWatchBookmarks") == Ok(Some(true))
    }

    /// Whether this is a watch (`watch=true|1`).
    pub fn is_watch(&self) -> Result<bool, ApiError> {
        Ok(self.flag("watch")?.unwrap_or(false))
    }
}

/// The `resourceVersion` parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RvParam {
    /// Absent or empty: the most recent state (a consistent read).
    Unset,
    /// `"0"`: any state the cache has.
    Any,
    /// `"N"`.
    At(Revision),
}

fn parse_rv(p: &Params) -> Result<RvParam, ApiError> {
    match p.get("resourceVersion") {
        None | Some("") => Ok(RvParam::Unset),
        Some("0") => Ok(RvParam::Any),
        Some(v) => match v.parse::<i64>() {
            Ok(n) if n > 0 => Ok(RvParam::At(Revision(n))),
            _ => Err(ApiError::BadRequest(format!(
                "invalid resource version: {v:?}"
            ))),
        },
    }
}

/// The `resourceVersionMatch` parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RvMatch {
    /// Absent.
    Unset,
    /// `Exact`.
    Exact,
    /// `NotOlderThan`.
    NotOlderThan,
}

/// Label and field selectors of a list or watch.
#[derive(Debug, Clone, Default)]
pub struct Selectors {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `shardSelector` (KEP-5866): the shards of objects the request selects.
    pub shard: Option<std::sync::Arc<ShardSelector>>,
}

impl Selectors {
    /// Parses and validates `labelSelector` and `fieldSelector` for a resource.
    pub fn parse(p: &Params, info: &ResourceInfo) -> Result<Selectors, ApiError> {
        let bad = |e: crate::selectors::SelectorError| ApiError::BadRequest(e.to_string());
        let labels = LabelSelector::parse(p.get("labelSelector").unwrap_or("")).map_err(bad)?;
        let mut fields = FieldSelector::parse(p.get("fieldSelector").unwrap_or("")).map_err(bad)?;
        fields
            .convert_labels(|f| info.convert_field_label(f))
            .map_err(|e| ApiError::BadRequest(e.to_string()))?;
        // An empty parameter is none (as kube-apiserver parses only a non-empty one).
        let shard = match p.get("shardSelector").unwrap_or("") {
            "" => None,
            text => Some(std::sync::Arc::new(ShardSelector::parse(text).map_err(
                |e| ApiError::BadRequest(format!("invalid shard selector: {e}")),
            )?)),
        };
        Ok(Selectors {
            labels,
            fields,
            shard,
        })
    }

    /// Scopes the selectors to the object `name` (a watch at a path that names it): no
    /// field selector becomes `metadata.name=<name>`; one must name the same object with
    /// an `=` term, else kube-apiserver's 400. Other terms still filter.
    pub fn require_name(&mut self, name: &str) -> Result<(), ApiError> {
        if self.fields.is_empty() {
            self.fields = FieldSelector::exact("metadata.name", name);
            return Ok(());
        }
        match self.fields.exact_value("metadata.name") {
            Some(n) if n == name => Ok(()),
            _ => Err(ApiError::BadRequest(
                "fieldSelector metadata.name doesn't match requested name".into(),
            )),
        }
    }

    /// Whether no selector was given.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty() && self.shard.is_none()
    }
}

/// A continue token: the list's revision and the key to resume at.
///
/// As kube-apiserver's, the start key is relative to the request's own scope (the
/// namespace's keys for a namespaced list, the resource's for one across namespaces),
/// and a decoded one is always put back behind that scope's prefix: a token forged with
/// another namespace's key, an empty one or a `..` reaches nothing outside the scope
/// (`storage.DecodeContinue`: the key must be unchanged by `path.Clean`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContinueToken {
    /// Always `meta.k8s.io/v1`.
    pub v: String,
    /// The revision of the listing.
    pub rv: i64,
    /// The first key of the next page, relative to the request's scope.
    pub start: String,
}

impl ContinueToken {
    /// The token of a page that ends with the object at `last_key` (`namespace/name` or
    /// `name`), for a list in `namespace` (None: every namespace, or cluster-scoped):
    /// URL-safe unpadded base64 of the JSON form, as kube-apiserver writes.
    pub fn after(rv: Revision, namespace: Option<&str>, last_key: &str) -> String {
        Self::encode(rv, &format!("{}\u{0}", scope_relative(namespace, last_key)))
    }

    /// A token whose start key, relative to the scope, is `start`.
    pub fn encode(rv: Revision, start: &str) -> String {
        let t = ContinueToken {
            v: "meta.k8s.io/v1".into(),
            rv: rv.0,
            start: start.into(),
        };
        let json = serde_json::to_vec(&t).unwrap_or_default();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
    }

    /// The object key (`namespace/name` or `name`) the next page starts at, inside the
    /// scope of a list in `namespace`: the scope's prefix, then the token's start key.
    pub fn start_key(&self, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) => format!("{ns}/{}", self.start),
            None => self.start.clone(),
        }
    }

    fn decode(s: &str) -> Result<ContinueToken, ApiError> {
        let invalid = |why: &str| {
            ApiError::BadRequest(format!(
                "invalid continue token: continue key is not valid{why}"
            ))
        };
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(s.trim_end_matches('='))
            .map_err(|e| invalid(&format!(": {e}")))?;
        let mut t: ContinueToken =
            serde_json::from_slice(&raw).map_err(|e| invalid(&format!(": {e}")))?;
        if t.v != "meta.k8s.io/v1" {
            return Err(invalid(&format!(
                ": server does not recognize this encoded version {:?}",
                t.v
            )));
        }
        if t.rv <= 0 {
            return Err(invalid(
                ": incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
            ));
        }
        if t.start.is_empty() {
            return Err(invalid(
                ": encoded start key empty (version meta.k8s.io/v1)",
            ));
        }
        let rooted = match t.start.strip_prefix('/') {
            Some(_) => t.start.clone(),
            None => format!("/{}", t.start),
        };
        if !is_clean_path(&rooted) {
            return Err(invalid(&format!(": {:?}", t.start)));
        }
        t.start = rooted[1..].to_string();
        Ok(t)
    }
}

/// kube-apiserver's `path.IsValidPathSegmentName` for a name or namespace that becomes
/// part of a key: not `.` or `..`, no `/` or `%`. A name `ns/x` asked of a namespaced
/// collection without a namespace would otherwise be the key of `x` in `ns`.
pub fn check_path_segment(what: &str, value: &str) -> Result<(), ApiError> {
    let mut why = Vec::new();
    match value {
        "." => why.push("may not be '.'"),
        ".." => why.push("may not be '..'"),
        _ => {}
    }
    if value.contains('/') {
        why.push("may not contain '/'");
    }
    if value.contains('%') {
        why.push("may not contain '%'");
    }
    if why.is_empty() {
        return Ok(());
    }
    Err(ApiError::BadRequest(format!(
        "{what} parameter invalid: {value:?}: {}",
        why.join(";")
    )))
}

/// `key` (`namespace/name` or `name`) relative to the scope of a list in `namespace`.
pub fn scope_relative<'a>(namespace: Option<&str>, key: &'a str) -> &'a str {
    namespace
        .and_then(|ns| key.strip_prefix(ns))
        .and_then(|rest| rest.strip_prefix('/'))
        .unwrap_or(key)
}

/// Whether Go's `path.Clean` leaves a rooted path as it is: no empty, `.` or `..`
/// element, and no trailing slash but the root's.
fn is_clean_path(rooted: &str) -> bool {
    rooted == "/"
        || rooted[1..]
            .split('/')
            .all(|e| !e.is_empty() && e != "." && e != "..")
}

/// A list request.
#[derive(Debug, Clone)]
pub struct ListQuery {
    /// `resourceVersion`.
    pub rv: RvParam,
    /// `resourceVersionMatch`.
    pub rv_match: RvMatch,
    /// `limit` (None or 0: no limit).
    pub limit: Option<usize>,
    /// `continue`.
    pub continue_from: Option<ContinueToken>,
    /// Selectors.
    pub selectors: Selectors,
    /// A bound the server puts on a page whatever the client asked (the gRPC API's
    /// message size): the page ends early, with a continue token, like a `limit`, but
    /// the resourceVersion semantics stay those of the request.
    pub bound: Option<PageBound>,
}

/// The most a page may hold.
#[derive(Clone, Copy)]
pub struct PageBound {
    /// Most objects.
    pub items: usize,
    /// Most bytes, as `size` counts each object; a page always holds at least one.
    pub bytes: usize,
    /// What an object costs in the page's message.
    pub size: fn(&crate::store::object::ObjectRef) -> usize,
}

impl std::fmt::Debug for PageBound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageBound")
            .field("items", &self.items)
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

fn invalid(violations: Vec<FieldViolation>) -> ApiError {
    ApiError::Invalid {
        group: "meta.k8s.io".into(),
        kind: "ListOptions".into(),
        violations,
    }
}

impl ListQuery {
    /// Parses and validates a list request for a resource.
    pub fn parse(info: &ResourceInfo, p: &Params) -> Result<ListQuery, ApiError> {
        let rv_raw = p.get("resourceVersion").unwrap_or("");
        let match_raw = p.get("resourceVersionMatch").unwrap_or("");
        let cont = p.get("continue").unwrap_or("");
        let mut v = Vec::new();
        let rvm = "resourceVersionMatch";
        if !match_raw.is_empty() {
            if rv_raw.is_empty() {
                v.push(FieldViolation::forbidden(
                    rvm,
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if !cont.is_empty() {
                v.push(FieldViolation::forbidden(
                    rvm,
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            if match_raw != "Exact" && match_raw != "NotOlderThan" {
                v.push(FieldViolation::not_supported(
                    rvm,
                    match_raw,
                    &["Exact", "NotOlderThan", ""],
                ));
            }
            if match_raw == "Exact" && rv_raw == "0" {
                v.push(FieldViolation::forbidden(
                    rvm,
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        if p.get("sendInitialEvents").is_some() {
            v.push(FieldViolation::forbidden(
                "sendInitialEvents",
                "sendInitialEvents is forbidden for list",
            ));
        }
        if !v.is_empty() {
            return Err(invalid(v));
        }
        let rv = parse_rv(p)?;
        let rv_match = match match_raw {
            "Exact" => RvMatch::Exact,
            "NotOlderThan" => RvMatch::NotOlderThan,
            _ => RvMatch::Unset,
        };
        let limit = match p.get("limit") {
            None | Some("") => None,
            Some(l) => match l.parse::<i64>() {
                Ok(n) if n > 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
                Ok(_) => None,
                Err(_) => return Err(ApiError::BadRequest(format!("invalid limit: {l:?}"))),
            },
        };
        let continue_from = if cont.is_empty() {
            None
        } else {
            if let RvParam::At(_) = rv {
                return Err(ApiError::BadRequest(
                    "specifying resource version is not allowed when using continue".into(),
                ));
            }
            Some(ContinueToken::decode(cont)?)
        };
        Ok(ListQuery {
            rv,
            rv_match,
            limit,
            continue_from,
            selectors: Selectors::parse(p, info)?,
            bound: None,
        })
    }
}

/// A watch request.
#[derive(Debug, Clone)]
pub struct WatchQuery {
    /// `resourceVersion`.
    pub rv: RvParam,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
    /// `allowWatchBookmarks`.
    pub allow_bookmarks: bool,
    /// `timeoutSeconds` (clamped), or the default.
    pub timeout: Duration,
    /// Selectors.
    pub selectors: Selectors,
}

impl WatchQuery {
    /// Whether the watch starts with the state as synthetic ADDED events: as asked by
    /// `sendInitialEvents`, else without a resourceVersion (or with "0"), as
    /// kube-apiserver starts such a watch.
    pub fn wants_initial(&self) -> bool {
        match (self.send_initial_events, self.rv) {
            (Some(b), _) => b,
            (None, RvParam::Unset | RvParam::Any) => true,
            (None, RvParam::At(_)) => false,
        }
    }

    /// Parses and validates a watch request for a resource.
    pub fn parse(info: &ResourceInfo, p: &Params) -> Result<WatchQuery, ApiError> {
        let match_raw = p.get("resourceVersionMatch").unwrap_or("");
        let send_initial_events = p.flag("sendInitialEvents")?;
        let rvm = "resourceVersionMatch";
        let mut v = Vec::new();
        if send_initial_events.is_some() && match_raw != "NotOlderThan" {
            v.push(FieldViolation::forbidden(
                rvm,
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if !match_raw.is_empty() {
            if send_initial_events.is_none() {
                v.push(FieldViolation::forbidden(rvm, "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"));
            }
            if match_raw != "NotOlderThan" {
                v.push(FieldViolation::not_supported(
                    rvm,
                    match_raw,
                    &["NotOlderThan"],
                ));
            }
            if p.get("continue").is_some_and(|c| !c.is_empty()) {
                v.push(FieldViolation::forbidden(
                    rvm,
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
        }
        if !v.is_empty() {
            return Err(invalid(v));
        }
        let timeout = match p.get("timeoutSeconds") {
            None | Some("") => config::DEFAULT_WATCH_TIMEOUT,
            Some(t) => match t.parse::<i64>() {
                Ok(n) if n > 0 => Duration::from_secs(n as u64).min(config::MAX_WATCH_TIMEOUT),
                Ok(_) => config::DEFAULT_WATCH_TIMEOUT,
                Err(_) => {
                    return Err(ApiError::BadRequest(format!(
                        "invalid timeoutSeconds: {t:?}"
                    )))
                }
            },
        };
        Ok(WatchQuery {
            rv: parse_rv(p)?,
            send_initial_events,
            allow_bookmarks: p.flag("allowWatchBookmarks")?.unwrap_or(false),
            timeout,
            selectors: Selectors::parse(p, info)?,
        })
    }
}

/// A get request.
#[derive(Debug, Clone, Copy)]
pub struct GetQuery {
    /// `resourceVersion`.
    pub rv: RvParam,
}

impl GetQuery {
    /// Parses a get request.
    pub fn parse(p: &Params) -> Result<GetQuery, ApiError> {
        Ok(GetQuery { rv: parse_rv(p)? })
    }
}

/// `s` with its percent-encoded bytes decoded (and `+` as a space where a query's
/// form encoding says so); a 400 for a bad escape or bytes that are not UTF-8.
pub(crate) fn percent_decode(s: &str, plus_is_space: bool) -> Result<String, ApiError> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = b
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| {
                        ApiError::BadRequest(format!("invalid percent-encoding in {s:?}"))
                    })?;
                out.push(hex);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out)
        .map_err(|_| ApiError::BadRequest(format!("{s:?} is not UTF-8 once decoded")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(q: &str) -> Params {
        Params::parse(Some(q)).unwrap()
    }

    #[test]
    fn field_selectors_accept_the_resource_fields_only() {
        assert!(ListQuery::parse(&pods(), &params("fieldSelector=spec.nodeName%3Dn1")).is_ok());
        let e = ListQuery::parse(&pods(), &params("fieldSelector=spec.color%3Dred")).unwrap_err();
        assert_eq!(e.code(), 400);
        assert_eq!(e.message(), "field label not supported: spec.color");
    }

    fn pods() -> ResourceInfo {
        crate::registry::builtin::builtin_resources()
            .into_iter()
            .find(|r| r.resource == "pods")
            .unwrap()
    }

    #[test]
    fn query_values_are_percent_decoded() {
        let p = params("labelSelector=app%3Dweb%2Ctier+in+%28a%29&watch=1");
        assert_eq!(p.get("labelSelector"), Some("app=web,tier in (a)"));
        assert!(p.is_watch().unwrap());
        assert!(Params::parse(Some("a=%zz")).is_err());
    }

    #[test]
    fn list_resource_version_match_without_resource_version_is_invalid() {
        let e = ListQuery::parse(&pods(), &params("resourceVersionMatch=Exact")).unwrap_err();
        assert_eq!(e.code(), 422);
        let e = ListQuery::parse(
            &pods(),
            &params("resourceVersionMatch=Exact&resourceVersion=0"),
        )
        .unwrap_err();
        assert!(e
            .message()
            .contains("resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""));
    }

    #[test]
    fn continue_with_explicit_resource_version_is_bad_request() {
        let tok = ContinueToken::encode(Revision(5), "a/b");
        let e = ListQuery::parse(
            &pods(),
            &params(&format!("continue={tok}&resourceVersion=7&limit=1")),
        )
        .unwrap_err();
        assert_eq!(e.code(), 400);
        let q = ListQuery::parse(
            &pods(),
            &params(&format!("continue={tok}&resourceVersion=0&limit=1")),
        )
        .unwrap();
        assert_eq!(q.continue_from.unwrap().start, "a/b");
    }

    fn token_json(json: &str) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
    }

    #[test]
    fn continue_tokens_are_relative_to_the_request_scope() {
        let tok = ContinueToken::after(Revision(5), Some("ns"), "ns/a");
        let q = ListQuery::parse(&pods(), &params(&format!("continue={tok}"))).unwrap();
        let t = q.continue_from.unwrap();
        assert_eq!(
            t.start, "a\u{0}",
            "relative to the namespace, as kube-apiserver's"
        );
        assert_eq!(t.start_key(Some("ns")), "ns/a\u{0}");
        // The same token read by a list in another namespace stays in that namespace.
        assert_eq!(t.start_key(Some("other")), "other/a\u{0}");
        let tok = ContinueToken::after(Revision(5), None, "ns/a");
        let t = ListQuery::parse(&pods(), &params(&format!("continue={tok}")))
            .unwrap()
            .continue_from
            .unwrap();
        assert_eq!(t.start_key(None), "ns/a\u{0}");
        // A leading slash is the scope's root, as path.Clean reads it.
        let tok = token_json(r#"{"v":"meta.k8s.io/v1","rv":3,"start":"/b/c"}"#);
        let t = ListQuery::parse(&pods(), &params(&format!("continue={tok}")))
            .unwrap()
            .continue_from
            .unwrap();
        assert_eq!(t.start_key(Some("ns")), "ns/b/c");
    }

    #[test]
    fn forged_continue_tokens_are_refused_with_kube_apiservers_reasons() {
        for (json, why) in [
            (
                r#"{"v":"meta.k8s.io/v1","rv":3,"start":""}"#,
                "encoded start key empty",
            ),
            (
                r#"{"v":"meta.k8s.io/v1","rv":0,"start":"a"}"#,
                "incorrect encoded start resourceVersion",
            ),
            (
                r#"{"v":"meta.k8s.io/v2","rv":3,"start":"a"}"#,
                "does not recognize this encoded version",
            ),
            (
                r#"{"v":"meta.k8s.io/v1","rv":3,"start":"../kube-system/a"}"#,
                "../kube-system/a",
            ),
            (
                r#"{"v":"meta.k8s.io/v1","rv":3,"start":"a/../../b"}"#,
                "a/../../b",
            ),
            (r#"{"v":"meta.k8s.io/v1","rv":3,"start":"a//b"}"#, "a//b"),
            (r#"{"v":"meta.k8s.io/v1","rv":3,"start":"./a"}"#, "./a"),
            (r#"{"v":"meta.k8s.io/v1","rv":3,"start":"a/"}"#, "a/"),
            (r#"{"v":"meta.k8s.io/v1","rv":3}"#, "missing field"),
        ] {
            let tok = token_json(json);
            let e = ListQuery::parse(&pods(), &params(&format!("continue={tok}"))).unwrap_err();
            assert_eq!(e.code(), 400, "{json}");
            assert!(
                e.message()
                    .starts_with("invalid continue token: continue key is not valid")
                    && e.message().contains(why),
                "{json}: {}",
                e.message()
            );
        }
        let e = ListQuery::parse(&pods(), &params("continue=!!!")).unwrap_err();
        assert_eq!(e.code(), 400);
    }

    #[test]
    fn malformed_parameters_are_bad_requests() {
        for q in [
            "resourceVersion=abc",
            "limit=x",
            "continue=!!",
            "labelSelector=a%20in%20(",
            "fieldSelector=spec.foo%3Db",
        ] {
            let e = ListQuery::parse(&pods(), &params(q)).unwrap_err();
            assert_eq!(e.code(), 400, "{q}");
        }
        assert_eq!(
            WatchQuery::parse(&pods(), &params("timeoutSeconds=x"))
                .unwrap_err()
                .code(),
            400
        );
    }

    #[test]
    fn watch_send_initial_events_requires_not_older_than() {
        let e = WatchQuery::parse(&pods(), &params("sendInitialEvents=true")).unwrap_err();
        assert_eq!(e.code(), 422);
        assert!(e
            .message()
            .contains("sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"));
        let e =
            WatchQuery::parse(&pods(), &params("resourceVersionMatch=NotOlderThan")).unwrap_err();
        assert!(e
            .message()
            .contains("forbidden for watch unless sendInitialEvents is provided"));
        let q = WatchQuery::parse(
            &pods(),
            &params(
                "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
            ),
        )
        .unwrap();
        assert_eq!(q.send_initial_events, Some(true));
        assert!(q.allow_bookmarks);
    }
}
