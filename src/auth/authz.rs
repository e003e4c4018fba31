//! Authorization modes, evaluated in `--authorization-mode` order as kube-apiserver does:
//! members of `system:masters` first (always allowed), then each mode in turn; the first
//! mode with an opinion decides, and when none has one the request is forbidden with every
//! mode's reason.

use std::sync::Arc;

use super::cached::RbacCache;
use super::rbac::{self, Decision};
use super::Attributes;

/// One `--authorization-mode` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Everything is allowed (the default without authentication).
    AlwaysAllow,
    /// Nothing is allowed.
    AlwaysDeny,
    /// RBAC, evaluated from the cache.
    Rbac,
}

impl Mode {
    /// Parses `--authorization-mode`'s comma list (kube-apiserver's names).
    pub fn parse_list(s: &str) -> Result<Vec<Mode>, String> {
        let mut modes = Vec::new();
        for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let mode = match name {
                "AlwaysAllow" => Mode::AlwaysAllow,
                "AlwaysDeny" => Mode::AlwaysDeny,
                "RBAC" => Mode::Rbac,
                "Webhook" | "Node" | "ABAC" => {
                    return Err(format!(
                        "--authorization-mode {name} is not supported by watchd (use AlwaysAllow, AlwaysDeny or RBAC)"
                    ))
                }
                other => {
                    return Err(format!(
                        "unknown --authorization-mode {other:?} (use AlwaysAllow, AlwaysDeny or RBAC)"
                    ))
                }
            };
            if modes.contains(&mode) {
                return Err(format!("--authorization-mode lists {name} twice"));
            }
            modes.push(mode);
        }
        if modes.is_empty() {
            return Err("--authorization-mode is empty".into());
        }
        Ok(modes)
    }

    /// The name, for logs.
    pub fn name(self) -> &'static str {
        match self {
            Mode::AlwaysAllow => "AlwaysAllow",
            Mode::AlwaysDeny => "AlwaysDeny",
            Mode::Rbac => "RBAC",
        }
    }
}

/// The configured authorizers.
pub struct Authorizer {
    modes: Vec<Mode>,
    rbac: Option<Arc<RbacCache>>,
}

/// A refusal: the reason kube-apiserver appends to the 403 message (may be empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied(pub String);

impl Authorizer {
    /// Authorizers for `modes`; `rbac` is required when RBAC is among them.
    pub fn new(modes: Vec<Mode>, rbac: Option<Arc<RbacCache>>) -> Result<Authorizer, String> {
        if modes.contains(&Mode::Rbac) && rbac.is_none() {
            return Err("RBAC authorization needs the cache".into());
        }
        Ok(Authorizer { modes, rbac })
    }

    /// The modes, in order.
    pub fn modes(&self) -> &[Mode] {
        &self.modes
    }

    /// Whether every request is allowed without looking at it.
    pub fn allows_everything(&self) -> bool {
        self.modes.first() == Some(&Mode::AlwaysAllow)
    }

    /// The RBAC policy in force now (None without RBAC): a new one means a Role or
    /// binding changed, and open watches check their permission again.
    pub fn rbac_policy(&self) -> Option<Arc<rbac::Policy>> {
        self.rbac.as_ref().map(|r| r.policy())
    }

    /// Allowed, or the reason for the 403.
    pub fn authorize(&self, attrs: &Attributes) -> Result<(), Denied> {
        if rbac::is_privileged(&attrs.user) {
            return Ok(());
        }
        let mut reasons = Vec::new();
        for mode in &self.modes {
            match mode {
                Mode::AlwaysAllow => return Ok(()),
                Mode::AlwaysDeny => reasons.push("Everything is forbidden.".to_string()),
                Mode::Rbac => {
                    let Some(rbac) = &self.rbac else { continue };
                    match rbac.policy().authorize(attrs) {
                        Decision::Allow { .. } => return Ok(()),
                        Decision::NoOpinion { reason } => {
                            if !reason.is_empty() {
                                reasons.push(reason)
                            }
                        }
                    }
                }
            }
        }
        Err(Denied(reasons.join("\n")))
    }
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
        assert!(Mode::parse_list("Webhook")
            .unwrap_err()
            .contains("not supported"));
        assert!(Mode::parse_list("rbac").unwrap_err().contains("unknown"));
        assert!(Mode::parse_list("RBAC,RBAC").is_err());
        assert!(Mode::parse_list("").is_err());
    }

    #[test]
    fn the_first_opinion_decides_and_masters_are_always_allowed() {
        let deny = Authorizer::new(vec![Mode::AlwaysDeny], None).unwrap();
        assert_eq!(
            deny.authorize(&attrs("alice", &[])),
            Err(Denied("Everything is forbidden.".into()))
        );
        assert_eq!(deny.authorize(&attrs("root", &[MASTERS])), Ok(()));
        let then_allow = Authorizer::new(vec![Mode::AlwaysDeny, Mode::AlwaysAllow], None).unwrap();
        assert_eq!(then_allow.authorize(&attrs("alice", &[])), Ok(()));
        assert!(!then_allow.allows_everything());
        assert!(Authorizer::new(vec![Mode::Rbac], None).is_err());
    }
}
