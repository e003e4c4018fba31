//! What authentication and authorization read from watchd's own cache: objects a
//! ServiceAccount token names or is bound to, and the RBAC policy, rebuilt only when one of
//! the four RBAC resources changed. No decision asks kube-apiserver anything.

use std::sync::{Arc, Mutex};

use super::rbac::Policy;
use super::ObjectLookup;
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

#[derive(serde::Deserialize)]
struct Meta {
    #[serde(default)]
    uid: String,
    #[serde(default, rename = "deletionTimestamp")]
    deletion_timestamp: Option<String>,
}

impl ObjectLookup for CacheLookup {
    fn uid(&self, resource: &str, namespace: &str, name: &str) -> Option<String> {
        let index = self.cache.resources();
        let store = index.by_api("", "v1", resource)?;
        let key = if namespace.is_empty() {
            name.to_string()
        } else {
            format!("{namespace}/{name}")
        };
        let snap = store.snapshot();
        let obj = snap.objects.get(key.as_str())?;
        let meta: Meta = serde_json::from_slice(&obj.metadata_json()).ok()?;
        // An object being deleted still exists; kube-apiserver's validators decide on
        // deletionTimestamp themselves where it matters, so it is reported as present.
        let _ = meta.deletion_timestamp;
        Some(meta.uid)
    }
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
