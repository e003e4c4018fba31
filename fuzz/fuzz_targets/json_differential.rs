//! Any input: where serde_json reads an object whose metadata is an object, watchd's
//! decoder reads the same labels and field values and serves JSON that parses to the
//! same value with metadata.resourceVersion set (`watchd::codec::differential`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = watchd::codec::differential::check(data) {
        panic!("{e}\ninput: {}", String::from_utf8_lossy(data));
    }
});
