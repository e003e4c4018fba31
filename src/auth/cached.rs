//! What authentication and authorization read from watchd's own cache: objects a
//! ServiceAccount token names or is bound to (uid, deletionTimestamp, labels, and a
//! Secret's `data.token`, read from the object's JSON, rendered for a protobuf-stored
//! one), and the RBAC policy, an index kept per changed Role, ClusterRole or binding by a
//! task of its own, off the request path.
//! No decision asks kube-apiserver anything.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use base64::Engine as _;
use tokio::sync::{watch, Notify};

use super::rbac::index::{Affected, Kind, RbacIndex};
use super::rbac::{Decision, PolicyRule};
use super::{Attributes, LookedUp, ObjectLookup, UserInfo};
use crate::store::{
    Cache, EventLog, ObjectMap, ObjectRef, Read, ResourceIndex, ResourceStore, Snapshot,
};
use crate::Revision;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

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
            let secret: Secret = serde_json::from_slice(&obj.json()).ok()?;
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

/// One published version of the RBAC policy: the index, and what its latest changes
/// concerned, for open watches to tell whether to check their permission again.
pub struct RbacPolicy {
    index: RbacIndex,
    generation: u64,
    /// Whom each of the last changes concerned, oldest first; the last made `generation`.
    changes: imbl::Vector<Arc<Affected>>,
    /// The (epoch, revision) of each RBAC resource's snapshot the index holds.
    stamps: [Stamp; 4],
    /// Where those snapshots were read, so a reader finds the current ones without a
    /// lookup by name.
    sources: Sources,
}

/// Identifies the state of one RBAC resource: (epoch, revision) of its snapshot;
/// `(0, -1)` while it is not served.
type Stamp = (u64, i64);

const ABSENT: Stamp = (0, -1);

#[derive(Clone, Default)]
struct Sources {
    index: Option<Arc<ResourceIndex>>,
    stores: [Option<Arc<ResourceStore>>; 4],
}

impl Sources {
    /// The four stores of `index` (looked up by name unless it is the one already held).
    fn of(&self, index: Arc<ResourceIndex>) -> Sources {
        if self.index.as_ref().is_some_and(|i| Arc::ptr_eq(i, &index)) {
            return self.clone();
        }
        let stores = Kind::ALL.map(|k| index.by_api(RBAC_GROUP, "v1", k.resource()).cloned());
        Sources {
            index: Some(index),
            stores,
        }
    }

    /// The stamps of the four resources' current snapshots in `index`.
    fn stamps_in(&self, index: Arc<ResourceIndex>) -> [Stamp; 4] {
        let stamp = |s: Option<&Arc<ResourceStore>>| {
            s.map_or(ABSENT, |s| {
                let snap = s.snapshot();
                (snap.epoch, snap.revision.0)
            })
        };
        if self.index.as_ref().is_some_and(|i| Arc::ptr_eq(i, &index)) {
            return std::array::from_fn(|i| stamp(self.stores[i].as_ref()));
        }
        Kind::ALL.map(|k| stamp(index.by_api(RBAC_GROUP, "v1", k.resource())))
    }
}

impl RbacPolicy {
    /// Decides `attrs` as kube-apiserver's RBAC authorizer does.
    pub fn authorize(&self, attrs: &Attributes) -> Decision {
        self.index.authorize(attrs)
    }

    /// What `user` may do in `namespace`, as kube-apiserver's RBAC rule resolver lists
    /// it: the rules, and the roles found missing.
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<PolicyRule>, Vec<String>) {
        self.index.rules_for(user, namespace)
    }

    /// Counts the changes to the index: bumped by each change that may grant or take
    /// something from someone.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether a change after `generation` may have changed what `user` is allowed (also
    /// when more changes were made since than this version remembers).
    pub fn changed_for(&self, user: &UserInfo, generation: u64) -> bool {
        let Some(missed) = self.generation.checked_sub(generation).filter(|&n| n > 0) else {
            return false;
        };
        if missed > self.changes.len() as u64 {
            return true;
        }
        self.changes
            .iter()
            .rev()
            .take(missed as usize)
            .any(|a| a.concerns(user))
    }

    /// Whether this version holds every RBAC change of the snapshots stamped `stamps`.
    fn covers(&self, stamps: &[Stamp; 4]) -> bool {
        self.stamps
            .iter()
            .zip(stamps)
            .all(|(have, want)| have >= want)
    }
}

/// How many changes a published policy remembers for open watches; a watch that last
/// looked further back is checked again.
const CHANGES_KEPT: usize = 256;

/// How long a request waits for the index to take in the RBAC changes the cache applied
/// before the request came (the follower runs on every applied revision; this bounds a
/// stalled one).
const FRESH_WAIT: Duration = Duration::from_secs(2);

/// The follower looks at the RBAC resources at least this often, also when the cache's
/// applied revision did not move (a source with a revision per resource may apply an
/// older one).
const FOLLOW_INTERVAL: Duration = Duration::from_secs(1);

/// The RBAC policy of the cache's current Roles, ClusterRoles, RoleBindings and
/// ClusterRoleBindings: an index kept by a task of its own, which applies each changed
/// object (found in the resources' event logs; a new epoch, a resource gone or an event
/// log left behind are read whole, skipping the objects that did not change) and
/// publishes each version with one atomic store. Readers load it; a request first waits
/// for the changes applied to the cache before it (the index is at most one applied
/// revision behind), so that a request sees every RBAC change the cache served before it.
pub struct RbacCache {
    shared: Arc<Shared>,
    follower: Option<tokio::task::AbortHandle>,
}

struct Shared {
    cache: Arc<Cache>,
    current: ArcSwap<RbacPolicy>,
    /// Bumped at each publication; requests waiting for a fresh policy follow it.
    published: watch::Sender<u64>,
    /// Wakes the follower (a request found the policy behind the cache).
    wake: Notify,
}

impl Shared {
    fn publish(&self, policy: RbacPolicy) {
        self.current.store(Arc::new(policy));
        self.published.send_modify(|n| *n += 1);
    }
}

impl RbacCache {
    /// A policy source reading `cache`: built now from what the cache holds, then
    /// followed by a task on the current tokio runtime (without one, it stays as built).
    pub fn new(cache: Arc<Cache>) -> RbacCache {
        let mut follower = Follower::new(cache.clone());
        let first = follower.step();
        let shared = Arc::new(Shared {
            cache,
            current: ArcSwap::from_pointee(first),
            published: watch::channel(0).0,
            wake: Notify::new(),
        });
        let follower = match tokio::runtime::Handle::try_current() {
            Ok(rt) => Some(rt.spawn(follow(shared.clone(), follower)).abort_handle()),
            Err(_) => {
                tracing::warn!("no async runtime: the RBAC policy will not follow changes");
                None
            }
        };
        RbacCache { shared, follower }
    }

    /// The policy published last (one atomic load): what open watches compare.
    pub fn policy(&self) -> Arc<RbacPolicy> {
        self.shared.current.load_full()
    }

    /// The policy holding every RBAC change the cache applied before this call: the one
    /// published last, or, when the follower has yet to take in a change, the next one
    /// that does (at most [`FRESH_WAIT`]; then the last one).
    pub async fn fresh_policy(&self) -> Arc<RbacPolicy> {
        let policy = self.policy();
        let want = policy.sources.stamps_in(self.shared.cache.resources());
        if policy.covers(&want) || self.follower.is_none() {
            return policy;
        }
        let mut published = self.shared.published.subscribe();
        let policy = self.policy();
        if policy.covers(&want) {
            return policy;
        }
        self.shared.wake.notify_one();
        let caught_up = tokio::time::timeout(FRESH_WAIT, async {
            while published.changed().await.is_ok() {
                let policy = self.policy();
                if policy.covers(&want) {
                    return Some(policy);
                }
            }
            None
        })
        .await;
        match caught_up {
            Ok(Some(policy)) => policy,
            _ => {
                tracing::warn!("the RBAC index is behind the cache; deciding on the last one");
                self.policy()
            }
        }
    }
}

impl Drop for RbacCache {
    fn drop(&mut self) {
        if let Some(task) = &self.follower {
            task.abort();
        }
    }
}

/// The follower's task: a step at each applied revision, wake-up, or [`FOLLOW_INTERVAL`].
async fn follow(shared: Arc<Shared>, mut follower: Follower) {
    loop {
        let seen = shared.cache.progress().applied();
        if let Some(policy) = follower.step_if_moved() {
            shared.publish(policy);
        }
        tokio::select! {
            _ = shared.cache.progress().wait_applied(Revision(seen.0 + 1), FOLLOW_INTERVAL) => {}
            _ = shared.wake.notified() => {}
        }
    }
}

/// What the follower holds of one RBAC resource.
#[derive(Default)]
struct Followed {
    store: Option<Arc<ResourceStore>>,
    snapshot: Option<Arc<Snapshot>>,
    /// The event log of the snapshot's epoch, and the position after the last event
    /// taken in; None when the next change must be read whole.
    log: Option<(Arc<EventLog>, u64)>,
    /// The objects the index holds (the snapshot's map).
    held: ObjectMap,
}

/// Keeps the index: the single writer of the policy.
struct Follower {
    cache: Arc<Cache>,
    sources: Sources,
    kinds: [Followed; 4],
    index: RbacIndex,
    generation: u64,
    changes: imbl::Vector<Arc<Affected>>,
    /// Resources read whole, and objects applied, so far (the metrics, for tests).
    rebuilds: u64,
    applied: u64,
}

impl Follower {
    fn new(cache: Arc<Cache>) -> Follower {
        Follower {
            cache,
            sources: Sources::default(),
            kinds: Default::default(),
            index: RbacIndex::new(),
            generation: 0,
            changes: imbl::Vector::new(),
            rebuilds: 0,
            applied: 0,
        }
    }

    fn count(&mut self, how: &'static str, applied: usize) {
        self.rebuilds += u64::from(how == "rebuild");
        self.applied += applied as u64;
        metrics::counter!("watchd_rbac_index_updates_total", "how" => how).increment(1);
        metrics::counter!("watchd_rbac_index_objects_applied_total").increment(applied as u64);
    }

    /// Takes in what changed; the version to publish if any snapshot moved.
    fn step_if_moved(&mut self) -> Option<RbacPolicy> {
        let sources = self.sources.of(self.cache.resources());
        let moved = (0..4).any(|i| {
            let (now, held) = (&sources.stores[i], &self.kinds[i]);
            match (now, &held.store) {
                (Some(a), Some(b)) => {
                    !Arc::ptr_eq(a, b)
                        || !held
                            .snapshot
                            .as_ref()
                            .is_some_and(|s| Arc::ptr_eq(s, &a.snapshot()))
                }
                (None, None) => false,
                _ => true,
            }
        });
        moved.then(|| self.step())
    }

    /// Takes in what changed in the four resources, and the version to publish.
    fn step(&mut self) -> RbacPolicy {
        self.sources = self.sources.of(self.cache.resources());
        let mut affected = Affected::default();
        for (i, kind) in Kind::ALL.into_iter().enumerate() {
            let store = self.sources.stores[i].clone();
            self.follow(i, kind, store, &mut affected);
        }
        if !affected.is_empty() {
            self.generation += 1;
            self.changes.push_back(Arc::new(affected));
            while self.changes.len() > CHANGES_KEPT {
                self.changes.pop_front();
            }
        }
        metrics::gauge!("watchd_rbac_unreadable_objects").set(self.index.unreadable() as f64);
        RbacPolicy {
            index: self.index.clone(),
            generation: self.generation,
            changes: self.changes.clone(),
            stamps: std::array::from_fn(|i| {
                self.kinds[i]
                    .snapshot
                    .as_ref()
                    .map_or(ABSENT, |s| (s.epoch, s.revision.0))
            }),
            sources: self.sources.clone(),
        }
    }

    /// Brings resource `i` (`kind`, served by `store` now) up to its current snapshot.
    fn follow(
        &mut self,
        i: usize,
        kind: Kind,
        store: Option<Arc<ResourceStore>>,
        affected: &mut Affected,
    ) {
        let f = &mut self.kinds[i];
        let same_store = match (&f.store, &store) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        let Some(store) = store else {
            if !same_store {
                // No longer served: what it granted goes.
                let applied =
                    reconcile(&mut self.index, kind, &f.held, &ObjectMap::new(), affected);
                *f = Followed::default();
                self.count("rebuild", applied);
            }
            return;
        };
        let snap = store.snapshot();
        if same_store && f.snapshot.as_ref().is_some_and(|s| Arc::ptr_eq(s, &snap)) {
            return;
        }
        let (how, applied, log) = match f.log.take() {
            Some((log, cursor)) if same_store && log.epoch() == snap.epoch => {
                let (applied, cursor, whole) = apply_events(
                    &mut self.index,
                    kind,
                    &log,
                    cursor,
                    &f.held,
                    &snap,
                    affected,
                );
                if whole {
                    // Events were lost (evicted, or a value that cannot be read left the
                    // snapshot without one): read it whole (what the events applied
                    // already is applied again, to the same effect).
                    let applied =
                        reconcile(&mut self.index, kind, &f.held, &snap.objects, affected);
                    ("rebuild", applied, positioned(log, &snap))
                } else {
                    ("objects", applied, Some((log, cursor)))
                }
            }
            _ => {
                // A new store or a new epoch: read it whole. The log of the snapshot's
                // epoch is stored before the snapshot, so a newer one means another
                // epoch began: the next step reads that.
                let applied = reconcile(&mut self.index, kind, &f.held, &snap.objects, affected);
                ("rebuild", applied, positioned(store.log(), &snap))
            }
        };
        f.held = snap.objects.clone();
        f.log = log;
        f.snapshot = Some(snap);
        f.store = Some(store);
        self.count(how, applied);
    }
}

/// `log` with its cursor right after `snap`'s revision, if it is of `snap`'s epoch and
/// still holds what follows it.
fn positioned(log: Arc<EventLog>, snap: &Snapshot) -> Option<(Arc<EventLog>, u64)> {
    if log.epoch() != snap.epoch {
        return None;
    }
    let cursor = log.cursor_after(snap.revision).ok()?;
    Some((log, cursor))
}

/// Applies the changes of `log` from `cursor` up to `snap`'s revision: each key an event
/// names is set to its state in `snap` (held: what the index has). Returns how many
/// objects were applied, the cursor after the last event taken, and whether `snap` must
/// be read whole instead (events missing).
fn apply_events(
    index: &mut RbacIndex,
    kind: Kind,
    log: &EventLog,
    mut cursor: u64,
    held: &ObjectMap,
    snap: &Snapshot,
    affected: &mut Affected,
) -> (usize, u64, bool) {
    let mut now = held.clone();
    let mut applied = 0;
    loop {
        let ev = match log.read(cursor) {
            Read::Event(ev) if ev.revision <= snap.revision => ev,
            Read::Event(_) | Read::Pending => break,
            Read::Expired => return (applied, cursor, true),
        };
        cursor += 1;
        let Some(key) = ev.object.as_ref().or(ev.prev.as_ref()).map(|o| o.key()) else {
            continue;
        };
        let (was, is) = (now.get(key), snap.objects.get(key));
        if same(was, is) {
            continue;
        }
        applied += 1;
        match is {
            Some(obj) => {
                index.put(kind, key, &obj.json(), affected);
                now.insert(obj.clone());
            }
            None => {
                index.remove(kind, key, affected);
                now.remove(key);
            }
        }
    }
    // A key that went unreadable left the snapshot without an event.
    let whole = now.len() != snap.objects.len();
    (applied, cursor, whole)
}

fn same(a: Option<&ObjectRef>, b: Option<&ObjectRef>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

/// Brings the index from `held` to `objects` for `kind`: walks both in key order and
/// applies the keys whose object is not the same one. Returns how many were applied.
fn reconcile(
    index: &mut RbacIndex,
    kind: Kind,
    held: &ObjectMap,
    objects: &ObjectMap,
    affected: &mut Affected,
) -> usize {
    let (mut old, mut new) = (held.iter().peekable(), objects.iter().peekable());
    let mut applied = 0;
    loop {
        let order = match (old.peek(), new.peek()) {
            (Some((a, _)), Some((b, _))) => a.cmp(b),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => return applied,
        };
        match order {
            std::cmp::Ordering::Less => {
                if let Some((key, _)) = old.next() {
                    index.remove(kind, key, affected);
                    applied += 1;
                }
            }
            std::cmp::Ordering::Greater => {
                if let Some((key, obj)) = new.next() {
                    index.put(kind, key, &obj.json(), affected);
                    applied += 1;
                }
            }
            std::cmp::Ordering::Equal => {
                if let (Some((_, was)), Some((key, obj))) = (old.next(), new.next()) {
                    if !Arc::ptr_eq(was, obj) {
                        index.put(kind, key, &obj.json(), affected);
                        applied += 1;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ingest::{Ingestor, KvChange};
    use crate::store::StoreConfig;

    fn cache() -> (Arc<Cache>, Ingestor) {
        let cache = Cache::new(
            "/registry",
            StoreConfig {
                history_window: Duration::from_secs(300),
                max_events: 1000,
                snapshot_ring: 4,
                dispatch: crate::dispatch::Dispatch::inline(),
                index_fields: Default::default(),
            },
        );
        (cache.clone(), Ingestor::new(cache))
    }

    fn role_binding(name: &str, user: &str) -> Vec<u8> {
        serde_json::json!({
            "kind": "RoleBinding", "apiVersion": "rbac.authorization.k8s.io/v1",
            "metadata": {"name": name, "namespace": "ns1"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pods"},
            "subjects": [{"kind": "User", "name": user}],
        })
        .to_string()
        .into_bytes()
    }

    fn pod_role(verbs: &[&str]) -> Vec<u8> {
        serde_json::json!({
            "kind": "Role", "apiVersion": "rbac.authorization.k8s.io/v1",
            "metadata": {"name": "pods", "namespace": "ns1"},
            "rules": [{"verbs": verbs, "apiGroups": [""], "resources": ["pods"]}],
        })
        .to_string()
        .into_bytes()
    }

    fn put(key: &str, value: Vec<u8>, rev: i64) -> KvChange {
        KvChange {
            key: key.as_bytes().to_vec(),
            value: Some(value),
            revision: Revision(rev),
            prev_value: None,
            prev_revision: Revision::ZERO,
        }
    }

    fn delete(key: &str, rev: i64) -> KvChange {
        KvChange {
            value: None,
            ..put(key, Vec::new(), rev)
        }
    }

    fn watch(name: &str) -> Attributes {
        Attributes {
            user: UserInfo {
                name: name.into(),
                groups: vec![super::super::AUTHENTICATED.into()],
                ..UserInfo::default()
            },
            verb: "watch".into(),
            resource_request: true,
            api_version: "v1".into(),
            resource: "pods".into(),
            namespace: "ns1".into(),
            ..Attributes::default()
        }
    }

    fn allows(policy: &RbacPolicy, user: &str) -> bool {
        matches!(policy.authorize(&watch(user)), Decision::Allow { .. })
    }

    const ALICE: &str = "/registry/rolebindings/ns1/alice";
    const BOB: &str = "/registry/rolebindings/ns1/bob";
    const ROLE: &str = "/registry/roles/ns1/pods";

    fn loaded() -> (Arc<Cache>, Ingestor) {
        let (cache, mut ingest) = cache();
        ingest.load_epoch(
            Revision(10),
            vec![
                (ROLE.into(), pod_role(&["watch"]), Revision(3)),
                (ALICE.into(), role_binding("alice", "alice"), Revision(4)),
                (BOB.into(), role_binding("bob", "bob"), Revision(5)),
            ],
        );
        (cache, ingest)
    }

    #[test]
    fn the_follower_applies_each_changed_object_and_says_whom_it_concerns() {
        let (cache, mut ingest) = loaded();
        let mut f = Follower::new(cache.clone());
        let first = f.step();
        assert!(allows(&first, "alice") && allows(&first, "bob"));
        assert_eq!(f.applied, 3);
        let rebuilds = f.rebuilds;
        assert!(f.step_if_moved().is_none(), "nothing changed");

        // bob's binding changes: one object applied from the event log, and the change
        // concerns bob, not alice.
        ingest.apply(vec![put(BOB, role_binding("bob", "carol"), 11)]);
        let p = f.step_if_moved().expect("a new version");
        assert_eq!((f.rebuilds, f.applied), (rebuilds, 4));
        assert!(!allows(&p, "bob") && allows(&p, "carol"));
        assert_eq!(p.generation(), first.generation() + 1);
        let (alice, bob) = (watch("alice").user, watch("bob").user);
        assert!(p.changed_for(&bob, first.generation()));
        assert!(!p.changed_for(&alice, first.generation()));
        assert!(!p.changed_for(&bob, p.generation()));

        // The role changes: everyone bound to it.
        ingest.apply(vec![put(ROLE, pod_role(&["list"]), 12)]);
        let q = f.step_if_moved().expect("a new version");
        assert!(!allows(&q, "alice"));
        assert!(q.changed_for(&alice, p.generation()));
        assert!(q.changed_for(&watch("carol").user, p.generation()));
        assert!(!q.changed_for(&bob, p.generation()));

        // A deletion; and a write that grants the same concerns nobody (no new
        // generation, though the version covers the new revision).
        ingest.apply(vec![
            delete(ALICE, 13),
            put(BOB, role_binding("bob", "carol"), 13),
        ]);
        let r = f.step_if_moved().expect("a new version");
        assert_eq!(r.generation(), q.generation() + 1);
        assert!(r.changed_for(&alice, q.generation()));
        assert!(!r.changed_for(&watch("carol").user, q.generation()));
        ingest.apply(vec![put(BOB, role_binding("bob", "carol"), 14)]);
        let s = f.step_if_moved().expect("the new revision is covered");
        assert_eq!(s.generation(), r.generation());
        assert_eq!(f.rebuilds, rebuilds, "no resource was read whole");
    }

    #[test]
    fn a_new_epoch_is_read_whole_and_concerns_only_what_differs() {
        let (cache, mut ingest) = loaded();
        let mut f = Follower::new(cache.clone());
        let first = f.step();
        let rebuilds = f.rebuilds;
        ingest.load_epoch(
            Revision(20),
            vec![
                (ROLE.into(), pod_role(&["watch"]), Revision(3)),
                (ALICE.into(), role_binding("alice", "alice"), Revision(4)),
            ],
        );
        let p = f.step_if_moved().expect("a new version");
        assert!(f.rebuilds > rebuilds);
        assert!(allows(&p, "alice") && !allows(&p, "bob"));
        assert!(p.changed_for(&watch("bob").user, first.generation()));
        assert!(!p.changed_for(&watch("alice").user, first.generation()));
    }

    #[test]
    fn a_binding_that_cannot_be_read_grants_nothing() {
        let (cache, mut ingest) = loaded();
        let mut f = Follower::new(cache.clone());
        let first = f.step();
        // The value goes bad: it leaves the snapshot without an event.
        ingest.apply(vec![put(ALICE, b"{not json".to_vec(), 11)]);
        let p = f.step_if_moved().expect("a new version");
        assert!(!allows(&p, "alice") && allows(&p, "bob"));
        assert!(p.changed_for(&watch("alice").user, first.generation()));
        assert!(!p.changed_for(&watch("bob").user, first.generation()));
    }

    #[test]
    fn watches_too_far_behind_are_told_to_check() {
        let (cache, mut ingest) = loaded();
        let mut f = Follower::new(cache.clone());
        let first = f.step();
        for rev in 0..(CHANGES_KEPT as i64 + 1) {
            let user = format!("u{}", rev % 2);
            ingest.apply(vec![put(BOB, role_binding("bob", &user), 11 + rev)]);
            f.step_if_moved();
        }
        let p = f.step();
        assert_eq!(p.generation(), first.generation() + CHANGES_KEPT as u64 + 1);
        let alice = watch("alice").user;
        assert!(p.changed_for(&alice, first.generation()), "older than kept");
        assert!(!p.changed_for(&alice, first.generation() + 1));
    }

    #[tokio::test]
    async fn requests_see_every_rbac_change_applied_before_them() {
        let (cache, mut ingest) = loaded();
        let rbac = RbacCache::new(cache.clone());
        assert!(allows(&*rbac.fresh_policy().await, "alice"));
        for rev in 11..30 {
            let (who, other) = if rev % 2 == 0 {
                ("alice", "nobody")
            } else {
                ("nobody", "alice")
            };
            ingest.apply(vec![put(ALICE, role_binding("alice", who), rev)]);
            let p = rbac.fresh_policy().await;
            assert!(allows(&p, who) && !allows(&p, other), "at {rev}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_follower_task_publishes_changes_without_requests() {
        let (cache, mut ingest) = loaded();
        let rbac = RbacCache::new(cache.clone());
        let before = rbac.policy().generation();
        ingest.apply(vec![delete(BOB, 11)]);
        let published = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if rbac.policy().generation() > before {
                    return rbac.policy();
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("published");
        assert!(!allows(&published, "bob"));
    }

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
