//! The front proxy's headers (aggregation layer): a request whose client certificate
//! chains to `--requestheader-client-ca-file` (and, when `--requestheader-allowed-names`
//! is set, has one of those common names) names its user in headers. The user is the
//! first non-empty value among the username headers, the groups every value of the group
//! headers, and each header starting with an extra prefix adds a value to the extra key
//! that follows the prefix (lower-cased, percent-decoded). From anyone else these headers
//! mean nothing, and they are removed from every request either way.

use std::collections::BTreeMap;

use http::HeaderMap;

use super::UserInfo;

/// `--requestheader-*` flags.
#[derive(Debug, Clone, Default)]
pub struct RequestHeaderConfig {
    /// Headers naming the user, in order.
    pub username_headers: Vec<String>,
    /// Headers naming groups.
    pub group_headers: Vec<String>,
    /// Prefixes of extra-attribute headers.
    pub extra_headers_prefixes: Vec<String>,
    /// Common names allowed for the proxy's certificate; empty: any.
    pub allowed_names: Vec<String>,
}

impl RequestHeaderConfig {
    /// The user the headers name, when `proxy_common_name` (the CN of a client
    /// certificate verified against the front-proxy CA) is allowed; None otherwise or
    /// when no username header is set.
    pub fn authenticate(
        &self,
        proxy_common_name: Option<&str>,
        headers: &HeaderMap,
    ) -> Option<UserInfo> {
        let cn = proxy_common_name?;
        if !self.allowed_names.is_empty() && !self.allowed_names.iter().any(|n| n == cn) {
            return None;
        }
        let name = self
            .username_headers
            .iter()
            .flat_map(|h| headers.get_all(h.as_str()))
            .filter_map(|v| v.to_str().ok())
            .find(|v| !v.is_empty())?
            .to_string();
        let groups = self
            .group_headers
            .iter()
            .flat_map(|h| headers.get_all(h.as_str()))
            .filter_map(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(String::from)
            .collect();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (header, value) in headers {
            let Some(key) = self.extra_key(header.as_str()) else {
                continue;
            };
            if let Ok(v) = value.to_str() {
                extra.entry(key).or_default().push(v.to_string());
            }
        }
        Some(UserInfo {
            name,
            uid: String::new(),
            groups,
            extra,
        })
    }

    /// The extra key a header carries, if it has one of the prefixes.
    fn extra_key(&self, header: &str) -> Option<String> {
        let lower = header.to_ascii_lowercase();
        let prefix = self
            .extra_headers_prefixes
            .iter()
            .map(|p| p.to_ascii_lowercase())
            .find(|p| !p.is_empty() && lower.starts_with(p.as_str()))?;
        let key = &lower[prefix.len()..];
        Some(percent_decode(key).unwrap_or_else(|| key.to_string()))
    }

    /// Removes every header this configuration reads.
    pub fn strip(&self, headers: &mut HeaderMap) {
        for h in self.username_headers.iter().chain(&self.group_headers) {
            headers.remove(h.as_str());
        }
        let extras: Vec<_> = headers
            .keys()
            .filter(|h| self.extra_key(h.as_str()).is_some())
            .cloned()
            .collect();
        for h in extras {
            headers.remove(h);
        }
    }
}

/// `%XX` decoding of a path segment; None if malformed (the key is then used as is).
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(allowed: &[&str]) -> RequestHeaderConfig {
        RequestHeaderConfig {
            username_headers: vec!["X-Remote-User".into()],
            group_headers: vec!["X-Remote-Group".into()],
            extra_headers_prefixes: vec!["X-Remote-Extra-".into()],
            allowed_names: allowed.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn a_verified_allowed_proxy_names_the_user_groups_and_extra() {
        let c = config(&["front-proxy-client"]);
        let h = headers(&[
            ("X-Remote-User", "alice"),
            ("X-Remote-Group", "dev"),
            ("X-Remote-Group", "ops"),
            ("X-Remote-Extra-Scopes", "a"),
            ("X-Remote-Extra-Scopes", "b"),
            ("X-Remote-Extra-Acme.com%2fproject", "p1"),
        ]);
        let u = c.authenticate(Some("front-proxy-client"), &h).unwrap();
        assert_eq!(u.name, "alice");
        assert_eq!(u.groups, ["dev", "ops"]);
        assert_eq!(u.extra["scopes"], ["a", "b"]);
        assert_eq!(u.extra["acme.com/project"], ["p1"]);
    }

    #[test]
    fn headers_mean_nothing_without_a_verified_allowed_proxy() {
        let h = headers(&[("X-Remote-User", "alice")]);
        assert_eq!(config(&[]).authenticate(None, &h), None);
        assert_eq!(
            config(&["front-proxy-client"]).authenticate(Some("mallory"), &h),
            None
        );
        assert!(config(&[]).authenticate(Some("anyone"), &h).is_some());
        let empty = headers(&[("X-Remote-User", ""), ("X-Remote-Group", "dev")]);
        assert_eq!(config(&[]).authenticate(Some("p"), &empty), None);
    }

    #[test]
    fn every_header_read_is_stripped() {
        let mut h = headers(&[
            ("X-Remote-User", "alice"),
            ("X-Remote-Group", "dev"),
            ("x-remote-extra-scopes", "a"),
            ("Accept", "application/json"),
        ]);
        config(&[]).strip(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("accept"));
    }
}
