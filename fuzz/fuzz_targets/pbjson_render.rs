//! Fuzzes the protobuf → JSON transcoder (`watchd::codec::pbjson`).
//!
//! An input starting with the `k8s\0` magic is a whole stored value (envelope and object);
//! any other input is `[kind selector: 2 bytes][the object's protobuf]`, rendered as the
//! selected kind, so an empty corpus reaches every schema quickly. The round-trip
//! fixtures make good seeds; from the repository root:
//! `RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir fuzz pbjson_render fuzz/corpus/pbjson_render
//! ../shared/fixtures/k8s-api-testdata/v1.34.0 ../shared/fixtures/k8s-api-testdata/HEAD`.
//!
//! Properties: never panics; whatever renders is valid JSON; the resourceVersion given
//! is where `rv_span` says, and is `metadata.resourceVersion`; the validate-only pass
//! ingestion runs fails exactly where rendering fails; metadata rendered alone equals the
//! full rendering's.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use watchd::codec::pbjson;

fuzz_target!(|data: &[u8]| {
    let rendered = if data.starts_with(watchd::codec::envelope::MAGIC) {
        let rendered = pbjson::render_stored(data, Some("123"));
        if let Ok(env) = watchd::codec::envelope::parse(data) {
            if rendered != Err(pbjson::TranscodeError::ContentType) {
                let validated = pbjson::validate(env.api_version, env.kind, env.raw);
                assert_eq!(
                    validated,
                    rendered
                        .as_ref()
                        .map(|r| r.unknown_fields)
                        .map_err(Clone::clone)
                );
            }
        }
        rendered
    } else {
        let kinds: Vec<(&str, &str)> = pbjson::kinds().collect();
        let (Some(&a), Some(&b)) = (data.first(), data.get(1)) else {
            return;
        };
        let (api_version, kind) = kinds[usize::from(u16::from_le_bytes([a, b])) % kinds.len()];
        let rendered = pbjson::render(api_version, kind, &data[2..], Some("123"));
        let validated = pbjson::validate(api_version, kind, &data[2..]);
        assert_eq!(
            validated,
            rendered
                .as_ref()
                .map(|r| r.unknown_fields)
                .map_err(Clone::clone)
        );
        if let (Ok(r), true) = (&rendered, pbjson::has_object_meta(api_version, kind)) {
            // PartialObjectMetadata's rendering is exactly the full rendering's metadata.
            let meta = pbjson::render_metadata(api_version, kind, &data[2..], "123")
                .expect("metadata renders where the object does");
            let range = watchd::codec::json::top_level_member(&r.json, b"metadata")
                .expect("a rendered object has metadata");
            assert_eq!(&meta.json[..], &r.json[range]);
        }
        rendered
    };
    let Ok(r) = rendered else { return };
    let v: Value = serde_json::from_slice(&r.json).expect("rendered output is valid JSON");
    if r.rv_span.len > 0 {
        let at = r.rv_span.at as usize;
        assert_eq!(&r.json[at..at + r.rv_span.len as usize], b"123");
        assert_eq!(v["metadata"]["resourceVersion"], "123");
    }
});
