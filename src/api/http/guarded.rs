//! A watch body under authorization: its permission is checked again whenever the RBAC
//! policy changes (looked at every [`crate::config::PERMISSION_RECHECK_INTERVAL`]), and a
//! watch no longer allowed ends with a 403 `ERROR` event. kube-apiserver checks only when
//! a watch starts; a cache that holds the RBAC objects can do better. The watch's per-user
//! permit is held until the body ends.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::Stream;

use super::body::{Body, BufList};
use super::{encode, encode_protobuf};
use crate::api::status::ApiError;
use crate::auth::limits::Permit;
use crate::auth::rbac::Policy;
use crate::auth::{Attributes, Security};

struct Guarded {
    inner: Pin<Box<dyn Stream<Item = BufList> + Send>>,
    security: Arc<Security>,
    attrs: Attributes,
    protobuf: bool,
    tick: tokio::time::Interval,
    policy: Option<Arc<Policy>>,
    done: bool,
    _permit: Option<Permit>,
}

/// Wraps a watch response body; a complete body (an error) is returned as it is.
pub fn watch_body(
    body: Body,
    security: Arc<Security>,
    attrs: Attributes,
    protobuf: bool,
    permit: Option<Permit>,
) -> Body {
    let Body::Stream(inner) = body else {
        return body;
    };
    let mut tick = tokio::time::interval(crate::config::PERMISSION_RECHECK_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let policy = security.authorizer.rbac_policy();
    Body::stream(Guarded {
        inner,
        security,
        attrs,
        protobuf,
        tick,
        policy,
        done: false,
        _permit: permit,
    })
}

impl Guarded {
    /// The refusal, if the policy changed and no longer allows the watch.
    fn revoked(&mut self) -> Option<ApiError> {
        let current = self.security.authorizer.rbac_policy();
        let same = match (&current, &self.policy) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if same {
            return None;
        }
        self.policy = current;
        let denied = self.security.authorizer.authorize(&self.attrs).err()?;
        metrics::counter!("watchd_watches_revoked_total").increment(1);
        tracing::info!(user = %self.attrs.user.name, resource = %self.attrs.resource, namespace = %self.attrs.namespace, "watch ended: permission revoked");
        Some(ApiError::Forbidden {
            group: self.attrs.api_group.clone(),
            resource: self.attrs.resource.clone(),
            name: self.attrs.name.clone(),
            message: crate::auth::rbac::forbidden_message(&self.attrs, &denied.0),
        })
    }
}

impl Stream for Guarded {
    type Item = BufList;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<BufList>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        while this.tick.poll_tick(cx).is_ready() {
            if let Some(e) = this.revoked() {
                this.done = true;
                let frame = if this.protobuf {
                    encode_protobuf::error_frame(&e)
                } else {
                    encode::error_frame(&e)
                };
                return Poll::Ready(Some(BufList::from(frame)));
            }
        }
        this.inner.as_mut().poll_next(cx)
    }
}
