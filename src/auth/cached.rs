//! What authentication and authorization read from watchd's own cache: objects a
//! ServiceAccount token names or is bound to (uid, deletionTimestamp, labels, and a
//! Secret's `data.token`, read from the object's JSON, rendered for a protobuf-stored
//! one), and the RBAC policy, rebuilt only when one of the four RBAC resources changed.
//! No decision asks kube-apiserver anything.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;

use super::rbac::Policy;
use super::{LookedUp, ObjectLookup};
use crate::store::Cache;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
const RBAC_RESOURCES: [&str; 4] = [
    "roles",
    "clusterroles",
    "rolebindings",
    "clusterrolebindings",
];

/// Object lookups in the cache (core/v1 resources).
pub struct CacheLookup {
    /// The cache.
    pub cache: Arc<Cache>,
}

#[derive(serde::Deserialize, Default)]
struct Meta {
    #[serde(default)]
    uid: String,
    #[serde(default, rename = "deletionTimestamp")]
    deletion_timestamp: Option<String>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
}

/// The members of a Secret a legacy token's check reads.
#[derive(serde::Deserialize)]
struct Secret {
    #[serde(default)]
    metadata: Option<Meta>,
    #[serde(default)]
    data: Option<SecretData>,
}

#[derive(serde::Deserialize)]
struct SecretData {
    /// Base64, as Go writes `[]byte` (and as watchd renders a protobuf-stored Secret).
    #[serde(default)]
    token: Option<String>,
}

impl ObjectLookup for CacheLookup {
    fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<LookedUp> {
        let index = self.cache.resources();
        let store = index.by_api("", "v1", resource)?;
        let key = if namespace.is_empty() {
            name.to_string()
        } else {
            format!("{namespace}/{name}")
        };
        let snap = store.snapshot();
        let obj = snap.objects.get(key.as_str())?;
        // An object that does not read is not there, as a Secret kube-apiserver cannot
        // decode is not: its tokens are refused.
        let (meta, token) = if resource == "secrets" {
            // `data` is beyond `metadata`: the whole JSON (rendered once and kept for a
            // protobuf-stored Secret).
            let secret: Secret = serde_json::from_slice(obj.json()).ok()?;
            let token = match secret.data.and_then(|d| d.token) {
                Some(b64) => Some(base64::engine::general_purpose::STANDARD.decode(b64).ok()?),
                None => None,
            };
            (secret.metadata.unwrap_or_default(), token)
        } else {
            let meta: Meta = serde_json::from_slice(&obj.metadata_json()).ok()?;
            (meta, None)
        };
        Some(LookedUp {
            uid: meta.uid,
            deletion_timestamp: meta.deletion_timestamp.as_deref().map(timestamp),
            labels: meta.labels.unwrap_or_default(),
            token,
        })
    }
}

/// A `metadata.deletionTimestamp` as a time; one that does not read as RFC 3339 (or lies
/// before 1970) is the Unix epoch, long past any grace.
fn timestamp(text: &str) -> SystemTime {
    crate::codec::civil::parse_rfc3339(text)
        .and_then(|(secs, nanos)| {
            let secs = u64::try_from(secs).ok()?;
            UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
        })
        .unwrap_or(UNIX_EPOCH)
}

/// The RBAC policy of the cache's current Roles, ClusterRoles, RoleBindings and
/// ClusterRoleBindings.
pub struct RbacCache {
    cache: Arc<Cache>,
    built: Mutex<Option<(Stamp, Arc<Policy>)>>,
}

/// Identifies the state of the four resources: (epoch, revision) of each snapshot.
type Stamp = [(u64, i64); 4];

impl RbacCache {
    /// A policy source reading `cache`.
    pub fn new(cache: Arc<Cache>) -> RbacCache {
        RbacCache {
            cache,
            built: Mutex::new(None),
        }
    }

    /// The current policy: the one built last if none of the four resources changed
    /// since, else a new one.
    pub fn policy(&self) -> Arc<Policy> {
        let index = self.cache.resources();
        let snaps = RBAC_RESOURCES.map(|r| index.by_api(RBAC_GROUP, "v1", r).map(|s| s.snapshot()));
        let stamp: Stamp = std::array::from_fn(|i| {
            snaps[i]
                .as_ref()
                .map_or((0, -1), |s| (s.epoch, s.revision.0))
        });
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((s, p)) = built.as_ref() {
            if *s == stamp {
                return p.clone();
            }
        }
        let jsons = |i: usize| -> Vec<bytes::Bytes> {
            snaps[i]
                .as_ref()
                .map(|s| s.objects.values().map(|o| o.json().clone()).collect())
                .unwrap_or_default()
        };
        let [roles, cluster_roles, role_bindings, cluster_role_bindings] =
            std::array::from_fn::<_, 4, _>(jsons);
        let policy = Arc::new(Policy::from_objects(
            roles.iter().map(|b| &b[..]),
            cluster_roles.iter().map(|b| &b[..]),
            role_bindings.iter().map(|b| &b[..]),
            cluster_role_bindings.iter().map(|b| &b[..]),
        ));
        metrics::counter!("watchd_rbac_policy_builds_total").increment(1);
        metrics::gauge!("watchd_rbac_unreadable_objects").set(policy.skipped as f64);
        *built = Some((stamp, policy.clone()));
        policy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletion_timestamps_read_as_rfc3339_and_unreadable_ones_as_long_ago() {
        let at = |secs: u64, nanos: u32| UNIX_EPOCH + Duration::new(secs, nanos);
        assert_eq!(timestamp("2026-01-02T03:04:05Z"), at(1_767_323_045, 0));
        assert_eq!(
            timestamp("2026-01-02T04:04:05.5+01:00"),
            at(1_767_323_045, 500_000_000)
        );
        assert_eq!(timestamp("yesterday"), UNIX_EPOCH);
        assert_eq!(timestamp("1969-12-31T23:59:59Z"), UNIX_EPOCH);
    }
}
