//! The audit line of an HTTP request: its attributes as the authorizer sees them, the
//! answer's code, and when.

use std::time::Instant;

use http::{header, Request, Response, StatusCode};

use super::body::Body;
use super::conn::Connection;
use super::query::{self, Route};
use crate::api::query::Params;
use crate::auth::{Attributes, UserInfo};

/// Writes the request's audit line: its attributes as the authorizer sees them (also
/// for requests refused before routing, such as a 401).
pub(super) fn audit_request<B>(
    audit: &crate::auth::audit::AuditLog,
    req: &Request<B>,
    user: Option<UserInfo>,
    response: &Response<Body>,
    conn: &Connection,
    started: Instant,
) {
    let user = user.unwrap_or_default();
    let mut attrs = match query::route(req.uri().path()) {
        Ok(Route::Resource(p)) => {
            p.attributes(user, &Params::parse(req.uri().query()).unwrap_or_default())
        }
        _ => Attributes::non_resource(
            user,
            req.method(),
            &query::canonical_path(req.uri().path())
                .unwrap_or_else(|_| req.uri().path().to_string()),
        ),
    };
    // A POST on a resource creates (the reviews; refused writes say what they tried).
    if attrs.resource_request && req.method() == http::Method::POST {
        attrs.verb = "create".into();
    }
    let stage = if attrs.verb == "watch" && response.status() == StatusCode::OK {
        "ResponseStarted"
    } else {
        "ResponseComplete"
    };
    audit.record(&crate::auth::audit::Entry {
        attrs: &attrs,
        uri: req.uri().path_and_query().map_or("/", |p| p.as_str()),
        peer: conn.peer,
        user_agent: req
            .headers()
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok()),
        code: response.status().as_u16(),
        received: std::time::SystemTime::now() - started.elapsed(),
        stage,
    });
}
