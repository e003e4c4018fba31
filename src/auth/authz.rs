//! Authorization modes, evaluated in `--authorization-mode` order as kube-apiserver does:
//! members of `system:masters` first (always allowed), then each mode in turn; the first
//! mode with an opinion decides, and when none has one the request is forbidden with every
//! mode's reason. A mode that fails (a webhook that cannot be reached) has no opinion; if
//! no later mode allows, the request fails with that error (500), not a 403.

use std::sync::Arc;

use super::authz_webhook::AuthzWebhook;
pub use super::authz_webhook::Verdict;
use super::cached::{RbacCache, RbacPolicy};
use super::errors::{ConfigError, WebhookError};
use super::rbac::{self, Decision, PolicyRule};
use super::{Attributes, UserInfo};

/// One `--authorization-mode` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Everything is allowed (the default without authentication).
    AlwaysAllow,
    /// Nothing is allowed.
    AlwaysDeny,
    /// RBAC, evaluated from the cache.
    Rbac,
    /// A SubjectAccessReview webhook.
    Webhook,
}

impl Mode {
    /// Parses `--authorization-mode`'s comma list (kube-apiserver's names).
    pub fn parse_list(s: &str) -> Result<Vec<Mode>, ConfigError> {
        let mut modes = Vec::new();
        for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let mode = match name {
                "AlwaysAllow" => Mode::AlwaysAllow,
                "AlwaysDeny" => Mode::AlwaysDeny,
                "RBAC" => Mode::Rbac,
                "Webhook" => Mode::Webhook,
                "Node" | "ABAC" => return Err(ConfigError::UnsupportedMode(name.into())),
                other => return Err(ConfigError::UnknownMode(other.into())),
            };
            if modes.contains(&mode) {
                return Err(ConfigError::RepeatedMode(name.into()));
            }
            modes.push(mode);
        }
        if modes.is_empty() {
            return Err(ConfigError::NoMode);
        }
        Ok(modes)
    }

    /// The name, for logs.
    pub fn name(self) -> &'static str {
        match self {
            Mode::AlwaysAllow => "AlwaysAllow",
            Mode::AlwaysDeny => "AlwaysDeny",
            Mode::Rbac => "RBAC",
            Mode::Webhook => "Webhook",
        }
    }
}

/// The configured authorizers.
pub struct Authorizer {
    modes: Vec<Mode>,
    rbac: Option<Arc<RbacCache>>,
    webhook: Option<Arc<AuthzWebhook>>,
}

/// A refusal.
#[derive(Debug, Clone)]
pub enum Denied {
    /// 403: the reason kube-apiserver appends to the message (may be empty).
    Forbidden(String),
    /// 500: a mode failed and none allowed; the failure.
    Failed(Arc<WebhookError>),
}

/// Refusals are equal when they are forbidden for the same reason, or fail with the
/// same failure (the same one, not one that reads alike).
impl PartialEq for Denied {
    fn eq(&self, other: &Denied) -> bool {
        match (self, other) {
            (Denied::Forbidden(a), Denied::Forbidden(b)) => a == b,
            (Denied::Failed(a), Denied::Failed(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for Denied {}

impl Authorizer {
    /// Authorizers for `modes`; `rbac` is required when RBAC is among them, `webhook`
    /// when Webhook is.
    pub fn new(
        modes: Vec<Mode>,
        rbac: Option<Arc<RbacCache>>,
        webhook: Option<Arc<AuthzWebhook>>,
    ) -> Result<Authorizer, ConfigError> {
        if modes.contains(&Mode::Rbac) && rbac.is_none() {
            return Err(ConfigError::RbacWithoutCache);
        }
        if modes.contains(&Mode::Webhook) && webhook.is_none() {
            return Err(ConfigError::WebhookWithoutConfig);
        }
        Ok(Authorizer {
            modes,
            rbac,
            webhook,
        })
    }

    /// The modes, in order.
    pub fn modes(&self) -> &[Mode] {
        &self.modes
    }

    /// Whether every request is allowed without looking at it.
    pub fn allows_everything(&self) -> bool {
        self.modes.first() == Some(&Mode::AlwaysAllow)
    }

    /// The RBAC policy published last (None without RBAC): open watches look whether a
    /// change since the one they checked against concerns their user.
    pub fn rbac_policy(&self) -> Option<Arc<RbacPolicy>> {
        self.rbac.as_ref().map(|r| r.policy())
    }

    /// Whether an open watch is checked again at any RBAC change, not only one that
    /// concerns its user: with a Webhook mode, whose answer may change with anything.
    pub fn rechecks_at_any_rbac_change(&self) -> bool {
        self.modes.contains(&Mode::Webhook)
    }

    /// Allowed, or the reason for the 403 (or the error for the 500).
    pub async fn authorize(&self, attrs: &Attributes) -> Result<(), Denied> {
        let d = self.decide(attrs).await;
        match (d.verdict, d.failed) {
            (Verdict::Allow, _) => Ok(()),
            (Verdict::Deny(reason), _) => Err(Denied::Forbidden(reason)),
            (Verdict::NoOpinion(_), Some(e)) => Err(Denied::Failed(e)),
            (Verdict::NoOpinion(reason), None) => Err(Denied::Forbidden(reason)),
        }
    }

    /// The decision on `attrs` as kube-apiserver's authorizer union makes it: members of
    /// `system:masters` are allowed; then the first mode that allows or denies decides,
    /// with its reason; when none does, no opinion, with every mode's reason, one per
    /// line, and the first failure. What a SubjectAccessReview reports.
    pub async fn decide(&self, attrs: &Attributes) -> Decided {
        let decided = |verdict| Decided {
            verdict,
            failed: None,
        };
        if rbac::is_privileged(&attrs.user) {
            return decided(Verdict::Allow);
        }
        let mut reasons = Vec::new();
        // The first failure (the webhook is the only mode that can fail).
        let mut failed = None;
        for mode in &self.modes {
            match mode {
                Mode::AlwaysAllow => return decided(Verdict::Allow),
                Mode::AlwaysDeny => reasons.push("Everything is forbidden.".to_string()),
                Mode::Rbac => {
                    let Some(rbac) = &self.rbac else { continue };
                    match rbac.fresh_policy().await.authorize(attrs) {
                        Decision::Allow { .. } => return decided(Verdict::Allow),
                        Decision::NoOpinion { reason } => {
                            if !reason.is_empty() {
                                reasons.push(reason)
                            }
                        }
                    }
                }
                Mode::Webhook => {
                    let Some(webhook) = &self.webhook else {
                        continue;
                    };
                    match webhook.authorize(attrs).await {
                        Ok(Verdict::Allow) => return decided(Verdict::Allow),
                        // A denial answers with its own reason only, as kube-apiserver's
                        // union returns the deciding authorizer's.
                        Ok(Verdict::Deny(reason)) => return decided(Verdict::Deny(reason)),
                        Ok(Verdict::NoOpinion(reason)) => reasons.push(reason),
                        Err(e) => {
                            metrics::counter!("watchd_authorization_webhook_errors_total")
                                .increment(1);
                            tracing::warn!(error = %e, "authorization webhook failed");
                            failed.get_or_insert(Arc::new(e));
                        }
                    }
                }
            }
        }
        Decided {
            verdict: Verdict::NoOpinion(join(&reasons)),
            failed,
        }
    }

    /// What `user` may do in `namespace` (cluster-wide only when empty), as kube-
    /// apiserver's rule resolvers list it for a SelfSubjectRulesReview, in mode order:
    /// AlwaysAllow grants everything, AlwaysDeny nothing, RBAC its bindings' rules, and a
    /// webhook cannot list its rules, which leaves the answer incomplete.
    pub async fn rules_for(&self, user: &UserInfo, namespace: &str) -> UserRules {
        let mut out = UserRules::default();
        for mode in &self.modes {
            match mode {
                Mode::AlwaysAllow => out.rules.extend(UserRules::everything().rules),
                Mode::AlwaysDeny => {}
                Mode::Rbac => {
                    let Some(rbac) = &self.rbac else { continue };
                    let (rules, errors) = rbac.fresh_policy().await.rules_for(user, namespace);
                    out.rules.extend(rules);
                    out.errors.extend(errors);
                }
                Mode::Webhook => {
                    out.incomplete = true;
                    out.errors
                        .push("webhook authorizer does not support user rule resolution".into());
                }
            }
        }
        out
    }
}

/// An authorizer's decision with its reason, and the failure of a mode, if one failed.
#[derive(Debug, Clone)]
pub struct Decided {
    /// Allowed, denied (by a webhook), or neither (with every mode's reason).
    pub verdict: Verdict,
    /// The first mode that failed, when none allowed or denied before it.
    pub failed: Option<Arc<WebhookError>>,
}

/// The rules a user holds, as a SelfSubjectRulesReview reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserRules {
    /// The rules, each either on resources or on non-resource URLs (or both).
    pub rules: Vec<PolicyRule>,
    /// Whether some rules could not be listed.
    pub incomplete: bool,
    /// Why not all could be read: missing roles, a webhook.
    pub errors: Vec<String>,
}

impl UserRules {
    /// Every verb on every resource and every non-resource URL: what AlwaysAllow
    /// grants (and everyone holds without authentication).
    pub fn everything() -> UserRules {
        let all = || vec!["*".to_string()];
        UserRules {
            rules: vec![
                PolicyRule {
                    verbs: all(),
                    api_groups: all(),
                    resources: all(),
                    ..PolicyRule::default()
                },
                PolicyRule {
                    verbs: all(),
                    non_resource_urls: all(),
                    ..PolicyRule::default()
                },
            ],
            ..UserRules::default()
        }
    }
}

/// The reasons of every mode, one per line, as kube-apiserver's union joins them.
fn join(reasons: &[String]) -> String {
    reasons
        .iter()
        .filter(|r| !r.is_empty())
        .cloned()
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{UserInfo, MASTERS};

    fn attrs(user: &str, groups: &[&str]) -> Attributes {
        Attributes {
            user: UserInfo {
                name: user.into(),
                groups: groups.iter().map(|g| g.to_string()).collect(),
                ..UserInfo::default()
            },
            verb: "list".into(),
            resource_request: true,
            api_version: "v1".into(),
            resource: "pods".into(),
            ..Attributes::default()
        }
    }

    #[test]
    fn modes_parse_as_kube_apiserver_names_them() {
        assert_eq!(
            Mode::parse_list("AlwaysDeny,RBAC").unwrap(),
            [Mode::AlwaysDeny, Mode::Rbac]
        );
        assert_eq!(
            Mode::parse_list("RBAC,Webhook").unwrap(),
            [Mode::Rbac, Mode::Webhook]
        );
        assert!(Mode::parse_list("Node")
            .unwrap_err()
            .to_string()
            .contains("not supported"));
        assert!(Mode::parse_list("rbac")
            .unwrap_err()
            .to_string()
            .contains("unknown"));
        assert!(Mode::parse_list("RBAC,RBAC").is_err());
        assert!(Mode::parse_list("").is_err());
    }

    #[tokio::test]
    async fn the_first_opinion_decides_and_masters_are_always_allowed() {
        let deny = Authorizer::new(vec![Mode::AlwaysDeny], None, None).unwrap();
        assert_eq!(
            deny.authorize(&attrs("alice", &[])).await,
            Err(Denied::Forbidden("Everything is forbidden.".into()))
        );
        assert_eq!(deny.authorize(&attrs("root", &[MASTERS])).await, Ok(()));
        let then_allow =
            Authorizer::new(vec![Mode::AlwaysDeny, Mode::AlwaysAllow], None, None).unwrap();
        assert_eq!(then_allow.authorize(&attrs("alice", &[])).await, Ok(()));
        assert!(!then_allow.allows_everything());
        assert!(Authorizer::new(vec![Mode::Rbac], None, None).is_err());
        assert!(Authorizer::new(vec![Mode::Webhook], None, None).is_err());
    }

    /// A webhook that allows alice, denies mallory, has no opinion on others, and fails
    /// for "crash".
    async fn webhook() -> Arc<AuthzWebhook> {
        use crate::auth::token_webhook::tests::{client, review_server};
        use crate::auth::token_webhook::ReviewVersion;
        use serde_json::json;
        let (url, _) = review_server(|req| {
            let status = match req["spec"]["user"].as_str() {
                Some("alice") => json!({"allowed": true}),
                Some("mallory") => json!({"denied": true, "reason": "go away"}),
                Some("crash") => return (400, json!({})),
                _ => json!({"reason": "unknown user"}),
            };
            (200, json!({"status": status}))
        })
        .await;
        let ttl = std::time::Duration::from_secs(60);
        Arc::new(AuthzWebhook::new(client(&url), ReviewVersion::V1, ttl, ttl))
    }

    #[tokio::test]
    async fn a_webhook_allows_denies_abstains_or_fails_in_its_place_in_the_order() {
        let w = webhook().await;
        let only = Authorizer::new(vec![Mode::Webhook], None, Some(w.clone())).unwrap();
        assert_eq!(only.authorize(&attrs("alice", &[])).await, Ok(()));
        assert_eq!(
            only.authorize(&attrs("bob", &[])).await,
            Err(Denied::Forbidden("unknown user".into()))
        );
        let e = only.authorize(&attrs("crash", &[])).await.unwrap_err();
        assert!(
            matches!(&e, Denied::Failed(m) if m.to_string().contains("400")),
            "{e:?}"
        );
        // A denial ends the evaluation; no opinion and failures let a later mode allow.
        let then_allow =
            Authorizer::new(vec![Mode::Webhook, Mode::AlwaysAllow], None, Some(w)).unwrap();
        assert_eq!(
            then_allow.authorize(&attrs("mallory", &[])).await,
            Err(Denied::Forbidden("go away".into()))
        );
        assert_eq!(then_allow.authorize(&attrs("bob", &[])).await, Ok(()));
        assert_eq!(then_allow.authorize(&attrs("crash", &[])).await, Ok(()));
    }

    /// What a SubjectAccessReview reports: a webhook's denial as a denial, every mode's
    /// reason when none decides, a failure beside them; and what a rules review lists.
    #[tokio::test]
    async fn decisions_and_rules_are_the_unions() {
        let w = webhook().await;
        let a = Authorizer::new(vec![Mode::AlwaysDeny, Mode::Webhook], None, Some(w)).unwrap();
        let verdict = |d: Decided| (d.verdict, d.failed.map(|e| e.to_string()));
        assert_eq!(
            verdict(a.decide(&attrs("mallory", &[])).await),
            (Verdict::Deny("go away".into()), None)
        );
        assert_eq!(
            verdict(a.decide(&attrs("bob", &[])).await),
            (
                Verdict::NoOpinion("Everything is forbidden.\nunknown user".into()),
                None
            )
        );
        let (v, failed) = verdict(a.decide(&attrs("crash", &[])).await);
        assert_eq!(v, Verdict::NoOpinion("Everything is forbidden.".into()));
        assert!(failed.is_some_and(|e| e.contains("400")));
        assert_eq!(
            verdict(a.decide(&attrs("root", &[MASTERS])).await),
            (Verdict::Allow, None)
        );
        let alice = attrs("alice", &[]).user;
        assert_eq!(
            a.rules_for(&alice, "ns").await,
            UserRules {
                rules: vec![],
                incomplete: true,
                errors: vec!["webhook authorizer does not support user rule resolution".into()],
            }
        );
        let all = Authorizer::new(vec![Mode::AlwaysAllow], None, None).unwrap();
        let r = all.rules_for(&alice, "ns").await;
        assert!(!r.incomplete && r.errors.is_empty());
        assert_eq!(r.rules.len(), 2);
        assert_eq!(
            (&r.rules[0].verbs, &r.rules[0].resources),
            (&vec!["*".to_string()], &vec!["*".to_string()])
        );
        assert_eq!(r.rules[1].non_resource_urls, ["*"]);
    }
}
