//! S3 at a tiny scale: 300 pods of 1 KiB, storms of 5 full and 5 streaming
//! lists in JSON and protobuf, and 3 paged etcd reads: every list complete
//! (the reference list's length; every pod before the end bookmark).

use watchd_loadtest::s3::{run, S3Config};

#[path = "scenarios/tiny.rs"]
mod tiny;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_tiny_lists_are_complete_in_both_media_types() {
    let cfg = S3Config {
        pods: 300,
        pod_bytes: 1024,
        concurrency: 5,
        etcd_lists: 3,
        setup: tiny::setup(),
        ..S3Config::default()
    };
    let r = run(&cfg).await.expect("s3 runs");
    let v = tiny::checked_json(&r);
    assert!(r.clean, "{}\n{v:#}", r.table());
    let storms = v["details"]["storms"].as_array().expect("storms");
    let kinds: Vec<(String, String)> = storms
        .iter()
        .map(|s| {
            (
                s["kind"].as_str().unwrap().into(),
                s["accept"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("list", "json"),
            ("list", "protobuf"),
            ("stream", "json"),
            ("stream", "protobuf")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    let reference = &v["details"]["reference_list_bytes"];
    for s in storms {
        assert_eq!(s["lists"], 5);
        assert_eq!(s["failed"], 0, "{s}");
        assert!(s["gb_per_sec"].as_f64().unwrap() > 0.0);
        if s["kind"] == "list" {
            let one = reference[s["accept"].as_str().unwrap()].as_u64().unwrap();
            assert_eq!(s["bytes"].as_u64(), Some(5 * one), "{s}");
        }
    }
    // A protobuf list is smaller than the same list as JSON.
    assert!(reference["protobuf"].as_u64() < reference["json"].as_u64());
    assert_eq!(v["details"]["etcd"]["lists"], 3);
    assert_eq!(v["details"]["etcd"]["failed"], 0);
    let gbps = tiny::figure(&r, "list json: output GB/s");
    assert!(gbps.baseline_name.as_deref() == Some("etcd direct x3") && gbps.ratio.is_some());
    assert!(
        tiny::figure(&r, "stream protobuf: peak RSS growth, % of cache")
            .value
            .is_some()
    );
}

/// With `--gzip`, watch lists come as gzip members (kube-apiserver 1.37's
/// `WatchListCompression`) and full lists over 128 KiB gzipped: every list still complete
/// once decoded, in fewer bytes sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_tiny_with_gzip_compresses_streams_and_large_lists() {
    let cfg = S3Config {
        pods: 300,
        pod_bytes: 1024,
        concurrency: 3,
        etcd_lists: 0,
        gzip: true,
        setup: tiny::setup(),
        ..S3Config::default()
    };
    let r = run(&cfg).await.expect("s3 runs");
    let v = tiny::checked_json(&r);
    assert!(r.clean, "{}\n{v:#}", r.table());
    let reference = &v["details"]["reference_list_bytes"];
    for s in v["details"]["storms"].as_array().expect("storms") {
        assert_eq!(
            (s["failed"].as_u64(), s["gzip"].as_bool()),
            (Some(0), Some(true)),
            "{s}"
        );
        let (sent, decoded) = (
            s["bytes"].as_u64().unwrap(),
            s["decoded_bytes"].as_u64().unwrap(),
        );
        if s["kind"] == "list" {
            let one = reference[s["accept"].as_str().unwrap()].as_u64().unwrap();
            assert_eq!(decoded, 3 * one, "{s}");
            if one <= 128 * 1024 {
                continue; // kube-apiserver's threshold: sent as is
            }
        }
        assert_eq!(s["gzipped"], 3, "{s}");
        assert!(sent * 2 < decoded, "{s}");
    }
}
