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
use std::task::{Context, Poll, Waker};

use tokio::time::Instant;

use futures_util::Stream;

use crate::api::status::ApiError;
use crate::api::watch::{Step, SteppedWatch};
use crate::auth::authz::Denied;
use crate::auth::limits::Permit;
use crate::auth::{Attributes, Security};

/// A check of the watch's permission under way (a webhook mode may be asked).
type Check = Pin<Box<dyn Future<Output = Result<(), Denied>> + Send>>;

/// A watch's permission, checked again when the policy changes.
struct Guard {
    security: Arc<Security>,
    attrs: Attributes,
    /// The RBAC policy's generation the permission was last checked at (None without
    /// RBAC).
    generation: Option<u64>,
    check: Option<Check>,
    _permit: Option<Permit>,
}

impl Guard {
    fn new(security: Arc<Security>, attrs: Attributes, permit: Option<Permit>) -> Self {
        let generation = security.authorizer.rbac_policy().map(|p| p.generation());
        Guard {
            security,
            attrs,
            generation,
            check: None,
            _permit: permit,
        }
    }

    /// Starts a check when the policy changed since the last one in a way that may
    /// concern the watch's user (unless one is under way).
    fn check_if_policy_changed(&mut self) {
        if self.check.is_some() {
            return;
        }
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

/// Wraps a watch stream `S`; `F` turns the refusal into the stream's last item.
pub struct Guarded<S: ?Sized, F> {
    inner: Pin<Box<S>>,
    on_revoked: F,
    guard: Guard,
    tick: tokio::time::Interval,
    done: bool,
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
        let guard = Guard::new(security, attrs, permit);
        Guarded::looking_from(inner, on_revoked, guard, Instant::now(), false)
    }

    /// `inner` under `guard`, the policy looked at first at `first_look`, then every
    /// [`crate::config::PERMISSION_RECHECK_INTERVAL`].
    fn looking_from(
        inner: Pin<Box<S>>,
        on_revoked: F,
        guard: Guard,
        first_look: Instant,
        done: bool,
    ) -> Self {
        let mut tick =
            tokio::time::interval_at(first_look, crate::config::PERMISSION_RECHECK_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Guarded {
            inner,
            on_revoked,
            guard,
            tick,
            done,
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
            this.guard.check_if_policy_changed();
        }
        if let Some(e) = this.guard.poll_check(cx) {
            this.done = true;
            return Poll::Ready(Some((this.on_revoked)(&e)));
        }
        this.inner.as_mut().poll_next(cx)
    }
}

/// A watch stepped by its frontend (see [`SteppedWatch`]) under authorization, as
/// [`Guarded`] guards a stream: the policy is looked at when a step comes a
/// [`crate::config::PERMISSION_RECHECK_INTERVAL`] or more after the last look (an idle
/// watch asks to be stepped then), not per event, and without a timer of its own.
pub struct GuardedWatch<T, F> {
    inner: Box<dyn SteppedWatch<T>>,
    on_revoked: F,
    guard: Guard,
    /// When the policy is looked at next.
    next_look: Instant,
    done: bool,
}

impl<T, F> GuardedWatch<T, F>
where
    T: Send + 'static,
    F: Fn(&ApiError) -> T + Send + Unpin + 'static,
{
    /// Guards `inner`, a watch allowed now for `attrs`, holding `permit` until it ends.
    pub fn new(
        inner: Box<dyn SteppedWatch<T>>,
        security: Arc<Security>,
        attrs: Attributes,
        permit: Option<Permit>,
        on_revoked: F,
    ) -> Self {
        GuardedWatch {
            inner,
            on_revoked,
            guard: Guard::new(security, attrs, permit),
            next_look: Instant::now() + crate::config::PERMISSION_RECHECK_INTERVAL,
            done: false,
        }
    }
}

impl<T, F> SteppedWatch<T> for GuardedWatch<T, F>
where
    T: Send + 'static,
    F: Fn(&ApiError) -> T + Send + Unpin + 'static,
{
    fn step(&mut self, waker: &Waker) -> Step<T> {
        if self.done {
            return Step::End;
        }
        let now = Instant::now();
        if now >= self.next_look {
            self.next_look = now + crate::config::PERMISSION_RECHECK_INTERVAL;
            self.guard.check_if_policy_changed();
        }
        // A check under way wakes the watch when it finishes.
        if let Some(e) = self.guard.poll_check(&mut Context::from_waker(waker)) {
            self.done = true;
            // Stepped again after this frame, to end.
            waker.wake_by_ref();
            return Step::Frame((self.on_revoked)(&e));
        }
        match self.inner.step(waker) {
            Step::Idle(at) => Step::Idle(at.min(self.next_look)),
            other => other,
        }
    }

    fn into_stream(self: Box<Self>) -> Pin<Box<dyn Stream<Item = T> + Send>> {
        let this = *self;
        Box::pin(Guarded::looking_from(
            this.inner.into_stream(),
            this.on_revoked,
            this.guard,
            this.next_look,
            this.done,
        ))
    }
}
