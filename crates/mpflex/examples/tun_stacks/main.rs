//! Two user-space TCP/IP stacks for the TUN ingress, side by side (docs/tun.md "Choosing
//! the stack"): the ingress's own (smoltcp driven directly, `mpflex::tun::bench`: the
//! shipped stack code without a session) and ipstack (its own TCP, tokio streams).
//!
//! Each trial makes a TUN device in a network namespace of its own (one MTU for both
//! stacks, no offload: plain `IFF_TUN | IFF_NO_PI`, as the ingress opens it), runs one
//! stack on it in a fresh tokio runtime of this process, and drives it with `curl` from
//! the namespace. Every connection ends in the stack: a small HTTP/1.1 responder sources
//! what a GET asks for and sinks what a PUT sends. A trial measures:
//!
//! * that bytes arrive intact both ways (SHA-256 of a download and an upload),
//! * download and upload rate of one connection, and the process's CPU seconds per GiB
//!   for each (`getrusage`: the stack's threads; `curl` is another process),
//! * a burst of N short connections at once (`curl --parallel`, each a new connection
//!   for a small object, as a browser opens them): the burst's time and each
//!   connection's connect time,
//! * the property the ingress relies on, that a SYN can stay unanswered until the
//!   destination is known to answer: a destination decided after a delay (its connect
//!   time shows whether the SYN waited for the decision) and one decided "refused"
//!   (curl's exit 7 when the SYN got an RST; anything else when a connection opened).
//!
//! Trials alternate between the stacks (A, B, A, B, ...), and each writes one JSON line
//! (with the commit) to `--out`. Needs root (namespace, TUN) and curl.
//!
//! ```sh
//! cargo build --release -p mpflex --example tun_stacks
//! sudo target/release/examples/tun_stacks --pairs 5 --out lab-results/tun-stacks.jsonl
//! ```

use std::io::Write as _;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context as _, Result};
use clap::Parser;
use serde::{Deserialize, Serialize};

mod stacks;
use stacks::{open_tun, pattern, pattern_sha256, run_ipstack, run_smoltcp, sha256_hex};

// The shipped binary's allocator, so that both stacks allocate as they would in it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Where the bulk transfers and probes go.
const SERVER: &str = "10.99.0.2";
/// Where the burst goes: a destination not yet decided in the trial, so the first of its
/// SYNs wait for a decision in a stack that holds them.
const BURST_SERVER: &str = "10.99.0.3";
/// A destination port the responder "cannot reach": a stack that can hold a SYN answers
/// it with an RST.
const REFUSED_PORT: u16 = 9;
/// A destination port whose decision takes [`HOLD_PROBE`]: a stack that holds the SYN
/// until then shows it in the connect time.
const HOLD_PORT: u16 = 8081;
const HOLD_PROBE: Duration = Duration::from_millis(300);
/// Bytes of each way's integrity check.
const VERIFY_BYTES: u64 = 4 << 20;
/// Seconds any one curl may take: a stack that stalls fails its trial instead of hanging
/// the run.
const CURL_MAX: &str = "300";
/// Seconds each integrity transfer may take: a stack that stalls shows it here, soon.
const VERIFY_MAX: &str = "30";
/// Seconds the refused destination's connection may take: a stack that cannot refuse a
/// SYN leaves it open, and curl gives up.
const REFUSED_MAX: &str = "3";

#[derive(Parser, Debug, Clone)]
#[command(
    about = "The TUN ingress's TCP/IP stack beside ipstack: rates, CPU per GiB, a burst of connections, SYN holding"
)]
struct Opts {
    /// Pairs of trials (smoltcp then ipstack in each).
    #[arg(long, default_value_t = 5)]
    pairs: usize,
    /// MiB of each bulk transfer (one download and one upload per trial).
    #[arg(long, default_value_t = 256)]
    size_mb: u64,
    /// Connections of the burst (curl allows at most 300 at once).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=300))]
    burst: u32,
    /// The device's MTU, for both stacks: a real link's by default, which both handle
    /// (the ingress itself defaults to the largest IP packet, 65535).
    #[arg(long, default_value_t = 1500, value_parser = clap::value_parser!(u16).range(1280..))]
    mtu: u16,
    /// The stacks of each pair, in their order.
    #[arg(long, value_delimiter = ',', default_values = ["smoltcp", "ipstack"])]
    stacks: Vec<Kind>,
    /// Appends one JSON line per trial to this file.
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Smoltcp,
    Ipstack,
}

/// One trial's figures: one JSON line.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    bench: String,
    commit: String,
    stack: Kind,
    pair: usize,
    mtu: u16,
    size_mb: u64,
    /// Both integrity checks passed.
    intact: bool,
    down_gbit: f64,
    up_gbit: f64,
    down_cpu_s_per_gb: f64,
    up_cpu_s_per_gb: f64,
    burst: Burst,
    /// curl's exit for the refused destination: 7 when its SYN got an RST.
    refused_curl_exit: i32,
    refused_by_rst: bool,
    /// Connect time of the destination decided after `HOLD_PROBE`.
    hold_connect_ms: f64,
    syn_held: bool,
    cores: usize,
    loadavg: String,
}

/// A burst of connections at once.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Burst {
    n: u32,
    /// Transfers answered 200 with the whole object.
    ok: u32,
    /// From starting curl to its exit.
    ms: f64,
    connect_ms_median: f64,
    connect_ms_max: f64,
    cpu_ms: f64,
}

fn main() -> Result<()> {
    let o = Opts::parse();
    compare(&o)?;
    Ok(())
}

/// Runs the trials, writes the records, prints each and the medians.
fn compare(o: &Opts) -> Result<Vec<Record>> {
    // SAFETY: geteuid has no preconditions.
    ensure!(
        unsafe { libc::geteuid() } == 0,
        "needs root: a network namespace and a TUN device"
    );
    let ns = Netns::new()?;
    let files = Files::new(o.size_mb << 20)?;
    let commit = commit();
    let mut out = match &o.out {
        Some(p) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .with_context(|| format!("opening {}", p.display()))?,
        ),
        None => None,
    };
    let (mut records, mut failed) = (Vec::new(), 0);
    for pair in 0..o.pairs {
        for &kind in &o.stacks {
            // A trial that fails (a stack that stalls at this MTU) is a result too: its
            // record names the error, and the run goes on.
            let line = match trial(&ns, &files, kind, o, pair, &commit) {
                Ok(r) => {
                    let line = serde_json::to_string(&r)?;
                    records.push(r);
                    line
                }
                Err(e) => {
                    failed += 1;
                    let error = format!("{e:#}");
                    eprintln!("tun_stacks: {kind:?}, pair {pair} failed: {error}");
                    serde_json::json!({
                        "bench": "tun-stacks", "commit": commit, "stack": kind, "pair": pair,
                        "mtu": o.mtu, "size_mb": o.size_mb, "error": error,
                    })
                    .to_string()
                }
            };
            println!("{line}");
            if let Some(f) = out.as_mut() {
                writeln!(f, "{line}")?;
            }
        }
    }
    print_summary(&records);
    if failed > 0 {
        println!("{failed} trial(s) failed (their records name the error)");
    }
    Ok(records)
}

/// One stack's trial: device, runtime and stack fresh, then the clients.
fn trial(ns: &Netns, files: &Files, kind: Kind, o: &Opts, pair: usize, commit: &str) -> Result<Record> {
    let dev = open_tun(&ns.0, o.mtu)?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mtu = o.mtu;
    let stack = rt.spawn(async move {
        let r = match kind {
            Kind::Smoltcp => run_smoltcp(dev, mtu).await,
            Kind::Ipstack => run_ipstack(dev, mtu).await,
        };
        if let Err(e) = r {
            eprintln!("tun_stacks: {kind:?} stopped: {e:#}");
        }
    });
    let r = clients(ns, files, kind, o, pair, commit);
    stack.abort();
    rt.shutdown_timeout(Duration::from_secs(2));
    r
}

fn clients(ns: &Netns, files: &Files, kind: Kind, o: &Opts, pair: usize, commit: &str) -> Result<Record> {
    let base = format!("http://{SERVER}");
    let phase = |p: &str| eprintln!("tun_stacks: {kind:?}, pair {pair}: {p}");
    wait_ready(ns, &base)?;
    phase("integrity");
    let intact = verify(ns, files, &base)?;
    phase("probes");
    let (refused_curl_exit, _) = ns.curl(&[
        "-m",
        REFUSED_MAX,
        "-o",
        "/dev/null",
        &format!("{base}:{REFUSED_PORT}/small"),
    ])?;
    let (code, w) = ns.curl(&[
        "-m",
        "5",
        "-o",
        "/dev/null",
        "-w",
        "%{time_connect}",
        &format!("{base}:{HOLD_PORT}/small"),
    ])?;
    ensure!(code == 0, "the delayed destination: curl exit {code}");
    let hold_connect_ms = w.trim().parse::<f64>().context("curl's time_connect")? * 1e3;
    let size = o.size_mb << 20;
    let w = "%{http_code} %{size_download} %{size_upload} %{time_total}";
    phase("download");
    let cpu0 = cpu_seconds();
    let (code, down) = ns.curl(&["-o", "/dev/null", "-w", w, &format!("{base}/bytes/{size}")])?;
    let cpu1 = cpu_seconds();
    ensure!(code == 0, "download: curl exit {code}");
    let down = Transfer::parse(&down)?;
    ensure!(
        down.code == 200 && down.down == size,
        "download: {down:?}, want {size} bytes"
    );
    phase("upload");
    let up_file = files.bulk.to_str().context("path")?;
    let (code, up) = ns.curl(&[
        "-o",
        "/dev/null",
        "-H",
        "Expect:",
        "-T",
        up_file,
        "-w",
        w,
        &format!("{base}/sink"),
    ])?;
    let cpu2 = cpu_seconds();
    ensure!(code == 0, "upload: curl exit {code}");
    let up = Transfer::parse(&up)?;
    ensure!(up.code == 200 && up.up == size, "upload: {up:?}, want {size} bytes");
    phase("burst");
    let burst = burst(ns, files, o.burst)?;
    let gib = size as f64 / f64::from(1u32 << 30);
    Ok(Record {
        bench: "tun-stacks".into(),
        commit: commit.into(),
        stack: kind,
        pair,
        mtu: o.mtu,
        size_mb: o.size_mb,
        intact,
        down_gbit: round(down.gbit(), 3),
        up_gbit: round(up.gbit(), 3),
        down_cpu_s_per_gb: round((cpu1 - cpu0) / gib, 3),
        up_cpu_s_per_gb: round((cpu2 - cpu1) / gib, 3),
        burst,
        refused_curl_exit,
        refused_by_rst: refused_curl_exit == 7,
        hold_connect_ms: round(hold_connect_ms, 2),
        syn_held: hold_connect_ms >= HOLD_PROBE.as_secs_f64() * 1e3 * 0.9,
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        loadavg: std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
            .into(),
    })
}

/// The stack answers (a device just made needs a moment to come up).
fn wait_ready(ns: &Netns, base: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (code, _) = ns.curl(&["-m", "1", "-o", "/dev/null", &format!("{base}/small")])?;
        if code == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the stack did not answer within 5 s (curl exit {code})");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A download and an upload of [`VERIFY_BYTES`], each checked by SHA-256.
fn verify(ns: &Netns, files: &Files, base: &str) -> Result<bool> {
    let got = files.dir.join("down");
    let (code, _) = ns.curl(&[
        "-m",
        VERIFY_MAX,
        "-o",
        got.to_str().context("path")?,
        &format!("{base}/bytes/{VERIFY_BYTES}"),
    ])?;
    ensure!(code == 0, "integrity download: curl exit {code}");
    let down_ok = sha256_hex(&std::fs::read(&got)?) == pattern_sha256(VERIFY_BYTES);
    let up = files.verify.to_str().context("path")?;
    let (code, reply) = ns.curl(&["-m", VERIFY_MAX, "-H", "Expect:", "-T", up, &format!("{base}/sink?sum")])?;
    ensure!(code == 0, "integrity upload: curl exit {code}");
    let want = format!("{VERIFY_BYTES} {}", sha256_hex(&std::fs::read(&files.verify)?));
    Ok(down_ok && reply.trim() == want)
}

/// N connections at once, each for a small object.
fn burst(ns: &Netns, files: &Files, n: u32) -> Result<Burst> {
    let cfg = files.dir.join("burst.cfg");
    let mut text = String::new();
    for _ in 0..n {
        text.push_str(&format!(
            "url = \"http://{BURST_SERVER}/small\"\noutput = \"/dev/null\"\n"
        ));
    }
    std::fs::write(&cfg, text)?;
    let max = n.to_string();
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let (code, w) = ns.curl(&[
        "--parallel",
        "--parallel-immediate",
        "--parallel-max",
        &max,
        "-K",
        cfg.to_str().context("path")?,
        "-w",
        "%{http_code} %{size_download} %{time_connect}\\n",
    ])?;
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let cpu_ms = (cpu_seconds() - cpu0) * 1e3;
    ensure!(code == 0, "burst: curl exit {code}");
    let mut b = parse_burst(&w, n)?;
    b.ms = round(ms, 2);
    b.cpu_ms = round(cpu_ms, 2);
    Ok(b)
}

/// One curl transfer's `-w` line: code, bytes down, bytes up, seconds.
#[derive(Debug, PartialEq)]
struct Transfer {
    code: u16,
    down: u64,
    up: u64,
    secs: f64,
}

impl Transfer {
    fn parse(w: &str) -> Result<Transfer> {
        let f: Vec<&str> = w.split_whitespace().collect();
        ensure!(f.len() == 4, "curl -w: {w:?} is not code, download, upload, time");
        Ok(Transfer {
            code: f[0].parse()?,
            down: f[1].parse()?,
            up: f[2].parse()?,
            secs: f[3].parse()?,
        })
    }

    fn gbit(&self) -> f64 {
        (self.down + self.up) as f64 * 8.0 / self.secs / 1e9
    }
}

/// The burst's `-w` lines: code, bytes, connect seconds per connection.
fn parse_burst(w: &str, n: u32) -> Result<Burst> {
    let mut connect = Vec::new();
    let mut ok = 0;
    for line in w.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split_whitespace().collect();
        ensure!(f.len() == 3, "curl -w: {line:?} is not code, size, connect time");
        if f[0] == "200" && f[1] == "2" {
            ok += 1;
        }
        connect.push(f[2].parse::<f64>()? * 1e3);
    }
    ensure!(
        connect.len() == n as usize,
        "the burst reported {} of {n} transfers",
        connect.len()
    );
    Ok(Burst {
        n,
        ok,
        connect_ms_median: round(median(&mut connect.clone()), 2),
        connect_ms_max: round(connect.iter().copied().fold(0.0, f64::max), 2),
        ..Default::default()
    })
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

fn round(x: f64, digits: i32) -> f64 {
    let p = 10f64.powi(digits);
    (x * p).round() / p
}

/// Each stack's medians and ipstack's against ours.
fn print_summary(records: &[Record]) {
    type Field = fn(&Record) -> f64;
    let fields: [(&str, Field); 6] = [
        ("download Gbit/s", |r| r.down_gbit),
        ("upload Gbit/s", |r| r.up_gbit),
        ("download CPU s/GiB", |r| r.down_cpu_s_per_gb),
        ("upload CPU s/GiB", |r| r.up_cpu_s_per_gb),
        ("burst ms", |r| r.burst.ms),
        ("burst connect ms (median)", |r| r.burst.connect_ms_median),
    ];
    let of = |k: Kind, f: Field| median(&mut records.iter().filter(|r| r.stack == k).map(f).collect::<Vec<_>>());
    println!(
        "{:<28} {:>10} {:>10} {:>18}",
        "median", "smoltcp", "ipstack", "ipstack / smoltcp"
    );
    for (name, f) in fields {
        let (a, b) = (of(Kind::Smoltcp, f), of(Kind::Ipstack, f));
        println!("{name:<28} {a:>10.3} {b:>10.3} {:>18.3}", b / a);
    }
    for k in [Kind::Smoltcp, Kind::Ipstack] {
        let rs: Vec<&Record> = records.iter().filter(|r| r.stack == k).collect();
        if rs.is_empty() {
            println!("{k:?}: no trial completed");
            continue;
        }
        let held = rs.iter().all(|r| r.syn_held);
        let rst = rs.iter().all(|r| r.refused_by_rst);
        println!("{k:?}: SYN held until decided: {held}; refused destination gets an RST for its SYN: {rst}");
    }
}

/// `git describe` of the source tree, as the other benchmarks record it.
fn commit() -> String {
    Command::new("git")
        .args([
            "-C",
            env!("CARGO_MANIFEST_DIR"),
            "describe",
            "--always",
            "--dirty",
            "--abbrev=12",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || "unknown".into(),
            |o| String::from_utf8_lossy(&o.stdout).trim().into(),
        )
}

/// CPU seconds (user and system) of this process so far: the stack's runtime threads,
/// as the driver only waits on curl meanwhile.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// The namespace of a run ("mpfl-" names: the test suite's cleanup knows them).
struct Netns(String);

impl Netns {
    fn new() -> Result<Netns> {
        let name = format!("mpfl-stk-{}", std::process::id());
        run("ip", &["netns", "add", &name])?;
        let ns = Netns(name);
        run("ip", &["-n", &ns.0, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// curl in the namespace (quiet, errors shown, [`CURL_MAX`] unless `args` give a
    /// shorter `-m`): its exit code and what it printed.
    fn curl(&self, args: &[&str]) -> Result<(i32, String)> {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.0, "curl", "-sS", "-m", CURL_MAX])
            .args(args)
            .output()
            .context("running curl (is it installed?)")?;
        Ok((
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into(),
        ))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn run(cmd: &str, args: &[&str]) -> Result<()> {
    let st = Command::new(cmd)
        .args(args)
        .status()
        .with_context(|| format!("running {cmd}"))?;
    ensure!(st.success(), "{cmd} {}: {st}", args.join(" "));
    Ok(())
}

/// The run's files: the upload sources, the integrity download, the burst's list.
struct Files {
    dir: PathBuf,
    /// A sparse file of the bulk size: zeros the kernel reads without a disk.
    bulk: PathBuf,
    verify: PathBuf,
}

impl Files {
    fn new(size: u64) -> Result<Files> {
        let dir = std::env::temp_dir().join(format!("mpfl-tun-stacks-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let bulk = dir.join("bulk");
        std::fs::File::create(&bulk)?.set_len(size)?;
        let verify = dir.join("verify");
        let mut v = pattern(VERIFY_BYTES);
        v.reverse();
        std::fs::write(&verify, v)?;
        Ok(Files { dir, bulk, verify })
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curl_reports_are_parsed_and_bad_ones_refused() {
        let t = Transfer::parse("200 268435456 0 0.5").unwrap();
        assert_eq!((t.code, t.down, t.up), (200, 1 << 28, 0));
        assert!((t.gbit() - 4.294_967_296).abs() < 1e-9);
        assert!(Transfer::parse("200 12").is_err());
        let b = parse_burst("200 2 0.001\n200 2 0.003\n000 0 0.000\n", 3).unwrap();
        assert_eq!((b.n, b.ok, b.connect_ms_median, b.connect_ms_max), (3, 2, 1.0, 3.0));
        assert!(parse_burst("200 2 0.001\n", 3).is_err(), "a transfer missing");
        assert_eq!(median(&mut [3.0, 1.0, 2.0, 10.0]), 2.5);
    }

    /// A short run of both stacks: bytes intact both ways, a whole burst answered, and
    /// the SYN-holding property as each stack has it. Root only; under `CI=true` it fails
    /// rather than skips without root.
    #[test]
    fn both_stacks_move_bytes_intact_and_only_ours_holds_a_syn() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            assert!(
                std::env::var("CI").is_err(),
                "needs root (a namespace and a TUN device)"
            );
            eprintln!("skipped: needs root");
            return;
        }
        let out = std::env::temp_dir().join(format!("mpfl-tun-stacks-test-{}.jsonl", std::process::id()));
        let o = Opts {
            pairs: 1,
            size_mb: 16,
            burst: 20,
            mtu: 1500,
            stacks: vec![Kind::Smoltcp, Kind::Ipstack],
            out: Some(out.clone()),
        };
        let records = compare(&o).unwrap();
        let lines = std::fs::read_to_string(&out).unwrap();
        let _ = std::fs::remove_file(&out);
        let written: Vec<Record> = lines.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(written.len(), 2);
        for r in &records {
            assert!(r.intact, "{r:?}");
            assert!(r.down_gbit > 0.0 && r.up_gbit > 0.0, "{r:?}");
            assert_eq!(r.burst.ok, 20, "{r:?}");
            assert!(!r.commit.is_empty());
        }
        let [ours, theirs] = [&records[0], &records[1]];
        assert_eq!((ours.stack, theirs.stack), (Kind::Smoltcp, Kind::Ipstack));
        assert!(ours.syn_held && ours.refused_by_rst, "{ours:?}");
        assert!(!theirs.syn_held && !theirs.refused_by_rst, "{theirs:?}");
    }
}
