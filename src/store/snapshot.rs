//! The state of one resource at a revision: an immutable ordered map, shared by every
//! list that reads it, and linked to the snapshot before it so that `Exact` and paginated
//! lists can read a recent past revision without locks.

use std::ops::Bound;
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use std::borrow::Borrow;

use imbl::OrdSet;

use super::object::ObjectRef;
use crate::Revision;

/// Objects of a resource by object key (`namespace/name` or `name`), in etcd key order.
///
/// A persistent ordered set of the objects themselves, ordered by the key each holds: an
/// entry is one pointer, where a map would keep the key's beside it. Every revision's
/// change copies the entries of the nodes on its path (and each later drop releases
/// them), so this halves both the bytes and the reference counts copied per change.
#[derive(Clone, Default)]
pub struct ObjectMap(OrdSet<Entry>);

/// An object in an [`ObjectMap`]: compared, ordered and found by its key.
#[derive(Clone)]
pub struct Entry(ObjectRef);

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        **self.0.key() == **other.0.key()
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.key().cmp(other.0.key())
    }
}

impl Borrow<str> for Entry {
    fn borrow(&self) -> &str {
        self.0.key()
    }
}

impl ObjectMap {
    /// No objects.
    pub fn new() -> Self {
        ObjectMap(OrdSet::new())
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The object whose key is `key`.
    pub fn get(&self, key: &str) -> Option<&ObjectRef> {
        self.0.get(key).map(|e| &e.0)
    }

    /// Whether an object has the key `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.0.contains(key)
    }

    /// Adds `object` under `key` (its own key), returning the one it replaces.
    pub fn insert(&mut self, key: Arc<str>, object: ObjectRef) -> Option<ObjectRef> {
        debug_assert_eq!(&*key, &**object.key());
        self.0.insert(Entry(object)).map(|e| e.0)
    }

    /// Removes the object whose key is `key`.
    pub fn remove(&mut self, key: &str) -> Option<ObjectRef> {
        self.0.remove(key).map(|e| e.0)
    }

    /// The objects in key order.
    pub fn values(&self) -> impl Iterator<Item = &ObjectRef> + '_ {
        self.0.iter().map(|e| &e.0)
    }

    /// (key, object) in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &ObjectRef)> + '_ {
        self.0.iter().map(|e| (e.0.key(), &e.0))
    }

    /// The objects whose keys are within `(lower, upper)`, in key order.
    pub fn range<'a>(
        &'a self,
        lower: Bound<&str>,
        upper: Bound<&str>,
    ) -> impl Iterator<Item = &'a ObjectRef> + use<'a> {
        self.0.range::<_, str>((lower, upper)).map(|e| &e.0)
    }
}

impl FromIterator<(Arc<str>, ObjectRef)> for ObjectMap {
    fn from_iter<I: IntoIterator<Item = (Arc<str>, ObjectRef)>>(iter: I) -> Self {
        ObjectMap(iter.into_iter().map(|(_, o)| Entry(o)).collect())
    }
}

/// One resource's objects as of `revision`, valid until the resource's next change.
pub struct Snapshot {
    /// The revision of the change that produced this state (or the epoch's list revision).
    pub revision: Revision,
    /// The epoch this snapshot belongs to; bumped by every re-list.
    pub epoch: u64,
    /// The objects.
    pub objects: ObjectMap,
    /// Bytes of the cached objects, for the cache-size metric.
    pub bytes: usize,
    /// Objects not stored as protobuf (which a protobuf watch cannot carry).
    pub json_objects: usize,
    /// The snapshot this one replaced; None past the end of the kept ring.
    older: ArcSwapOption<Snapshot>,
}

impl Snapshot {
    /// A snapshot following `older` (None starts a chain).
    pub fn new(
        revision: Revision,
        epoch: u64,
        objects: ObjectMap,
        (bytes, json_objects): (usize, usize),
        older: Option<Arc<Snapshot>>,
    ) -> Self {
        Snapshot {
            revision,
            epoch,
            objects,
            bytes,
            json_objects,
            older: ArcSwapOption::new(older),
        }
    }

    /// The snapshot valid at `revision`, walking back through the kept ring: the newest
    /// one whose revision is not after it. None if the ring no longer reaches that far.
    pub fn as_of(self: &Arc<Self>, revision: Revision) -> Option<Arc<Snapshot>> {
        let mut cur = Some(self.clone());
        while let Some(s) = cur {
            if s.revision <= revision {
                return Some(s);
            }
            cur = s.older.load_full();
        }
        None
    }

    /// The previous snapshot in the ring.
    pub fn older(&self) -> Option<Arc<Snapshot>> {
        self.older.load_full()
    }

    /// Cuts the chain after this snapshot, releasing everything older.
    pub fn forget_older(&self) {
        self.older.store(None);
    }

    /// Objects with keys in `[start, end)` order, starting at `start` (inclusive) within
    /// the namespace `ns` if given.
    pub fn range<'a>(
        &'a self,
        ns: Option<&str>,
        start: Option<&str>,
    ) -> impl Iterator<Item = &'a ObjectRef> + 'a {
        self.range_from(
            ns,
            start.map_or(Bound::Unbounded, |s| Bound::Included(s.into())),
        )
    }

    /// Objects in key order within the namespace `ns` if given, from `lower` on.
    pub fn range_from<'a>(
        &'a self,
        ns: Option<&str>,
        lower: Bound<Arc<str>>,
    ) -> impl Iterator<Item = &'a ObjectRef> + 'a {
        let (lo, hi) = match ns {
            // `'/' + 1 == '0'`, so "ns0" is the first key after every "ns/..." key.
            Some(ns) => {
                let first: Arc<str> = Arc::from(format!("{ns}/"));
                let lo = match lower {
                    Bound::Included(s) | Bound::Excluded(s) if s < first => Bound::Included(first),
                    Bound::Unbounded => Bound::Included(first),
                    b => b,
                };
                (lo, Bound::Excluded(Arc::from(format!("{ns}0"))))
            }
            None => (lower, Bound::Unbounded),
        };
        // The set reads the bounds only to find where the range starts and ends.
        self.objects.range(as_str(&lo), as_str(&hi))
    }
}

/// A bound on an owned key as a bound on its text.
fn as_str(b: &Bound<Arc<str>>) -> Bound<&str> {
    match b {
        Bound::Included(s) => Bound::Included(s),
        Bound::Excluded(s) => Bound::Excluded(s),
        Bound::Unbounded => Bound::Unbounded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decode;
    use crate::store::object::CachedObject;

    fn obj(key: &str, rev: i64) -> (Arc<str>, ObjectRef) {
        let d = decode(br#"{"metadata":{}}"#, Revision(rev), &[]).unwrap();
        let k: Arc<str> = Arc::from(key);
        (
            k.clone(),
            Arc::new(CachedObject::new(k, Revision(rev), Arc::from([]), d)),
        )
    }

    #[test]
    fn as_of_finds_the_snapshot_valid_at_a_revision() {
        let s1 = Arc::new(Snapshot::new(
            Revision(10),
            1,
            ObjectMap::new(),
            (0, 0),
            None,
        ));
        let s2 = Arc::new(Snapshot::new(
            Revision(15),
            1,
            ObjectMap::new(),
            (0, 0),
            Some(s1.clone()),
        ));
        let s3 = Arc::new(Snapshot::new(
            Revision(20),
            1,
            ObjectMap::new(),
            (0, 0),
            Some(s2.clone()),
        ));
        assert_eq!(s3.as_of(Revision(25)).unwrap().revision, Revision(20));
        assert_eq!(s3.as_of(Revision(19)).unwrap().revision, Revision(15));
        assert_eq!(s3.as_of(Revision(10)).unwrap().revision, Revision(10));
        assert!(s3.as_of(Revision(9)).is_none());
        s2.forget_older();
        assert!(s3.as_of(Revision(12)).is_none());
    }

    #[test]
    fn range_stays_inside_a_namespace_and_resumes_from_a_key() {
        let map: ObjectMap = ["a/x", "a/y", "a-b/z", "a0/w", "b/q"]
            .iter()
            .map(|k| obj(k, 1))
            .collect();
        let s = Snapshot::new(Revision(1), 1, map, (0, 0), None);
        let keys = |it: Vec<&ObjectRef>| it.iter().map(|o| o.key().to_string()).collect::<Vec<_>>();
        assert_eq!(keys(s.range(Some("a"), None).collect()), vec!["a/x", "a/y"]);
        assert_eq!(keys(s.range(Some("a"), Some("a/y")).collect()), vec!["a/y"]);
        assert_eq!(
            keys(s.range(None, Some("a0/w")).collect()),
            vec!["a0/w", "b/q"]
        );
        assert_eq!(s.range(None, None).count(), 5);
    }
}
