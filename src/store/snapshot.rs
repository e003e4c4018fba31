//! The state of one resource at a revision: an immutable ordered map, shared by every
//! list that reads it, and linked to the snapshot before it so that `Exact` and paginated
//! lists can read a recent past revision without locks.

use std::ops::Bound;
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use imbl::OrdMap;

use super::object::ObjectRef;
use crate::Revision;

/// Objects of a resource by object key (`namespace/name` or `name`), in etcd key order.
pub type ObjectMap = OrdMap<Arc<str>, ObjectRef>;

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
        self.objects.range((lo, hi)).map(|(_, v)| v)
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
        (k.clone(), Arc::new(CachedObject::new(k, Revision(rev), d)))
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
