//! A watch stream under authorization, for both frontends: its permission is checked
//! again when an RBAC change concerns its user (its name, one of its groups, or its
//! ServiceAccount is a subject of a binding that changed or of one whose role changed;
//! with a Webhook mode, at any RBAC change), looked at every
//! [`crate::config::PERMISSION_RECHECK_INTERVAL`], and a watch no longer allowed ends
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
    /// The RBAC policy's generation the permission was last checked at (None without
    /// RBAC).
    generation: Option<u64>,
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
        let generation = security.authorizer.rbac_policy().map(|p| p.generation());
        Guarded {
            inner,
            on_revoked,
            security,
            attrs,
            tick,
            generation,
            check: None,
            done: false,
            _permit: permit,
        }
    }

    /// Starts a check when the policy changed since the last one in a way that may
    /// concern the watch's user.
    fn check_if_policy_changed(&mut self) {
        let Some(policy) = self.security.authorizer.rbac_policy() else {
            return;
        };
        let since = self.generation.unwrap_or(0);
        if policy.generation() == since {
            return;
        }
        self.generation = Some(policy.generation());
        if !self.security.authorizer.rechecks_at_any_rbac_change()
            && !policy.changed_for(&self.attrs.user, since)
        {
            return;
        }
        metrics::counter!("watchd_watch_permission_rechecks_total").increment(1);
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
