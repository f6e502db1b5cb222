//! `mpflex`: use all of a host's links at once for unmodified applications.

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use mpflex::config::{load, ClientConfig, ServerConfig};
use tokio_util::sync::CancellationToken;

// Buffers of 16-256 KiB are allocated and freed at a high rate on the data path; the
// system allocator serves them from fresh mmap'd pages (a page fault and a zeroed page per
// 4 KiB), mimalloc from its free lists. The workspace pins mimalloc's v2 line: it returns
// freed pages to the system after 10 ms, where v3 holds them for a second, which keeps a
// process at its peak memory for that long after a burst of streams (the README's
// "1,000 concurrent streams").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "mpflex",
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
        /// server_id, join_addr, drain_grace_secs,
        /// [acl] allow/deny/allow_ports/deny_ports/allow_loopback/allow_private,
        /// [[classes]] class/ports/cidrs/hosts, [tuning]).
        #[arg(short, long)]
        config: Option<PathBuf>,
        /// Override a configuration key, e.g. --set scheduler=redundant or
        /// --set 'listen=["0.0.0.0:7000"]'. Repeatable; applied after the file.
        #[arg(short, long, value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Refuse to start with a key or token file other users can read (default: warn).
        #[arg(long)]
        strict_perms: bool,
    },
    /// Run on the multi-homed host: one path connection per link, applications enter
    /// through SOCKS5 (socks_listen) or a transparent redirect (transparent_listen).
    Client {
        /// TOML configuration file (keys: private_key | private_key_file,
        /// server_public_key, scheduler, socks_listen, transparent_listen, status_listen,
        /// [[paths]] name/server/source/device/auto/exclude/priority, [[classes]]
        /// class/ports/cidrs/hosts, [tuning]).
        #[arg(short, long)]
        config: Option<PathBuf>,
        /// Override a configuration key, e.g. --set scheduler=roundrobin or
        /// --set tuning.path_timeout_ms=2000. Repeatable; applied after the file.
        #[arg(short, long, value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Refuse to start with a key or token file other users can read (default: warn).
        #[arg(long)]
        strict_perms: bool,
    },
    /// Print a new key pair (X25519, base64) as TOML lines.
    Keygen,
    /// Policy rules (`[[rules]]`, docs/policy.md).
    Policy {
        #[command(subcommand)]
        cmd: PolicyCmd,
    },
    /// Print the per-path counters, each stream's traffic class and each class's
    /// latency of a running client or server (its status_listen also serves /metrics for
    /// Prometheus and a live view at /).
    Status {
        /// Its status_listen address. Without it: the one client or server with a
        /// status_listen running in this network namespace, else 127.0.0.1:9190.
        #[arg(short, long)]
        addr: Option<SocketAddr>,
        /// Print the raw JSON.
        #[arg(long, conflicts_with = "watch")]
        json: bool,
        /// Redraw every second: per path the state, throughput (with a sparkline of the
        /// last 40 s), RTT and queue; per stream its class and path split (the live view
        /// at http://ADDR/ in a terminal). Ctrl-C ends it.
        #[arg(short, long)]
        watch: bool,
    },
    /// Print the manual page (roff) to stdout, or write it and one page per subcommand
    /// (mpflex-server.1, …) into a directory.
    Man {
        /// Write every page into DIR instead.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Print a completion script for SHELL to stdout.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Subcommand)]
enum PolicyCmd {
    /// Say which rule a connection would match and what it would get, from the client's
    /// configuration (no running client needed), and the data-cap counts of its ledger.
    Check {
        /// The client's TOML configuration file.
        #[arg(short, long)]
        config: Option<PathBuf>,
        /// Override a configuration key (as for `mpflex client`).
        #[arg(short, long, value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Destination: HOST:PORT or IP:PORT.
        #[arg(long, value_name = "HOST:PORT")]
        dest: String,
        /// Server name of the connection's TLS ClientHello.
        #[arg(long)]
        sni: Option<String>,
        /// Owner of the application's socket (transparent ingress).
        #[arg(long)]
        uid: Option<u32>,
        #[arg(long)]
        gid: Option<u32>,
        #[arg(long)]
        cgroup: Option<String>,
        /// Ingress: socks, transparent (REDIRECT), tproxy (TCP by TPROXY) or tun.
        #[arg(long, default_value = "socks")]
        listener: String,
        /// SOCKS5 user name.
        #[arg(long)]
        user: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// The command line's definition, with a version that names the wire protocol too (peers
/// must speak the same one; `--version` is where an operator compares them).
fn command() -> clap::Command {
    let version = format!("{} (wire protocol {})", env!("CARGO_PKG_VERSION"), mpflex_wire::VERSION);
    Cli::command().version(version)
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("mpflex: {e:#}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<()> {
    let cli = Cli::from_arg_matches(&command().get_matches()).unwrap_or_else(|e| e.exit());
    // Colour codes only for a person at a terminal: in a file, a pipe or the journal they
    // are noise around every line.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    match &cli.cmd {
        Cmd::Man { dir: Some(dir) } => {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            return clap_mangen::generate_to(command(), dir)
                .with_context(|| format!("cannot write to {}", dir.display()));
        }
        Cmd::Man { dir: None } => {
            let mut page = Vec::new();
            clap_mangen::Man::new(command()).render(&mut page)?;
            return Ok(std::io::stdout().write_all(&page)?);
        }
        Cmd::Completions { shell } => {
            // Into a buffer first: the generator panics on a write error (a closed pipe).
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut command(), "mpflex", &mut script);
            return Ok(std::io::stdout().write_all(&script)?);
        }
        _ => {}
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        match cli.cmd {
            Cmd::Keygen => {
                let (private, public) = mpflex::crypto::generate_keypair();
                println!("private_key = \"{}\"", mpflex::crypto::encode_key(&private));
                println!("public_key = \"{}\"", mpflex::crypto::encode_key(&public));
                Ok(())
            }
            Cmd::Status { addr, watch: true, .. } => {
                let addr = match addr {
                    Some(a) => a,
                    None => mpflex::runtime::locate()?.unwrap_or(mpflex::runtime::DEFAULT_STATUS),
                };
                mpflex::status::watch(addr).await
            }
            Cmd::Status { addr, json, .. } => {
                let v = match addr {
                    Some(a) => mpflex::status::fetch(a).await?,
                    None => fetch_local().await?,
                };
                if json {
                    println!("{}", serde_json::to_string_pretty(&v)?);
                } else {
                    print!("{}", mpflex::status::render_table(&v));
                }
                Ok(())
            }
            Cmd::Server {
                config,
                set,
                strict_perms,
            } => {
                mpflex::config::STRICT_PERMS.store(strict_perms, std::sync::atomic::Ordering::Relaxed);
                let cfg: ServerConfig = load(config.as_deref(), &set)?;
                open_file_limit();
                let stop = shutdown_signal();
                mpflex::server::run(cfg, stop).await
            }
            Cmd::Client {
                config,
                set,
                strict_perms,
            } => {
                mpflex::config::STRICT_PERMS.store(strict_perms, std::sync::atomic::Ordering::Relaxed);
                let cfg: ClientConfig = load(config.as_deref(), &set)?;
                open_file_limit();
                let stop = shutdown_signal();
                // SIGHUP re-reads the same file with the same overrides.
                let reload: mpflex::client::Reload = Box::new(move || load(config.as_deref(), &set));
                mpflex::client::run_with_reload(cfg, stop, Some(reload)).await
            }
            Cmd::Policy {
                cmd:
                    PolicyCmd::Check {
                        config,
                        set,
                        dest,
                        sni,
                        uid,
                        gid,
                        cgroup,
                        listener,
                        user,
                        json,
                    },
            } => {
                let cfg: ClientConfig = load(config.as_deref(), &set)?;
                let q = mpflex::policy::check::Query {
                    dest,
                    sni,
                    uid,
                    gid,
                    cgroup,
                    listener,
                    user,
                };
                let v = mpflex::policy::check::answer(&cfg, &q)?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&v)?);
                } else {
                    print!("{}", mpflex::policy::check::render(&v));
                }
                Ok(())
            }
            Cmd::Man { .. } | Cmd::Completions { .. } => unreachable!("handled above"),
        }
    })
}

/// The status of the client or server running here (see [`mpflex::runtime`]).
async fn fetch_local() -> Result<serde_json::Value> {
    use mpflex::runtime::{locate, read_dirs, DEFAULT_STATUS};
    if let Some(addr) = locate()? {
        return mpflex::status::fetch(addr).await;
    }
    mpflex::status::fetch(DEFAULT_STATUS).await.map_err(|e| {
        let dirs: Vec<String> = read_dirs().iter().map(|d| d.display().to_string()).collect();
        anyhow::anyhow!(
            "no running mpflex client or server found here (none registered in {}; at {DEFAULT_STATUS}: {}): \
             start one with status_listen set, or pass its status_listen with --addr",
            dirs.join(" or "),
            e.root_cause()
        )
    })
}

/// Raises the open-file limit to the hard one ([`mpflex::runtime::raise_nofile_limit`]),
/// and says so when it stays low: every connection and UDP flow is a descriptor.
fn open_file_limit() {
    match mpflex::runtime::raise_nofile_limit() {
        Ok((_, now)) if now < 4096 => tracing::warn!(
            limit = now,
            "open-file limit is low: connections and UDP flows beyond it will fail (raise the hard limit: LimitNOFILE= or ulimit -Hn)"
        ),
        Ok((before, now)) if before != now => tracing::debug!(before, now, "open-file limit raised"),
        Ok(_) => {}
        Err(e) => tracing::warn!("cannot read or raise the open-file limit: {e}"),
    }
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
