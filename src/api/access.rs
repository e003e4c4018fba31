//! The security steps every frontend takes before serving: authorization of the request's
//! attributes (a 403, or a 500 when an authorizer failed) and the per-user permit of a
//! watch or a list (a 429 at the limit).

use crate::api::status::ApiError;
use crate::auth::limits::{Kind, Permit};
use crate::auth::{Attributes, Security};

/// Checks `attrs` with the authorizers: the Status kube-apiserver would answer, if
/// refused.
pub async fn authorize(security: Option<&Security>, attrs: &Attributes) -> Result<(), ApiError> {
    let Some(sec) = security else {
        return Ok(());
    };
    sec.authorizer.authorize(attrs).await.map_err(|denied| {
        metrics::counter!("watchd_authorization_denials_total").increment(1);
        tracing::info!(user = %attrs.user.name, verb = %attrs.verb, resource = %attrs.resource, namespace = %attrs.namespace, name = %attrs.name, path = %attrs.path, "forbidden");
        ApiError::denied(attrs, &denied)
    })
}

/// The user's permit for a watch or a list (None for other verbs or without
/// authentication), or the 429 of a user at the limit.
pub fn permit(security: Option<&Security>, attrs: &Attributes) -> Result<Option<Permit>, ApiError> {
    let Some(sec) = security else {
        return Ok(None);
    };
    let (kind, what) = match attrs.verb.as_str() {
        "watch" => (Kind::Watch, "open watches"),
        "list" => (Kind::List, "lists in flight"),
        _ => return Ok(None),
    };
    sec.limits
        .acquire(&attrs.user.name, kind)
        .map(Some)
        .map_err(|max| ApiError::TooManyRequests {
            message: format!(
                "Too many requests, please try again later. (user {:?} has {max} {what}, the limit)",
                attrs.user.name
            ),
            retry_after: crate::config::USER_LIMIT_RETRY_AFTER,
        })
}
