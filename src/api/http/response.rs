//! Responses: JSON, text and Status errors, representations typed for client-go,
//! gzip, and a watch's response.

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};

use super::body::Body;
use super::negotiate::Output;
use super::{body, encode, encode_protobuf, gzip};
use crate::api::status::ApiError;
use crate::api::watch::WatchStart;

fn json_response(code: u16, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Body::full(body));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

pub(super) fn value_response(v: &serde_json::Value) -> Response<Body> {
    json_response(200, serde_json::to_vec(v).unwrap_or_default())
}

/// The response for an error: its Status object with the matching HTTP code.
pub fn error_response(e: &ApiError) -> Response<Body> {
    let mut r = json_response(
        e.code(),
        serde_json::to_vec(&e.to_status()).unwrap_or_default(),
    );
    if let Some(secs) = e.retry_after() {
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
    }
    r
}

/// Aggregated discovery, labelled with its exact media type: client-go chooses its parser
/// from the Content-Type alone.
pub(super) fn aggregated_response(v: &serde_json::Value, version: &str) -> Response<Body> {
    let mut r = value_response(v);
    let ct = format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList");
    if let Ok(h) = HeaderValue::from_str(&ct) {
        r.headers_mut().insert(header::CONTENT_TYPE, h);
    }
    r
}

pub(super) fn text_response(code: u16, body: String) -> Response<Body> {
    let mut r = Response::new(Body::full(body));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// The Content-Type of a representation (client-go picks its decoder from it).
fn content_type(output: Output, list: bool) -> HeaderValue {
    let ct = match output {
        Output::Json => return HeaderValue::from_static("application/json"),
        Output::Protobuf => return HeaderValue::from_static(encode_protobuf::CONTENT_TYPE),
        Output::Table(v) => format!("application/json;as=Table;v={v};g=meta.k8s.io"),
        Output::Metadata(v) => {
            let kind = if list {
                "PartialObjectMetadataList"
            } else {
                "PartialObjectMetadata"
            };
            format!("application/json;as={kind};v={v};g=meta.k8s.io")
        }
    };
    HeaderValue::from_str(&ct).unwrap_or(HeaderValue::from_static("application/json"))
}

pub(super) fn typed_response(body: Body, output: Output, list: bool) -> Response<Body> {
    let mut r = Response::new(body);
    r.headers_mut()
        .insert(header::CONTENT_TYPE, content_type(output, list));
    r
}

/// Gzips a get or list body over kube-apiserver's threshold (128 KiB) as the client reads
/// it, off the runtime's worker threads (`gzip.rs`); a streamed list is read up to the
/// threshold first, as kube-apiserver buffers one, and one that ends before it is sent
/// whole, as it is. A smaller body and a watch are sent as they are.
pub(super) async fn compress(r: Response<Body>) -> Response<Body> {
    let (parts, body) = r.into_parts();
    gzipped(parts, gzip::compress(gzip::settle(body).await))
}

/// The response with its body gzipped (and the headers that say so), or as it was.
fn gzipped(mut parts: http::response::Parts, body: Result<Body, Body>) -> Response<Body> {
    match body {
        Ok(gz) => {
            parts
                .headers
                .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            // Beside any Vary the response has (an OpenAPI document's `Accept`).
            parts
                .headers
                .append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
            Response::from_parts(parts, gz)
        }
        Err(as_is) => Response::from_parts(parts, as_is),
    }
}

/// Gzips a watch list's stream, a gzip member per frame (`gzip::compress_watch`); an
/// error answered at once stays as it is.
pub(super) fn compress_watch(r: Response<Body>) -> Response<Body> {
    let (parts, body) = r.into_parts();
    gzipped(parts, gzip::compress_watch(body))
}

pub(super) fn watch_response<E>(start: WatchStart<E>, output: Output) -> Response<Body>
where
    E: crate::api::watch::WatchEncoder<Frame = body::BufList>,
{
    let body = match start {
        WatchStart::Error(e) if output == Output::Protobuf => {
            Body::full(encode_protobuf::error_frame(&e))
        }
        WatchStart::Error(e) => Body::full(encode::error_frame(&e)),
        WatchStart::Session(session) => Body::Watch(session),
    };
    let mut r = typed_response(body, output, false);
    if output == Output::Protobuf {
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(encode_protobuf::WATCH_CONTENT_TYPE),
        );
    }
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    r
}
