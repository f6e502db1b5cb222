//! The status listener (`status_listen`), a small HTTP endpoint on a local address:
//!
//! - `GET /status`: JSON with per-path counters, each stream's target, traffic class and
//!   path split, and each class's latency (`mpflex status` prints it as tables);
//! - `GET /metrics`: the same in the Prometheus text format ([`metrics`]);
//! - `GET /` (or `/live`): the live view, a page polling `GET /live.json` every second
//!   ([`live`]); `mpflex status --watch` shows the same data in a terminal.
//!
//! It is meant for the local host or a management network: it has no authentication,
//! and shows stream destinations.

pub mod live;
pub mod metrics;
pub mod snapshot;
mod table;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tracing::info;

pub use snapshot::SessionView;
pub use table::{render_live, render_table};

/// The most of a request read; the request line and the `Accept` header are all that is
/// used.
const MAX_REQUEST: usize = 8 * 1024;

/// A request that has not arrived whole in this time is answered with what came.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// Serves the sessions `sessions` lists (the process's `role`: "client" or "server") until
/// the process ends, and samples them every second for the live view.
pub async fn serve<F>(addr: SocketAddr, role: &'static str, sessions: F) -> Result<()>
where
    F: Fn() -> Vec<SessionView> + Send + Sync + 'static,
{
    serve_with(addr, role, sessions, Vec::new).await
}

/// A process-wide counter beside the sessions: (name, help, value). JSON shows it under
/// `counters.<name>`, Prometheus as `mpflex_<name>_total`.
pub type Counter = (&'static str, &'static str, u64);

/// [`serve`], with the process-wide counters `counters` lists.
pub async fn serve_with<F, C>(addr: SocketAddr, role: &'static str, sessions: F, counters: C) -> Result<()>
where
    F: Fn() -> Vec<SessionView> + Send + Sync + 'static,
    C: Fn() -> Vec<Counter> + Send + Sync + 'static,
{
    let l = crate::listen::bind(addr, "status_listen").await?;
    info!("status on http://{addr}/ (live view), /status (JSON), /metrics (Prometheus)");
    let ctx = Arc::new(Ctx {
        role,
        sessions: Box::new(sessions),
        counters: Box::new(counters),
        history: Mutex::new(live::History::default()),
    });
    let sampler = ctx.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(live::SAMPLE_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let views = (sampler.sessions)();
            sampler.history.lock().unwrap().record(Instant::now(), &views);
        }
    });
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = l.accept().await else { continue };
            let ctx = ctx.clone();
            tokio::spawn(async move { answer(s, &ctx).await });
        }
    });
    Ok(())
}

struct Ctx {
    role: &'static str,
    sessions: Box<dyn Fn() -> Vec<SessionView> + Send + Sync>,
    counters: Box<dyn Fn() -> Vec<Counter> + Send + Sync>,
    history: Mutex<live::History>,
}

impl Ctx {
    /// The status JSON: a client's one session at the top level, a server's in a list.
    fn status_json(&self) -> serde_json::Value {
        let views = (self.sessions)();
        let json_of = |s: &SessionView| {
            let mut v = s.snap.to_json();
            v["session"] = s.session.clone().into();
            if let Some(c) = &s.client {
                v["client"] = c.clone().into();
            }
            v
        };
        if self.role == "client" {
            let mut v = views.first().map(json_of).unwrap_or_else(|| serde_json::json!({}));
            v["role"] = "client".into();
            v
        } else {
            let list: Vec<serde_json::Value> = views.iter().map(json_of).collect();
            let counters: serde_json::Map<String, serde_json::Value> = (self.counters)()
                .into_iter()
                .map(|(name, _, v)| (name.to_string(), v.into()))
                .collect();
            serde_json::json!({"role": self.role, "sessions": list, "counters": counters})
        }
    }
}

/// A parsed request: its path (query string dropped) and whether it accepts OpenMetrics.
#[derive(Debug, PartialEq, Eq)]
struct Request {
    method: String,
    path: String,
    openmetrics: bool,
}

fn parse_request(head: &str) -> Option<Request> {
    let mut lines = head.lines();
    let mut first = lines.next()?.split_whitespace();
    let method = first.next()?.to_string();
    let target = first.next()?;
    let path = target.split(['?', '#']).next().unwrap_or("/").to_string();
    let openmetrics = lines.any(|l| {
        l.split_once(':')
            .is_some_and(|(k, v)| k.trim().eq_ignore_ascii_case("accept") && v.contains("application/openmetrics-text"))
    });
    Some(Request {
        method,
        path,
        openmetrics,
    })
}

async fn read_head(s: &mut TcpStream) -> String {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + REQUEST_TIMEOUT;
    while buf.len() < MAX_REQUEST && !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match tokio::time::timeout_at(deadline, s.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

async fn answer(mut s: TcpStream, ctx: &Ctx) {
    let head = read_head(&mut s).await;
    let (status, ctype, body) = match parse_request(&head) {
        Some(r) if r.method != "GET" => ("405 Method Not Allowed", "text/plain", "GET only\n".to_string()),
        Some(r) => route(&r, ctx),
        None => ("400 Bad Request", "text/plain", "bad request\n".to_string()),
    };
    let resp = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = s.write_all(resp.as_bytes()).await;
}

fn route(r: &Request, ctx: &Ctx) -> (&'static str, &'static str, String) {
    const JSON: &str = "application/json";
    match r.path.as_str() {
        "/status" => (
            "200 OK",
            JSON,
            serde_json::to_string_pretty(&ctx.status_json()).unwrap_or_default(),
        ),
        "/metrics" => {
            let (ctype, body) = metrics::render(ctx.role, (ctx.sessions)(), (ctx.counters)(), r.openmetrics);
            ("200 OK", ctype, body)
        }
        "/" | "/live" => ("200 OK", "text/html; charset=utf-8", live::PAGE.to_string()),
        "/live.json" => {
            let views = (ctx.sessions)();
            let v = live::live_json(ctx.role, &views, &ctx.history.lock().unwrap(), Instant::now());
            ("200 OK", JSON, v.to_string())
        }
        _ => (
            "404 Not Found",
            "text/plain",
            "not found: try /, /status, /metrics or /live.json\n".to_string(),
        ),
    }
}

/// `GET path` from a running client or server; the body.
pub async fn get(addr: SocketAddr, path: &str) -> Result<String> {
    let mut s = TcpStream::connect(addr)
        .await
        .with_context(|| format!("no status endpoint at {addr} (is status_listen set?)"))?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nhost: mpflex\r\nconnection: close\r\n\r\n").as_bytes())
        .await?;
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).await?;
    let text = String::from_utf8_lossy(&resp);
    let (head, body) = text.split_once("\r\n\r\n").context("malformed status response")?;
    if !head.starts_with("HTTP/1.1 200") {
        bail!("{addr}{path}: {}", head.lines().next().unwrap_or("no status line"));
    }
    Ok(body.to_string())
}

/// Fetches the status JSON from a running client or server.
pub async fn fetch(addr: SocketAddr) -> Result<serde_json::Value> {
    Ok(serde_json::from_str(&get(addr, "/status").await?)?)
}

/// `mpflex status --watch`: the live view in the terminal, redrawn every second until
/// interrupted. On a terminal each frame replaces the last; otherwise frames follow one
/// another, separated by a blank line.
pub async fn watch(addr: SocketAddr) -> Result<()> {
    use std::io::{IsTerminal, Write};
    let tty = std::io::stdout().is_terminal();
    let mut tick = tokio::time::interval(live::SAMPLE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut ok_once = false;
    loop {
        tick.tick().await;
        let frame = match get(addr, "/live.json").await {
            Ok(body) => {
                ok_once = true;
                render_live(&serde_json::from_str(&body)?)
            }
            // The first failure is an error (wrong address); later ones, a restart, are
            // shown and waited out.
            Err(e) if !ok_once => return Err(e),
            Err(e) => format!("{e:#}; retrying\n"),
        };
        let mut out = std::io::stdout().lock();
        let written = if tty {
            // Home, clear the screen, then the frame.
            write!(out, "\x1b[H\x1b[2J{frame}")
        } else {
            writeln!(out, "{frame}")
        }
        .and_then(|_| out.flush());
        match written {
            // The reader went away (`| head`): done, not an error.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            r => r?,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_name_their_path_and_whether_they_take_openmetrics() {
        let r = parse_request("GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5\r\n\r\n").unwrap();
        assert_eq!(
            r,
            Request {
                method: "GET".into(),
                path: "/metrics".into(),
                openmetrics: true
            }
        );
        let r = parse_request("GET / HTTP/1.1\r\naccept: text/html\r\n\r\n").unwrap();
        assert_eq!((r.path.as_str(), r.openmetrics), ("/", false));
        assert_eq!(parse_request(""), None);
    }

    /// The endpoint over a real socket: each route answers with its content type, unknown
    /// paths get a 404, the sampler fills the history.
    #[tokio::test]
    async fn routes_answer_over_http() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let s = crate::status::metrics::tests::sample_session();
        serve(addr, "server", move || vec![s.clone()]).await.unwrap();
        let v = fetch(addr).await.unwrap();
        assert_eq!(v["role"], "server");
        assert_eq!(v["sessions"][0]["client"], "lap\"top");
        assert_eq!(v["sessions"][0]["session"], "0a0b0c0d");
        assert_eq!(v["sessions"][0]["paths"][1]["state"], "suspect");
        let m = get(addr, "/metrics").await.unwrap();
        assert!(m.contains("mpflex_path_sent_bytes_total{"), "{m}");
        let page = get(addr, "/").await.unwrap();
        assert!(
            page.contains("live.json") && page.starts_with("<!doctype html>"),
            "{page}"
        );
        let live: serde_json::Value = serde_json::from_str(&get(addr, "/live.json").await.unwrap()).unwrap();
        assert_eq!(live["sessions"][0]["paths"].as_array().unwrap().len(), 2);
        let e = get(addr, "/nothing").await.unwrap_err().to_string();
        assert!(e.contains("404"), "{e}");
    }
}
