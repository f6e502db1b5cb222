//! Backpressure as an application sees it: `iperf3` uploads through the transparent
//! ingress (iptables REDIRECT) over two slow uplinks with deep FIFOs. Bytes mpflex accepts
//! ahead of what its paths carry are bytes the application counts as sent: measured
//! before the bound, an `iperf3` sender reported 8.4 Mbit/s while 4.05 arrived (about
//! 10 MB waiting in mpflex and the local sockets). With queue control mpflex holds only a
//! bounded amount in the session and in its end of the application's connection; what
//! remains is the application's own socket send buffer, its kernel's to size.

mod support;
use std::process::Command;
use std::time::Duration;

use support::*;

/// iperf3's port on the "remote" address.
const IPERF_PORT: u16 = 5201;
/// Seconds of the upload.
const SECS: u32 = 8;

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

struct Upload {
    /// iperf3's sender and receiver rates, Mbit/s.
    sent: f64,
    received: f64,
    /// Mid-upload: bytes the session held ahead of its paths, and bytes waiting unread in
    /// mpflex's end of the application's connection.
    ahead: u64,
    unread: u64,
}

/// Bytes queued unread in the receive buffers of the client's accepted transparent
/// connections (`ss`'s `skmem r`).
fn unread_at_proxy(ns: &str) -> u64 {
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "ss",
            "-tmn",
            "state",
            "established",
            "( sport = :1081 )",
        ])
        .output()
        .expect("ss");
    String::from_utf8_lossy(&out.stdout)
        .split("skmem:(r")
        .skip(1)
        .filter_map(|s| s.split(',').next()?.parse::<u64>().ok())
        .sum()
}

/// `sustained`: queue control also engages for the upload alone
/// (`tuning.queue_control_sustained`), not only while an interactive stream is active.
fn upload(queue_target_ms: u64, sustained: bool) -> Upload {
    let lab = Lab::new(Options {
        uplink: bottlenecks(),
        queue_target_ms,
        client_toml: format!("queue_control_sustained = {sustained}\n"),
        ..Default::default()
    });
    let remote = format!("10.{}.9.9", lab.topo.net);
    lab.add_remote(&remote);
    let port = IPERF_PORT.to_string();
    lab.redirect_to_client(&remote, Some(IPERF_PORT));
    let mut server = lab.spawn_in(
        &lab.topo.server_ns,
        &["iperf3", "-s", "-1", "-B", &remote, "-p", &port],
        "iperf3-server.log",
    );
    std::thread::sleep(Duration::from_millis(500));
    let (out, (ahead, unread)) = std::thread::scope(|sc| {
        let probe = sc.spawn(|| {
            std::thread::sleep(Duration::from_secs(SECS as u64 / 2));
            let unread = unread_at_proxy(&lab.topo.client_ns);
            (lab.client_status()["ahead_bytes"].as_u64().unwrap_or(0), unread)
        });
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &lab.topo.client_ns,
                "iperf3",
                "-c",
                &remote,
                "-p",
                &port,
            ])
            .args(["-t", &SECS.to_string(), "-J"])
            .output()
            .expect("iperf3");
        (out, probe.join().unwrap())
    });
    let _ = server.kill();
    let _ = server.wait();
    if std::env::var_os("MPFLEX_TEST_SHOW_LOGS").is_some() {
        eprintln!("client log:\n{}\nserver log:\n{}", lab.log("client"), lab.log("server"));
    }
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("iperf3 printed no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    let rate = |k: &str| report["end"][k]["bits_per_second"].as_f64().unwrap_or(0.0) / 1e6;
    Upload {
        sent: rate("sum_sent"),
        received: rate("sum_received"),
        ahead,
        unread,
    }
}

#[test]
fn an_uploading_application_is_held_to_the_rate_its_paths_carry() {
    let test = "an_uploading_application_is_held_to_the_rate_its_paths_carry";
    if !ready(test) || !mpflex_netns::require_tools(test, &["iptables", "iperf3", "ss", "tc", "ethtool"]) {
        return;
    }
    let on = upload(20, false);
    let sustained = upload(20, true);
    let off = upload(0, false);
    let show = |u: &Upload| {
        format!(
            "sent {:.2}, received {:.2} Mbit/s; mid-upload {} KB ahead in the session, {} KB unread at the proxy",
            u.sent,
            u.received,
            u.ahead / 1024,
            u.unread / 1024
        )
    };
    eprintln!("iperf3 upload over 4 + 6 Mbit/s with queue control: {}", show(&on));
    eprintln!(
        "iperf3 upload over 4 + 6 Mbit/s, sustained control: {}",
        show(&sustained)
    );
    eprintln!("iperf3 upload over 4 + 6 Mbit/s without:            {}", show(&off));
    // mpflex holds about the target's worth ahead of its paths (rate × 20 ms plus a frame
    // per path: ~60 KB here), and its end of the connection no more than its fixed buffer.
    assert!(on.ahead <= 256 * 1024, "with queue control: {}", show(&on));
    assert!(on.unread <= 300 * 1024, "with queue control: {}", show(&on));
    // The same when queue control holds the paths for the whole upload: held so, every
    // path is application-limited, and a stale high rate sample must not widen the bound.
    assert!(sustained.ahead <= 256 * 1024, "sustained: {}", show(&sustained));
    assert!(sustained.unread <= 300 * 1024, "sustained: {}", show(&sustained));
    assert!(
        off.ahead + off.unread >= 1 << 20,
        "without queue control the bytes waiting in mpflex should be megabytes (else this test measures nothing): {}",
        show(&off)
    );
    // So the application counts fewer bytes as sent that have not arrived.
    assert!(
        on.sent - on.received < off.sent - off.received,
        "with: {}; without: {}",
        show(&on),
        show(&off)
    );
    // Not by starving the upload: the paths carry 10 Mbit/s together.
    assert!(on.received >= 7.0, "with queue control: {}", show(&on));
    assert!(sustained.received >= 7.0, "sustained: {}", show(&sustained));
}
