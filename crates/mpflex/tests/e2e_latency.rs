//! Latency under load: a request/response connection next to a bulk upload, through a
//! real client and server over two paths whose uplinks are slow links with deep FIFOs
//! (4 Mbit/s with 500 ms of queue, 6 Mbit/s with 250 ms). With queue control on
//! (`tuning.queue_target_ms = 20`) the requests take about as long as on idle links; with
//! it off they wait behind the upload's queue. The status shows each stream's class.
//! Also: a malformed class override is a configuration error naming the key.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use support::*;

/// Requests on idle paths before the upload starts.
const IDLE_PINGS: usize = 20;
/// How long the upload runs; requests in its first second (the queue filling) are not
/// counted.
const LOAD: Duration = Duration::from_secs(8);
const WARMUP: Duration = Duration::from_secs(1);
const PING_EVERY: Duration = Duration::from_millis(100);
/// Response body of a request.
const PING_BYTES: usize = 1024;

/// Pins streams to `localhost` as bulk on both sides: the status must show the pin.
const CLASSES: &str = "[[classes]]\nclass = \"bulk\"\nhosts = [\"localhost\"]\n";

fn bottlenecks() -> Vec<Bottleneck> {
    vec![
        Bottleneck {
            kbit: 4000,
            queue_ms: 500,
        },
        Bottleneck {
            kbit: 6000,
            queue_ms: 250,
        },
    ]
}

struct Measured {
    idle_ms: Vec<f64>,
    loaded_ms: Vec<f64>,
    /// Bytes the server received during `LOAD` (all paths, framing included).
    uploaded: u64,
}

fn quantile(v: &[f64], q: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// One HTTP/1.1 request on a kept-alive connection; returns its time to the response's
/// last byte, ms.
fn ping(s: &mut TcpStream) -> f64 {
    let t = Instant::now();
    s.write_all(format!("GET /bytes/{PING_BYTES} HTTP/1.1\r\nHost: o\r\n\r\n").as_bytes())
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = s.read(&mut buf).expect("response");
        assert!(n > 0, "the origin closed the request connection");
        got.extend_from_slice(&buf[..n]);
        if let Some(h) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            if got.len() >= h + 4 + PING_BYTES {
                assert_eq!(got.len(), h + 4 + PING_BYTES, "one response at a time");
                return t.elapsed().as_secs_f64() * 1000.0;
            }
        }
    }
}

/// The stream of the client's status whose target is `target`.
fn stream_class(status: &serde_json::Value, target: &str) -> Option<(String, bool)> {
    let list = status["stream_list"].as_array()?;
    let s = list.iter().find(|s| s["target"] == target)?;
    Some((s["class"].as_str()?.to_string(), s["pinned"].as_bool()?))
}

fn server_stream_class(status: &serde_json::Value, target: &str) -> Option<(String, bool)> {
    stream_class(&status["sessions"][0], target)
}

fn measure(queue_target_ms: u64) -> Measured {
    let lab = Lab::new(Options {
        uplink: bottlenecks(),
        queue_target_ms,
        // Loss-based, without CUBIC's HyStart: slow start runs until the FIFO overflows, so
        // the queue is deep within the test's seconds (CUBIC leaves slow start at a few ms of
        // queue on these sub-millisecond paths and takes tens of seconds to fill it).
        congestion: Some("reno"),
        client_toml: CLASSES.into(),
        server_toml: CLASSES.into(),
        ..Default::default()
    });
    let proxy = lab.socks();
    let bulk_host = lab.server_addr(1);
    let (mut pinger, mut pinned, bulk) = in_ns(&lab.topo.client_ns, {
        let bulk_host = bulk_host.clone();
        move || {
            (
                socks_connect(proxy, "127.0.0.1", ORIGIN_PORT).unwrap(),
                socks_connect(proxy, "localhost", ORIGIN_PORT).unwrap(),
                socks_connect(proxy, &bulk_host, ORIGIN_PORT).unwrap(),
            )
        }
    });
    pinger.set_nodelay(true).unwrap();

    // Idle: the requests' own time, and the pinned stream's class on both sides.
    ping(&mut pinned);
    let idle_ms: Vec<f64> = (0..IDLE_PINGS)
        .map(|_| {
            let ms = ping(&mut pinger);
            thread::sleep(PING_EVERY);
            ms
        })
        .collect();
    let target = format!("localhost:{ORIGIN_PORT}");
    let want = Some(("bulk".to_string(), true));
    assert_eq!(
        stream_class(&lab.client_status(), &target),
        want,
        "client, pinned stream"
    );
    assert_eq!(
        server_stream_class(&lab.server_status(), &target),
        want,
        "server, pinned stream"
    );
    drop(pinned);

    // Load: an upload that runs for LOAD, requests every PING_EVERY beside it.
    let received = |lab: &Lab| -> u64 {
        let s = lab.server_status();
        let paths = s["sessions"][0]["paths"].as_array().cloned().unwrap_or_default();
        paths.iter().map(|p| p["bytes_received"].as_u64().unwrap_or(0)).sum()
    };
    let received_before = received(&lab);
    let stop = Arc::new(AtomicBool::new(false));
    let upload = {
        let stop = stop.clone();
        let mut bulk = bulk;
        thread::spawn(move || {
            bulk.write_all(
                b"POST /upload HTTP/1.1\r\nHost: o\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000000000\r\n\r\n",
            )
            .unwrap();
            let chunk = vec![0x5au8; 64 * 1024];
            while !stop.load(Ordering::Relaxed) {
                if let Err(e) = bulk.write_all(&chunk) {
                    // After the stop the lab goes away under a blocked write.
                    assert!(stop.load(Ordering::Relaxed), "upload: {e}");
                    return;
                }
            }
        })
    };
    let started = Instant::now();
    let pings = thread::spawn(move || {
        let mut loaded = Vec::new();
        while started.elapsed() < LOAD {
            let t = Instant::now();
            let ms = ping(&mut pinger);
            if t.duration_since(started) >= WARMUP {
                loaded.push(ms);
            }
            thread::sleep(PING_EVERY.saturating_sub(t.elapsed()));
        }
        loaded
    });
    thread::sleep(LOAD / 2);
    let status = lab.client_status();
    let loaded_ms = pings.join().unwrap();
    let uploaded = received(&lab) - received_before;
    stop.store(true, Ordering::Relaxed);
    // The upload's writer may sit in a full socket: it ends when the lab goes.
    drop(lab);
    upload.join().unwrap();

    let ping_target = format!("127.0.0.1:{ORIGIN_PORT}");
    let bulk_target = format!("{bulk_host}:{ORIGIN_PORT}");
    assert_eq!(
        stream_class(&status, &bulk_target),
        Some(("bulk".into(), false)),
        "the upload's class (queue target {queue_target_ms} ms): {status:#}"
    );
    assert_eq!(
        stream_class(&status, &ping_target),
        Some(("interactive".into(), false)),
        "the requests' class (queue target {queue_target_ms} ms): {status:#}"
    );
    let latency = status["class_latency"].as_array().cloned().unwrap_or_default();
    for class in ["interactive", "bulk"] {
        assert!(
            latency
                .iter()
                .any(|c| c["class"] == class && c["count"].as_u64() > Some(0)),
            "no {class} latency in the status: {latency:?}"
        );
    }
    Measured {
        idle_ms,
        loaded_ms,
        uploaded,
    }
}

#[test]
fn requests_beside_an_upload_stay_fast_with_queue_control_and_not_without() {
    let name = "requests_beside_an_upload_stay_fast_with_queue_control_and_not_without";
    if !ready(name) || !mpflex_netns::require_tools(name, &["tc", "ethtool"]) {
        return;
    }
    let on = measure(20);
    let off = measure(0);
    let summary = |m: &Measured| {
        format!(
            "idle p50 {:.1} ms; loaded p50 {:.1}, p90 {:.1}, max {:.1} ms ({} requests); upload {:.2} Mbit/s",
            quantile(&m.idle_ms, 0.5),
            quantile(&m.loaded_ms, 0.5),
            quantile(&m.loaded_ms, 0.9),
            quantile(&m.loaded_ms, 1.0),
            m.loaded_ms.len(),
            m.uploaded as f64 * 8.0 / LOAD.as_secs_f64() / 1e6,
        )
    };
    eprintln!("queue control on (20 ms): {}", summary(&on));
    eprintln!("queue control off:        {}", summary(&off));

    let idle = quantile(&on.idle_ms, 0.5);
    assert!(
        on.loaded_ms.len() >= 30,
        "too few requests under load: {}",
        summary(&on)
    );
    assert!(
        quantile(&on.loaded_ms, 0.5) <= idle + 50.0,
        "with queue control the requests' median grew too much: {}",
        summary(&on)
    );
    assert!(
        quantile(&on.loaded_ms, 0.9) <= idle + 100.0,
        "with queue control the requests' p90 grew too much: {}",
        summary(&on)
    );
    let idle_off = quantile(&off.idle_ms, 0.5);
    assert!(
        quantile(&off.loaded_ms, 0.5) > idle_off + 100.0,
        "without queue control the requests should wait behind the upload's queue \
         (else this test measures nothing): {}",
        summary(&off)
    );
    // Queue control must not get its latency by starving the upload (the paths carry 10
    // Mbit/s together).
    for (what, m) in [("on", &on), ("off", &off)] {
        assert!(
            m.uploaded > 5_000_000,
            "queue control {what}: upload too slow: {}",
            summary(m)
        );
    }
}

#[test]
fn a_malformed_class_override_is_a_config_error_naming_the_key() {
    let dir = std::env::temp_dir().join(format!("mpflex-classes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    let client = format!(
        "private_key = \"{key}\"\nserver_public_key = \"{key}\"\nsocks_listen = \"127.0.0.1:1\"\n\
         [[paths]]\nname = \"a\"\nserver = \"127.0.0.1:1\"\n\
         [[classes]]\nclass = \"interactive\"\nports = [22]\n\
         [[classes]]\nclass = \"bulk\"\nports = [\"90-80\"]\n"
    );
    let server = format!(
        "listen = [\"127.0.0.1:1\"]\nprivate_key = \"{key}\"\n[[clients]]\nname = \"a\"\npublic_key = \"{key}\"\n\
         [[classes]]\nclass = \"fast\"\nhosts = [\"example.com\"]\n"
    );
    for (role, text, want) in [
        ("client", client, "classes[1].ports: bad port range \"90-80\""),
        ("server", server, "classes[0].class: unknown traffic class \"fast\""),
    ] {
        let path = dir.join(format!("{role}.toml"));
        std::fs::write(&path, text).unwrap();
        let out = Command::new(BIN)
            .args([role, "--config", path.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{role} started with a bad class override");
        assert!(err.contains(want), "{role}: {err:?} should name {want:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
