//! Delegated token authentication (`--authentication-token-webhook-config-file`): a
//! bearer token no local authenticator knows is sent to a remote service as a
//! `TokenReview` (authentication.k8s.io, `v1beta1` by default as kube-apiserver), which
//! answers who it belongs to. Answers are cached by the token's SHA-256 for
//! `--authentication-token-webhook-cache-ttl` (2 minutes), "authenticated" and "not
//! authenticated" alike; a failed call is not cached and refuses the request (401).
//!
//! Audiences follow kube-apiserver: with API audiences (`--api-audiences`, or the first
//! ServiceAccount issuer) the review asks for them, and a token is accepted only when
//! the audiences the service answers (or, when it names none, the API's own) meet them.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::Deserialize;
use serde_json::json;

use super::errors::{ConfigError, Webhook, WebhookError};
use super::ttl_cache::{TtlCache, CAPACITY};
use super::UserInfo;
use crate::client::ApiClient;

/// The version of the review objects a webhook speaks (`--*-webhook-version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewVersion {
    /// `v1`.
    V1,
    /// `v1beta1`, kube-apiserver's default.
    V1beta1,
}

impl ReviewVersion {
    /// Parses the value of `flag` (named with its dashes).
    pub fn parse(s: &str, flag: &'static str) -> Result<ReviewVersion, ConfigError> {
        match s {
            "v1" => Ok(ReviewVersion::V1),
            "v1beta1" => Ok(ReviewVersion::V1beta1),
            other => Err(ConfigError::UnsupportedVersion {
                flag,
                version: other.into(),
            }),
        }
    }

    /// `v1` or `v1beta1`.
    pub fn name(self) -> &'static str {
        match self {
            ReviewVersion::V1 => "v1",
            ReviewVersion::V1beta1 => "v1beta1",
        }
    }
}

/// The TokenReview webhook and its cache.
pub struct TokenWebhook {
    client: ApiClient,
    version: ReviewVersion,
    audiences: Vec<String>,
    ttl: Duration,
    cache: TtlCache<[u8; 32], Option<UserInfo>>,
}

#[derive(Deserialize, Default)]
struct Review {
    #[serde(default)]
    status: Status,
}

#[derive(Deserialize, Default)]
struct Status {
    #[serde(default)]
    authenticated: bool,
    #[serde(default)]
    user: ReviewedUser,
    #[serde(default)]
    audiences: Vec<String>,
    #[serde(default)]
    error: String,
}

#[derive(Deserialize, Default)]
struct ReviewedUser {
    #[serde(default)]
    username: String,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    groups: Vec<String>,
    #[serde(default)]
    extra: BTreeMap<String, Vec<String>>,
}

impl TokenWebhook {
    /// A webhook called through `client`, speaking `version`, requiring one of
    /// `audiences` (none: no audience check), caching answers for `ttl` (zero: never).
    pub fn new(
        client: ApiClient,
        version: ReviewVersion,
        audiences: Vec<String>,
        ttl: Duration,
    ) -> TokenWebhook {
        TokenWebhook {
            client,
            version,
            audiences,
            ttl,
            cache: TtlCache::new(CAPACITY),
        }
    }

    /// The user the service says `token` belongs to; None when it says the token is not
    /// valid (another authenticator had its chance before); an error when the call
    /// failed or the service reported one.
    pub async fn authenticate(&self, token: &str) -> Result<Option<UserInfo>, WebhookError> {
        let key: [u8; 32] = ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
            .as_ref()
            .try_into()
            .unwrap_or([0; 32]);
        if let Some(cached) = self.cache.get(&key, Instant::now()) {
            metrics::counter!("watchd_webhook_cache_total", "webhook" => "authentication", "result" => "hit").increment(1);
            return Ok(cached);
        }
        metrics::counter!("watchd_webhook_cache_total", "webhook" => "authentication", "result" => "miss").increment(1);
        let body = self.review(token);
        let review: Review = Webhook::Authentication.exchange(&self.client, body).await?;
        let status = review.status;
        if !self.audiences.is_empty() {
            let got = if status.audiences.is_empty() {
                &self.audiences
            } else {
                &status.audiences
            };
            if !got.iter().any(|a| self.audiences.contains(a)) {
                self.cache.insert(key, None, self.ttl, Instant::now());
                return Ok(None);
            }
        }
        if !status.authenticated {
            if !status.error.is_empty() {
                return Err(WebhookError::Reported(status.error));
            }
            self.cache.insert(key, None, self.ttl, Instant::now());
            return Ok(None);
        }
        let u = status.user;
        let user = UserInfo {
            name: u.username,
            uid: u.uid,
            groups: u.groups,
            extra: u.extra,
        };
        self.cache
            .insert(key, Some(user.clone()), self.ttl, Instant::now());
        Ok(Some(user))
    }

    fn review(&self, token: &str) -> Bytes {
        let mut spec = json!({ "token": token });
        if !self.audiences.is_empty() {
            spec["audiences"] = json!(self.audiences);
        }
        let body = json!({
            "apiVersion": format!("authentication.k8s.io/{}", self.version.name()),
            "kind": "TokenReview",
            "metadata": {},
            "spec": spec,
        });
        Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::client::{Backoff, Endpoint};
    use std::sync::{Arc, Mutex};

    /// A review service on loopback: records each request body, answers with `answer`
    /// of it (status code, JSON).
    pub(crate) async fn review_server(
        answer: impl Fn(&serde_json::Value) -> (u16, serde_json::Value) + Send + Sync + 'static,
    ) -> (String, Arc<Mutex<Vec<serde_json::Value>>>) {
        use http_body_util::BodyExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/review", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (log, answer) = (seen.clone(), Arc::new(answer));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (log, answer) = (log.clone(), answer.clone());
                let svc =
                    hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
                        let (log, answer) = (log.clone(), answer.clone());
                        async move {
                            let body = req.into_body().collect().await.unwrap().to_bytes();
                            let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
                            let (code, out) = answer(&v);
                            log.lock().unwrap().push(v);
                            let mut r = http::Response::new(http_body_util::Full::new(
                                Bytes::from(out.to_string()),
                            ));
                            *r.status_mut() = http::StatusCode::from_u16(code).unwrap();
                            Ok::<_, std::convert::Infallible>(r)
                        }
                    });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), svc),
                );
            }
        });
        (url, seen)
    }

    pub(crate) fn client(url: &str) -> ApiClient {
        let e = Endpoint {
            server: url.into(),
            ..Endpoint::default()
        };
        ApiClient::new(&e).unwrap().with_backoff(Backoff {
            initial: Duration::from_millis(1),
            factor: 1.0,
            jitter: 0.0,
            steps: 2,
        })
    }

    fn answer(req: &serde_json::Value) -> (u16, serde_json::Value) {
        match req["spec"]["token"].as_str().unwrap() {
            "good" => (
                200,
                json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                    "status": {"authenticated": true, "user": {"username": "jane", "uid": "42",
                        "groups": ["dev"], "extra": {"scopes": ["read"]}}}}),
            ),
            "elsewhere" => (
                200,
                json!({"status": {"authenticated": true, "user": {"username": "x"},
                    "audiences": ["other"]}}),
            ),
            "broken" => (200, json!({"status": {"error": "backend down"}})),
            "crash" => (500, json!({})),
            "garbage" => (200, json!(["not", "a", "review"])),
            _ => (200, json!({"status": {"authenticated": false}})),
        }
    }

    #[tokio::test]
    async fn the_review_names_the_user_and_answers_are_cached() {
        let (url, seen) = review_server(answer).await;
        let w = TokenWebhook::new(
            client(&url),
            ReviewVersion::V1beta1,
            vec![],
            Duration::from_secs(60),
        );
        let u = w.authenticate("good").await.unwrap().unwrap();
        assert_eq!((u.name.as_str(), u.uid.as_str()), ("jane", "42"));
        assert_eq!(u.groups, ["dev"]);
        assert_eq!(u.extra["scopes"], ["read"]);
        assert_eq!(w.authenticate("bad").await.unwrap(), None);
        // Both answers come from the cache now.
        assert!(w.authenticate("good").await.unwrap().is_some());
        assert_eq!(w.authenticate("bad").await.unwrap(), None);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0]["apiVersion"], "authentication.k8s.io/v1beta1");
        assert_eq!(seen[0]["kind"], "TokenReview");
        assert!(seen[0]["spec"].get("audiences").is_none());
    }

    #[tokio::test]
    async fn failures_are_errors_and_are_not_cached() {
        let (url, seen) = review_server(answer).await;
        let w = TokenWebhook::new(
            client(&url),
            ReviewVersion::V1,
            vec![],
            Duration::from_secs(60),
        );
        for _ in 0..2 {
            let e = w.authenticate("broken").await.unwrap_err();
            assert!(
                matches!(&e, WebhookError::Reported(m) if m == "backend down"),
                "{e:?}"
            );
            assert_eq!(e.to_string(), "backend down");
        }
        let e = w.authenticate("crash").await.unwrap_err();
        assert!(matches!(e, WebhookError::Call { .. }), "{e:?}");
        let e = e.to_string();
        assert!(e.contains("500"), "{e}");
        assert!(e.starts_with("webhook token authenticator: "), "{e}");
        let e = w.authenticate("garbage").await.unwrap_err();
        assert!(matches!(e, WebhookError::Undecodable { .. }), "{e:?}");
        assert!(
            e.to_string()
                .starts_with("webhook token authenticator: undecodable TokenReview: "),
            "{e}"
        );
        // broken twice, crash twice (one retry), garbage once.
        assert_eq!(seen.lock().unwrap().len(), 5);
    }

    #[tokio::test]
    async fn audiences_are_asked_for_and_must_meet() {
        let (url, seen) = review_server(answer).await;
        let w = TokenWebhook::new(
            client(&url),
            ReviewVersion::V1,
            vec!["https://kubernetes.default.svc".into()],
            Duration::ZERO,
        );
        assert!(w.authenticate("good").await.unwrap().is_some());
        assert_eq!(w.authenticate("elsewhere").await.unwrap(), None);
        let seen = seen.lock().unwrap();
        assert_eq!(
            seen[0]["spec"]["audiences"],
            json!(["https://kubernetes.default.svc"])
        );
        assert_eq!(seen[0]["apiVersion"], "authentication.k8s.io/v1");
    }
}
