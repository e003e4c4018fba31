//! Any request URL (path and query, as they arrive): routing, the canonical path that
//! non-resource requests are authorized on, and the query of a resource route parsed
//! against its resource (selectors included, percent-decoded) answer a route or a 4xx
//! Status, never panic. The path a non-resource request is authorized on is the path of
//! the route served: the canonical path spells that route.
#![no_main]

use libfuzzer_sys::fuzz_target;
use watchd::api::http::query::{canonical_path, route, OpenApiPath, Route};
use watchd::api::query::{GetQuery, ListQuery, Params, WatchQuery};
use watchd::registry::builtin::builtin_resources;

/// How a non-resource route is written, from the route alone (None for resources and
/// unknown paths, which are not authorized as paths).
fn spelled(r: &Route) -> Option<String> {
    Some(match r {
        Route::ApiVersions => "/api".into(),
        Route::ApiGroupList => "/apis".into(),
        Route::ApiGroup(g) => format!("/apis/{g}"),
        Route::ResourceList { group, version } if group.is_empty() => format!("/api/{version}"),
        Route::ResourceList { group, version } => format!("/apis/{group}/{version}"),
        Route::Version => "/version".into(),
        Route::Metrics => "/metrics".into(),
        Route::Health { endpoint, check: None } => format!("/{endpoint}"),
        Route::Health {
            endpoint,
            check: Some(c),
        } => format!("/{endpoint}/{c}"),
        Route::OpenApi(OpenApiPath::V2) => "/openapi/v2".into(),
        Route::OpenApi(OpenApiPath::V3Root) => "/openapi/v3".into(),
        Route::OpenApi(OpenApiPath::V3(gv)) => format!("/openapi/v3/{gv}"),
        Route::Resource(_) | Route::Unknown => return None,
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(url) = std::str::from_utf8(data) else {
        return;
    };
    let (path, query) = match url.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (url, None),
    };
    let routed = route(path);
    let canonical = canonical_path(path);
    match (&routed, &canonical) {
        (Ok(r), Ok(c)) => {
            if let Some(spelled) = spelled(r) {
                assert_eq!(c, &spelled, "{path:?} routes to {r:?}");
            }
        }
        (Err(e), Err(_)) => assert!((400..500).contains(&e.code())),
        _ => panic!("routing and the canonical path disagree on {path:?}"),
    }
    let params = match Params::parse(query) {
        Ok(p) => p,
        Err(e) => {
            assert!((400..500).contains(&e.code()));
            return;
        }
    };
    let Ok(Route::Resource(p)) = routed else {
        return;
    };
    let resources = builtin_resources();
    let Some(info) = resources
        .iter()
        .find(|r| r.resource == p.resource && r.group == p.group)
    else {
        return;
    };
    let results = [
        ListQuery::parse(info, &params).err(),
        WatchQuery::parse(info, &params).err(),
        GetQuery::parse(&params).err(),
    ];
    for e in results.into_iter().flatten() {
        assert!((400..500).contains(&e.code()), "{}", e.code());
    }
});
