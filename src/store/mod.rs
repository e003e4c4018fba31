//! The cache: per resource, immutable snapshots (current and a ring of recent ones) and
//! an event log of the history window; one writer (ingestion), lock-free readers.

pub mod cache;
pub mod event_log;
pub mod health;
pub mod ingest;
pub mod object;
pub mod progress;
pub mod rendered;
pub mod resource;
pub mod snapshot;

pub use cache::{Cache, ResourceIndex};
pub use event_log::{EventLog, EventType, Read, TooOld, WatchEvent};
pub use health::{Readiness, Transition, Unreadable};
pub use object::{CachedObject, MetaFacts, ObjectRef};
pub use progress::Progress;
pub use resource::{Change, ResourceStore, StoreConfig, View};
pub use snapshot::{ObjectMap, Snapshot};
