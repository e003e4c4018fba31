//! "No allocation per field": rendering and validating a protobuf object allocate a small
//! number of times whatever the number of fields (the output buffer and the renderer's
//! reusable stacks growing), counted with a counting global allocator on this thread.
//! Allocation counts are deterministic, unlike timings.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;

use serde_json::Value;
use watchd::codec::pbjson;

struct Counting;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

fn bump() {
    if ON.try_with(Cell::get).unwrap_or(false) {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
    }
}

// SAFETY: every call is passed to the system allocator unchanged; only a counter is kept.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        bump();
        // SAFETY: the caller's contract is forwarded as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        bump();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Allocations (and reallocations) made on this thread by `f`.
fn allocations<T>(f: impl FnOnce() -> T) -> (T, u64) {
    COUNT.with(|c| c.set(0));
    ON.with(|o| o.set(true));
    let out = f();
    ON.with(|o| o.set(false));
    (out, COUNT.with(Cell::get))
}

/// Scalars and containers in a JSON value: what "per field" would multiply.
fn values(v: &Value) -> u64 {
    1 + match v {
        Value::Array(a) => a.iter().map(values).sum(),
        Value::Object(o) => o.values().map(values).sum(),
        _ => 0,
    }
}

#[test]
fn rendering_and_validating_allocate_a_few_times_not_per_field() {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/k8s-api-testdata/v1.34.0");
    assert!(
        dir.is_dir(),
        "fixture folder {} is absent (it comes with ../shared; CI always has it)",
        dir.display()
    );
    for name in [
        "core.v1.Pod",
        "core.v1.Node",
        "apps.v1.Deployment",
        "batch.v1.Job",
    ] {
        let value = std::fs::read(dir.join(format!("{name}.pb"))).expect("fixture");
        let env = watchd::codec::envelope::parse(&value).expect("envelope");
        let (rendered, render_allocs) =
            allocations(|| pbjson::render(env.api_version, env.kind, env.raw, Some("12345")));
        let rendered = rendered.expect("renders");
        let (validated, validate_allocs) =
            allocations(|| pbjson::validate(env.api_version, env.kind, env.raw));
        assert_eq!(validated, Ok(rendered.unknown_fields));
        let fields = values(&serde_json::from_slice(&rendered.json).expect("JSON"));
        println!("{name}: {fields} JSON values; render {render_allocs} allocations, validate {validate_allocs}");
        // The output buffer, the slot and map-entry stacks and the embedded-JSON stacks
        // grow a few times each; nothing is allocated per field.
        assert!(fields > 100, "{name}: a fixture with many fields");
        assert!(
            render_allocs <= 24,
            "{name}: {render_allocs} allocations for {fields} values"
        );
        assert!(
            validate_allocs <= 16,
            "{name}: {validate_allocs} allocations for {fields} values"
        );
    }
}

/// A CRD whose schema has `n` properties, each using apiextensions' self-marshaling types.
fn crd(n: usize) -> Value {
    let mut properties = serde_json::Map::new();
    for i in 0..n {
        properties.insert(
            format!("field{i}"),
            serde_json::json!({
                "type": "array",
                "default": [{"a": i, "b": "<x>"}],
                "enum": [[{"a": i, "b": "<x>"}], null],
                "items": {"type": "object", "additionalProperties": {"type": "string"},
                          "x-kubernetes-preserve-unknown-fields": true},
                "dependencies": {"a": ["b", "c"], "d": {"required": ["e"]}},
                "x-kubernetes-validations": [{"rule": "self.size() < 10"}]
            }),
        );
    }
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "names": {"plural": "widgets", "kind": "Widget"},
                 "scope": "Namespaced",
                 "validation": {"openAPIV3Schema": {"type": "object", "properties": properties,
                                                    "additionalProperties": false}}}
    })
}

#[test]
fn crds_allocate_a_few_times_not_per_schema_field() {
    let (av, kind) = ("apiextensions.k8s.io/v1beta1", "CustomResourceDefinition");
    for n in [10, 200] {
        let raw = pbjson::encode_json(av, kind, &crd(n)).expect("encodes");
        let (rendered, render_allocs) = allocations(|| pbjson::render(av, kind, &raw, Some("7")));
        let rendered = rendered.expect("renders");
        let (validated, validate_allocs) = allocations(|| pbjson::validate(av, kind, &raw));
        assert_eq!(validated, Ok(rendered.unknown_fields));
        let fields = values(&serde_json::from_slice(&rendered.json).expect("JSON"));
        println!("CRD with {n} properties: {fields} JSON values; render {render_allocs} allocations, validate {validate_allocs}");
        assert!(
            render_allocs <= 24,
            "{n}: {render_allocs} allocations for {fields} values"
        );
        assert!(
            validate_allocs <= 16,
            "{n}: {validate_allocs} allocations for {fields} values"
        );
    }
}
