//! `mpflex`: use all of a host's links at once for unmodified applications.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand};
use mpflex::config::{load, ClientConfig, ServerConfig};
use tokio_util::sync::CancellationToken;

// Buffers of 16-256 KiB are allocated and freed at a high rate on the data path; the
// system allocator serves them from fresh mmap'd pages (a page fault and a zeroed page per
// 4 KiB), mimalloc from its free lists. The workspace pins mimalloc's v2 line: it returns
// freed pages to the system after 10 ms, where v3 holds them for a second, which keeps a
// process at its peak memory for that long after a burst of streams (measured in the
// README, "1,000 concurrent streams").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "mpflex",
    version,
    about = "Multipath transport for unmodified applications: \
a client on the multi-homed host carries every app connection over all its links to a server."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run on the host near the internet: accept path connections from known clients and
    /// connect their streams to destinations the ACL allows.
    Server {
        /// TOML configuration file (keys: listen, private_key | private_key_file,
        /// [[clients]] name/public_key, status_listen, scheduler, session_linger_secs,
        /// [acl] allow/deny/allow_ports/deny_ports/allow_loopback/allow_private,
        /// [[classes]] class/ports/cidrs/hosts, [tuning]).
        #[arg(short, long)]
        config: Option<PathBuf>,
        /// Override a configuration key, e.g. --set scheduler=redundant or
        /// --set 'listen=["0.0.0.0:7000"]'. Repeatable; applied after the file.
        #[arg(short, long, value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
    /// Run on the multi-homed host: one path connection per link, applications enter
    /// through SOCKS5 (socks_listen) or a transparent redirect (transparent_listen).
    Client {
        /// TOML configuration file (keys: private_key | private_key_file,
        /// server_public_key, scheduler, socks_listen, transparent_listen, status_listen,
        /// [[paths]] name/server/source/device/backup, [[classes]] class/ports/cidrs/hosts,
        /// [tuning]).
        #[arg(short, long)]
        config: Option<PathBuf>,
        /// Override a configuration key, e.g. --set scheduler=roundrobin or
        /// --set tuning.path_timeout_ms=2000. Repeatable; applied after the file.
        #[arg(short, long, value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
    /// Print a new key pair (X25519, base64) as TOML lines.
    Keygen,
    /// Print the per-path counters, each stream's traffic class and each class's
    /// latency of a running client or server (its status_listen also serves /metrics for
    /// Prometheus and a live view at /).
    Status {
        /// Its status_listen address.
        #[arg(short, long, default_value = "127.0.0.1:9190")]
        addr: SocketAddr,
        /// Print the raw JSON.
        #[arg(long, conflicts_with = "watch")]
        json: bool,
        /// Redraw every second: per path the state, throughput (with a sparkline of the
        /// last 40 s), RTT and queue; per stream its class and path split (the live view
        /// at http://ADDR/ in a terminal). Ctrl-C ends it.
        #[arg(short, long)]
        watch: bool,
    },
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("mpflex: {e:#}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        match cli.cmd {
            Cmd::Keygen => {
                let (private, public) = mpflex::crypto::generate_keypair();
                println!("private_key = \"{}\"", mpflex::crypto::encode_key(&private));
                println!("public_key = \"{}\"", mpflex::crypto::encode_key(&public));
                Ok(())
            }
            Cmd::Status { addr, watch: true, .. } => mpflex::status::watch(addr).await,
            Cmd::Status { addr, json, .. } => {
                let v = mpflex::status::fetch(addr).await?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&v)?);
                } else {
                    print!("{}", mpflex::status::render_table(&v));
                }
                Ok(())
            }
            Cmd::Server { config, set } => {
                let cfg: ServerConfig = load(config.as_deref(), &set)?;
                let stop = shutdown_signal();
                mpflex::server::run(cfg, stop).await
            }
            Cmd::Client { config, set } => {
                let cfg: ClientConfig = load(config.as_deref(), &set)?;
                let stop = shutdown_signal();
                mpflex::client::run(cfg, stop).await
            }
        }
    })
}

/// Cancelled on SIGINT or SIGTERM.
fn shutdown_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let t = token.clone();
    tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        t.cancel();
    });
    token
}
