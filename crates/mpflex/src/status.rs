//! A small status endpoint: `GET /status` on a local address returns JSON with per-path
//! counters, each stream's target and traffic class, and each class's latency; `mpflex
//! status` prints it as tables.

use std::net::SocketAddr;

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tracing::info;

/// Serves `render()` as JSON until the process ends.
pub async fn serve<F>(addr: SocketAddr, render: F) -> Result<()>
where
    F: Fn() -> serde_json::Value + Send + Sync + 'static,
{
    let l = crate::listen::bind(addr, "status_listen").await?;
    info!("status on http://{addr}/status");
    let render = std::sync::Arc::new(render);
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else { continue };
            let render = render.clone();
            tokio::spawn(async move {
                let mut req = [0u8; 1024];
                // One read is enough for a GET; anything else gets the same answer.
                let _ = tokio::time::timeout(std::time::Duration::from_secs(2), s.read(&mut req)).await;
                let body = serde_json::to_string_pretty(&render()).unwrap_or_default();
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(resp.as_bytes()).await;
            });
        }
    });
    Ok(())
}

/// Fetches the JSON from a running client or server.
pub async fn fetch(addr: SocketAddr) -> Result<serde_json::Value> {
    let mut s = TcpStream::connect(addr)
        .await
        .with_context(|| format!("no status endpoint at {addr} (is status_listen set?)"))?;
    s.write_all(b"GET /status HTTP/1.1\r\nhost: mpflex\r\nconnection: close\r\n\r\n")
        .await?;
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).await?;
    let text = String::from_utf8_lossy(&resp);
    let body = text
        .split_once("\r\n\r\n")
        .map(|x| x.1)
        .context("malformed status response")?;
    Ok(serde_json::from_str(body)?)
}

/// Renders status JSON as a table.
pub fn render_table(v: &serde_json::Value) -> String {
    let mut out = String::new();
    let sessions: Vec<&serde_json::Value> = match v.get("sessions").and_then(|s| s.as_array()) {
        Some(list) => list.iter().collect(),
        None => vec![v],
    };
    for s in sessions {
        let held = match (s["held_bytes"]["send"].as_u64(), s["held_bytes"]["receive"].as_u64()) {
            (Some(tx), Some(rx)) => format!(", holding {} to send, {} unread", kib(tx), kib(rx)),
            _ => String::new(),
        };
        out += &format!(
            "{} session{}: scheduler {}, {} streams{held}\n",
            v["role"].as_str().unwrap_or("?"),
            s.get("client")
                .and_then(|c| c.as_str())
                .map(|c| format!(" of {c}"))
                .unwrap_or_default(),
            s["scheduler"].as_str().unwrap_or("?"),
            s["streams"]
        );
        out += &format!(
            "  {:<24} {:>4} {:>14} {:>14} {:>12} {:>9} {:>6} {:>8}\n",
            "path", "up", "sent", "received", "resent", "srtt_ms", "cwnd", "failures"
        );
        for p in s["paths"].as_array().into_iter().flatten() {
            out += &format!(
                "  {:<24} {:>4} {:>14} {:>14} {:>12} {:>9.1} {:>6} {:>8}\n",
                p["name"].as_str().unwrap_or("?"),
                if p["up"].as_bool() == Some(true) { "yes" } else { "no" },
                p["bytes_sent"].as_u64().unwrap_or(0),
                p["bytes_received"].as_u64().unwrap_or(0),
                p["payload_resent"].as_u64().unwrap_or(0),
                p["srtt_us"].as_u64().unwrap_or(0) as f64 / 1000.0,
                p["cwnd"].as_u64().unwrap_or(0),
                p["failures"].as_u64().unwrap_or(0),
            );
        }
        out += &streams_table(s);
        out += &latency_table(s);
    }
    out
}

/// Most streams the table lists (the JSON lists all).
const TABLE_STREAMS: usize = 20;
/// Widest target shown; longer names keep their end (the port and the domain).
const TARGET_WIDTH: usize = 60;

/// Per stream: id, target, class (`*`: pinned by `[[classes]]`).
fn streams_table(s: &serde_json::Value) -> String {
    let Some(list) = s["stream_list"].as_array().filter(|l| !l.is_empty()) else {
        return String::new();
    };
    let mut out = format!("  {:>8} {:<TARGET_WIDTH$} {}\n", "stream", "target", "class");
    for st in list.iter().take(TABLE_STREAMS) {
        let pinned = if st["pinned"].as_bool() == Some(true) { "*" } else { "" };
        out += &format!(
            "  {:>8} {:<TARGET_WIDTH$} {}{pinned}\n",
            st["id"].as_u64().map_or("?".to_string(), |i| i.to_string()),
            clip(st["target"].as_str().unwrap_or("-"), TARGET_WIDTH),
            st["class"].as_str().unwrap_or("?"),
        );
    }
    if list.len() > TABLE_STREAMS {
        out += &format!("  … {} more (--json lists all)\n", list.len() - TABLE_STREAMS);
    }
    if list.iter().any(|st| st["pinned"].as_bool() == Some(true)) {
        out += "  * pinned by [[classes]]\n";
    }
    out
}

/// Per class: how long its bytes took from the application to the peer.
fn latency_table(s: &serde_json::Value) -> String {
    let Some(list) = s["class_latency"].as_array().filter(|l| !l.is_empty()) else {
        return String::new();
    };
    let mut out = format!(
        "  {:<12} {:>10} {:>9} {:>9} {:>9}   (latency to the peer, ms)\n",
        "class", "count", "p50", "p99", "mean"
    );
    let ms = |v: &serde_json::Value| match v.as_f64() {
        Some(x) => format!("≤{x}"),
        None => ">16384".to_string(),
    };
    for c in list {
        out += &format!(
            "  {:<12} {:>10} {:>9} {:>9} {:>9.1}\n",
            c["class"].as_str().unwrap_or("?"),
            c["count"].as_u64().unwrap_or(0),
            ms(&c["p50_ms"]),
            ms(&c["p99_ms"]),
            c["mean_ms"].as_f64().unwrap_or(0.0),
        );
    }
    out
}

/// `s` in at most `width` characters, keeping its end.
fn clip(s: &str, width: usize) -> String {
    let n = s.chars().count();
    if n <= width {
        s.to_string()
    } else {
        let tail: String = s.chars().skip(n - width + 1).collect();
        format!("…{tail}")
    }
}

/// A byte count for people: whole KiB from 1 KiB on, MiB with one decimal from 10 MiB on.
fn kib(n: u64) -> String {
    if n >= 10 << 20 {
        format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
    } else if n >= 1024 {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_shows_sessions_paths_and_held_bytes() {
        let v = serde_json::json!({
            "role": "server",
            "sessions": [{
                "client": "laptop",
                "scheduler": "dems-f",
                "streams": 3,
                "held_bytes": {"send": 5 * 1024 * 1024, "receive": 300},
                "paths": [{"name": "wifi", "up": true, "bytes_sent": 1234, "bytes_received": 99,
                           "payload_resent": 0, "srtt_us": 51_500, "cwnd": 40, "failures": 1}],
            }],
        });
        let t = render_table(&v);
        assert!(
            t.starts_with(
                "server session of laptop: scheduler dems-f, 3 streams, holding 5120 KiB to send, 300 B unread\n"
            ),
            "{t}"
        );
        let row = t.lines().nth(2).unwrap();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols, ["wifi", "yes", "1234", "99", "0", "51.5", "40", "1"]);
        // An older peer's JSON without held_bytes still renders.
        let old = serde_json::json!({"role": "client", "scheduler": "minrtt", "streams": 0, "paths": []});
        assert_eq!(
            render_table(&old).lines().next(),
            Some("client session: scheduler minrtt, 0 streams")
        );
        assert_eq!(kib(20 << 20), "20.0 MiB");
        assert!(!t.contains("stream "), "no stream table without stream_list: {t}");
    }

    #[test]
    fn table_shows_streams_classes_and_class_latency() {
        let long = format!("{}.example.com:443", "a".repeat(80));
        let mut list: Vec<serde_json::Value> = vec![
            serde_json::json!({"id": 1, "target": "example.com:443", "class": "interactive", "pinned": true}),
            serde_json::json!({"id": 3, "target": "10.0.0.2:8080", "class": "bulk", "pinned": false}),
            serde_json::json!({"id": 5, "target": long, "class": "realtime", "pinned": false}),
            serde_json::json!({"id": 7, "target": null, "class": "bulk", "pinned": false}),
        ];
        let v = serde_json::json!({
            "role": "client", "scheduler": "minrtt", "streams": 4, "paths": [],
            "stream_list": list.clone(),
            "class_latency": [
                {"class": "interactive", "count": 120, "mean_ms": 5.24, "p50_ms": 4.0, "p99_ms": 64.0},
                {"class": "bulk", "count": 9000, "mean_ms": 210.0, "p50_ms": 256.0, "p99_ms": null},
            ],
        });
        let t = render_table(&v);
        let rows: Vec<Vec<&str>> = t.lines().map(|l| l.split_whitespace().collect()).collect();
        assert!(t.lines().all(|l| l.chars().count() <= 100), "too wide:\n{t}");
        assert_eq!(rows[2], ["stream", "target", "class"], "{t}");
        assert_eq!(rows[3], ["1", "example.com:443", "interactive*"]);
        assert_eq!(rows[4], ["3", "10.0.0.2:8080", "bulk"]);
        assert_eq!(rows[5][2], "realtime");
        assert!(
            rows[5][1].starts_with('…') && rows[5][1].ends_with("a.example.com:443"),
            "{t}"
        );
        assert_eq!(rows[6], ["7", "-", "bulk"], "target unknown");
        assert_eq!(t.lines().nth(7), Some("  * pinned by [[classes]]"));
        assert_eq!(rows[8][..5], ["class", "count", "p50", "p99", "mean"]);
        assert_eq!(rows[9], ["interactive", "120", "≤4", "≤64", "5.2"]);
        assert_eq!(rows[10], ["bulk", "9000", "≤256", ">16384", "210.0"]);

        // Many streams: the table lists the first ones and says how many it left out.
        for id in 8..40 {
            list.push(serde_json::json!({"id": id, "target": "h:1", "class": "bulk", "pinned": false}));
        }
        let v = serde_json::json!({"role": "server", "sessions": [{"scheduler": "minrtt", "streams": 36,
            "paths": [], "stream_list": list}]});
        let t = render_table(&v);
        assert_eq!(
            t.lines().filter(|l| l.ends_with(" bulk")).count(),
            TABLE_STREAMS - 2,
            "{t}"
        );
        assert!(t.contains("  … 16 more (--json lists all)\n"), "{t}");
        assert!(!t.contains("latency"), "no latency table without samples: {t}");
    }
}
