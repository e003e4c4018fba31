//! A small, polite etcd writer that uses the same transaction shapes as
//! kube-apiserver and retries forever with exponential backoff.
//!
//! * create: `create_revision(key) == 0` then put, else get the current value
//! * update: `mod_revision(key) == known` then put, else get the current value
//! * delete: `mod_revision(key) == known` then delete, else get the current value
//!
//! Each write is therefore a single etcd put or delete. Puts may attach an
//! etcd lease, as kube-apiserver does for objects with a TTL (Events); the
//! leases come from [`TtlLeases`], which reuses them the way kube-apiserver's
//! lease manager does. When a request fails
//! (etcd down, timeout, leader change) the client is dropped, the failure is
//! logged, and the request is retried on a fresh connection after a backoff
//! that grows from 200 ms to 5 s. Callers bound the time spent by cancelling
//! the future (e.g. inside `tokio::select!`), which is always safe here.

use std::future::Future;
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse,
};
use tracing::{info, warn};

mod lease;
pub use lease::TtlLeases;

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
    /// etcd leases granted.
    pub leases: u64,
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

/// (succeeded, header revision, the current value if the compare failed).
type TxnResult = (bool, i64, Option<Current>);

/// A write named an etcd lease that etcd no longer has (it expired, or etcd
/// lost its data): grant a new one and write again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseLost;

/// The outcome of a write that attached no lease, where [`LeaseLost`] cannot
/// happen; should etcd say so anyway, the write is reported as not applied.
fn unleased(_: LeaseLost) -> Outcome {
    Outcome::Conflict { current: None }
}

/// A put of `value` at `key`, attached to `lease` when given.
fn put(key: &str, value: Vec<u8>, lease: Option<i64>) -> TxnOp {
    let options = lease.map(|id| PutOptions::new().with_lease(id));
    TxnOp::put(key, value, options)
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
    /// revision, current value from the `or_else` get, if any). A put naming a
    /// lease etcd does not have is not retried: that is [`LeaseLost`].
    async fn txn(&mut self, what: &str, txn: Txn) -> Result<TxnResult, LeaseLost> {
        let resp = self
            .retry(what, |mut client| {
                let txn = txn.clone();
                async move {
                    match client.txn(txn).await {
                        Err(err) if err.to_string().contains("lease not found") => {
                            Ok(Err(LeaseLost))
                        }
                        other => other.map(Ok),
                    }
                }
            })
            .await?;
        let revision = resp.header().map_or(0, |h| h.revision());
        let current = resp.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Get(get) => get.kvs().first().map(|kv| Current {
                value: kv.value().to_vec(),
                mod_revision: kv.mod_revision(),
            }),
            _ => None,
        });
        Ok((resp.succeeded(), revision, current))
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

    fn outcome(&mut self, (ok, revision, current): TxnResult) -> Outcome {
        if ok {
            Outcome::Applied { revision }
        } else {
            self.stats.conflicts += 1;
            Outcome::Conflict { current }
        }
    }

    /// Creates `key` only if it does not exist (`create_revision == 0`).
    pub async fn create(&mut self, key: &str, value: Vec<u8>) -> Outcome {
        let put = put(key, value, None);
        self.put_if(
            "create",
            Compare::create_revision(key, CompareOp::Equal, 0),
            key,
            put,
        )
        .await
        .unwrap_or_else(unleased)
    }

    /// Like [`Store::create`], attaching etcd lease `lease`.
    pub async fn create_leased(
        &mut self,
        key: &str,
        value: Vec<u8>,
        lease: i64,
    ) -> Result<Outcome, LeaseLost> {
        let put = put(key, value, Some(lease));
        self.put_if(
            "create",
            Compare::create_revision(key, CompareOp::Equal, 0),
            key,
            put,
        )
        .await
    }

    /// Replaces `key` only if it is still at `mod_revision`.
    pub async fn update(&mut self, key: &str, value: Vec<u8>, mod_revision: i64) -> Outcome {
        let put = put(key, value, None);
        let compare = Compare::mod_revision(key, CompareOp::Equal, mod_revision);
        self.put_if("update", compare, key, put)
            .await
            .unwrap_or_else(unleased)
    }

    /// Like [`Store::update`], attaching etcd lease `lease` (as kube-apiserver
    /// does on every write of an object with a TTL).
    pub async fn update_leased(
        &mut self,
        key: &str,
        value: Vec<u8>,
        mod_revision: i64,
        lease: i64,
    ) -> Result<Outcome, LeaseLost> {
        let put = put(key, value, Some(lease));
        let compare = Compare::mod_revision(key, CompareOp::Equal, mod_revision);
        self.put_if("update", compare, key, put).await
    }

    /// `put` if `compare` holds, else reads the key; counts the write.
    async fn put_if(
        &mut self,
        what: &str,
        compare: Compare,
        key: &str,
        put: TxnOp,
    ) -> Result<Outcome, LeaseLost> {
        let txn = Txn::new()
            .when([compare])
            .and_then([put])
            .or_else([TxnOp::get(key, None)]);
        let res = self.txn(what, txn).await?;
        let out = self.outcome(res);
        if matches!(out, Outcome::Applied { .. }) {
            match what {
                "create" => self.stats.creates += 1,
                _ => self.stats.updates += 1,
            }
        }
        Ok(out)
    }

    /// Grants an etcd lease of `ttl` seconds (retrying until etcd answers).
    pub async fn grant_lease(&mut self, ttl: i64) -> i64 {
        let resp = self
            .retry("lease grant", |mut client| async move {
                client.lease_grant(ttl, None).await
            })
            .await;
        self.stats.leases += 1;
        resp.id()
    }

    /// Deletes `key` only if it is still at `mod_revision`.
    pub async fn delete(&mut self, key: &str, mod_revision: i64) -> Outcome {
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, mod_revision)])
            .and_then([TxnOp::delete(key, None)])
            .or_else([TxnOp::get(key, None)]);
        let res = match self.txn("delete", txn).await {
            Ok(res) => res,
            Err(lost) => return unleased(lost),
        };
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
