//! Content negotiation: which representation an `Accept` header asks for, taking the first
//! offer watchd can produce, as kube-apiserver does.

use crate::api::status::ApiError;

/// What a resource request is answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The objects as stored (JSON).
    Json,
    /// `meta.k8s.io` Table of the given version (`v1` or `v1beta1`).
    Table(&'static str),
    /// `meta.k8s.io` PartialObjectMetadata(List) of the given version.
    Metadata(&'static str),
    /// Kubernetes protobuf (`application/vnd.kubernetes.protobuf`), built-ins only.
    Protobuf,
}

/// What a discovery request (`/api`, `/apis`) is answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscoveryOutput {
    /// The legacy documents (APIVersions, APIGroupList).
    Legacy,
    /// Aggregated discovery, `apidiscovery.k8s.io` of the given version (`v2`, `v2beta1`).
    Aggregated(&'static str),
}

/// One media range of an Accept header.
struct MediaRange<'a> {
    mime: String,
    params: Vec<(String, &'a str)>,
}

impl MediaRange<'_> {
    fn param(&self, key: &str) -> Option<&str> {
        self.params.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }
}

fn media_ranges(accept: &str) -> Vec<MediaRange<'_>> {
    accept
        .split(',')
        .filter_map(|range| {
            let mut parts = range.split(';').map(str::trim);
            let mime = parts.next()?.to_ascii_lowercase();
            let params = parts
                .filter_map(|p| p.split_once('='))
                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().trim_matches('"')))
                .collect();
            (!mime.is_empty()).then_some(MediaRange { mime, params })
        })
        .collect()
}

fn is_json(mime: &str) -> bool {
    matches!(mime, "application/json" | "application/*" | "*/*")
}

fn meta_version(r: &MediaRange<'_>) -> Option<&'static str> {
    if r.param("g") != Some("meta.k8s.io") {
        return None;
    }
    match r.param("v") {
        Some("v1") => Some("v1"),
        Some("v1beta1") => Some("v1beta1"),
        _ => None,
    }
}

/// What an OpenAPI document is answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenApiOutput {
    Json,
    /// gnostic's protobuf of the document.
    Protobuf,
}

/// The representation of an OpenAPI document of `version` (`v2`, `v3`), as
/// kube-openapi's handlers choose it: the client's media ranges by quality, then by
/// specificity (goautoneg's order), the first that is JSON or gnostic's protobuf under
/// either of its names; `None` when the client takes neither (406). No header takes
/// anything.
pub fn negotiate_openapi(accept: Option<&str>, version: &str) -> Option<OpenApiOutput> {
    let accept = accept.filter(|a| !a.trim().is_empty()).unwrap_or("*/*");
    let protobuf = |m: &str| {
        m.strip_prefix("application/com.github.proto-openapi.spec.")
            .and_then(|rest| rest.strip_prefix(version))
            .is_some_and(|rest| matches!(rest, ".v1.0+protobuf" | "@v1.0+protobuf"))
    };
    let mut ranges: Vec<(f64, u8, MediaRange<'_>)> = media_ranges(accept)
        .into_iter()
        .map(|r| {
            let q = r.param("q").and_then(|q| q.parse().ok()).unwrap_or(1.0);
            let specificity = match r.mime.as_str() {
                "*/*" => 0,
                m if m.ends_with("/*") => 1,
                _ => 2,
            };
            (q, specificity, r)
        })
        .filter(|(q, _, _)| *q > 0.0)
        .collect();
    // Stable: equal ranges keep the client's order.
    ranges.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
    ranges.iter().find_map(|(_, _, r)| match r.mime.as_str() {
        m if is_json(m) => Some(OpenApiOutput::Json),
        m if protobuf(m) => Some(OpenApiOutput::Protobuf),
        _ => None,
    })
}

/// The representation of a get, list or watch. `list` distinguishes
/// `PartialObjectMetadataList` (lists) from `PartialObjectMetadata` (get, watch).
pub fn negotiate(accept: Option<&str>, list: bool) -> Result<Output, ApiError> {
    negotiate_with(accept, list, false)
}

/// Like [`negotiate`]; `protobuf` says whether the resource's objects can be served as
/// Kubernetes protobuf (built-ins), so that a plain protobuf offer is taken in its turn.
/// Protobuf Table and PartialObjectMetadata offers are skipped.
pub fn negotiate_with(
    accept: Option<&str>,
    list: bool,
    protobuf: bool,
) -> Result<Output, ApiError> {
    let Some(accept) = accept.map(str::trim).filter(|a| !a.is_empty()) else {
        return Ok(Output::Json);
    };
    for r in media_ranges(accept) {
        if protobuf && r.mime == "application/vnd.kubernetes.protobuf" && r.param("as").is_none() {
            return Ok(Output::Protobuf);
        }
        if !is_json(&r.mime) {
            continue;
        }
        let chosen = match r.param("as") {
            None => Some(Output::Json),
            Some("Table") => meta_version(&r).map(Output::Table),
            Some("PartialObjectMetadataList") if list => meta_version(&r).map(Output::Metadata),
            Some("PartialObjectMetadata") if !list => meta_version(&r).map(Output::Metadata),
            Some(_) => None,
        };
        if let Some(o) = chosen {
            return Ok(o);
        }
    }
    Err(ApiError::NotAcceptable(format!(
        "only the following media types are accepted: application/json, application/vnd.kubernetes.protobuf (built-in resources), application/json;as=Table;g=meta.k8s.io;v=v1, application/json;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1 (got {accept:?})"
    )))
}

/// The representation of `/api` or `/apis`: aggregated discovery only when offered.
pub fn negotiate_discovery(accept: Option<&str>) -> Result<DiscoveryOutput, ApiError> {
    let Some(accept) = accept.map(str::trim).filter(|a| !a.is_empty()) else {
        return Ok(DiscoveryOutput::Legacy);
    };
    for r in media_ranges(accept) {
        if !is_json(&r.mime) {
            continue;
        }
        match (r.param("as"), r.param("g"), r.param("v")) {
            (None, _, _) => return Ok(DiscoveryOutput::Legacy),
            (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io"), Some("v2")) => {
                return Ok(DiscoveryOutput::Aggregated("v2"))
            }
            (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io"), Some("v2beta1")) => {
                return Ok(DiscoveryOutput::Aggregated("v2beta1"))
            }
            _ => {}
        }
    }
    Err(ApiError::NotAcceptable(format!(
        "only application/json and aggregated discovery (apidiscovery.k8s.io v2, v2beta1) are served (got {accept:?})"
    )))
}

/// Whether the client accepts a gzip-compressed body.
pub fn accepts_gzip(accept_encoding: Option<&str>) -> bool {
    accept_encoding.is_some_and(|ae| {
        ae.split(',').any(|e| {
            let mut parts = e.split(';').map(str::trim);
            let coding = parts.next().unwrap_or("");
            let refused = parts.any(|p| {
                matches!(
                    p.replace(' ', "").as_str(),
                    "q=0" | "q=0.0" | "q=0.00" | "q=0.000"
                )
            });
            coding.eq_ignore_ascii_case("gzip") && !refused
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openapi_documents_are_json_or_gnostic_protobuf_as_offered() {
        let v2 = |a: Option<&str>| negotiate_openapi(a, "v2");
        let v3 = |a: Option<&str>| negotiate_openapi(a, "v3");
        assert_eq!(v2(None), Some(OpenApiOutput::Json));
        assert_eq!(v2(Some("*/*")), Some(OpenApiOutput::Json));
        // client-go's discovery client asks for the deprecated name.
        let pb = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
        assert_eq!(v2(Some(pb)), Some(OpenApiOutput::Protobuf));
        assert_eq!(
            v2(Some(
                "application/com.github.proto-openapi.spec.v2.v1.0+protobuf, application/json"
            )),
            Some(OpenApiOutput::Protobuf)
        );
        assert_eq!(v2(Some("application/yaml")), None);
        assert_eq!(v3(Some(pb)), None);
        for v3_pb in [
            "application/com.github.proto-openapi.spec.v3.v1.0+protobuf",
            "application/com.github.proto-openapi.spec.v3@v1.0+protobuf",
        ] {
            assert_eq!(v3(Some(v3_pb)), Some(OpenApiOutput::Protobuf));
            assert_eq!(v2(Some(v3_pb)), None);
        }
        assert_eq!(
            v3(Some("text/html, application/json")),
            Some(OpenApiOutput::Json)
        );
        // By quality, then specificity; q=0 refuses.
        let (low_json, any_then_pb, no_pb) = (
            format!("application/json;q=0.5, {pb}"),
            format!("*/*, {pb}"),
            format!("{pb};q=0, application/json;q=0.1"),
        );
        assert_eq!(v2(Some(&low_json)), Some(OpenApiOutput::Protobuf));
        assert_eq!(v2(Some(&any_then_pb)), Some(OpenApiOutput::Protobuf));
        assert_eq!(v2(Some(&no_pb)), Some(OpenApiOutput::Json));
        assert_eq!(v2(Some("application/json;q=0")), None);
    }

    const KUBECTL_GET: &str =
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

    #[test]
    fn kubectl_gets_a_table() {
        assert_eq!(negotiate(Some(KUBECTL_GET), true), Ok(Output::Table("v1")));
        assert_eq!(
            negotiate(
                Some("application/json;as=Table;v=v1beta1;g=meta.k8s.io"),
                false
            ),
            Ok(Output::Table("v1beta1"))
        );
    }

    #[test]
    fn metadata_informers_get_partial_object_metadata() {
        let list = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(negotiate(Some(list), true), Ok(Output::Metadata("v1")));
        // A list-only offer on a watch falls back to the plain JSON offer.
        assert_eq!(negotiate(Some(list), false), Ok(Output::Json));
    }

    #[test]
    fn unsupported_offers_alone_are_not_acceptable() {
        assert_eq!(negotiate(None, true), Ok(Output::Json));
        assert_eq!(negotiate(Some("*/*"), true), Ok(Output::Json));
        assert_eq!(
            negotiate(Some("application/vnd.kubernetes.protobuf"), true)
                .unwrap_err()
                .code(),
            406
        );
        assert_eq!(
            negotiate(Some("application/json;as=Foo;g=meta.k8s.io;v=v1"), true)
                .unwrap_err()
                .code(),
            406
        );
        assert_eq!(negotiate(Some("text/html"), false).unwrap_err().code(), 406);
    }

    #[test]
    fn protobuf_only_for_protobuf_capable_resources() {
        let pb = "application/vnd.kubernetes.protobuf";
        assert_eq!(negotiate_with(Some(pb), true, true), Ok(Output::Protobuf));
        assert_eq!(negotiate_with(Some(pb), false, true), Ok(Output::Protobuf));
        assert_eq!(
            negotiate_with(Some(pb), true, false).unwrap_err().code(),
            406
        );
        let both = "application/vnd.kubernetes.protobuf, application/json";
        assert_eq!(negotiate_with(Some(both), true, true), Ok(Output::Protobuf));
        assert_eq!(negotiate_with(Some(both), true, false), Ok(Output::Json));
        // Offer order wins.
        let json_first = "application/json, application/vnd.kubernetes.protobuf";
        assert_eq!(
            negotiate_with(Some(json_first), true, true),
            Ok(Output::Json)
        );
        // Protobuf Table / metadata offers fall back to later offers.
        let table =
            "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json";
        assert_eq!(negotiate_with(Some(table), true, true), Ok(Output::Json));
        let meta = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/vnd.kubernetes.protobuf";
        assert_eq!(negotiate_with(Some(meta), true, true), Ok(Output::Protobuf));
        assert_eq!(negotiate_with(Some("*/*"), true, true), Ok(Output::Json));
    }

    #[test]
    fn aggregated_discovery_only_when_offered_in_the_offered_version() {
        let v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(
            negotiate_discovery(Some(v2)),
            Ok(DiscoveryOutput::Aggregated("v2"))
        );
        let beta = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(
            negotiate_discovery(Some(beta)),
            Ok(DiscoveryOutput::Aggregated("v2beta1"))
        );
        assert_eq!(
            negotiate_discovery(Some("application/json")),
            Ok(DiscoveryOutput::Legacy)
        );
        assert_eq!(negotiate_discovery(None), Ok(DiscoveryOutput::Legacy));
    }

    #[test]
    fn gzip_is_accepted_unless_refused() {
        assert!(accepts_gzip(Some("gzip")));
        assert!(accepts_gzip(Some("deflate, gzip;q=0.5")));
        assert!(!accepts_gzip(Some("gzip;q=0")));
        assert!(!accepts_gzip(Some("br")));
        assert!(!accepts_gzip(None));
    }
}
