//! Any input as credentials: the Authorization header, a static token file, a
//! ServiceAccount token and front-proxy headers never panic, and what they accept is
//! consistent (a parsed token file authenticates each of its tokens; a bearer token is a
//! piece of its header).
#![no_main]

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use libfuzzer_sys::fuzz_target;
use watchd::auth::request_header::RequestHeaderConfig;
use watchd::auth::service_account::ServiceAccountAuthenticator;
use watchd::auth::token_file::{bearer_token, TokenFile};
use watchd::auth::{LookedUp, ObjectLookup};

struct Nothing;

impl ObjectLookup for Nothing {
    fn get(&self, _: &str, _: &str, _: &str) -> Option<LookedUp> {
        Some(LookedUp {
            uid: "uid".into(),
            ..LookedUp::default()
        })
    }
}

/// An ECDSA P-256 public key (fixed), so signature checks run on every input.
const KEY: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE7Hm7y/z6ZS3yMq63gR2vY9uWhFr2
cDcoQ1c+wvGQ7iM2kCXoJftSJvCtK7GGZAKX5taB+sjg6PBQUFt3uIw0Ng==
-----END PUBLIC KEY-----
";

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(t) = bearer_token(s) {
        assert!(s.contains(t));
    }
    if let Ok(file) = TokenFile::parse(s) {
        // Without quotes every line is one record: each non-empty token authenticates.
        if !s.contains('"') {
            for line in s.lines() {
                let token = line.split(',').next().unwrap_or_default();
                if !token.is_empty() {
                    assert!(file.authenticate(token).is_some(), "{token:?} of {line:?}");
                }
            }
        }
    }
    let sa = ServiceAccountAuthenticator::new(
        &[KEY.to_string()],
        vec!["https://kubernetes.default.svc".into()],
        vec![],
        Arc::new(Nothing),
    )
    .expect("the fixed key loads");
    // Without a signature by the key's private half no input authenticates.
    let r = sa.authenticate(s, UNIX_EPOCH + Duration::from_secs(1_800_000_000));
    assert!(!matches!(r, Ok(Some(_))));
    let mut headers = http::HeaderMap::new();
    for line in s.lines() {
        if let Some((k, v)) = line.split_once(':') {
            if let (Ok(k), Ok(v)) = (
                http::HeaderName::from_bytes(k.trim().as_bytes()),
                http::HeaderValue::from_str(v.trim()),
            ) {
                headers.append(k, v);
            }
        }
    }
    let rh = RequestHeaderConfig {
        username_headers: vec!["X-Remote-User".into()],
        group_headers: vec!["X-Remote-Group".into()],
        extra_headers_prefixes: vec!["X-Remote-Extra-".into()],
        allowed_names: vec![],
    };
    assert!(rh.authenticate(None, &headers).is_none());
    let _ = rh.authenticate(Some("front-proxy-client"), &headers);
    rh.strip(&mut headers);
    assert!(rh
        .authenticate(Some("front-proxy-client"), &headers)
        .is_none());
});
