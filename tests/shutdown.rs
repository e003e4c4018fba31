//! The stop after SIGTERM (issue #24, item 2): what is in flight is finished, not cut.
//! A list being read when the stop comes is served whole (on watchd's own HTTP/1.1
//! path and on hyper's, which serves HTTP/1.0), an idle keep-alive connection does not
//! hold the stop, and the process exits 0.

mod support;

use std::time::{Duration, Instant};

use etcd_client::{Client, Txn, TxnOp};
use serde_json::Value;
use support::kube::configmap;
use support::{Etcd, Watchd};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// ConfigMaps of about 1 KiB each, written 100 to a transaction.
async fn fill(kv: &mut Client, n: usize) {
    let pad = "x".repeat(1000);
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        let ops: Vec<TxnOp> = chunk
            .iter()
            .map(|i| {
                let name = format!("cm-{i:05}");
                let value = configmap("default", &name, &pad).to_string();
                TxnOp::put(format!("/registry/configmaps/default/{name}"), value, None)
            })
            .collect();
        kv.txn(Txn::new().and_then(ops)).await.expect("etcd txn");
    }
}

/// A connection with a small receive buffer, so that a large response cannot all sit in
/// the kernel's buffers: the server is still writing it when the stop comes.
async fn small_window(addr: std::net::SocketAddr) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
    socket.connect(addr).await.expect("connect")
}

/// Sends `request`, reads a little of the answer, has `during` run (the stop), then
/// reads the rest slowly until the server closes: the whole response.
async fn read_across(
    addr: std::net::SocketAddr,
    request: &str,
    during: impl std::future::Future<Output = ()>,
) -> Vec<u8> {
    let mut conn = small_window(addr).await;
    conn.write_all(request.as_bytes()).await.expect("send");
    let mut response = vec![0u8; 16 * 1024];
    let n = conn.read(&mut response).await.expect("the first bytes");
    response.truncate(n);
    during.await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        assert!(Instant::now() < deadline, "the response ends in time");
        match tokio::time::timeout(Duration::from_secs(10), conn.read(&mut buf)).await {
            Ok(Ok(0)) => return response,
            Ok(Ok(n)) => response.extend_from_slice(&buf[..n]),
            Ok(Err(e)) => panic!("the response was cut after {} bytes: {e}", response.len()),
            Err(_) => panic!("no byte for 10 s"),
        }
        // A slow reader: the server waits on it.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn split_head(response: &[u8]) -> (String, &[u8]) {
    let at = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    (
        String::from_utf8_lossy(&response[..at]).into_owned(),
        &response[at + 4..],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_in_flight_at_the_stop_is_served_whole() {
    const OBJECTS: usize = 6000;
    let etcd = Etcd::start();
    let mut kv = etcd.client().await;
    fill(&mut kv, OBJECTS).await;
    for http10 in [false, true] {
        let mut watchd = Watchd::start(&etcd.client_url(), &[]);
        let addr = watchd.http_addr();
        // An idle keep-alive connection, which must not hold the stop.
        let mut idle = tokio::net::TcpStream::connect(addr).await.expect("connect");
        idle.write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .expect("send");
        let mut first = [0u8; 512];
        let n = idle.read(&mut first).await.expect("readyz answered");
        assert!(first[..n].starts_with(b"HTTP/1.1 200"));

        let request = if http10 {
            "GET /api/v1/namespaces/default/configmaps HTTP/1.0\r\nHost: x\r\n\r\n"
        } else {
            "GET /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        };
        let pid = watchd.pid();
        let response = read_across(addr, request, async {
            let sent = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .expect("kill");
            assert!(sent.success());
            tokio::time::sleep(Duration::from_millis(300)).await;
        })
        .await;
        let (head, body) = split_head(&response);
        assert!(head.contains(" 200 "), "{head}");
        let body = if head.to_lowercase().contains("transfer-encoding: chunked") {
            let (data, whole) = support::http::dechunk(body);
            assert!(whole, "the chunked list was cut after {} bytes", body.len());
            data
        } else {
            body.to_vec()
        };
        let list: Value = serde_json::from_slice(&body).unwrap_or_else(|e| {
            panic!(
                "a whole list (HTTP/1.0: {http10}), {} bytes: {e}",
                body.len()
            )
        });
        assert_eq!(
            list["items"].as_array().map(Vec::len),
            Some(OBJECTS),
            "HTTP/1.0: {http10}"
        );
        // The idle connection was closed, and the process ended cleanly.
        let closed = tokio::time::timeout(Duration::from_secs(5), idle.read(&mut first)).await;
        assert!(
            matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
            "the idle connection is closed at the stop"
        );
        let status = tokio::task::block_in_place(|| watchd.wait_exit(Duration::from_secs(10)))
            .expect("watchd exits after the stop");
        assert!(status.success(), "{status:?}: {}", watchd.log());
        let log = watchd.log();
        assert!(log.contains("HTTP connections drained"), "{log}");
    }
}
