//! watchd's gRPC endpoint seen by generic tools: the standard health service
//! (`grpc.health.v1.Health`) answers SERVING once the cache is synced and NOT_SERVING
//! when the server drains, server reflection (v1 and v1alpha) lists the services and
//! hands out their descriptors, so a client needs no `.proto` file, and a connection
//! carries no more calls at once than `--grpc-max-concurrent-streams`. Checked with the
//! generated clients of both standard services, as grpcurl and grpc-health-probe use
//! them, against a real etcd.

mod support;

use std::time::Duration;

use prost::Message;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
use tonic_reflection::pb::v1::ServerReflectionRequest;
use tonic_reflection::pb::v1alpha::server_reflection_client::ServerReflectionClient as AlphaClient;
use tonic_reflection::pb::v1alpha::server_reflection_request::MessageRequest as AlphaRequest;
use tonic_reflection::pb::v1alpha::server_reflection_response::MessageResponse as AlphaResponse;
use tonic_reflection::pb::v1alpha::ServerReflectionRequest as AlphaReflectionRequest;

use support::kube::{configmap, put_json};
use support::{Etcd, Watchd};

const WAIT: Duration = Duration::from_secs(10);

async fn channel(w: &Watchd) -> tonic::transport::Channel {
    tokio::time::timeout(
        WAIT,
        tonic::transport::Endpoint::from_shared(w.grpc_url())
            .unwrap()
            .connect(),
    )
    .await
    .expect("connect in time")
    .expect("connect")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_serving_once_synced_and_not_serving_while_draining() {
    let mut etcd = Etcd::start();
    let mut kv = etcd.client().await;
    put_json(
        &mut kv,
        "/registry/configmaps/default/a",
        &configmap("default", "a", "1"),
    )
    .await;
    // Before the initial sync: etcd is down, so watchd cannot sync, and the health
    // service answers NOT_SERVING, for the server and for the API, every time it is
    // asked over a few of its readiness looks (it looks every 200 ms).
    etcd.kill9();
    let mut w = Watchd::spawn(&etcd.client_url(), &[]);
    // Spawned, not waited for: connect once its gRPC port listens (bounded).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let endpoint = tonic::transport::Endpoint::from_shared(w.grpc_url()).unwrap();
    let ch = loop {
        match tokio::time::timeout(WAIT, endpoint.connect()).await {
            Ok(Ok(ch)) => break ch,
            other => assert!(
                std::time::Instant::now() < deadline,
                "the gRPC port does not listen before sync: {other:?}\n{}",
                w.log()
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut health = HealthClient::new(ch);
    let mut before_sync = health
        .watch(HealthCheckRequest {
            service: "watchd.v1.Watchd".into(),
        })
        .await
        .expect("health watch before sync")
        .into_inner();
    let first = tokio::time::timeout(WAIT, before_sync.message())
        .await
        .expect("the status before sync")
        .expect("a message")
        .expect("not ended");
    assert_eq!(first.status(), ServingStatus::NotServing, "before sync");
    for _ in 0..5 {
        for service in ["", "watchd.v1.Watchd"] {
            let r = health
                .check(HealthCheckRequest {
                    service: service.into(),
                })
                .await
                .unwrap_or_else(|e| panic!("check {service:?} before sync: {e}"))
                .into_inner();
            assert_eq!(
                r.status(),
                ServingStatus::NotServing,
                "{service:?} before sync"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let readyz = support::http::get(&format!("{}/readyz", w.base_url()), &[]).await;
    assert_ne!(readyz.status, 200, "not synced while etcd is down");

    // etcd comes back: watchd syncs, and the watch of the health sees SERVING.
    tokio::task::block_in_place(|| {
        etcd.restart();
        w.wait_ready(Duration::from_secs(60))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let synced = tokio::time::timeout(WAIT, before_sync.message())
        .await
        .expect("SERVING after the sync")
        .expect("a message")
        .expect("not ended");
    assert_eq!(synced.status(), ServingStatus::Serving, "after sync");

    // The health service is told of each change of the readiness /readyz reports (200
    // now): it follows at once, as soon as its task runs (before, it looked five times
    // a second and lagged up to half a second).
    for service in ["", "watchd.v1.Watchd"] {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let status = loop {
            let r = health
                .check(HealthCheckRequest {
                    service: service.into(),
                })
                .await
                .unwrap_or_else(|e| panic!("check {service:?}: {e}"))
                .into_inner();
            if r.status() == ServingStatus::Serving || std::time::Instant::now() > deadline {
                break r.status();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(status, ServingStatus::Serving, "{service:?}");
    }
    let unknown = health
        .check(HealthCheckRequest {
            service: "no.such.Service".into(),
        })
        .await
        .expect_err("an unknown service is NOT_FOUND");
    assert_eq!(unknown.code(), tonic::Code::NotFound);

    // A watch of the health sees NOT_SERVING when the server starts draining.
    let mut stream = health
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("health watch")
        .into_inner();
    let first = tokio::time::timeout(WAIT, stream.message())
        .await
        .expect("the current status")
        .expect("a message")
        .expect("not ended");
    assert_eq!(first.status(), ServingStatus::Serving);
    let stopping = std::thread::spawn(move || w.terminate(Duration::from_secs(15)));
    let next = tokio::time::timeout(WAIT, stream.message()).await;
    let exited = stopping.join().expect("terminate");
    assert!(exited.is_some(), "watchd exited after SIGTERM");
    match next {
        Ok(Ok(Some(m))) => assert_eq!(m.status(), ServingStatus::NotServing),
        other => panic!("expected NOT_SERVING before the stream ended, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflection_lists_the_services_and_serves_their_descriptors() {
    let etcd = Etcd::start();
    let w = Watchd::start(&etcd.client_url(), &[]);
    let ch = channel(&w).await;

    let mut v1 = ServerReflectionClient::new(ch.clone());
    let requests = tokio_stream::iter([
        ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        },
        ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::FileContainingSymbol(
                "watchd.v1.Watchd".into(),
            )),
        },
    ]);
    let mut answers = v1
        .server_reflection_info(requests)
        .await
        .expect("reflection v1")
        .into_inner();
    let listed = match answers.message().await.unwrap().unwrap().message_response {
        Some(MessageResponse::ListServicesResponse(l)) => l,
        other => panic!("not a service list: {other:?}"),
    };
    let names: Vec<String> = listed.service.into_iter().map(|s| s.name).collect();
    for wanted in [
        "watchd.v1.Watchd",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    ] {
        assert!(names.iter().any(|n| n == wanted), "{wanted} in {names:?}");
    }
    let files = match answers.message().await.unwrap().unwrap().message_response {
        Some(MessageResponse::FileDescriptorResponse(f)) => f.file_descriptor_proto,
        other => panic!("not descriptors: {other:?}"),
    };
    let file = prost_types::FileDescriptorProto::decode(files[0].as_slice()).expect("a descriptor");
    assert_eq!(file.package(), "watchd.v1");
    let service = file
        .service
        .iter()
        .find(|s| s.name() == "Watchd")
        .expect("the Watchd service");
    let methods: Vec<&str> = service.method.iter().map(|m| m.name()).collect();
    for m in [
        "Get",
        "List",
        "Watch",
        "ListResources",
        "Snapshot",
        "WatchMany",
    ] {
        assert!(methods.contains(&m), "{m} in {methods:?}");
    }

    // grpcurl asks v1alpha first on older versions: it answers too.
    let mut alpha = AlphaClient::new(ch);
    let mut answers = alpha
        .server_reflection_info(tokio_stream::iter([AlphaReflectionRequest {
            host: String::new(),
            message_request: Some(AlphaRequest::ListServices(String::new())),
        }]))
        .await
        .expect("reflection v1alpha")
        .into_inner();
    match answers.message().await.unwrap().unwrap().message_response {
        Some(AlphaResponse::ListServicesResponse(l)) => {
            for wanted in [
                "watchd.v1.Watchd",
                "grpc.reflection.v1.ServerReflection",
                "grpc.reflection.v1alpha.ServerReflection",
            ] {
                assert!(
                    l.service.iter().any(|s| s.name == wanted),
                    "{wanted}: {l:?}"
                );
            }
        }
        other => panic!("not a service list: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_carries_at_most_the_configured_calls_at_once() {
    use watchd::api::grpc::pb::watchd_client::WatchdClient;
    use watchd::api::grpc::pb::{Collection, WatchRequest};
    let etcd = Etcd::start();
    let w = Watchd::start(&etcd.client_url(), &["--grpc-max-concurrent-streams=2"]);
    let mut c = WatchdClient::new(channel(&w).await);
    let watch = || WatchRequest {
        collection: Some(Collection {
            group: String::new(),
            version: "v1".into(),
            resource: "configmaps".into(),
            namespace: String::new(),
        }),
        resource_version: "0".into(),
        ..Default::default()
    };
    let first = c.watch(watch()).await.expect("first watch").into_inner();
    let _second = c.watch(watch()).await.expect("second watch").into_inner();
    // A third call on the same connection waits for one of the two to end.
    let mut third_client = c.clone();
    let third = tokio::spawn(async move { third_client.watch(watch()).await.map(|_| ()) });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !third.is_finished(),
        "a third call ran beside two on one connection"
    );
    drop(first);
    let answered = tokio::time::timeout(WAIT, third)
        .await
        .expect("the third call runs once the first ended");
    answered.expect("join").expect("third watch");
}

/// `--shutdown-delay-duration`: after SIGTERM watchd reports itself not ready at once
/// (`/readyz` fails its `shutdown` check, gRPC health turns NOT_SERVING) and goes on
/// serving reads until the delay has passed, then exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_the_shutdown_delay_readiness_fails_and_reads_are_served() {
    let etcd = Etcd::start();
    let mut w = Watchd::start(&etcd.client_url(), &["--shutdown-delay-duration=6s"]);
    let mut health = HealthClient::new(channel(&w).await);
    let mut statuses = health
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("health watch")
        .into_inner();
    // The health service follows readiness a few times a second: SERVING soon after
    // /readyz turned 200.
    loop {
        let status = tokio::time::timeout(WAIT, statuses.message())
            .await
            .expect("SERVING once ready")
            .expect("a message")
            .expect("not ended");
        if status.status() == ServingStatus::Serving {
            break;
        }
    }
    let readyz = support::http::get(&format!("{}/readyz", w.base_url()), &[]).await;
    assert_eq!(readyz.status, 200, "{}", readyz.text());

    let signalled = std::time::Instant::now();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &w.pid().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
    let next = tokio::time::timeout(Duration::from_secs(2), statuses.message())
        .await
        .expect("NOT_SERVING within 2 s of SIGTERM")
        .expect("a message")
        .expect("not ended");
    assert_eq!(next.status(), ServingStatus::NotServing);
    let readyz = support::http::get(&format!("{}/readyz", w.base_url()), &[]).await;
    assert_eq!(readyz.status, 500);
    assert!(
        readyz.text().contains("[-]shutdown failed"),
        "{}",
        readyz.text()
    );
    let list = support::http::get(&format!("{}/api/v1/configmaps", w.base_url()), &[]).await;
    assert_eq!(list.status, 200, "reads are served during the delay");
    // A lower bound only: a loaded machine makes the exit later, never earlier.
    let exited = tokio::task::block_in_place(|| w.wait_exit(Duration::from_secs(30)));
    assert!(exited.is_some(), "watchd exited after the delay");
    assert!(
        signalled.elapsed() >= Duration::from_secs(6),
        "exited after {:?}, before the 6 s delay",
        signalled.elapsed()
    );
}

/// `--shutdown-watch-termination-grace-period`: after SIGTERM the open watches end one
/// after another over the period (their clients watch again elsewhere over that time),
/// not all at once when the server stops; then watchd exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_watches_end_spread_over_the_termination_grace_period() {
    const WATCHES: usize = 20;
    let etcd = Etcd::start();
    let mut w = Watchd::start(
        &etcd.client_url(),
        &["--shutdown-watch-termination-grace-period=4s"],
    );
    let mut streams = Vec::new();
    for _ in 0..WATCHES {
        let url = format!("{}/api/v1/configmaps?watch=1", w.base_url());
        streams.push(support::http::watch(&url, &[]).await);
    }
    let signalled = std::time::Instant::now();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &w.pid().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
    let readers: Vec<_> = streams
        .into_iter()
        .map(|mut s| {
            tokio::spawn(async move {
                while let Some(ev) = s.next_event(Duration::from_secs(20)).await {
                    assert_ne!(ev["type"], "ERROR", "a drained watch just ends: {ev}");
                }
                assert!(s.is_ended(), "the watch ended");
                signalled.elapsed()
            })
        })
        .collect();
    let mut ends = Vec::new();
    for r in readers {
        ends.push(r.await.expect("reader"));
    }
    let exited = tokio::task::block_in_place(|| w.wait_exit(Duration::from_secs(30)));
    assert!(exited.is_some(), "watchd exited after the grace period");
    let exit = signalled.elapsed();
    let (first, last) = (ends.iter().min().unwrap(), ends.iter().max().unwrap());
    // Spread over the period; cut by the exit they would all end within moments.
    assert!(
        *last - *first >= Duration::from_millis(1500),
        "the watches ended between {first:?} and {last:?} after SIGTERM"
    );
    // Lower bounds only: a loaded machine makes these later, never earlier.
    assert!(exit >= Duration::from_secs(4), "exited after {exit:?}");
}
