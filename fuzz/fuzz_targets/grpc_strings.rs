//! The strings of gRPC requests (a collection's namespace, an object's name, the list
//! parameters a List carries), fed as the gRPC frontend feeds them to the shared query
//! parsers: a 4xx Status or a query, never a panic. A name and namespace that pass the
//! path-segment check make a key that splits back into exactly them: no name reaches
//! another object's key.
#![no_main]

use libfuzzer_sys::fuzz_target;
use watchd::api::query::{check_path_segment, ListQuery, Params, WatchQuery};
use watchd::registry::builtin::builtin_resources;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Fields separated by NUL, as the request's strings.
    let mut f = text.split('\u{0}');
    let mut next = || f.next().unwrap_or("");
    let (namespace, name) = (next(), next());
    let fields = [
        ("resourceVersion", next()),
        ("resourceVersionMatch", next()),
        ("limit", next()),
        ("continue", next()),
        ("labelSelector", next()),
        ("fieldSelector", next()),
    ];
    let ns_ok = check_path_segment("Namespace", namespace);
    let name_ok = check_path_segment("Name", name);
    for e in [&ns_ok, &name_ok].into_iter().filter_map(|r| r.as_ref().err()) {
        assert_eq!(e.code(), 400);
    }
    if ns_ok.is_ok() && name_ok.is_ok() && !namespace.is_empty() && !name.is_empty() {
        let key = format!("{namespace}/{name}");
        assert_eq!(key.split_once('/'), Some((namespace, name)));
    }
    let resources = builtin_resources();
    let Some(pods) = resources.iter().find(|r| r.resource == "pods") else {
        return;
    };
    let params = Params::from_pairs(fields);
    for e in [
        ListQuery::parse(pods, &params).err(),
        WatchQuery::parse(pods, &params).err(),
    ]
    .into_iter()
    .flatten()
    {
        assert!((400..500).contains(&e.code()), "{}", e.code());
    }
});
