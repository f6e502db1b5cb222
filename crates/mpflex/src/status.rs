//! A small status endpoint: `GET /status` on a local address returns JSON with per-path
//! counters; `mpflex status` prints it as a table.

use std::net::SocketAddr;

use anyhow::{Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::info;

/// Serves `render()` as JSON until the process ends.
pub async fn serve<F>(addr: SocketAddr, render: F) -> Result<()>
where
    F: Fn() -> serde_json::Value + Send + Sync + 'static,
{
    let l = TcpListener::bind(addr)
        .await
        .with_context(|| format!("status_listen: cannot listen on {addr}"))?;
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
    }
    out
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
    }
}
