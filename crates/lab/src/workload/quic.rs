//! `quic`: a 20 MB HTTP/3 download with a real QUIC stack (aioquic, in `quic/h3.py`), in a
//! new QUIC connection whose handshake the time includes; the body's SHA-256 is checked.
//! QUIC runs over UDP, so the baselines are the download straight over one path
//! (`tcp-<path>` systems carry this workload's datagrams over that path alone); kernel
//! MPTCP carries no UDP and is left out. mpflex carries it through its SOCKS5
//! `UDP ASSOCIATE` (the same datagram flows as the transparent ingress's).
//!
//! aioquic is not a Debian package: `python3 -m venv DIR && DIR/bin/pip install aioquic`,
//! then `MPFLEX_LAB_PYTHON=DIR/bin/python` (default `python3`) for the runner, which
//! starts the HTTP/3 server in the server namespace, and for the client.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::{ClientRun, Fields, Spec, Via};
use crate::record::Record;
use crate::summary::{no_line, BarChart, Column, Summary, Table};

/// The download's size (issue 24's floor: a 20 MB HTTP/3 download).
pub const SIZE: u64 = 20_000_000;
/// The HTTP/3 server's UDP port in the server namespace.
pub const PORT: u16 = 9443;

/// The script, written where the runner and the client can run it.
const SCRIPT: &str = include_str!("../../quic/h3.py");

pub struct Quic;

impl Spec for Quic {
    fn name(&self) -> &'static str {
        "quic"
    }

    /// The client's timeout: a download that takes longer is a failure.
    fn default_secs(&self) -> f64 {
        120.0
    }

    fn datagrams(&self) -> bool {
        true
    }

    fn h3_server(&self) -> bool {
        true
    }

    fn has_capacity(&self) -> bool {
        true
    }

    fn client(&self, run: &ClientRun) -> Result<Fields> {
        get(SocketAddr::new(run.server.ip(), PORT), &run.via, SIZE, run.secs)
    }

    fn summary(&self) -> Summary {
        let table = Table {
            heading: |_| {
                format!(
                    ", {} MB HTTP/3 download in a new QUIC connection — median (p10–p90)",
                    SIZE / 1_000_000
                )
            },
            columns: vec![
                ("time, ms", Column::Dist(time, 0)),
                ("goodput, Mbit/s", Column::Dist(|r| r.goodput_mbit, 2)),
                ("% of capacity", Column::Dist(pct_of_capacity, 0)),
            ],
        };
        let chart = BarChart {
            suffix: "time",
            title: "HTTP/3 download time",
            y_desc: "download time, ms (median, p10–p90)",
            bars: vec![(None, time)],
            line: no_line,
        };
        Summary::BySystem(table, chart)
    }
}

fn time(r: &Record) -> Option<f64> {
    r.completion_ms
}

fn pct_of_capacity(r: &Record) -> Option<f64> {
    Some(100.0 * r.goodput_mbit? / r.capacity_mbit?)
}

/// The Python that runs the script (`MPFLEX_LAB_PYTHON`, else `python3`).
pub fn python() -> String {
    std::env::var("MPFLEX_LAB_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// The script's path: written once per content (its hash in the name), so concurrent
/// runs and older binaries never run each other's.
pub fn script() -> Result<PathBuf> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    SCRIPT.hash(&mut h);
    let path = std::env::temp_dir().join(format!("mpflex-lab-h3-{:016x}.py", h.finish()));
    if !path.exists() {
        let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
        std::fs::write(&tmp, SCRIPT).with_context(|| format!("write {}", tmp.display()))?;
        std::fs::rename(&tmp, &path)?;
    }
    Ok(path)
}

/// One download of `size` bytes from the HTTP/3 server at `server` over `via`.
pub fn get(server: SocketAddr, via: &Via, size: u64, timeout_secs: f64) -> Result<Fields> {
    get_in(None, server, via, size, timeout_secs)
}

/// As [`get`], in network namespace `ns` if given.
pub fn get_in(ns: Option<&str>, server: SocketAddr, via: &Via, size: u64, timeout_secs: f64) -> Result<Fields> {
    let script = script()?;
    let mut c = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, &python()]);
            c
        }
        None => Command::new(python()),
    };
    c.arg(&script).args([
        "get",
        "--server",
        &server.to_string(),
        "--size",
        &size.to_string(),
        "--timeout",
        &timeout_secs.to_string(),
    ]);
    match via {
        Via::Tcp { bind } => {
            if let Some(b) = bind {
                c.args(["--bind", &b.ip().to_string()]);
            }
        }
        Via::Socks(p) => {
            c.args(["--socks", &p.to_string()]);
        }
        Via::Mptcp => bail!("kernel MPTCP carries no UDP: quic runs over tcp-<path> and mpflex"),
    }
    let out = c
        .output()
        .with_context(|| format!("run {} (MPFLEX_LAB_PYTHON)", python()))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        if stderr.contains("No module named 'aioquic'") {
            bail!(
                "quic needs aioquic: python3 -m venv DIR && DIR/bin/pip install aioquic, then MPFLEX_LAB_PYTHON=DIR/bin/python"
            );
        }
        bail!("HTTP/3 download failed: {}", stderr.trim());
    }
    let f: Fields = serde_json::from_slice(&out.stdout).context("h3.py's JSON")?;
    if f.get("sha256_ok") != Some(&serde_json::Value::Bool(true)) {
        bail!("HTTP/3 download: wrong body ({f:?})");
    }
    Ok(f)
}

/// The HTTP/3 server's command line (run in the server namespace until killed).
pub fn server_args(listen: SocketAddr) -> Result<Vec<String>> {
    Ok(vec![
        python(),
        script()?.to_str().context("utf-8 path")?.into(),
        "serve".into(),
        "--listen".into(),
        listen.to_string(),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real HTTP/3 download on loopback, direct and through a wrong SOCKS proxy. Needs
    /// aioquic (`MPFLEX_LAB_PYTHON`); skipped without it, except under `CI=true`, where
    /// `scripts/test.sh` provides it.
    #[test]
    fn downloads_over_http3_on_loopback() {
        let probe = Command::new(python()).args(["-c", "import aioquic"]).output();
        if !probe.is_ok_and(|o| o.status.success()) {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "aioquic missing under CI=true: scripts/test.sh sets MPFLEX_LAB_PYTHON"
            );
            eprintln!("skipped: no aioquic for {}", python());
            return;
        }
        let port = std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let listen: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let args = server_args(listen).unwrap();
        let mut server = Command::new(&args[0]).args(&args[1..]).spawn().unwrap();
        let via = Via::Tcp { bind: None };
        let mut f = None;
        for _ in 0..20 {
            match get(listen, &via, 3_000_001, 5.0) {
                Ok(x) => {
                    f = Some(x);
                    break;
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(250)),
            }
        }
        let f = f.expect("the HTTP/3 server answered");
        assert_eq!(f["bytes"], 3_000_001, "{f:?}");
        assert_eq!(f["status"], 200, "{f:?}");
        assert!(f["completion_ms"].as_f64().unwrap() > 0.0, "{f:?}");
        let e = get(listen, &Via::Mptcp, 1, 5.0).unwrap_err().to_string();
        assert!(e.contains("carries no UDP"), "{e}");
        let _ = server.kill();
        let _ = server.wait();
    }
}
