//! Any continue token, read by a list in any namespace: refused with a 4xx Status, or
//! read into a start key that lies inside the list's own scope. A token can never name
//! a key of another namespace (kube-apiserver's `storage.DecodeContinue` rule).
#![no_main]

use libfuzzer_sys::fuzz_target;
use watchd::api::query::{check_path_segment, ContinueToken, ListQuery, Params};
use watchd::registry::builtin::builtin_resources;
use watchd::Revision;

fuzz_target!(|data: &[u8]| {
    // The first line is the namespace, the rest the token (raw, or as JSON to encode).
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (ns, token) = text.split_once('\n').unwrap_or(("default", text));
    if ns.is_empty() || check_path_segment("Namespace", ns).is_err() {
        return;
    }
    let resources = builtin_resources();
    let Some(pods) = resources.iter().find(|r| r.resource == "pods") else {
        return;
    };
    // The token as sent, and the same bytes as the JSON inside a well-formed token.
    let wrapped = ContinueToken::encode(Revision(7), token);
    for t in [token.to_string(), wrapped] {
        if t.is_empty() {
            // An empty continue parameter is no continue parameter.
            continue;
        }
        let params = Params::from_pairs([("continue", t.as_str()), ("limit", "1")]);
        match ListQuery::parse(pods, &params) {
            Err(e) => assert!((400..500).contains(&e.code()), "{}", e.code()),
            Ok(q) => {
                let Some(t) = q.continue_from else {
                    panic!("a continue parameter that parses gives a token");
                };
                let key = t.start_key(Some(ns));
                assert!(
                    key.starts_with(&format!("{ns}/")),
                    "{key:?} is outside namespace {ns:?}"
                );
                let rel = &t.start;
                assert!(!rel.starts_with('/'), "{rel:?}");
                assert!(
                    rel.split('/')
                        .all(|e| e != "." && e != "..")
                        && !rel.contains("//"),
                    "{rel:?}"
                );
            }
        }
    }
    // What a page ends with round-trips to the key just after it.
    if check_path_segment("Name", token).is_ok() && !token.is_empty() {
        let last = format!("{ns}/{token}");
        let t = ContinueToken::after(Revision(7), Some(ns), &last);
        let params = Params::from_pairs([("continue", t.as_str())]);
        let q = ListQuery::parse(pods, &params).expect("a token this server wrote");
        let start = q.continue_from.expect("a token").start_key(Some(ns));
        assert_eq!(start, format!("{last}\u{0}"));
    }
});
