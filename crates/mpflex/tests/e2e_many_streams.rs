//! A thousand application connections at once through one session: all complete
//! byte-exact, and neither process's memory grows without bound. With `MPFLEX_RECORD=1`
//! the memory it measured is appended to `lab-results/many-streams.jsonl`.

mod support;
use std::io::{Read, Write};
use std::time::Duration;

use sha2::Digest;
use support::*;

const STREAMS: usize = 1000;
const SIZE: usize = 200_000;

#[test]
fn thousand_concurrent_streams() {
    if !ready("thousand_concurrent_streams") {
        return;
    }
    let lab = Lab::new(Options::default());
    let want = lab_sha(&lab, SIZE);
    let rss_before = (
        Lab::rss_kib(lab.client.as_ref().unwrap()),
        Lab::rss_kib(lab.server.as_ref().unwrap()),
    );
    let peak = RssPeak::start(vec![
        lab.client.as_ref().unwrap().id(),
        lab.server.as_ref().unwrap().id(),
    ]);
    let proxy = lab.socks();
    let t0 = std::time::Instant::now();
    // All connections are opened and their requests sent before any is read, so they are
    // really concurrent.
    let conns = in_ns(&lab.topo.client_ns, move || {
        let mut conns = Vec::new();
        for i in 0..STREAMS {
            let mut s = socks_connect(proxy, "127.0.0.1", ORIGIN_PORT).unwrap_or_else(|e| panic!("connect {i}: {e}"));
            s.write_all(format!("GET /bytes/{SIZE} HTTP/1.0\r\nHost: o\r\n\r\n").as_bytes())
                .unwrap();
            conns.push(s);
        }
        conns
    });
    let open_streams = lab.client_status()["streams"].as_u64().unwrap_or(0);
    let server = lab.server_status();
    let sessions = server["sessions"].as_array().map_or(0, |a| a.len());
    assert_eq!(sessions, 1, "the streams were not carried by one session: {server}");
    // The sockets already live in the client namespace; the readers need not enter it.
    let results = {
        let handles: Vec<_> = conns
            .into_iter()
            .map(|mut s| {
                std::thread::Builder::new()
                    .stack_size(64 * 1024)
                    .spawn(move || {
                        s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
                        let mut buf = Vec::new();
                        s.read_to_end(&mut buf).map(|_| buf)
                    })
                    .unwrap()
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
    };
    let took = t0.elapsed();
    let peak = peak.finish();
    let rss_after = (
        Lab::rss_kib(lab.client.as_ref().unwrap()),
        Lab::rss_kib(lab.server.as_ref().unwrap()),
    );
    let mut ok = 0;
    for (i, r) in results.into_iter().enumerate() {
        let resp = r.unwrap_or_else(|e| panic!("stream {i}: {e}"));
        let split = resp.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or_else(|| {
            panic!(
                "stream {i}: no HTTP headers in {} bytes: {:?}",
                resp.len(),
                &resp[..resp.len().min(64)]
            )
        }) + 4;
        let body = &resp[split..];
        assert_eq!(body.len(), SIZE, "stream {i}: length");
        assert_eq!(hex::encode(sha2::Sha256::digest(body)), want, "stream {i}: content");
        ok += 1;
    }
    assert_eq!(ok, STREAMS);
    eprintln!(
        "{STREAMS} streams x {SIZE} bytes in {took:?} ({open_streams} streams open in the client once all \
         were requested); RSS KiB (client, server): before {rss_before:?}, \
         peak {peak:?}, after {rss_after:?}"
    );
    support::record(
        "many-streams.jsonl",
        "thousand_concurrent_streams",
        serde_json::json!({
            "streams": STREAMS,
            "bytes_each": SIZE,
            "took_s": took.as_secs_f64(),
            "open_streams": open_streams,
            "rss_kib_before": [rss_before.0, rss_before.1],
            "rss_kib_peak": [peak[0], peak[1]],
            "rss_kib_after": [rss_after.0, rss_after.1],
        }),
    );
    assert!(rss_before.0 > 0 && peak[0] > 0, "could not read the client's RSS");
    for (who, before, peak, after) in [
        ("client", rss_before.0, peak[0], rss_after.0),
        ("server", rss_before.1, peak[1], rss_after.1),
    ] {
        assert!(peak < 300 * 1024, "{who} RSS peaked at {peak} KiB");
        assert!(after < 300 * 1024, "{who} RSS {after} KiB after the streams");
        // Bounded growth: the streams' data (200 MB in all) must not have been kept.
        assert!(
            after.saturating_sub(before) < 150 * 1024,
            "{who} RSS grew from {before} to {after} KiB"
        );
    }
    // Every stream is gone once its connection closed.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(lab.client_status()["streams"], 0);
}

fn lab_sha(lab: &Lab, n: usize) -> String {
    let proxy = lab.socks();
    in_ns(&lab.topo.client_ns, move || {
        let mut s = socks_connect(proxy, "127.0.0.1", ORIGIN_PORT).unwrap();
        s.write_all(format!("GET /sha256/{n} HTTP/1.0\r\nHost: o\r\n\r\n").as_bytes())
            .unwrap();
        let mut resp = String::new();
        s.read_to_string(&mut resp).unwrap();
        resp.rsplit("\r\n\r\n").next().unwrap().trim().to_string()
    })
}
