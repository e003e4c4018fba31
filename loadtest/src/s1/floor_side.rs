//! The loopback floor as a side of S1: the same W and rate as the S1 run,
//! events the size of the run's watch event on the wire, and its result
//! read as an S1 result (the sender thread in the place of the server, the
//! receiver in the place of the generator), so that `s1-compare` and
//! `s1-saturate` show it in the same rows and ratios as etcd and watchd.

use std::path::Path;

use prost::Message;
use serde_json::{json, Value};
use watchd::api::grpc::pb;

use super::config::S1Config;
use super::protocol::WatchApi;
use super::report::{Machine, Multiplexing, ProcFigures, S1Result};
use super::writer::{self, WriteStats};
use crate::demo::Storage;
use crate::floor::{FloorConfig, FloorResult};
use crate::http::Accept;
use crate::stats::Accounting;

/// Digits of the `resourceVersion` a watch event carries in the estimate
/// (a revision in the millions, as after a few minutes of S1).
const RV_DIGITS: usize = 7;
/// Bytes a protobuf watch frame adds around the stored object: the 4-byte
/// length, the `WatchEvent` type field (`MODIFIED`) and the `RawExtension`
/// wrappers with their lengths.
const PROTOBUF_FRAME_OVERHEAD: usize = 4 + 10 + 3 + 3;

/// Bytes gRPC puts before each message (a compression flag and a 4-byte
/// length).
const GRPC_MESSAGE_PREFIX: usize = 5;

/// The size of one of the run's watch events as watchd writes it (without
/// the HTTP/1.1 chunk or HTTP/2 frame header around it): the JSON line
/// `{"type":"MODIFIED","object":{...}}\n` with `resourceVersion` set, or the
/// protobuf frame when the watchers ask for protobuf; over watchd's gRPC
/// API, the length-prefixed `WatchResponse` of that one event, its object's
/// metadata as fields and its bytes in the encoding asked for.
pub fn watch_event_bytes(cfg: &S1Config) -> Result<usize, String> {
    let names = writer::namespace_names(1);
    let stored = match cfg.accept {
        Accept::Json => Storage::Json,
        Accept::Protobuf => Storage::Protobuf,
    };
    let mut slots = writer::slots(&cfg.prefix, &names, 1, cfg.object_bytes, stored)?;
    let value = slots[0].stamped(1_700_000_000_000_000_000)?;
    if cfg.accept == Accept::Protobuf && cfg.api == WatchApi::Http {
        return Ok(value.len() + PROTOBUF_FRAME_OVERHEAD);
    }
    let rv = "1".repeat(RV_DIGITS);
    let json_value = match cfg.accept {
        Accept::Json => value.clone(),
        Accept::Protobuf => {
            let mut json = writer::slots(&cfg.prefix, &names, 1, cfg.object_bytes, Storage::Json)?;
            json[0].stamped(1_700_000_000_000_000_000)?
        }
    };
    let mut object: Value =
        serde_json::from_slice(&json_value).map_err(|e| format!("the S1 object: {e}"))?;
    object["metadata"]["resourceVersion"] = Value::String(rv.clone());
    if cfg.api == WatchApi::Grpc {
        let (encoding, raw) = match cfg.accept {
            Accept::Json => (
                pb::Encoding::Json,
                serde_json::to_vec(&object).map_err(|e| e.to_string())?,
            ),
            Accept::Protobuf => (pb::Encoding::Protobuf, value),
        };
        let rv: i64 = rv.parse().map_err(|e| format!("{e}"))?;
        return Ok(GRPC_MESSAGE_PREFIX + grpc_event(&object, rv, encoding, raw).encoded_len());
    }
    let line = json!({ "type": "MODIFIED", "object": object });
    Ok(serde_json::to_vec(&line).map_err(|e| e.to_string())?.len() + 1)
}

/// The gRPC `WatchResponse` watchd sends for a MODIFIED of `object` (its
/// JSON form, for the metadata) at `rv`, with `raw` in `encoding`.
fn grpc_event(object: &Value, rv: i64, encoding: pb::Encoding, raw: Vec<u8>) -> pb::WatchResponse {
    let meta = &object["metadata"];
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let labels = meta["labels"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), text(v))).collect())
        .unwrap_or_default();
    pb::WatchResponse {
        events: vec![pb::WatchEvent {
            r#type: pb::EventType::Modified as i32,
            resource_version: rv,
            object: Some(pb::Object {
                metadata: Some(pb::ObjectMeta {
                    namespace: text(&meta["namespace"]),
                    name: text(&meta["name"]),
                    uid: text(&meta["uid"]),
                    resource_version: rv,
                    labels,
                    generation: meta["generation"].as_i64().unwrap_or_default(),
                    deleting: false,
                }),
                encoding: encoding as i32,
                raw: raw.into(),
            }),
            ..Default::default()
        }],
    }
}

/// The floor beside `s1`: its watchers and rate, its duration, events of
/// its watch event's size, with `receiver_bin` as the receiver.
pub fn floor_config(s1: &S1Config, receiver_bin: &Path) -> Result<FloorConfig, String> {
    let mut f = FloorConfig::new(s1.watchers, s1.writes_per_sec, s1.duration);
    f.payload_bytes = watch_event_bytes(s1)?;
    f.receiver_bin = receiver_bin.to_path_buf();
    f.drain_timeout = s1.drain_timeout;
    f.validate()?;
    Ok(f)
}

/// How the floor's deliveries are carried: one socket per watcher, or as
/// many as fit under the open-files limit.
pub fn multiplexing(f: &FloorConfig) -> Multiplexing {
    let limit = crate::fdlimit::soft_limit();
    Multiplexing {
        protocol: "tcp".into(),
        connections: f.shape(limit).map_or(f.watchers, |s| s.sockets),
        streams_per_connection: 1,
        tls: false,
    }
}

/// A floor result in the shape of an S1 result: the sender thread is the
/// server (CPU, user share), the receiver process the generator; nothing
/// is written to etcd, so the writer's figures are the ticks.
pub fn as_s1_result(f: &FloorResult) -> S1Result {
    let per_m = |c: f64| (f.deliveries_sent > 0).then(|| c * 1e6 / f.deliveries_sent as f64);
    let cpu_s = f.sender.user_s + f.sender.system_s;
    S1Result {
        scenario: "s1".into(),
        target: "floor".into(),
        watchers: f.watchers,
        writes_per_sec: f.requested_rate,
        duration_s: f.duration_s,
        object_bytes: f.payload_bytes,
        storage: "-".into(),
        stored_bytes: f.payload_bytes,
        accept: None,
        multiplexing: Multiplexing {
            protocol: "tcp".into(),
            connections: f.sockets,
            streams_per_connection: 1,
            tls: false,
        },
        writes: WriteStats {
            planned: f.ticks_planned,
            ok: f.ticks,
            failed: 0,
            abandoned: f.abandoned_ticks,
            achieved_per_sec: f.ticks as f64 / f.window_s.max(1e-9) * f.sockets as f64
                / f.watchers.max(1) as f64,
            elapsed_s: f.window_s,
            first_error: f.error.clone(),
            revisions: Vec::new(),
            slot_revisions: Vec::new(),
        },
        expected_deliveries: f.deliveries_sent,
        window_s: f.window_s,
        delivered_per_sec: f.delivered_per_sec,
        caught_up: f.lost == 0,
        drain_s: f.lag_end_s,
        latency_ms: f.latency_ms.clone(),
        accounting: Accounting {
            delivered: f.deliveries_received,
            missed: f.lost,
            ..Accounting::default()
        },
        watchers_failed: usize::from(f.error.is_some()),
        first_watcher_error: f.error.clone(),
        server: ProcFigures {
            process: "floor sender thread".into(),
            pid: Some(std::process::id()),
            cpu_s: Some(cpu_s),
            user_s: Some(f.sender.user_s),
            cpu_s_per_million: per_m(cpu_s),
            cores: Some(f.sender.cores),
            peak_rss_bytes: None,
        },
        generator: f.receiver.clone(),
        machine: Machine {
            cpus: f.machine.cpus,
            busy_share: f.machine.busy_share,
            loadavg_1m_start: f.machine.loadavg_1m_start,
            tokio_workers: f.machine.tokio_workers.clone(),
        },
        ..S1Result::default()
    }
}

/// One side's run: the floor, or S1 against etcd direct or watchd.
#[derive(Clone, Debug)]
// A handful exist per invocation: their size does not matter.
#[allow(clippy::large_enum_variant)]
pub enum SideRun {
    /// The loopback floor.
    Floor(FloorConfig),
    /// An S1 run.
    S1(S1Config),
}

impl SideRun {
    /// Runs it once; the floor's result in S1's shape.
    pub async fn run(&self) -> Result<S1Result, String> {
        match self {
            SideRun::Floor(f) => crate::floor::run(f).await.map(|r| as_s1_result(&r)),
            SideRun::S1(c) => super::run(c).await,
        }
    }

    /// How its streams are carried.
    pub fn multiplexing(&self) -> Multiplexing {
        match self {
            SideRun::Floor(f) => multiplexing(f),
            SideRun::S1(c) => c.multiplexing(),
        }
    }

    /// The same side at another write rate.
    pub fn at_rate(&self, rate: f64) -> SideRun {
        match self {
            SideRun::Floor(f) => SideRun::Floor(FloorConfig { rate, ..f.clone() }),
            SideRun::S1(c) => SideRun::S1(S1Config {
                writes_per_sec: rate,
                ..c.clone()
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::floor::SenderCpu;
    use crate::s1::Target;
    use std::time::Duration;

    #[test]
    fn the_event_size_is_the_object_plus_the_watch_envelope() {
        let cfg = S1Config::new(Target::Watchd, 10, 100.0, Duration::from_secs(5));
        let n = watch_event_bytes(&cfg).unwrap();
        // ≈1024 B of object, `{"type":"MODIFIED","object":` + `}\n`, the RV.
        assert!((1024 + 30 + 20..=1024 + 30 + 40).contains(&n), "{n}");
        let mut pb = cfg.clone();
        pb.storage = Storage::Protobuf;
        pb.accept = Accept::Protobuf;
        let m = watch_event_bytes(&pb).unwrap();
        assert!(m < n && m > 900, "{m} vs {n}");
        let f = floor_config(&cfg, Path::new("/bin/x")).unwrap();
        assert_eq!((f.watchers, f.rate, f.payload_bytes), (10, 100.0, n));
        assert_eq!(f.duration, Duration::from_secs(5));
        let SideRun::Floor(f2) = SideRun::Floor(f).at_rate(7.0) else {
            panic!("floor");
        };
        assert_eq!((f2.rate, f2.payload_bytes), (7.0, n));
        // Over watchd's gRPC API: the object plus its metadata as fields,
        // a little more than the JSON line, in either encoding.
        let mut grpc = cfg.clone();
        grpc.set_watch_protocol(crate::s1::WatchProtocol::GrpcWatchd);
        let g = watch_event_bytes(&grpc).unwrap();
        assert!((n + 20..=n + 160).contains(&g), "{g} vs {n}");
        let mut grpc_pb = grpc.clone();
        grpc_pb.storage = Storage::Protobuf;
        grpc_pb.accept = Accept::Protobuf;
        let gp = watch_event_bytes(&grpc_pb).unwrap();
        assert!(gp < g && gp > m, "{gp} vs {g} and {m}");
        assert_eq!(
            floor_config(&grpc, Path::new("/bin/x"))
                .unwrap()
                .payload_bytes,
            g
        );
        let s = SideRun::S1(cfg).at_rate(3.0);
        assert_eq!(s.multiplexing().protocol, "http1");
        let SideRun::S1(c) = s else { panic!("s1") };
        assert_eq!(c.writes_per_sec, 3.0);
    }

    #[test]
    fn a_floor_result_reads_as_an_s1_result() {
        let f = FloorResult {
            scenario: "floor".into(),
            watchers: 4,
            sockets: 4,
            requested_rate: 10.0,
            rate: 10.0,
            ticks_planned: 20,
            ticks: 20,
            deliveries_sent: 80,
            deliveries_received: 80,
            window_s: 2.0,
            delivered_per_sec: 40.0,
            sender: SenderCpu::new(0.0001, 0.0007, 80, 2.0),
            ..FloorResult::default()
        };
        let r = as_s1_result(&f);
        assert!(r.is_clean(), "{r:?}");
        assert_eq!(r.target, "floor");
        assert_eq!(r.accounting.delivered, 80);
        assert!((r.server.cpu_s_per_million.unwrap() - 10.0).abs() < 1e-9);
        assert!((r.server.user_share().unwrap() - 0.125).abs() < 1e-9);
        assert!((r.writes.achieved_per_sec - 10.0).abs() < 1e-9);
        let lost = as_s1_result(&FloorResult { lost: 3, ..f });
        assert!(!lost.is_clean() && !lost.caught_up);
    }
}
