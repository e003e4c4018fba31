//! The etcd revision, which watchd serves as the Kubernetes `resourceVersion`.

use std::fmt;

/// An etcd store revision. Every key change gets one; watchd serves it as the object's
/// and the list's `resourceVersion`, so it is the cache's one clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Revision(pub i64);

impl Revision {
    /// The revision before anything was written.
    pub const ZERO: Revision = Revision(0);

    /// The revision as the decimal `resourceVersion` string.
    pub fn to_resource_version(self) -> String {
        self.0.to_string()
    }

    /// The next revision.
    pub fn next(self) -> Revision {
        Revision(self.0.saturating_add(1))
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
