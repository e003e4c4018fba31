//! The reviews a client asks about itself, answered as kube-apiserver answers them from
//! watchd's own authenticator and authorizer: SelfSubjectReview (`kubectl auth whoami`),
//! SelfSubjectAccessReview (`kubectl auth can-i`) and SelfSubjectRulesReview (`kubectl
//! auth can-i --list`). They are `create` requests that change nothing.
//!
//! Without authentication every request is the anonymous user's and everything is
//! allowed, so that is what the reviews report. The routing decides when they are
//! answered here rather than passed to an upstream (`routes`).

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Map, Value};

use super::body::Body;
use super::negotiate::{self, Output};
use super::proxy::ForwardBody;
use super::response::error_response;
use crate::api::access;
use crate::api::status::{ApiError, FieldViolation};
use crate::auth::authz::{Decided, UserRules, Verdict};
use crate::auth::{Attributes, Security, UserInfo, ANONYMOUS_USER, UNAUTHENTICATED};
use crate::codec::{envelope, pbjson};

/// The most of a review's body read: kube-apiserver's default request limit (3 MiB).
const BODY_LIMIT: usize = 3 << 20;
/// The longest wait for a review's body.
const BODY_WAIT: Duration = Duration::from_secs(30);

/// One of the three reviews.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Review {
    /// `authentication.k8s.io/v1` SelfSubjectReview: who am I.
    Subject,
    /// `authorization.k8s.io/v1` SelfSubjectAccessReview: may I.
    Access,
    /// `authorization.k8s.io/v1` SelfSubjectRulesReview: what may I, in a namespace.
    Rules,
}

impl Review {
    /// The review a request creates, if it creates one.
    pub fn of(method: &Method, path: &str) -> Option<Review> {
        if method != Method::POST {
            return None;
        }
        match path.trim_end_matches('/') {
            "/apis/authentication.k8s.io/v1/selfsubjectreviews" => Some(Review::Subject),
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews" => Some(Review::Access),
            "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews" => Some(Review::Rules),
            _ => None,
        }
    }

    fn group(self) -> &'static str {
        match self {
            Review::Subject => "authentication.k8s.io",
            Review::Access | Review::Rules => "authorization.k8s.io",
        }
    }

    fn api_version(self) -> String {
        format!("{}/v1", self.group())
    }

    fn resource(self) -> &'static str {
        match self {
            Review::Subject => "selfsubjectreviews",
            Review::Access => "selfsubjectaccessreviews",
            Review::Rules => "selfsubjectrulesreviews",
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Review::Subject => "SelfSubjectReview",
            Review::Access => "SelfSubjectAccessReview",
            Review::Rules => "SelfSubjectRulesReview",
        }
    }

    /// `<resource>.<group>`, as metrics name resources.
    pub fn qualified(self) -> String {
        format!("{}.{}", self.resource(), self.group())
    }
}

/// The user of a request without authentication, as kube-apiserver's anonymous
/// authenticator names it.
fn anonymous() -> UserInfo {
    UserInfo {
        name: ANONYMOUS_USER.into(),
        groups: vec![UNAUTHENTICATED.into()],
        ..UserInfo::default()
    }
}

/// Answers `review` for `user` (None without authentication): the create itself is
/// authorized as any request, the body read (JSON or protobuf) and checked, and the
/// review answered with 201 in the representation the client accepts.
pub async fn answer<B: ForwardBody>(
    security: Option<&Security>,
    review: Review,
    head: &Request<()>,
    body: B,
    user: Option<UserInfo>,
) -> Response<Body> {
    // watchd does not impersonate: answering for the caller would tell an admin asking
    // `can-i --as=alice` about themselves.
    if head
        .headers()
        .keys()
        .any(|n| n.as_str().starts_with("impersonate-"))
    {
        body.discard().await;
        return error_response(&ApiError::Forbidden {
            group: review.group().into(),
            resource: review.resource().into(),
            name: String::new(),
            message: "impersonation is not supported by watchd: ask the API server itself".into(),
        });
    }
    let user = user.unwrap_or_else(anonymous);
    let attrs = Attributes::resource(
        user.clone(),
        "create",
        review.group(),
        "v1",
        review.resource(),
        None,
        None,
        None,
        None,
    );
    if let Err(e) = access::authorize(security, &attrs).await {
        body.discard().await;
        return error_response(&e);
    }
    let accept = head
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let output = match negotiate::negotiate_with(accept, false, true) {
        Ok(Output::Protobuf) => Output::Protobuf,
        Ok(_) => Output::Json,
        Err(e) => {
            body.discard().await;
            return error_response(&e);
        }
    };
    let content_type = head
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let result = match read_body(body).await {
        Ok(bytes) => match decode(review, content_type, &bytes) {
            Ok(request) => reviewed(security, review, &user, &request).await,
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    match result.and_then(|answer| encode(review, &answer, output)) {
        Ok(r) => r,
        Err(e) => error_response(&e),
    }
}

/// The request body, at most [`BODY_LIMIT`] bytes, within [`BODY_WAIT`].
async fn read_body<B: ForwardBody>(body: B) -> Result<Bytes, ApiError> {
    let mut body = body.into_stream_body();
    let read = async {
        let mut out = BytesMut::new();
        while let Some(frame) = body.frame().await {
            let frame =
                frame.map_err(|e| ApiError::BadRequest(format!("reading the body: {e}")))?;
            if let Some(data) = frame.data_ref() {
                if out.len() + data.len() > BODY_LIMIT {
                    return Err(ApiError::TooLarge(format!(
                        "Request entity too large: limit is {BODY_LIMIT}"
                    )));
                }
                out.extend_from_slice(data);
            }
        }
        Ok(out.freeze())
    };
    tokio::time::timeout(BODY_WAIT, read)
        .await
        .unwrap_or_else(|_| {
            Err(ApiError::BadRequest(
                "the request body was not received in time".into(),
            ))
        })
}

/// The review the body holds, as JSON: JSON as sent, protobuf read by its schema.
fn decode(review: Review, content_type: Option<&str>, bytes: &[u8]) -> Result<Value, ApiError> {
    // kube-apiserver reads a body without a Content-Type as JSON.
    let media = content_type
        .and_then(|c| c.split(';').next())
        .map(|c| c.trim().to_ascii_lowercase())
        .unwrap_or_else(|| "application/json".into());
    let value: Value = match media.as_str() {
        "application/json" => serde_json::from_slice(bytes)
            .map_err(|e| ApiError::BadRequest(format!("the request body is not JSON: {e}")))?,
        envelope::PROTOBUF => {
            let env = envelope::parse(bytes).map_err(|e| {
                ApiError::BadRequest(format!("the request body is not Kubernetes protobuf: {e}"))
            })?;
            let (api_version, kind) = (env.api_version.to_string(), env.kind.to_string());
            check_type(review, Some(&api_version), Some(&kind))?;
            let rendered = pbjson::render(&api_version, &kind, env.raw, None)
                .map_err(|e| ApiError::BadRequest(format!("the request body does not read: {e}")))?;
            serde_json::from_slice(&rendered.json)
                .map_err(|e| ApiError::Internal(format!("rendered review: {e}")))?
        }
        _ => {
            return Err(ApiError::UnsupportedMediaType(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/vnd.kubernetes.protobuf".into(),
            ))
        }
    };
    if !value.is_object() {
        return Err(ApiError::BadRequest(format!(
            "the request body is not a {} object",
            review.kind()
        )));
    }
    let s = |k| value.get(k).and_then(Value::as_str);
    check_type(review, s("apiVersion"), s("kind"))?;
    Ok(value)
}

/// A body naming another apiVersion or kind than the review's is refused, as kube-
/// apiserver refuses it; one naming none is the review.
fn check_type(
    review: Review,
    api_version: Option<&str>,
    kind: Option<&str>,
) -> Result<(), ApiError> {
    let want = review.api_version();
    if let Some(v) = api_version.filter(|v| !v.is_empty() && *v != want) {
        return Err(ApiError::BadRequest(format!(
            "the API version in the data ({v}) does not match the expected API version ({want})"
        )));
    }
    if let Some(k) = kind.filter(|k| !k.is_empty() && *k != review.kind()) {
        return Err(ApiError::BadRequest(format!(
            "not a {}: the object provided is a {k}",
            review.kind()
        )));
    }
    Ok(())
}

/// The review answered: the request's spec (for an access review) and its status.
async fn reviewed(
    security: Option<&Security>,
    review: Review,
    user: &UserInfo,
    request: &Value,
) -> Result<Value, ApiError> {
    let mut out = json!({
        "kind": review.kind(),
        "apiVersion": review.api_version(),
        "metadata": {},
    });
    match review {
        Review::Subject => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            out["metadata"] =
                json!({"creationTimestamp": crate::codec::civil::format_rfc3339(now)});
            out["status"] = json!({"userInfo": user_info(user)});
        }
        Review::Access => {
            let spec = request.get("spec").cloned().unwrap_or_else(|| json!({}));
            let attrs = access_attributes(user, request, &spec)?;
            let decided = match security {
                Some(sec) => sec.authorizer.decide(&attrs).await,
                None => Decided {
                    verdict: Verdict::Allow,
                    failed: None,
                },
            };
            out["spec"] = spec;
            out["status"] = access_status(&decided);
        }
        Review::Rules => {
            let namespace = request
                .pointer("/spec/namespace")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if namespace.is_empty() {
                return Err(ApiError::BadRequest("no namespace on request".into()));
            }
            let rules = match security {
                Some(sec) => sec.authorizer.rules_for(user, namespace).await,
                None => UserRules::everything(),
            };
            out["spec"] = json!({});
            out["status"] = rules_status(&rules);
        }
    }
    Ok(out)
}

/// A user as `authentication.k8s.io/v1` UserInfo.
fn user_info(user: &UserInfo) -> Value {
    let mut info = Map::new();
    if !user.name.is_empty() {
        info.insert("username".into(), json!(user.name));
    }
    if !user.uid.is_empty() {
        info.insert("uid".into(), json!(user.uid));
    }
    if !user.groups.is_empty() {
        info.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        info.insert("extra".into(), json!(user.extra));
    }
    Value::Object(info)
}

/// The attributes an access review asks about, checked as kube-apiserver validates a
/// SelfSubjectAccessReview: no metadata, and exactly one of resourceAttributes and
/// nonResourceAttributes.
fn access_attributes(
    user: &UserInfo,
    request: &Value,
    spec: &Value,
) -> Result<Attributes, ApiError> {
    let invalid = |field: &str, detail: &str| ApiError::Invalid {
        group: Review::Access.group().into(),
        kind: Review::Access.kind().into(),
        violations: vec![FieldViolation::invalid(field, "null", detail)],
    };
    let metadata_set = request
        .get("metadata")
        .and_then(Value::as_object)
        .is_some_and(|m| m.values().any(|v| !v.is_null()));
    if metadata_set {
        return Err(invalid("metadata", "must be empty"));
    }
    let attrs = |k| spec.get(k).filter(|v| !v.is_null());
    let s = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    match (attrs("resourceAttributes"), attrs("nonResourceAttributes")) {
        (Some(_), Some(_)) => Err(invalid(
            "spec.nonResourceAttributes",
            "cannot be specified in combination with resourceAttributes",
        )),
        (None, None) => Err(invalid(
            "spec.resourceAttributes",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
        (Some(r), None) => Ok(Attributes {
            user: user.clone(),
            verb: s(r, "verb"),
            resource_request: true,
            api_group: s(r, "group"),
            // kube-apiserver reads an empty version as every version.
            api_version: Some(s(r, "version"))
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| "*".into()),
            resource: s(r, "resource"),
            subresource: s(r, "subresource"),
            namespace: s(r, "namespace"),
            name: s(r, "name"),
            path: String::new(),
        }),
        (None, Some(n)) => Ok(Attributes {
            user: user.clone(),
            verb: s(n, "verb"),
            resource_request: false,
            path: s(n, "path"),
            ..Attributes::default()
        }),
    }
}

/// `authorization.k8s.io/v1` SubjectAccessReviewStatus of a decision.
fn access_status(decided: &Decided) -> Value {
    let mut status = Map::new();
    let (allowed, denied, reason) = match &decided.verdict {
        Verdict::Allow => (true, false, ""),
        Verdict::Deny(r) => (false, true, r.as_str()),
        Verdict::NoOpinion(r) => (false, false, r.as_str()),
    };
    status.insert("allowed".into(), json!(allowed));
    if denied {
        status.insert("denied".into(), json!(true));
    }
    if !reason.is_empty() {
        status.insert("reason".into(), json!(reason));
    }
    if let Some(e) = &decided.failed {
        status.insert("evaluationError".into(), json!(e.to_string()));
    }
    Value::Object(status)
}

/// `authorization.k8s.io/v1` SubjectRulesReviewStatus of a user's rules: each rule on
/// resources a ResourceRule, each on non-resource URLs a NonResourceRule; errors joined
/// as kube-apiserver's aggregate error prints them.
fn rules_status(rules: &UserRules) -> Value {
    let some = |v: &[String]| (!v.is_empty()).then(|| json!(v));
    let resource_rules: Vec<Value> = rules
        .rules
        .iter()
        .filter(|r| !r.resources.is_empty())
        .map(|r| {
            let mut rule = Map::new();
            rule.insert("verbs".into(), json!(r.verbs));
            for (k, v) in [
                ("apiGroups", &r.api_groups),
                ("resources", &r.resources),
                ("resourceNames", &r.resource_names),
            ] {
                if let Some(v) = some(v) {
                    rule.insert(k.into(), v);
                }
            }
            Value::Object(rule)
        })
        .collect();
    let non_resource_rules: Vec<Value> = rules
        .rules
        .iter()
        .filter(|r| !r.non_resource_urls.is_empty())
        .map(|r| json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls}))
        .collect();
    let mut status = json!({
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": rules.incomplete,
    });
    let mut errors: Vec<&String> = Vec::new();
    for e in &rules.errors {
        if !errors.contains(&e) {
            errors.push(e);
        }
    }
    match errors.as_slice() {
        [] => {}
        [one] => status["evaluationError"] = json!(one),
        many => {
            let joined: Vec<&str> = many.iter().map(|e| e.as_str()).collect();
            status["evaluationError"] = json!(format!("[{}]", joined.join(", ")));
        }
    }
    status
}

/// The 201 response: the review as its Go type encodes it (JSON in the type's field
/// order, or Kubernetes protobuf), by way of its schema.
fn encode(review: Review, answer: &Value, output: Output) -> Result<Response<Body>, ApiError> {
    let api_version = review.api_version();
    let raw = pbjson::encode_json_lossy(&api_version, review.kind(), answer)
        .map_err(|e| ApiError::Internal(format!("encoding the review: {e}")))?;
    let (body, content_type) = match output {
        Output::Protobuf => (
            envelope::write(&api_version, review.kind(), &raw),
            envelope::PROTOBUF,
        ),
        _ => {
            let rendered = pbjson::render(&api_version, review.kind(), &raw, None)
                .map_err(|e| ApiError::Internal(format!("rendering the review: {e}")))?;
            (rendered.json, "application/json")
        }
    };
    let mut r = Response::new(Body::full(Bytes::from(body)));
    *r.status_mut() = StatusCode::CREATED;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    Ok(r)
}
