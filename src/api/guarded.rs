//! A watch stream under authorization, for both frontends: its permission is checked
//! again whenever the RBAC policy changes (looked at every
//! [`crate::config::PERMISSION_RECHECK_INTERVAL`]), and a watch no longer allowed ends
//! with a 403 `ERROR` event in the frontend's encoding. kube-apiserver checks only when a
//! watch starts; a cache that holds the RBAC objects can do better. The watch's per-user
//! permit is held until the stream ends.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::Stream;

use crate::api::status::ApiError;
use crate::auth::authz::Denied;
use crate::auth::limits::Permit;
use crate::auth::rbac::Policy;
use crate::auth::{Attributes, Security};

/// A check of the watch's permission under way (a webhook mode may be asked).
type Check = Pin<Box<dyn Future<Output = Result<(), Denied>> + Send>>;

/// Wraps a watch stream `S`; `F` turns the refusal into the stream's last item.
pub struct Guarded<S: ?Sized, F> {
    inner: Pin<Box<S>>,
    on_revoked: F,
    security: Arc<Security>,
    attrs: Attributes,
    tick: tokio::time::Interval,
    policy: Option<Arc<Policy>>,
    check: Option<Check>,
    done: bool,
    _permit: Option<Permit>,
}

impl<S, F> Guarded<S, F>
where
    S: Stream + Send + ?Sized,
    F: Fn(&ApiError) -> S::Item,
{
    /// Guards `inner`, a watch allowed now for `attrs`, holding `permit` until it ends.
    pub fn new(
        inner: Pin<Box<S>>,
        security: Arc<Security>,
        attrs: Attributes,
        permit: Option<Permit>,
        on_revoked: F,
    ) -> Self {
        let mut tick = tokio::time::interval(crate::config::PERMISSION_RECHECK_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let policy = security.authorizer.rbac_policy();
        Guarded {
            inner,
            on_revoked,
            security,
            attrs,
            tick,
            policy,
            check: None,
            done: false,
            _permit: permit,
        }
    }

    /// Starts a check when the policy changed since the last one.
    fn check_if_policy_changed(&mut self) {
        let current = self.security.authorizer.rbac_policy();
        let same = match (&current, &self.policy) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if same {
            return;
        }
        self.policy = current;
        let (security, attrs) = (self.security.clone(), self.attrs.clone());
        self.check = Some(Box::pin(async move {
            security.authorizer.authorize(&attrs).await
        }));
    }

    /// The refusal, once a check under way finished with one. A check that failed (a
    /// webhook that cannot be reached) leaves the watch open: only a decision ends it.
    fn poll_check(&mut self, cx: &mut Context<'_>) -> Option<ApiError> {
        let check = self.check.as_mut()?;
        let Poll::Ready(result) = check.as_mut().poll(cx) else {
            return None;
        };
        self.check = None;
        match result {
            Ok(()) => None,
            Err(Denied::Failed(e)) => {
                tracing::warn!(user = %self.attrs.user.name, error = %e, "watch permission check failed; the watch stays open");
                None
            }
            Err(denied) => {
                metrics::counter!("watchd_watches_revoked_total").increment(1);
                tracing::info!(user = %self.attrs.user.name, resource = %self.attrs.resource, namespace = %self.attrs.namespace, "watch ended: permission revoked");
                Some(ApiError::denied(&self.attrs, &denied))
            }
        }
    }
}

impl<S, F> Stream for Guarded<S, F>
where
    S: Stream + Send + ?Sized,
    F: Fn(&ApiError) -> S::Item + Unpin,
{
    type Item = S::Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        while this.tick.poll_tick(cx).is_ready() {
            if this.check.is_none() {
                this.check_if_policy_changed();
            }
        }
        if let Some(e) = this.poll_check(cx) {
            this.done = true;
            return Poll::Ready(Some((this.on_revoked)(&e)));
        }
        this.inner.as_mut().poll_next(cx)
    }
}
