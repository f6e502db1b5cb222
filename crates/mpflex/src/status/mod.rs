//! The status listener (`status_listen`), a small HTTP endpoint on a local address:
//!
//! - `GET /status`: JSON with per-path counters, each stream's target, traffic class and
//!   path split, and each class's latency (`mpflex status` prints it as tables);
//! - `GET /metrics`: the same in the Prometheus text format ([`metrics`]);
//! - `GET /` (or `/live`): the live view, a page polling `GET /live.json` every second
//!   ([`live`]); `mpflex status --watch` shows the same data in a terminal.
//!
//! It is meant for the local host or a management network, and shows stream
//! destinations. A request is answered only if its `Host` is one this listener expects
//! (its own address, a loopback address, `localhost`, or a name listed in
//! `status_hosts`), so a web page on the same host cannot read it through a name that
//! rebinds to 127.0.0.1 (DNS rebinding: it gets 421 Misdirected Request); with a
//! `status_token` set, only requests that carry it as a bearer token are.

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

/// Who may ask the status listener.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// Names accepted in `Host` besides the listener's own address, loopback addresses
    /// and `localhost` (`status_hosts`: a name a reverse proxy or monitoring uses).
    pub hosts: Vec<String>,
    /// A bearer token every request must carry (`status_token`).
    pub token: Option<String>,
}

/// The environment variable `mpflex status` takes the bearer token from.
pub const TOKEN_ENV: &str = "MPFLEX_STATUS_TOKEN";

/// Serves the sessions `sessions` lists (the process's `role`: "client" or "server") until
/// the process ends, and samples them every second for the live view.
pub async fn serve<F>(addr: SocketAddr, role: &'static str, access: Access, sessions: F) -> Result<()>
where
    F: Fn() -> Vec<SessionView> + Send + Sync + 'static,
{
    serve_with(addr, role, access, sessions, Vec::new).await
}

/// A process-wide counter beside the sessions. JSON shows it under `counters.<name>`
/// (`counters.<name>.<label value>` if labelled), Prometheus as `mpflex_<name>_total`;
/// counters of one name and different label values are one family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counter {
    pub name: &'static str,
    pub help: &'static str,
    pub value: u64,
    /// (label, value), for one series of a family.
    pub label: Option<(&'static str, &'static str)>,
}

impl Counter {
    pub fn new(name: &'static str, help: &'static str, value: u64) -> Counter {
        Counter {
            name,
            help,
            value,
            label: None,
        }
    }

    /// The same counter as the series `key="value"` of its family.
    pub fn labelled(self, key: &'static str, value: &'static str) -> Counter {
        Counter {
            label: Some((key, value)),
            ..self
        }
    }
}

/// [`serve`], with the process-wide counters `counters` lists.
pub async fn serve_with<F, C>(
    addr: SocketAddr,
    role: &'static str,
    access: Access,
    sessions: F,
    counters: C,
) -> Result<()>
where
    F: Fn() -> Vec<SessionView> + Send + Sync + 'static,
    C: Fn() -> Vec<Counter> + Send + Sync + 'static,
{
    let l = crate::listen::bind(addr, "status_listen").await?;
    info!("status on http://{addr}/ (live view), /status (JSON), /metrics (Prometheus)");
    let ctx = Arc::new(Ctx {
        role,
        addr,
        access,
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
        let mut backoff = crate::listen::Backoff::default();
        loop {
            match l.accept().await {
                Ok((s, _)) => {
                    backoff.reset();
                    let ctx = ctx.clone();
                    tokio::spawn(async move { answer(s, &ctx).await });
                }
                Err(e) => backoff.failed(&e, "status_listen").await,
            }
        }
    });
    Ok(())
}

struct Ctx {
    role: &'static str,
    addr: SocketAddr,
    access: Access,
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
            let mut counters = serde_json::Map::new();
            for c in (self.counters)() {
                match c.label {
                    None => drop(counters.insert(c.name.to_string(), c.value.into())),
                    Some((_, value)) => {
                        let family = counters.entry(c.name).or_insert_with(|| serde_json::json!({}));
                        family[value] = c.value.into();
                    }
                }
            }
            serde_json::json!({"role": self.role, "sessions": list, "counters": counters})
        }
    }
}

/// A parsed request: its path (query string dropped), whether it accepts OpenMetrics,
/// its `Host` and its bearer token.
#[derive(Debug, Default, PartialEq, Eq)]
struct Request {
    method: String,
    path: String,
    openmetrics: bool,
    host: Option<String>,
    bearer: Option<String>,
}

fn parse_request(head: &str) -> Option<Request> {
    let mut lines = head.lines();
    let mut first = lines.next()?.split_whitespace();
    let method = first.next()?.to_string();
    let target = first.next()?;
    let path = target.split(['?', '#']).next().unwrap_or("/").to_string();
    let mut r = Request {
        method,
        path,
        ..Default::default()
    };
    for (k, v) in lines.filter_map(|l| l.split_once(':')) {
        let (k, v) = (k.trim(), v.trim());
        if k.eq_ignore_ascii_case("accept") {
            r.openmetrics |= v.contains("application/openmetrics-text");
        } else if k.eq_ignore_ascii_case("host") {
            r.host = Some(v.to_string());
        } else if k.eq_ignore_ascii_case("authorization") {
            r.bearer = v
                .split_once(' ')
                .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
                .map(|(_, t)| t.trim().to_string());
        }
    }
    Some(r)
}

/// Whether `host` (a `Host` header: name or address, and maybe a port) names this
/// listener: its own address (any address if it listens on all), a loopback address or
/// `localhost`, or a name in `extra`; a port given must be the listener's.
fn host_expected(host: &str, listen: SocketAddr, extra: &[String]) -> bool {
    let (name, port) = match host.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((ip, tail)) => (ip, tail.strip_prefix(':')),
            None => return false,
        },
        None => match host.rsplit_once(':') {
            Some((n, p)) if !n.contains(':') => (n, Some(p)),
            _ => (host, None),
        },
    };
    if port.is_some_and(|p| p.parse::<u16>().ok() != Some(listen.port())) {
        return false;
    }
    let name = name.trim_end_matches('.');
    match name.parse::<std::net::IpAddr>() {
        Ok(ip) => {
            let ip = crate::acl::canonical(ip);
            ip == crate::acl::canonical(listen.ip()) || ip.is_loopback() || listen.ip().is_unspecified()
        }
        Err(_) => name.eq_ignore_ascii_case("localhost") || extra.iter().any(|h| h.eq_ignore_ascii_case(name)),
    }
}

/// Compares two tokens in time that does not depend on where they differ.
fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
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
    const TEXT: &str = "text/plain";
    let (status, ctype, body) = match parse_request(&head) {
        None => ("400 Bad Request", TEXT, "bad request\n".to_string()),
        // No Host at all (HTTP/1.0 allows it) is no rebinding: a browser always sends one.
        Some(r)
            if r.host
                .as_deref()
                .is_some_and(|h| !host_expected(h, ctx.addr, &ctx.access.hosts)) =>
        {
            (
                "421 Misdirected Request",
                TEXT,
                "this Host is not one this status listener answers to (status_hosts)\n".to_string(),
            )
        }
        Some(r)
            if ctx
                .access
                .token
                .as_deref()
                .is_some_and(|t| !r.bearer.as_deref().is_some_and(|b| same_token(b, t))) =>
        {
            (
                "401 Unauthorized\r\nwww-authenticate: Bearer",
                TEXT,
                "a bearer token is needed (status_token)\n".to_string(),
            )
        }
        Some(r) if r.method != "GET" => ("405 Method Not Allowed", TEXT, "GET only\n".to_string()),
        Some(r) => route(&r, ctx),
    };
    let resp = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\ncache-control: no-store\r\n\
         x-content-type-options: nosniff\r\nconnection: close\r\n\r\n{body}",
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
    let auth = std::env::var(TOKEN_ENV)
        .map(|t| format!("authorization: Bearer {}\r\n", t.trim()))
        .unwrap_or_default();
    s.write_all(format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\n{auth}connection: close\r\n\r\n").as_bytes())
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
                openmetrics: true,
                host: Some("a".into()),
                bearer: None,
            }
        );
        let r = parse_request("GET / HTTP/1.1\r\nHOST: [::1]:9\r\nAuthorization: bearer  s3cret \r\n\r\n").unwrap();
        assert_eq!(
            (r.host.as_deref(), r.bearer.as_deref()),
            (Some("[::1]:9"), Some("s3cret"))
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
        serve(addr, "server", Access::default(), move || vec![s.clone()])
            .await
            .unwrap();
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
        // A browser led here by a rebinding name; a request without Host (HTTP/1.0).
        let raw = raw_get(addr, "GET /status HTTP/1.1\r\nHost: attacker.example\r\n\r\n").await;
        assert!(raw.starts_with("HTTP/1.1 421 "), "{raw}");
        assert!(!raw.contains("lap"), "{raw}");
        let raw = raw_get(addr, "GET /status HTTP/1.0\r\n\r\n").await;
        assert!(raw.starts_with("HTTP/1.1 200 "), "{raw}");
        let raw = raw_get(
            addr,
            &format!("GET /status HTTP/1.1\r\nHost: localhost:{}\r\n\r\n", addr.port()),
        )
        .await;
        assert!(
            raw.starts_with("HTTP/1.1 200 ") && raw.contains("x-content-type-options: nosniff"),
            "{raw}"
        );
    }

    /// Sends `request` as it is and returns the whole answer.
    async fn raw_get(addr: SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(request.as_bytes()).await.unwrap();
        let mut resp = Vec::new();
        s.read_to_end(&mut resp).await.unwrap();
        String::from_utf8_lossy(&resp).into_owned()
    }

    #[tokio::test]
    async fn a_token_is_required_when_set() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let access = Access {
            hosts: vec!["mon.example".into()],
            token: Some("s3cret".into()),
        };
        serve(addr, "server", access, Vec::new).await.unwrap();
        let host = format!("Host: mon.example:{}\r\n", addr.port());
        for (auth, want) in [
            ("", "401"),
            ("Authorization: Bearer wrong!\r\n", "401"),
            ("Authorization: Basic czNjcmV0\r\n", "401"),
            ("Authorization: Bearer s3cret\r\n", "200"),
        ] {
            let raw = raw_get(addr, &format!("GET /metrics HTTP/1.1\r\n{host}{auth}\r\n")).await;
            assert!(raw.starts_with(&format!("HTTP/1.1 {want} ")), "{auth}: {raw}");
        }
    }

    #[test]
    fn expected_hosts() {
        let on = |s: &str| s.parse::<SocketAddr>().unwrap();
        let extra = ["mon.example".to_string()];
        let lo = on("127.0.0.1:9191");
        for h in [
            "127.0.0.1:9191",
            "127.0.0.1",
            "localhost",
            "LOCALHOST:9191",
            "[::1]:9191",
            "127.0.0.2",
            "mon.example",
            "localhost.",
        ] {
            assert!(host_expected(h, lo, &extra), "{h}");
        }
        for h in [
            "attacker.example",
            "attacker.example:9191",
            "127.0.0.1:80",
            "localhost:1",
            "10.0.0.1",
            "[::1",
            "",
            "127.0.0.1.nip.io",
        ] {
            assert!(!host_expected(h, lo, &extra), "{h}");
        }
        // Listening on a management address, or on all.
        assert!(host_expected("10.0.0.5:9191", on("10.0.0.5:9191"), &[]));
        assert!(!host_expected("10.0.0.6:9191", on("10.0.0.5:9191"), &[]));
        assert!(host_expected("[2001:db8::5]:9191", on("[::]:9191"), &[]));
        assert!(!host_expected("rebind.example:9191", on("0.0.0.0:9191"), &[]));
    }
}
