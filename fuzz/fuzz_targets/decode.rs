//! Any etcd value: decoding never panics or loops; what it accepts renders as one line of
//! syntactically valid JSON whose metadata.resourceVersion is the revision given.
#![no_main]

use libfuzzer_sys::fuzz_target;
use watchd::codec::extract::extract;
use watchd::codec::{decode, FieldSpec};
use watchd::Revision;

fuzz_target!(|data: &[u8]| {
    let fields = [FieldSpec::simple("spec.nodeName"), FieldSpec::simple("status.phase")];
    let Ok(d) = decode(data, Revision(42), &fields) else { return };
    assert!(!d.json.contains(&b'\n') && !d.json.contains(&b'\r'));
    // Syntax, not representability: `1e999` is valid JSON that f64 cannot hold.
    serde_json::from_slice::<serde::de::IgnoredAny>(&d.json).expect("rendered JSON is valid");
    let rv = extract(&d.json, &[FieldSpec::simple("metadata.resourceVersion")]).expect("re-extracts");
    assert_eq!(rv.fields, vec!["42".to_string()]);
    assert_eq!(d.fields.len(), fields.len());
});
