//! What a watcher sees of a resource (its namespace and selectors, and the event type a
//! change is to it) and the key it is found by when events are dispatched: shared by a
//! watch session and each collection of a gRPC WatchMany.

use super::query::Selectors;
use super::read::matches;
use crate::dispatch::WakeKey;
use crate::store::{CachedObject, EventType, ResourceStore, WatchEvent};

/// What a watcher sees of a resource: its namespace (if one) and selectors.
pub struct Filter {
    /// The namespace, for a watch of one namespace.
    pub namespace: Option<String>,
    /// The request's selectors.
    pub selectors: Selectors,
}

impl Filter {
    /// Whether an object passes the namespace and selectors; `field_names` are the
    /// resource's selectable fields (its store's).
    pub fn passes(&self, obj: &CachedObject, field_names: &[String]) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| obj.namespace() == Some(ns))
            && matches(obj, &self.selectors, field_names)
    }

    /// The event type this watcher gets for an event of its resource, whose selectable
    /// fields are `field_names`, if any: selectors turn an update into ADDED or DELETED
    /// when the object starts or stops matching.
    pub fn classify(&self, ev: &WatchEvent, field_names: &[String]) -> Option<EventType> {
        let now = ev
            .object
            .as_deref()
            .is_some_and(|o| self.passes(o, field_names));
        let before = ev
            .prev
            .as_deref()
            .is_some_and(|o| self.passes(o, field_names));
        let t = match (ev.object.is_some(), now, before) {
            (true, true, true) => EventType::Modified,
            (true, true, false) => EventType::Added,
            (_, false, true) => EventType::Deleted,
            _ => return None,
        };
        Some(t)
    }
}

/// The most selective key a watcher can be found by: an exact value of the resource's
/// indexed field, an exact name, or its namespace.
pub fn wake_key(
    store: &ResourceStore,
    namespace: Option<&str>,
    selectors: &Selectors,
) -> Option<WakeKey> {
    let exact = |f: &str| selectors.fields.exact_value(f);
    if let Some(v) = store.info.indexed_field().and_then(exact) {
        return Some(WakeKey::field(v));
    }
    if let Some(name) = exact("metadata.name") {
        return Some(WakeKey::name(name));
    }
    namespace
        .or_else(|| exact("metadata.namespace"))
        .map(WakeKey::namespace)
}
