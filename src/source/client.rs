//! Connecting to etcd: endpoints, TLS files, message limits.

use std::time::Duration;

use etcd_client::{
    Certificate, Client, ConnectOptions, Identity, KvClient, TlsOptions, WatchClient,
};

use super::SourceError;
use crate::config;

/// How to reach etcd.
#[derive(Debug, Clone, Default)]
pub struct EtcdConfig {
    /// Endpoint URLs, e.g. `http://127.0.0.1:2379`.
    pub endpoints: Vec<String>,
    /// CA bundle to verify etcd's serving certificate.
    pub ca_file: Option<String>,
    /// Client certificate.
    pub cert_file: Option<String>,
    /// Client key.
    pub key_file: Option<String>,
}

impl EtcdConfig {
    /// Connects to any of the endpoints.
    pub async fn connect(&self) -> Result<EtcdClient, SourceError> {
        let mut opts = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(5))
            .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5))
            .with_keep_alive_while_idle(true);
        if let Some(tls) = self.tls()? {
            opts = opts.with_tls(tls);
        }
        let client = Client::connect(&self.endpoints, Some(opts))
            .await
            .map_err(super::failed("connect"))?;
        Ok(EtcdClient {
            kv: client
                .kv_client()
                .max_decoding_message_size(config::ETCD_MAX_MESSAGE),
            watch: client
                .watch_client()
                .max_decoding_message_size(config::ETCD_MAX_MESSAGE),
        })
    }

    fn tls(&self) -> Result<Option<TlsOptions>, SourceError> {
        if self.ca_file.is_none() && self.cert_file.is_none() {
            return Ok(None);
        }
        let read = |p: &str| {
            std::fs::read(p).map_err(|source| SourceError::EtcdTlsFile {
                path: p.to_string(),
                source,
            })
        };
        let mut tls = TlsOptions::new();
        if let Some(ca) = &self.ca_file {
            tls = tls.ca_certificate(Certificate::from_pem(read(ca)?));
        }
        match (&self.cert_file, &self.key_file) {
            (Some(c), Some(k)) => tls = tls.identity(Identity::from_pem(read(c)?, read(k)?)),
            (None, None) => {}
            _ => return Err(SourceError::EtcdKeyPair),
        }
        Ok(Some(tls))
    }
}

/// The etcd services watchd uses, with message limits large enough for big pages.
#[derive(Clone)]
pub struct EtcdClient {
    /// Range requests.
    pub kv: KvClient,
    /// Watch streams.
    pub watch: WatchClient,
}
