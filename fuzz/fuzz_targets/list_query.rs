//! Any query string: list and watch validation answer Ok or a Status error, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use watchd::api::query::{ListQuery, Params, WatchQuery};
use watchd::registry::builtin::builtin_resources;

fuzz_target!(|data: &[u8]| {
    let Ok(q) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(params) = Params::parse(Some(q)) else {
        return;
    };
    let resources = builtin_resources();
    let Some(pods) = resources.iter().find(|r| r.resource == "pods") else {
        return;
    };
    if let Err(e) = ListQuery::parse(pods, &params) {
        assert!((400..500).contains(&e.code()));
    }
    if let Err(e) = WatchQuery::parse(pods, &params) {
        assert!((400..500).contains(&e.code()));
    }
});
