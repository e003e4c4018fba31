//! Who is asking, and may they: authentication and authorization as kube-apiserver does
//! them. `authn` turns a request (its TLS client certificate, headers and bearer token) into
//! a [`UserInfo`]; `authz` decides whether that user may perform the request's
//! [`Attributes`]. Nothing here reads the network: ServiceAccount tokens and RBAC are
//! checked against objects in watchd's own cache.

pub mod audit;
pub mod authn;
pub mod authz;
pub mod authz_webhook;
pub mod cached;
pub mod errors;
pub mod limits;
pub mod rbac;
pub mod request_header;
pub mod service_account;
pub mod setup;
pub mod token_file;
pub mod token_webhook;
pub mod ttl_cache;

pub use errors::{ConfigError, WebhookError};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

/// An authenticated (or anonymous) user, as kube-apiserver's `user.Info`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name, e.g. `alice` or `system:serviceaccount:ns:sa`.
    pub name: String,
    /// A unique id, when the authenticator knows one.
    pub uid: String,
    /// Group names, including `system:authenticated` once authenticated.
    pub groups: Vec<String>,
    /// Extra attributes (lower-cased keys), e.g. `authentication.kubernetes.io/pod-name`.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The group every authenticated user is in.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The anonymous user's name.
pub const ANONYMOUS_USER: &str = "system:anonymous";
/// The anonymous user's group.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The group whose members may do anything.
pub const MASTERS: &str = "system:masters";

/// What a request asks to do, as kube-apiserver's `authorizer.Attributes`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    /// Who asks.
    pub user: UserInfo,
    /// `get`, `list`, `watch` for resources; the lower-cased HTTP method for other paths.
    pub verb: String,
    /// True for a request on an API resource; false for a non-resource path
    /// (`/api`, `/healthz`, `/metrics`, ...).
    pub resource_request: bool,
    /// The API group ("" for core).
    pub api_group: String,
    /// The API version.
    pub api_version: String,
    /// The resource (plural), e.g. `pods`.
    pub resource: String,
    /// The subresource, e.g. `status`; empty when none.
    pub subresource: String,
    /// The namespace; empty for cluster-scoped resources and all-namespace requests.
    pub namespace: String,
    /// The object's name; empty for collections.
    pub name: String,
    /// The URL path (for non-resource requests).
    pub path: String,
}

/// What ServiceAccount token checks read of an object in the cache, as kube-apiserver's
/// token validators read it of the object they get.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LookedUp {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.deletionTimestamp`, when a deletion is under way. One that does not read
    /// as a time is the Unix epoch: deleted long ago.
    pub deletion_timestamp: Option<SystemTime>,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// A Secret's `data.token` (decoded from base64); None for other objects and for a
    /// Secret without one.
    pub token: Option<Vec<u8>>,
}

/// Looks up an object in the cache: `resource` (plural, core group: `serviceaccounts`,
/// `pods`, `secrets`, `nodes`) named `name` in `namespace` (empty for cluster-scoped).
pub trait ObjectLookup: Send + Sync {
    /// What the checks read of the object, or None if there is no such object (or it does
    /// not read as one).
    fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<LookedUp>;
}

/// Authentication and authorization together, as the API frontends apply them.
pub struct Security {
    /// Who is asking.
    pub authenticator: authn::Authenticator,
    /// May they.
    pub authorizer: authz::Authorizer,
    /// Paths answered without authentication or authorization
    /// (`--authorization-always-allow-paths`; a trailing `*` matches a prefix).
    pub always_allow_paths: Vec<String>,
    /// Per-user limits of open watches and lists in flight.
    pub limits: Arc<limits::UserLimits>,
}

impl Security {
    /// Whether `path` is answered without authentication or authorization: one of
    /// `--authorization-always-allow-paths`, exactly or, for one ending in `*`, by prefix.
    /// The caller exempts only paths outside the API's resources.
    pub fn always_allows(&self, path: &str) -> bool {
        self.always_allow_paths
            .iter()
            .any(|p| match p.strip_suffix('*') {
                Some(prefix) => path.starts_with(prefix),
                None => path == p,
            })
    }
}

impl Attributes {
    /// The attributes of a request on a resource: `namespace` and `name` as the path
    /// gives them; a namespace object's own name is also its namespace, and a list or
    /// watch selecting one name with `fieldSelector=metadata.name=` names it, as
    /// kube-apiserver's request info does (so `resourceNames` rules apply).
    #[allow(clippy::too_many_arguments)]
    pub fn resource(
        user: UserInfo,
        verb: &str,
        group: &str,
        version: &str,
        resource: &str,
        subresource: Option<&str>,
        namespace: Option<&str>,
        name: Option<&str>,
        field_selector: Option<&str>,
    ) -> Attributes {
        let mut name = name.unwrap_or_default().to_string();
        if name.is_empty() && (verb == "list" || verb == "watch") {
            if let Some(sel) =
                field_selector.and_then(|s| crate::selectors::FieldSelector::parse(s).ok())
            {
                name = sel
                    .exact_value("metadata.name")
                    .unwrap_or_default()
                    .to_string();
            }
        }
        let mut namespace = namespace.unwrap_or_default().to_string();
        if group.is_empty() && resource == "namespaces" && namespace.is_empty() {
            namespace = name.clone();
        }
        Attributes {
            user,
            verb: verb.into(),
            resource_request: true,
            api_group: group.into(),
            api_version: version.into(),
            resource: resource.into(),
            subresource: subresource.unwrap_or_default().into(),
            namespace,
            name,
            path: String::new(),
        }
    }

    /// The attributes of a request on a non-resource path (discovery, health, metrics).
    pub fn non_resource(user: UserInfo, method: &http::Method, path: &str) -> Attributes {
        Attributes {
            user,
            verb: method.as_str().to_ascii_lowercase(),
            resource_request: false,
            path: path.into(),
            ..Attributes::default()
        }
    }
}
