//! Delegated authorization (`--authorization-mode=...,Webhook` with
//! `--authorization-webhook-config-file`): the request's attributes go to a remote
//! service as a `SubjectAccessReview` (authorization.k8s.io, `v1beta1` by default as
//! kube-apiserver; its user's groups are `group` there and `groups` in `v1`), which
//! answers allowed, denied (no later mode is asked), or neither (the next mode decides).
//!
//! Answers are cached by the review's spec: allowed ones for
//! `--authorization-webhook-cache-authorized-ttl` (5 minutes), the others for
//! `--authorization-webhook-cache-unauthorized-ttl` (30 seconds), unless the attributes
//! are too long to be worth keeping, as kube-apiserver decides. A failed call has no
//! opinion: a later mode may still allow, and if none does the request fails with 500,
//! as kube-apiserver answers an authorizer's error.

use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::errors::{Webhook, WebhookError};
use super::token_webhook::ReviewVersion;
use super::ttl_cache::{TtlCache, CAPACITY};
use super::Attributes;
use crate::client::ApiClient;

/// Attributes longer than this in all are not cached (kube-apiserver's limit).
const MAX_CACHED_ATTRIBUTES: usize = 10_000;

/// What the service said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Allowed.
    Allow,
    /// Denied: no later mode is asked.
    Deny(String),
    /// Neither: the reason, if any, joins the 403's.
    NoOpinion(String),
}

/// The SubjectAccessReview webhook and its cache.
pub struct AuthzWebhook {
    client: ApiClient,
    version: ReviewVersion,
    authorized_ttl: Duration,
    unauthorized_ttl: Duration,
    cache: TtlCache<String, Verdict>,
}

#[derive(Deserialize, Default)]
struct Review {
    #[serde(default)]
    status: Status,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Status {
    #[serde(default)]
    allowed: bool,
    #[serde(default)]
    denied: bool,
    #[serde(default)]
    reason: String,
}

impl AuthzWebhook {
    /// A webhook called through `client`, speaking `version`, caching allowed answers
    /// for `authorized_ttl` and the others for `unauthorized_ttl`.
    pub fn new(
        client: ApiClient,
        version: ReviewVersion,
        authorized_ttl: Duration,
        unauthorized_ttl: Duration,
    ) -> AuthzWebhook {
        AuthzWebhook {
            client,
            version,
            authorized_ttl,
            unauthorized_ttl,
            cache: TtlCache::new(CAPACITY),
        }
    }

    /// The service's verdict on `attrs`, or why it could not be asked.
    pub async fn authorize(&self, attrs: &Attributes) -> Result<Verdict, WebhookError> {
        let spec = self.spec(attrs);
        let key = spec.to_string();
        if let Some(v) = self.cache.get(&key, Instant::now()) {
            metrics::counter!("watchd_webhook_cache_total", "webhook" => "authorization", "result" => "hit").increment(1);
            return Ok(v);
        }
        metrics::counter!("watchd_webhook_cache_total", "webhook" => "authorization", "result" => "miss").increment(1);
        let body = json!({
            "apiVersion": format!("authorization.k8s.io/{}", self.version.name()),
            "kind": "SubjectAccessReview",
            "metadata": {},
            "spec": spec,
        });
        let body = Bytes::from(serde_json::to_vec(&body).unwrap_or_default());
        let review: Review = Webhook::Authorization.exchange(&self.client, body).await?;
        let s = review.status;
        let verdict = match (s.allowed, s.denied) {
            // Both is the service's mistake; denying is the safe reading (kube-apiserver
            // denies and reports an error).
            (_, true) => Verdict::Deny(s.reason),
            (true, false) => Verdict::Allow,
            (false, false) => Verdict::NoOpinion(s.reason),
        };
        if cacheable(attrs) {
            let ttl = if verdict == Verdict::Allow {
                self.authorized_ttl
            } else {
                self.unauthorized_ttl
            };
            self.cache.insert(key, verdict.clone(), ttl, Instant::now());
        }
        Ok(verdict)
    }

    /// The review's spec, as kube-apiserver fills it (empty fields left out).
    fn spec(&self, attrs: &Attributes) -> Value {
        let mut spec = Map::new();
        if attrs.resource_request {
            let mut r = Map::new();
            for (k, v) in [
                ("namespace", &attrs.namespace),
                ("verb", &attrs.verb),
                ("group", &attrs.api_group),
                ("version", &attrs.api_version),
                ("resource", &attrs.resource),
                ("subresource", &attrs.subresource),
                ("name", &attrs.name),
            ] {
                if !v.is_empty() {
                    r.insert(k.into(), json!(v));
                }
            }
            spec.insert("resourceAttributes".into(), Value::Object(r));
        } else {
            spec.insert(
                "nonResourceAttributes".into(),
                json!({"path": attrs.path, "verb": attrs.verb}),
            );
        }
        let u = &attrs.user;
        if !u.name.is_empty() {
            spec.insert("user".into(), json!(u.name));
        }
        if !u.uid.is_empty() {
            spec.insert("uid".into(), json!(u.uid));
        }
        if !u.groups.is_empty() {
            let field = match self.version {
                ReviewVersion::V1 => "groups",
                ReviewVersion::V1beta1 => "group",
            };
            spec.insert(field.into(), json!(u.groups));
        }
        if !u.extra.is_empty() {
            spec.insert("extra".into(), json!(u.extra));
        }
        Value::Object(spec)
    }
}

fn cacheable(a: &Attributes) -> bool {
    let size: usize = [
        &a.namespace,
        &a.verb,
        &a.api_group,
        &a.api_version,
        &a.resource,
        &a.subresource,
        &a.name,
        &a.path,
    ]
    .iter()
    .map(|s| s.len())
    .sum();
    size < MAX_CACHED_ATTRIBUTES
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::token_webhook::tests::{client, review_server};
    use crate::auth::UserInfo;

    fn attrs(user: &str, verb: &str, resource: &str, ns: &str) -> Attributes {
        Attributes {
            user: UserInfo {
                name: user.into(),
                groups: vec!["dev".into(), "system:authenticated".into()],
                ..UserInfo::default()
            },
            verb: verb.into(),
            resource_request: true,
            api_version: "v1".into(),
            resource: resource.into(),
            namespace: ns.into(),
            ..Attributes::default()
        }
    }

    fn answer(req: &Value) -> (u16, Value) {
        let spec = &req["spec"];
        let ra = &spec["resourceAttributes"];
        let status = match (spec["user"].as_str(), ra["resource"].as_str()) {
            (_, Some("secrets")) => {
                json!({"allowed": false, "denied": true, "reason": "no secrets"})
            }
            (Some("jane"), Some("pods")) => json!({"allowed": true}),
            (Some("boom"), _) => return (500, json!({})),
            _ if spec["nonResourceAttributes"]["path"] == "/healthz" => json!({"allowed": true}),
            _ => json!({"allowed": false, "reason": "not mine to say"}),
        };
        (200, json!({"status": status}))
    }

    #[tokio::test]
    async fn verdicts_and_the_review_as_kube_apiserver_sends_it() {
        let (url, seen) = review_server(answer).await;
        let w = AuthzWebhook::new(
            client(&url),
            ReviewVersion::V1beta1,
            Duration::from_secs(300),
            Duration::from_secs(30),
        );
        assert_eq!(
            w.authorize(&attrs("jane", "list", "pods", "ns1"))
                .await
                .unwrap(),
            Verdict::Allow
        );
        assert_eq!(
            w.authorize(&attrs("jane", "get", "secrets", "ns1"))
                .await
                .unwrap(),
            Verdict::Deny("no secrets".into())
        );
        assert_eq!(
            w.authorize(&attrs("joe", "list", "pods", ""))
                .await
                .unwrap(),
            Verdict::NoOpinion("not mine to say".into())
        );
        let health = Attributes::non_resource(UserInfo::default(), &http::Method::GET, "/healthz");
        assert_eq!(w.authorize(&health).await.unwrap(), Verdict::Allow);
        let e = w
            .authorize(&attrs("boom", "list", "pods", ""))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("500"), "{e}");
        assert!(e.starts_with("webhook authorizer: "), "{e}");
        // Cached: asking again sends nothing.
        let before = seen.lock().unwrap().len();
        assert_eq!(
            w.authorize(&attrs("jane", "list", "pods", "ns1"))
                .await
                .unwrap(),
            Verdict::Allow
        );
        assert_eq!(seen.lock().unwrap().len(), before);

        let seen = seen.lock().unwrap();
        assert_eq!(seen[0]["apiVersion"], "authorization.k8s.io/v1beta1");
        assert_eq!(seen[0]["kind"], "SubjectAccessReview");
        assert_eq!(
            seen[0]["spec"],
            json!({"resourceAttributes": {"namespace": "ns1", "verb": "list", "version": "v1",
                "resource": "pods"}, "user": "jane", "group": ["dev", "system:authenticated"]})
        );
        assert_eq!(
            seen[3]["spec"],
            json!({"nonResourceAttributes": {"path": "/healthz", "verb": "get"}})
        );
    }

    #[tokio::test]
    async fn v1_names_the_groups_groups_and_ttls_differ_by_verdict() {
        let (url, seen) = review_server(answer).await;
        let w = AuthzWebhook::new(
            client(&url),
            ReviewVersion::V1,
            Duration::from_secs(300),
            Duration::ZERO,
        );
        w.authorize(&attrs("jane", "list", "pods", ""))
            .await
            .unwrap();
        w.authorize(&attrs("jane", "list", "pods", ""))
            .await
            .unwrap();
        w.authorize(&attrs("joe", "list", "pods", ""))
            .await
            .unwrap();
        w.authorize(&attrs("joe", "list", "pods", ""))
            .await
            .unwrap();
        let seen = seen.lock().unwrap();
        // jane's allowed answer was cached; joe's refusal was not (zero TTL).
        assert_eq!(seen.len(), 3);
        assert_eq!(seen[0]["apiVersion"], "authorization.k8s.io/v1");
        assert_eq!(
            seen[0]["spec"]["groups"],
            json!(["dev", "system:authenticated"])
        );
        assert!(seen[0]["spec"].get("group").is_none());
    }
}
