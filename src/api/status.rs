//! Errors as Kubernetes `Status` objects: one enum variant per Status reason, each with
//! the HTTP code kube-apiserver uses for it.

use std::time::Duration;

use serde_json::{json, Value};

/// One field error of an `Invalid` status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldViolation {
    /// `FieldValueForbidden`, `FieldValueNotSupported`, `FieldValueInvalid`.
    pub cause: &'static str,
    /// The field path, e.g. `resourceVersionMatch`.
    pub field: String,
    /// The error without the field: e.g. `Forbidden: ...`.
    pub body: String,
}

impl FieldViolation {
    /// `field: Forbidden: detail`.
    pub fn forbidden(field: &str, detail: &str) -> Self {
        FieldViolation {
            cause: "FieldValueForbidden",
            field: field.into(),
            body: format!("Forbidden: {detail}"),
        }
    }

    /// `field: Unsupported value: "v": supported values: "a", "b"`.
    pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        FieldViolation {
            cause: "FieldValueNotSupported",
            field: field.into(),
            body: format!(
                "Unsupported value: {value:?}: supported values: {}",
                list.join(", ")
            ),
        }
    }

    /// `field: Invalid value: "v": detail`.
    pub fn invalid(field: &str, value: &str, detail: &str) -> Self {
        FieldViolation {
            cause: "FieldValueInvalid",
            field: field.into(),
            body: format!("Invalid value: {value:?}: {detail}"),
        }
    }
}

/// Every error the API answers, as a Kubernetes Status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// 400.
    BadRequest(String),
    /// 401 `Unauthorized`: no authenticator accepted the request's credentials.
    Unauthorized,
    /// 403 `Forbidden`, as kube-apiserver's authorization filter words it.
    Forbidden {
        /// API group of the resource ("" for core or a non-resource path).
        group: String,
        /// Plural resource name; empty for a non-resource path.
        resource: String,
        /// Object name, if the request named one.
        name: String,
        /// The whole message, e.g. `pods is forbidden: User "alice" cannot list ...`.
        message: String,
    },
    /// 404 for an object: `<resource> "<name>" not found`.
    NotFound {
        /// API group of the resource.
        group: String,
        /// Plural resource name.
        resource: String,
        /// Object name.
        name: String,
    },
    /// 404 for a path that is not served.
    PathNotFound(String),
    /// 405.
    MethodNotAllowed(String),
    /// 406.
    NotAcceptable(String),
    /// 410 `Expired`.
    Expired(String),
    /// 413 `RequestEntityTooLarge`: a request body over the limit.
    TooLarge(String),
    /// 415 `UnsupportedMediaType`: a request body in a format not read.
    UnsupportedMediaType(String),
    /// 422 `Invalid`, for `kind` (e.g. `ListOptions` in `meta.k8s.io`).
    Invalid {
        /// Group of the invalid kind.
        group: String,
        /// The kind whose validation failed.
        kind: String,
        /// The field errors.
        violations: Vec<FieldViolation>,
    },
    /// 429 `TooManyRequests`: a resource whose cache is not ready (kube-apiserver:
    /// "storage is (re)initializing"), with `Retry-After`.
    TooManyRequests {
        /// The message.
        message: String,
        /// Seconds for the `Retry-After` header and `details.retryAfterSeconds`.
        retry_after: u64,
    },
    /// 500 `InternalError`, as kube-apiserver's `NewInternalError(err)` words it:
    /// `Internal error occurred: <err>`, with `<err>` as the one cause.
    Internal(String),
    /// 503.
    Unavailable(String),
    /// 504 `Timeout`; `too_large_rv` adds the `ResourceVersionTooLarge` cause.
    Timeout {
        /// The message.
        message: String,
        /// Whether the cause is a resourceVersion ahead of the cache.
        too_large_rv: bool,
        /// Seconds for the `Retry-After` header.
        retry_after: u64,
    },
}

impl ApiError {
    /// What kube-apiserver answers when the authorizers refuse `attrs`: 403 with their
    /// reasons, or 500 when one failed and none allowed.
    pub fn denied(
        attrs: &crate::auth::Attributes,
        denied: &crate::auth::authz::Denied,
    ) -> ApiError {
        use crate::auth::authz::Denied;
        match denied {
            Denied::Forbidden(reason) => ApiError::Forbidden {
                group: attrs.api_group.clone(),
                resource: attrs.resource.clone(),
                name: attrs.name.clone(),
                message: crate::auth::rbac::forbidden_message(attrs, reason),
            },
            Denied::Failed(error) => ApiError::Internal(error.to_string()),
        }
    }

    /// The "too old resource version" error of a watch or an exact list.
    pub fn too_old(requested: i64, oldest: i64) -> ApiError {
        ApiError::Expired(format!("too old resource version: {requested} ({oldest})"))
    }

    /// The 504 for a resourceVersion the cache has not reached in time.
    pub fn too_large_resource_version(requested: i64, waited: Duration) -> ApiError {
        ApiError::Timeout {
            message: format!(
                "Too large resource version: {requested}, current: less than {requested}; waited {}s",
                waited.as_secs()
            ),
            too_large_rv: true,
            retry_after: 1,
        }
    }

    /// The HTTP status code.
    pub fn code(&self) -> u16 {
        match self {
            ApiError::BadRequest(_) => 400,
            ApiError::Unauthorized => 401,
            ApiError::Forbidden { .. } => 403,
            ApiError::NotFound { .. } | ApiError::PathNotFound(_) => 404,
            ApiError::MethodNotAllowed(_) => 405,
            ApiError::NotAcceptable(_) => 406,
            ApiError::Expired(_) => 410,
            ApiError::TooLarge(_) => 413,
            ApiError::UnsupportedMediaType(_) => 415,
            ApiError::Invalid { .. } => 422,
            ApiError::TooManyRequests { .. } => 429,
            ApiError::Internal(_) => 500,
            ApiError::Unavailable(_) => 503,
            ApiError::Timeout { .. } => 504,
        }
    }

    /// The Status `reason`.
    pub fn reason(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "BadRequest",
            ApiError::Unauthorized => "Unauthorized",
            ApiError::Forbidden { .. } => "Forbidden",
            ApiError::NotFound { .. } | ApiError::PathNotFound(_) => "NotFound",
            ApiError::MethodNotAllowed(_) => "MethodNotAllowed",
            ApiError::NotAcceptable(_) => "NotAcceptable",
            ApiError::Expired(_) => "Expired",
            ApiError::TooLarge(_) => "RequestEntityTooLarge",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            ApiError::Invalid { .. } => "Invalid",
            ApiError::TooManyRequests { .. } => "TooManyRequests",
            ApiError::Internal(_) => "InternalError",
            ApiError::Unavailable(_) => "ServiceUnavailable",
            ApiError::Timeout { .. } => "Timeout",
        }
    }

    /// Seconds for a `Retry-After` header, if any.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            ApiError::Timeout { retry_after, .. }
            | ApiError::TooManyRequests { retry_after, .. } => Some(*retry_after),
            ApiError::Unavailable(_) => Some(1),
            _ => None,
        }
    }

    /// The human message.
    pub fn message(&self) -> String {
        match self {
            ApiError::NotFound {
                group,
                resource,
                name,
            } => {
                format!("{} \"{name}\" not found", qualified(group, resource))
            }
            ApiError::Invalid {
                group,
                kind,
                violations,
            } => {
                let errs: Vec<String> = violations
                    .iter()
                    .map(|v| format!("{}: {}", v.field, v.body))
                    .collect();
                let list = if errs.len() == 1 {
                    errs.join("")
                } else {
                    format!("[{}]", errs.join(", "))
                };
                format!("{kind}.{group} \"\" is invalid: {list}")
            }
            ApiError::BadRequest(m)
            | ApiError::PathNotFound(m)
            | ApiError::MethodNotAllowed(m)
            | ApiError::NotAcceptable(m)
            | ApiError::Expired(m)
            | ApiError::TooLarge(m)
            | ApiError::UnsupportedMediaType(m)
            | ApiError::Unavailable(m) => m.clone(),
            ApiError::Internal(m) => format!("Internal error occurred: {m}"),
            ApiError::Unauthorized => "Unauthorized".into(),
            ApiError::Timeout { message, .. }
            | ApiError::TooManyRequests { message, .. }
            | ApiError::Forbidden { message, .. } => message.clone(),
        }
    }

    /// The Status object.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message(),
            "reason": self.reason(),
            "code": self.code(),
        });
        let details = match self {
            ApiError::NotFound {
                group,
                resource,
                name,
            } => {
                let mut d = json!({"name": name, "kind": resource});
                if !group.is_empty() {
                    d["group"] = json!(group);
                }
                Some(d)
            }
            ApiError::Invalid {
                group,
                kind,
                violations,
            } => Some(json!({
                "group": group,
                "kind": kind,
                "causes": violations.iter().map(|v| json!({
                    "reason": v.cause, "message": v.body, "field": v.field,
                })).collect::<Vec<_>>(),
            })),
            ApiError::Timeout {
                too_large_rv: true,
                retry_after,
                message,
            } => Some(json!({
                "causes": [{"reason": "ResourceVersionTooLarge", "message": message}],
                "retryAfterSeconds": retry_after,
            })),
            ApiError::Timeout { retry_after, .. }
            | ApiError::TooManyRequests { retry_after, .. } => {
                Some(json!({"retryAfterSeconds": retry_after}))
            }
            ApiError::Internal(m) => Some(json!({"causes": [{"message": m}]})),
            // kube-apiserver's NewForbidden: details always, each field when set.
            ApiError::Forbidden {
                group,
                resource,
                name,
                ..
            } => {
                let mut d = json!({});
                if !resource.is_empty() {
                    d["kind"] = json!(resource);
                }
                if !name.is_empty() {
                    d["name"] = json!(name);
                }
                if !group.is_empty() {
                    d["group"] = json!(group);
                }
                Some(d)
            }
            _ => None,
        };
        if let Some(d) = details {
            status["details"] = d;
        }
        status
    }
}

fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_names_the_resource_and_object() {
        let e = ApiError::NotFound {
            group: "apps".into(),
            resource: "deployments".into(),
            name: "web".into(),
        };
        let s = e.to_status();
        assert_eq!(s["code"], 404);
        assert_eq!(s["message"], "deployments.apps \"web\" not found");
        assert_eq!(s["details"]["kind"], "deployments");
        assert_eq!(s["details"]["group"], "apps");
    }

    #[test]
    fn invalid_list_options_are_worded_like_kube_apiserver() {
        let e = ApiError::Invalid {
            group: "meta.k8s.io".into(),
            kind: "ListOptions".into(),
            violations: vec![FieldViolation::forbidden(
                "resourceVersionMatch",
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            )],
        };
        assert_eq!(
            e.message(),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
        );
        let s = e.to_status();
        assert_eq!(s["code"], 422);
        assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueForbidden");
        let two = FieldViolation::not_supported(
            "resourceVersionMatch",
            "Foo",
            &["Exact", "NotOlderThan", ""],
        );
        assert_eq!(
            two.body,
            "Unsupported value: \"Foo\": supported values: \"Exact\", \"NotOlderThan\", \"\""
        );
    }

    #[test]
    fn internal_errors_and_too_many_requests_are_worded_like_kube_apiserver() {
        let e = ApiError::Internal(
            "unable to transform key \"/registry/secrets/a/b\": no matching prefix found".into(),
        );
        let s = e.to_status();
        assert_eq!(s["code"], 500);
        assert_eq!(s["reason"], "InternalError");
        assert_eq!(
            s["message"],
            "Internal error occurred: unable to transform key \"/registry/secrets/a/b\": no matching prefix found"
        );
        assert_eq!(
            s["details"]["causes"][0]["message"],
            "unable to transform key \"/registry/secrets/a/b\": no matching prefix found"
        );
        let e = ApiError::TooManyRequests {
            message: "storage is (re)initializing".into(),
            retry_after: 3,
        };
        let s = e.to_status();
        assert_eq!((s["code"].as_u64(), e.retry_after()), (Some(429), Some(3)));
        assert_eq!(s["reason"], "TooManyRequests");
        assert_eq!(s["message"], "storage is (re)initializing");
        assert_eq!(s["details"], json!({"retryAfterSeconds": 3}));
    }

    #[test]
    fn too_large_resource_version_is_a_timeout_with_retry_after() {
        let e = ApiError::too_large_resource_version(99, Duration::from_secs(3));
        assert_eq!(e.code(), 504);
        assert_eq!(e.retry_after(), Some(1));
        assert!(e.message().contains("Too large resource version"));
        assert_eq!(
            e.to_status()["details"]["causes"][0]["reason"],
            "ResourceVersionTooLarge"
        );
    }
}
