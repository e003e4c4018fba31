//! Writing many objects into etcd fast: `ops_per_txn` puts per
//! transaction (etcd's `--max-txn-ops` is 128, its request limit 1.5 MiB),
//! up to `concurrency` transactions in flight. One put per transaction is
//! what kube-apiserver does (each write its own revision): the ingest
//! scenario's replay; larger batches fill a cache quickly.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Client, Txn, TxnOp};
use serde::Serialize;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Longest one transaction may take.
pub const TXN_TIMEOUT: Duration = Duration::from_secs(30);
/// Most bytes of values in one transaction (below etcd's 1.5 MiB request
/// limit).
pub const MAX_TXN_BYTES: usize = 1 << 20;
/// Most puts in one transaction (etcd's default `--max-txn-ops`).
pub const MAX_OPS_PER_TXN: usize = 128;

/// Counters a progress line can read while a fill runs.
#[derive(Debug, Default)]
pub struct FillCounters {
    /// Puts acknowledged.
    pub keys: AtomicU64,
    /// Value bytes acknowledged.
    pub bytes: AtomicU64,
}

impl FillCounters {
    /// Puts acknowledged so far.
    pub fn keys(&self) -> u64 {
        self.keys.load(Ordering::Relaxed)
    }
}

/// What a fill did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FillStats {
    /// Puts acknowledged.
    pub keys: u64,
    /// Value bytes acknowledged (the raw etcd value bytes).
    pub value_bytes: u64,
    /// Transactions made.
    pub txns: u64,
    /// The highest revision acknowledged.
    pub last_revision: i64,
    /// Seconds from the first send to the last acknowledgement.
    pub elapsed_s: f64,
    /// Puts per second.
    pub keys_per_sec: f64,
}

impl FillStats {
    /// Counts one acknowledged transaction: (revision, puts, bytes).
    fn add(&mut self, (revision, keys, bytes): (i64, u64, u64)) {
        self.last_revision = self.last_revision.max(revision);
        self.keys += keys;
        self.value_bytes += bytes;
    }
}

/// Puts every `(key, value)` of `items`, `ops_per_txn` to a transaction,
/// `concurrency` transactions in flight; the first failure ends the fill.
pub async fn fill(
    client: &Client,
    items: impl Iterator<Item = (String, Vec<u8>)>,
    ops_per_txn: usize,
    concurrency: usize,
    counters: Arc<FillCounters>,
) -> Result<FillStats, String> {
    let ops_per_txn = ops_per_txn.clamp(1, MAX_OPS_PER_TXN);
    let gate = Arc::new(Semaphore::new(concurrency.max(1)));
    let mut tasks: JoinSet<Result<(i64, u64, u64), String>> = JoinSet::new();
    let started = Instant::now();
    let mut stats = FillStats::default();
    let mut batch: Vec<TxnOp> = Vec::with_capacity(ops_per_txn);
    let mut batch_bytes = 0usize;
    let mut items = items.peekable();
    while items.peek().is_some() || !batch.is_empty() {
        if let Some((key, value)) = items.next() {
            batch_bytes += value.len();
            batch.push(TxnOp::put(key, value, None));
            let full = batch.len() >= ops_per_txn || batch_bytes >= MAX_TXN_BYTES;
            if !full && items.peek().is_some() {
                continue;
            }
        }
        let ops = std::mem::take(&mut batch);
        let (n, bytes) = (ops.len() as u64, batch_bytes as u64);
        batch_bytes = 0;
        let permit = gate
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| e.to_string())?;
        while let Some(done) = tasks.try_join_next() {
            stats.add(done.map_err(|e| e.to_string())??);
        }
        let mut client = client.clone();
        let counters = counters.clone();
        stats.txns += 1;
        tasks.spawn(async move {
            let txn = Txn::new().and_then(ops);
            let resp = tokio::time::timeout(TXN_TIMEOUT, client.txn(txn))
                .await
                .map_err(|_| format!("etcd txn of {n} puts: timed out after {TXN_TIMEOUT:?}"))?
                .map_err(|e| format!("etcd txn of {n} puts: {e}"))?;
            drop(permit);
            counters.keys.fetch_add(n, Ordering::Relaxed);
            counters.bytes.fetch_add(bytes, Ordering::Relaxed);
            Ok((resp.header().map_or(0, |h| h.revision()), n, bytes))
        });
    }
    while let Some(done) = tasks.join_next().await {
        stats.add(done.map_err(|e| e.to_string())??);
    }
    stats.elapsed_s = started.elapsed().as_secs_f64();
    stats.keys_per_sec = stats.keys as f64 / stats.elapsed_s.max(1e-9);
    Ok(stats)
}
