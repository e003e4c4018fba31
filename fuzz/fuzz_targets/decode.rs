//! Any etcd value: decoding never panics or loops; what it accepts renders as one line of
//! syntactically valid JSON whose metadata.resourceVersion is the revision given. A
//! protobuf value accepted without JSON (rendered later, on first use) must render, and
//! the field values read from its wire bytes must be those of its JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use watchd::codec::extract::extract;
use watchd::codec::{decode, pbjson, FieldSpec};
use watchd::Revision;

fuzz_target!(|data: &[u8]| {
    let fields = [
        FieldSpec::simple("spec.nodeName"),
        FieldSpec::simple("status.phase"),
    ];
    let Ok(d) = decode("ns/a", data, Revision(42), &fields) else {
        return;
    };
    if d.json.is_none() {
        let pb = d
            .protobuf
            .as_ref()
            .expect("lazy JSON needs the protobuf value");
        pbjson::render_stored(&pb.value, Some("42")).expect("a validated value renders");
    }
    let json = d.json(Revision(42)).bytes;
    assert!(!json.contains(&b'\n') && !json.contains(&b'\r'));
    // Syntax, not representability: `1e999` is valid JSON that f64 cannot hold.
    serde_json::from_slice::<serde::de::IgnoredAny>(&json).expect("rendered JSON is valid");
    let rv = extract(&json, &["metadata.resourceVersion"]).expect("re-extracts");
    assert_eq!(rv.fields, vec![Some("42".to_string())]);
    assert_eq!(d.selectors.fields().count(), fields.len());
    if d.json.is_none() {
        let from_json = extract(&json, &FieldSpec::paths(&fields)).expect("re-extracts");
        let want = watchd::codec::extract::selectable_values(&fields, from_json.fields);
        assert!(
            d.selectors.fields().eq(want.iter()),
            "wire field values differ from the JSON's"
        );
    }
});
