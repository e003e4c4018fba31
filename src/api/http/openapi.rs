//! `/openapi/v3`, `/openapi/v3/<group-version>` and `/openapi/v2`, answered as
//! kube-openapi's handlers answer them (the documents are [`crate::openapi`]'s):
//!
//! - every document carries an `ETag`, the upper-case hex SHA-512 of its JSON, and a
//!   request whose `If-None-Match` names it is answered 304;
//! - the v3 discovery document lists each group-version with a `serverRelativeURL` that
//!   names that hash; a request with the current `?hash=` is cacheable for a year
//!   (`Cache-Control: public, immutable`), one with an old hash is redirected (301) to the
//!   current one;
//! - a group-version's document and v2 are JSON or gnostic protobuf (either name of its
//!   media type, chosen in the `Accept` header's quality order), anything else 406; the
//!   v3 discovery document is JSON whatever is asked.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};

use super::body::Body;
use super::h1::http_date;
use super::negotiate::{self, OpenApiOutput};
use super::query::OpenApiPath;
use super::response::text_response;
use crate::openapi;
use crate::store::ResourceIndex;

const PROTOBUF_V2: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
const PROTOBUF_V3: &str = "application/com.github.proto-openapi.spec.v3.v1.0+protobuf";

/// The answer to a GET of `path` (with its `?hash=`, if any).
pub fn serve(
    path: &OpenApiPath,
    hash: Option<&str>,
    headers: &HeaderMap,
    index: &Arc<ResourceIndex>,
) -> Response<Body> {
    let docs = openapi::documents_of(index);
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let if_none_match = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok());
    let version = if matches!(path, OpenApiPath::V2) {
        "v2"
    } else {
        "v3"
    };
    // The v3 discovery document is JSON whatever is asked, as kube-openapi's.
    let negotiated = match path {
        OpenApiPath::V3Root => Some(OpenApiOutput::Json),
        _ => negotiate::negotiate_openapi(accept, version),
    };
    let Some(output) = negotiated else {
        let mut r = text_response(406, String::new());
        r.headers_mut()
            .insert(header::VARY, HeaderValue::from_static("Accept"));
        return r;
    };
    match path {
        OpenApiPath::V3Root => document(
            docs.root.json.clone(),
            "application/json",
            &docs.root.etag,
            docs.rendered,
            if_none_match,
            None,
        ),
        OpenApiPath::V3(gv) => {
            let Some(group) = docs.groups.get(gv.as_str()) else {
                // Go's NotFound, as kube-apiserver's aggregator answers it.
                return text_response(404, "404 page not found\n".to_string());
            };
            let doc = &group.doc;
            let (body, content_type) = match output {
                OpenApiOutput::Json => (doc.json.clone(), "application/json"),
                OpenApiOutput::Protobuf => (group.protobuf(), PROTOBUF_V3),
            };
            match hash {
                Some(h) if !h.is_empty() && h != doc.etag => {
                    // As kube-openapi's: the current ETag and Vary beside the Location,
                    // and no caching of the redirect itself.
                    let location = format!("/openapi/v3/{gv}?hash={}", doc.etag);
                    let mut r = Response::new(Body::full(Bytes::new()));
                    *r.status_mut() = StatusCode::MOVED_PERMANENTLY;
                    let h = r.headers_mut();
                    for (name, value) in [
                        (header::LOCATION, location),
                        (header::ETAG, format!("\"{}\"", doc.etag)),
                        (header::CONTENT_TYPE, content_type.to_string()),
                    ] {
                        if let Ok(v) = HeaderValue::from_str(&value) {
                            h.insert(name, v);
                        }
                    }
                    h.insert(header::VARY, HeaderValue::from_static("Accept"));
                    h.insert(
                        header::CACHE_CONTROL,
                        HeaderValue::from_static("no-cache, private"),
                    );
                    r
                }
                h => document(
                    body,
                    content_type,
                    &doc.etag,
                    docs.rendered,
                    if_none_match,
                    h.filter(|h| !h.is_empty()).map(|_| SystemTime::now()),
                ),
            }
        }
        OpenApiPath::V2 => {
            let v2 = docs.v2();
            let (body, content_type) = match output {
                OpenApiOutput::Json => (v2.doc.json.clone(), "application/json"),
                OpenApiOutput::Protobuf => (v2.protobuf.clone(), PROTOBUF_V2),
            };
            document(
                body,
                content_type,
                &v2.doc.etag,
                docs.rendered,
                if_none_match,
                None,
            )
        }
    }
}

/// A document with its validators; `immutable_from` marks a hash-addressed one, cacheable
/// for a year from then.
fn document(
    body: Bytes,
    content_type: &'static str,
    etag: &str,
    modified: SystemTime,
    if_none_match: Option<&str>,
    immutable_from: Option<SystemTime>,
) -> Response<Body> {
    let quoted = format!("\"{etag}\"");
    let matched = if_none_match.is_some_and(|inm| {
        inm.split(',')
            .map(|t| t.trim().trim_start_matches("W/"))
            .any(|t| t == quoted || t == "*")
    });
    let mut r = if matched {
        let mut r = Response::new(Body::full(Bytes::new()));
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        let mut r = Response::new(Body::full(body));
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        r
    };
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&quoted) {
        h.insert(header::ETAG, v);
    }
    if let Ok(v) = HeaderValue::from_str(&http_date(modified)) {
        h.insert(header::LAST_MODIFIED, v);
    }
    h.insert(header::VARY, HeaderValue::from_static("Accept"));
    match immutable_from {
        Some(now) => {
            h.insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, immutable"),
            );
            let year = now + Duration::from_secs(365 * 24 * 3600);
            if let Ok(v) = HeaderValue::from_str(&http_date(year)) {
                h.insert(header::EXPIRES, v);
            }
        }
        None => {
            h.insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("no-cache, private"),
            );
        }
    }
    r
}
