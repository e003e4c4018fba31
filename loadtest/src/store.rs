//! A small, polite etcd writer that uses the same transaction shapes as
//! kube-apiserver and retries forever with exponential backoff.
//!
//! * create: `create_revision(key) == 0` then put, else get the current value
//! * update: `mod_revision(key) == known` then put, else get the current value
//! * delete: `mod_revision(key) == known` then delete, else get the current value
//!
//! Each write is therefore a single etcd put or delete. When a request fails
//! (etcd down, timeout, leader change) the client is dropped, the failure is
//! logged, and the request is retried on a fresh connection after a backoff
//! that grows from 200 ms to 5 s. Callers bound the time spent by cancelling
//! the future (e.g. inside `tokio::select!`), which is always safe here.

use std::future::Future;
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, Txn, TxnOp, TxnOpResponse,
};
use tracing::{info, warn};

const INITIAL_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Counters of what the store did, for progress logs and summaries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Objects created.
    pub creates: u64,
    /// Objects updated.
    pub updates: u64,
    /// Objects deleted.
    pub deletes: u64,
    /// Transactions whose compare failed (object existed, changed or vanished).
    pub conflicts: u64,
    /// Failed etcd requests (each followed by a reconnect and a retry).
    pub failures: u64,
    /// Successful reconnections after a failure.
    pub reconnects: u64,
}

/// The value currently stored under a key, with its `mod_revision`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Current {
    /// Raw stored bytes.
    pub value: Vec<u8>,
    /// etcd `mod_revision` of the key (the object's resourceVersion).
    pub mod_revision: i64,
}

/// Result of a conditional write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The write happened at this etcd revision.
    Applied {
        /// Revision of the write (the new `mod_revision` for puts).
        revision: i64,
    },
    /// The compare failed; `current` is what the key holds now (`None` if absent).
    Conflict {
        /// Current value of the key, if it exists.
        current: Option<Current>,
    },
}

/// A listed key with its value and `mod_revision`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Full etcd key.
    pub key: String,
    /// Raw stored bytes.
    pub value: Vec<u8>,
    /// etcd `mod_revision` of the key.
    pub mod_revision: i64,
}

/// Reconnecting etcd client wrapper; see the module docs.
pub struct Store {
    endpoints: Vec<String>,
    client: Option<Client>,
    backoff: Duration,
    failed: bool,
    /// What has been done so far.
    pub stats: StoreStats,
}

fn options() -> ConnectOptions {
    ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(2))
        .with_timeout(Duration::from_secs(5))
        .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5))
}

impl Store {
    /// Prepares a client for `endpoints` (`http://host:port`). The connection
    /// itself is lazy; an error here means the endpoints are unusable.
    pub async fn open(endpoints: Vec<String>) -> Result<Self, etcd_client::Error> {
        let client = Client::connect(&endpoints, Some(options())).await?;
        Ok(Self {
            endpoints,
            client: Some(client),
            backoff: INITIAL_BACKOFF,
            failed: false,
            stats: StoreStats::default(),
        })
    }

    async fn client(&mut self) -> Result<Client, etcd_client::Error> {
        if let Some(client) = &self.client {
            return Ok(client.clone());
        }
        let client = Client::connect(&self.endpoints, Some(options())).await?;
        self.client = Some(client.clone());
        Ok(client)
    }

    async fn backoff_after(&mut self, what: &str, err: &etcd_client::Error) {
        self.stats.failures += 1;
        self.failed = true;
        self.client = None;
        warn!(
            error = %err,
            retry_in_ms = self.backoff.as_millis() as u64,
            endpoints = %self.endpoints.join(","),
            "etcd {what} failed; reconnecting"
        );
        tokio::time::sleep(self.backoff).await;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }

    fn recovered(&mut self) {
        if self.failed {
            self.failed = false;
            self.stats.reconnects += 1;
            info!(endpoints = %self.endpoints.join(","), "etcd connection restored");
        }
        self.backoff = INITIAL_BACKOFF;
    }

    /// Calls `op` with a connected client until it succeeds, reconnecting
    /// with backoff after every failure.
    async fn retry<T, F, Fut>(&mut self, what: &str, mut op: F) -> T
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        loop {
            let result = match self.client().await {
                Ok(client) => op(client).await,
                Err(err) => Err(err),
            };
            match result {
                Ok(value) => {
                    self.recovered();
                    return value;
                }
                Err(err) => self.backoff_after(what, &err).await,
            }
        }
    }

    /// Runs `txn` until etcd answers, then returns (succeeded, header
    /// revision, current value from the `or_else` get, if any).
    async fn txn(&mut self, what: &str, txn: Txn) -> (bool, i64, Option<Current>) {
        let resp = self
            .retry(what, |mut client| {
                let txn = txn.clone();
                async move { client.txn(txn).await }
            })
            .await;
        let revision = resp.header().map_or(0, |h| h.revision());
        let current = resp.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Get(get) => get.kvs().first().map(|kv| Current {
                value: kv.value().to_vec(),
                mod_revision: kv.mod_revision(),
            }),
            _ => None,
        });
        (resp.succeeded(), revision, current)
    }

    /// The current etcd revision (retrying until etcd answers).
    pub async fn revision(&mut self) -> i64 {
        let resp = self
            .retry("revision read", |mut client| async move {
                client
                    .get("/", Some(GetOptions::new().with_count_only()))
                    .await
            })
            .await;
        resp.header().map_or(0, |h| h.revision())
    }

    fn outcome(&mut self, (ok, revision, current): (bool, i64, Option<Current>)) -> Outcome {
        if ok {
            Outcome::Applied { revision }
        } else {
            self.stats.conflicts += 1;
            Outcome::Conflict { current }
        }
    }

    /// Creates `key` only if it does not exist (`create_revision == 0`).
    pub async fn create(&mut self, key: &str, value: Vec<u8>) -> Outcome {
        let txn = Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, value, None)])
            .or_else([TxnOp::get(key, None)]);
        let res = self.txn("create", txn).await;
        let out = self.outcome(res);
        if matches!(out, Outcome::Applied { .. }) {
            self.stats.creates += 1;
        }
        out
    }

    /// Replaces `key` only if it is still at `mod_revision`.
    pub async fn update(&mut self, key: &str, value: Vec<u8>, mod_revision: i64) -> Outcome {
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, mod_revision)])
            .and_then([TxnOp::put(key, value, None)])
            .or_else([TxnOp::get(key, None)]);
        let res = self.txn("update", txn).await;
        let out = self.outcome(res);
        if matches!(out, Outcome::Applied { .. }) {
            self.stats.updates += 1;
        }
        out
    }

    /// Deletes `key` only if it is still at `mod_revision`.
    pub async fn delete(&mut self, key: &str, mod_revision: i64) -> Outcome {
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, mod_revision)])
            .and_then([TxnOp::delete(key, None)])
            .or_else([TxnOp::get(key, None)]);
        let res = self.txn("delete", txn).await;
        let out = self.outcome(res);
        if matches!(out, Outcome::Applied { .. }) {
            self.stats.deletes += 1;
        }
        out
    }

    /// Lists every key under `prefix` (retrying until etcd answers).
    pub async fn list(&mut self, prefix: &str) -> Vec<Entry> {
        let resp = self
            .retry("list", |mut client| async move {
                client
                    .get(prefix, Some(GetOptions::new().with_prefix()))
                    .await
            })
            .await;
        resp.kvs()
            .iter()
            .map(|kv| Entry {
                key: String::from_utf8_lossy(kv.key()).into_owned(),
                value: kv.value().to_vec(),
                mod_revision: kv.mod_revision(),
            })
            .collect()
    }
}
