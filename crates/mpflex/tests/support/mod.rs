//! End-to-end harness: a topology of mpflex-netns (client and server namespaces joined by
//! two veth paths, or one per link of `Options::links`), an HTTP origin and `mpflex server` in the server namespace, `mpflex
//! client` in the client namespace. Everything is removed on drop (and stale namespaces of
//! dead runs at start). Needs root, python3 (the origin) and curl; [`ready`] skips a test
//! without them, and fails it under CI.
#![allow(dead_code)]

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

mod record;
#[allow(unused_imports)]
pub use record::record;

// Each test binary compiles this module and uses a part of it.
#[allow(unused_imports)]
pub use mpflex_netns::{in_ns, spawn_in_ns, Layout, Topology};

pub const BIN: &str = env!("CARGO_BIN_EXE_mpflex");
pub const ORIGIN_PORT: u16 = 8080;
pub const SOCKS_PORT: u16 = 1080;
pub const TRANSPARENT_PORT: u16 = 1081;
pub const SERVER_PORT: u16 = 7000;
pub const CLIENT_STATUS: u16 = 9190;
pub const SERVER_STATUS: u16 = 9191;

pub mod dns;
pub mod exchange;
pub mod hostile;
pub mod lan;
mod transfer;
#[allow(unused_imports)]
pub use transfer::socks_connect;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Whether an end-to-end test `test` can run here (see the module doc); if not it is
/// skipped, or under CI fails.
pub fn ready(test: &str) -> bool {
    mpflex_netns::require_root(test) && mpflex_netns::require_tools(test, &["ip", "python3", "curl"])
}

/// Runs a program to completion and returns its stdout; panics if it fails.
pub fn sh(args: &[&str]) -> String {
    mpflex_netns::run(args).unwrap_or_else(|e| panic!("{e:#}"))
}

pub struct Options {
    pub scheduler: &'static str,
    /// Rate limit per path and direction (tbf), Mbit/s; 0 = none.
    pub rate_mbit: u32,
    pub keepalive_ms: u64,
    pub path_timeout_ms: u64,
    /// One bottleneck per path on its uplink (client -> server); empty: none. The paths
    /// then cross a middle namespace (see [`Bottleneck`]).
    pub uplink: Vec<Bottleneck>,
    /// `tuning.queue_target_ms` of client and server.
    pub queue_target_ms: u64,
    /// `tuning.congestion` of client and server (the system's default if `None`).
    pub congestion: Option<&'static str>,
    /// TOML appended to the client's and the server's configuration (e.g. `[[classes]]`).
    pub client_toml: String,
    pub server_toml: String,
    /// Top-level lines added to the client's configuration (before its tables).
    pub client_root: String,
    /// Lines added to the server's `[acl]` table (which allows loopback, private and
    /// link-local networks and the server's own addresses, where the lab's services are).
    pub server_acl: String,
    /// The server's `[acl]` table whole, in place of the lab's open one.
    pub acl_table: Option<String>,
    /// How server and client are started: (role, configuration file) to the command line;
    /// `mpflex <role> --config <file>` with the binary under test if `None`.
    pub launch: Option<Box<Launch>>,
    /// Binds each client path to its interface too (`device`, SO_BINDTODEVICE).
    pub bind_device: bool,
    /// The client's `transparent_listen`.
    pub transparent_listen: &'static str,
    /// The client's `socks_listen` (its port [`SOCKS_PORT`], where the lab waits for it).
    pub socks_listen: &'static str,
    /// The client's `[[paths]]` in place of one per path bound by source address.
    pub client_paths: Option<Box<PathsToml>>,
    /// The server's `listen` address.
    pub server_listen: &'static str,
    /// Each path also gets IPv6 addresses, and the client a default route (IPv4 and IPv6)
    /// over every path towards [`Lab::service_addr`], as on a host with several uplinks.
    pub routed: bool,
    /// How many paths must be up before the test starts.
    pub paths_up: usize,
    /// The client is not started: the test starts it ([`Lab::start_client`]).
    pub defer_client: bool,
    /// The paths cross the lab's user-space link emulator with this profile's rates,
    /// delays and buffers (e.g. `seed-default`, `mpflex_lab::profile::seed_default(70)`)
    /// in place of bare veths.
    pub links: Option<mpflex_lab::profile::Profile>,
}

/// (role, configuration file) to a command line.
pub type Launch = dyn Fn(&str, &str) -> Vec<String>;

/// The lab to the client's `[[paths]]` (its addresses are known once it is built).
pub type PathsToml = dyn Fn(&Lab) -> String;

/// A rate limit with a deep FIFO in front of it, on one direction of a path: a `tbf` on
/// the egress of a bridge port in a middle namespace, so the queue builds in a forwarding
/// hop, as in a modem or a bloated router. A `tbf` on the sender's own interface would
/// hold little: TCP small queues keep each socket's bytes in the local qdisc to about a
/// millisecond, the rest waits unsent in the socket.
#[derive(Clone, Copy, Debug)]
pub struct Bottleneck {
    pub kbit: u32,
    /// The queue's size in time at that rate (tbf `latency`).
    pub queue_ms: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            scheduler: "minrtt",
            rate_mbit: 0,
            keepalive_ms: 500,
            // Short, so a link taken down is noticed within a test's patience.
            path_timeout_ms: 1500,
            uplink: Vec::new(),
            queue_target_ms: 20,
            congestion: None,
            client_toml: String::new(),
            server_toml: String::new(),
            server_acl: String::new(),
            acl_table: None,
            client_root: String::new(),
            launch: None,
            bind_device: false,
            transparent_listen: "127.0.0.1:1081",
            socks_listen: "127.0.0.1:1080",
            client_paths: None,
            server_listen: "0.0.0.0:7000",
            routed: false,
            paths_up: 2,
            defer_client: false,
            links: None,
        }
    }
}

pub struct Lab {
    /// The namespaces: client `c<i>` 10.<net>.<i+1>.1, server `s<i>` 10.<net>.<i+1>.2.
    pub topo: Topology,
    pub dir: PathBuf,
    pub origin: Option<Child>,
    pub server: Option<Child>,
    pub client: Option<Child>,
    pub client_key: String,
    pub server_pub: String,
    /// `Options::rate_mbit`, for paths added later.
    rate_mbit: u32,
    /// The client's command line.
    client_args: Vec<String>,
    /// The link emulator of `Options::links`.
    emu: Option<mpflex_lab::emulator::Emulator>,
}

impl Lab {
    pub fn new(opts: Options) -> Lab {
        let layout = Layout {
            kind: "e2e",
            // Two veth paths, or one per link of the profile.
            paths: opts.links.as_ref().map_or(2, |p| p.paths.len()),
            emulator: !opts.uplink.is_empty() || opts.links.is_some(),
            ipv6: true,
            mptcp: false,
        };
        let topo = Topology::with(layout, COUNTER.fetch_add(1, Ordering::SeqCst)).unwrap_or_else(|e| panic!("{e:#}"));
        let dir = std::env::temp_dir().join(&topo.name);
        std::fs::create_dir_all(&dir).unwrap();
        let mut lab = Lab {
            topo,
            dir,
            origin: None,
            server: None,
            client: None,
            client_key: String::new(),
            server_pub: String::new(),
            rate_mbit: opts.rate_mbit,
            client_args: Vec::new(),
            emu: None,
        };
        if let Some(profile) = &opts.links {
            let emu = mpflex_lab::emulator::Emulator::start(&lab.topo, profile, 1);
            lab.emu = Some(emu.unwrap_or_else(|e| panic!("link emulator: {e:#}")));
        }
        if opts.rate_mbit > 0 {
            for p in 0..lab.topo.paths {
                lab.limit_rate(p);
            }
        }
        if opts.routed {
            for ip in [lab.service_addr(false) + "/32", lab.service_addr(true) + "/128"] {
                sh(&["ip", "-n", &lab.topo.server_ns, "addr", "add", &ip, "dev", "lo"]);
            }
            for p in 0..lab.topo.paths {
                lab.route_path(p);
            }
        }
        if !opts.uplink.is_empty() {
            lab.bridge_paths(&opts.uplink);
        }
        lab.start(&opts);
        lab
    }

    pub fn client_addr(&self, path: usize) -> String {
        self.topo.client_addr(path)
    }

    pub fn server_addr(&self, path: usize) -> String {
        self.topo.server_addr(path)
    }

    /// A `tbf` of `Options::rate_mbit` on both ends of path `p`.
    fn limit_rate(&self, p: usize) {
        let rate = format!("{}mbit", self.rate_mbit);
        let ends = [
            (&self.topo.client_ns, self.topo.client_dev(p)),
            (&self.topo.server_ns, self.topo.server_dev(p)),
        ];
        for (ns, dev) in ends {
            sh(&[
                "ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", &dev, "root", "tbf", "rate", &rate, "burst",
                "64kb", "latency", "30ms",
            ]);
        }
    }

    /// The server's address every routed path reaches (on its loopback).
    pub fn service_addr(&self, ipv6: bool) -> String {
        if ipv6 {
            format!("fd00:{}:ff::1", self.topo.net)
        } else {
            format!("10.{}.200.1", self.topo.net)
        }
    }

    /// Path `p`'s IPv6 address on the client (`fd00:<net>:<p+1>::1`) or the server (`::2`).
    pub fn addr6(&self, p: usize, server: bool) -> String {
        format!("fd00:{}:{}::{}", self.topo.net, p + 1, 1 + server as u8)
    }

    /// IPv6 addresses on both ends of path `p` (no duplicate detection: usable at once),
    /// and the client's default routes over it, one metric per path.
    fn route_path(&self, p: usize) {
        let (cns, sns) = (&self.topo.client_ns, &self.topo.server_ns);
        let (c, s) = (self.topo.client_dev(p), self.topo.server_dev(p));
        sh(&[
            "ip",
            "-n",
            sns,
            "-6",
            "addr",
            "add",
            &(self.addr6(p, true) + "/64"),
            "dev",
            &s,
            "nodad",
        ]);
        sh(&[
            "ip",
            "-n",
            cns,
            "-6",
            "addr",
            "add",
            &(self.addr6(p, false) + "/64"),
            "dev",
            &c,
            "nodad",
        ]);
        let metric = (100 + p).to_string();
        sh(&[
            "ip",
            "-n",
            cns,
            "route",
            "add",
            "default",
            "via",
            &self.server_addr(p),
            "dev",
            &c,
            "metric",
            &metric,
        ]);
        sh(&[
            "ip",
            "-n",
            cns,
            "-6",
            "route",
            "add",
            "default",
            "via",
            &self.addr6(p, true),
            "dev",
            &c,
            "metric",
            &metric,
        ]);
    }

    /// Plugs in path `p` mid-test: a new veth pair between client and server with its
    /// addresses, rate limit and routes, as `routed` sets up the first ones. Returns when
    /// the client's end is up with its address and route.
    pub fn plug_path(&self, p: usize) {
        let (cns, sns) = (&self.topo.client_ns, &self.topo.server_ns);
        let (c, s) = (self.topo.client_dev(p), self.topo.server_dev(p));
        sh(&[
            "ip", "link", "add", &c, "netns", cns, "type", "veth", "peer", "name", &s, "netns", sns,
        ]);
        sh(&[
            "ip",
            "-n",
            sns,
            "addr",
            "add",
            &format!("{}/24", self.server_addr(p)),
            "dev",
            &s,
        ]);
        sh(&[
            "ip",
            "-n",
            cns,
            "addr",
            "add",
            &format!("{}/24", self.client_addr(p)),
            "dev",
            &c,
        ]);
        if self.rate_mbit > 0 {
            self.limit_rate(p);
        }
        sh(&["ip", "-n", sns, "link", "set", &s, "up"]);
        sh(&["ip", "-n", cns, "link", "set", &c, "up"]);
        self.route_path(p);
    }

    /// Removes path `p`'s interfaces (both ends of the veth pair go).
    pub fn unplug_path(&self, p: usize) {
        sh(&[
            "ip",
            "-n",
            &self.topo.client_ns,
            "link",
            "del",
            &self.topo.client_dev(p),
        ]);
    }

    /// The client's status entry of the path bound to interface `dev` (Null if none).
    pub fn client_path_on(&self, dev: &str) -> serde_json::Value {
        let s = self.client_status();
        s["paths"]
            .as_array()
            .and_then(|a| a.iter().find(|p| p["device"] == dev).cloned())
            .unwrap_or(serde_json::Value::Null)
    }

    /// Joins each path's two halves with a bridge in the middle namespace and puts
    /// `uplink[p]` on the egress towards the server.
    fn bridge_paths(&self, uplink: &[Bottleneck]) {
        assert_eq!(uplink.len(), self.topo.paths, "one bottleneck per path");
        let emu = self.topo.emu_ns.as_str();
        for (p, b) in uplink.iter().enumerate() {
            let br = format!("br{p}");
            let (ec, es) = (format!("ec{p}"), format!("es{p}"));
            sh(&["ip", "-n", emu, "link", "add", &br, "type", "bridge"]);
            sh(&["ip", "-n", emu, "link", "set", &ec, "master", &br]);
            sh(&["ip", "-n", emu, "link", "set", &es, "master", &br]);
            sh(&["ip", "-n", emu, "link", "set", &br, "up"]);
            sh(&[
                "ip",
                "netns",
                "exec",
                emu,
                "tc",
                "qdisc",
                "add",
                "dev",
                &es,
                "root",
                "tbf",
                "rate",
                &format!("{}kbit", b.kbit),
                "burst",
                "8kb",
                "latency",
                &format!("{}ms", b.queue_ms),
            ]);
        }
    }

    fn spawn(&self, ns: &str, args: &[&str], log: &str) -> Child {
        let log = File::create(self.dir.join(log)).unwrap();
        mpflex_netns::command(ns, args[0])
            .args(&args[1..])
            // `MPFLEX_TEST_RUST_LOG` sets the daemons' filter (e.g. to trace the engine).
            .env(
                "RUST_LOG",
                std::env::var("MPFLEX_TEST_RUST_LOG").unwrap_or_else(|_| "info".into()),
            )
            // Runtime files (`mpflex status` without --addr) stay in the lab's directory.
            .env("MPFLEX_RUNTIME_DIR", self.dir.join("run"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn")
    }

    fn start(&mut self, opts: &Options) {
        let origin = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/origin.py");
        self.origin = Some(self.spawn(
            &self.topo.server_ns,
            &["python3", origin, "0.0.0.0", &ORIGIN_PORT.to_string()],
            "origin.log",
        ));
        let (spriv, spub) = keygen();
        let (cpriv, cpub) = keygen();
        std::fs::write(
            self.dir.join("server.toml"),
            format!(
                "listen = [\"{listen}\"]\nprivate_key = \"{spriv}\"\nstatus_listen = \"127.0.0.1:{SERVER_STATUS}\"\n\
                 scheduler = \"{sched}\"\n[[clients]]\nname = \"test\"\npublic_key = \"{cpub}\"\n\
                 [acl]\n{acl}[tuning]\nkeepalive_ms = {ka}\npath_timeout_ms = {pt}\n\
                 queue_target_ms = {qt}\n{cc}{extra}",
                listen = opts.server_listen,
                sched = opts.scheduler,
                ka = opts.keepalive_ms,
                pt = opts.path_timeout_ms,
                qt = opts.queue_target_ms,
                cc = congestion(opts),
                extra = opts.server_toml,
                acl = opts.acl_table.clone().unwrap_or(format!("allow_loopback = true\nallow_private = true\nallow_link_local = true\nallow_own = [\"0.0.0.0/0\", \"::/0\"]\n{}", opts.server_acl)),
            ),
        )
        .unwrap();
        let mut client = format!(
            "private_key = \"{cpriv}\"\nserver_public_key = \"{spub}\"\nscheduler = \"{sched}\"\n\
             socks_listen = \"{socks}\"\nstatus_listen = \"127.0.0.1:{CLIENT_STATUS}\"\n\
             transparent_listen = \"{transparent}\"\n{root}",
            sched = opts.scheduler,
            transparent = opts.transparent_listen,
            socks = opts.socks_listen,
            root = opts.client_root,
        );
        if let Some(paths) = &opts.client_paths {
            client += &paths(self);
        }
        for p in (0..self.topo.paths).filter(|_| opts.client_paths.is_none()) {
            client += &format!(
                "[[paths]]\nname = \"p{}\"\nserver = \"{}:{SERVER_PORT}\"\nsource = \"{}\"\n",
                p + 1,
                self.server_addr(p),
                self.client_addr(p)
            );
            if opts.bind_device {
                client += &format!("device = \"{}\"\n", self.topo.client_dev(p));
            }
        }
        client += &format!(
            "[tuning]\nkeepalive_ms = {}\npath_timeout_ms = {}\nqueue_target_ms = {}\n{}{}",
            opts.keepalive_ms,
            opts.path_timeout_ms,
            opts.queue_target_ms,
            congestion(opts),
            opts.client_toml
        );
        std::fs::write(self.dir.join("client.toml"), client).unwrap();
        self.client_key = cpriv;
        self.server_pub = spub;
        let scfg = self.dir.join("server.toml");
        let ccfg = self.dir.join("client.toml");
        let command = |role: &str, cfg: &Path| -> Vec<String> {
            let cfg = cfg.to_str().unwrap();
            match &opts.launch {
                Some(launch) => launch(role, cfg),
                None => [BIN, role, "--config", cfg].map(String::from).to_vec(),
            }
        };
        let args = command("server", &scfg);
        self.server = Some(self.spawn(
            &self.topo.server_ns,
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
            "server.log",
        ));
        self.wait_port(&self.topo.server_ns.clone(), ORIGIN_PORT);
        self.wait_port(&self.topo.server_ns.clone(), SERVER_PORT);
        self.client_args = command("client", &ccfg);
        if !opts.defer_client {
            self.start_client("client.log", opts.paths_up);
        }
    }

    /// Starts the client (logging to `log` in the lab's directory) and waits for its
    /// SOCKS port and `paths_up` paths.
    pub fn start_client(&mut self, log: &str, paths_up: usize) {
        let args: Vec<&str> = self.client_args.iter().map(String::as_str).collect();
        self.client = Some(self.spawn(&self.topo.client_ns, &args, log));
        self.wait_port(&self.topo.client_ns.clone(), SOCKS_PORT);
        self.wait_paths_up(paths_up, Duration::from_secs(10));
    }

    /// Sends the client `signal` (`"TERM"`, `"INT"`, `"KILL"`) and waits (at most 10 s)
    /// for it to exit; whether it exited with success.
    pub fn stop_client(&mut self, signal: &str) -> bool {
        let mut c = self.client.take().expect("a running client");
        sh(&["kill", "-s", signal, &c.id().to_string()]);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = c.try_wait().expect("wait") {
                return status.success();
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                let _ = c.wait();
                panic!("the client did not exit within 10 s of SIG{signal}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn wait_port(&self, ns: &str, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if in_ns(ns, move || TcpStream::connect(("127.0.0.1", port)).is_ok()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("port {port} never opened in {ns}; logs in {}", self.dir.display());
    }

    /// Status JSON of the client.
    pub fn client_status(&self) -> serde_json::Value {
        self.status(&self.topo.client_ns, CLIENT_STATUS)
    }

    pub fn server_status(&self) -> serde_json::Value {
        self.status(&self.topo.server_ns, SERVER_STATUS)
    }

    /// Status JSON served on 127.0.0.1:`port` inside namespace `ns` (Null if none).
    pub fn status(&self, ns: &str, port: u16) -> serde_json::Value {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                ns,
                BIN,
                "status",
                "--json",
                "--addr",
                &format!("127.0.0.1:{port}"),
            ])
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
    }

    pub fn paths_up(&self) -> usize {
        let s = self.client_status();
        s["paths"]
            .as_array()
            .map_or(0, |a| a.iter().filter(|p| p["up"] == true).count())
    }

    pub fn wait_paths_up(&self, n: usize, within: Duration) {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self.paths_up() >= n {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "only {} of {n} paths came up; logs in {}",
            self.paths_up(),
            self.dir.display()
        );
    }

    /// Per-path payload bytes the client received.
    pub fn client_path_bytes(&self) -> Vec<u64> {
        let s = self.client_status();
        s["paths"]
            .as_array()
            .map(|a| a.iter().map(|p| p["bytes_received"].as_u64().unwrap_or(0)).collect())
            .unwrap_or_default()
    }

    /// Breaks path `p` the given way (see `Kill`); false if `ss` found no socket to kill.
    pub fn kill_path(&self, p: usize, how: Kill) -> bool {
        match how {
            Kill::LinkDown => {
                self.link_down(p);
                true
            }
            Kill::Reset => self.kill_socket(p),
            Kill::ServerReset => self.kill_server_socket(p),
        }
    }

    /// Destroys path `p`'s TCP connection in the server's kernel.
    pub fn kill_server_socket(&self, p: usize) -> bool {
        ss_kill(&self.topo.server_ns, &self.server_addr(p), "sport")
    }

    /// Undoes `kill_path`: the link comes back up (a reset path reconnects by itself).
    pub fn restore_path(&self, p: usize) {
        self.link_up(p);
    }

    /// Takes path `p`'s emulated link (`Options::links`) down or up: everything queued or in
    /// flight on it is lost, and nothing crosses it, in either direction, until it is up.
    pub fn set_emulated_link(&self, p: usize, up: bool) {
        self.emu.as_ref().expect("Options::links").set_path_up(p, up);
    }

    /// What each emulated link (`Options::links`) did so far, per path `[down, up]`.
    pub fn link_stats(&self) -> Vec<[mpflex_lab::link::LinkStats; 2]> {
        self.emu.as_ref().expect("Options::links").stats()
    }

    /// Takes path `p`'s link down on the client side (no reset reaches anyone).
    pub fn link_down(&self, p: usize) {
        set_link(&self.topo.client_ns, &self.topo.client_dev(p), "down");
    }

    pub fn link_up(&self, p: usize) {
        set_link(&self.topo.client_ns, &self.topo.client_dev(p), "up");
        set_link(&self.topo.server_ns, &self.topo.server_dev(p), "up");
        // Addresses survive a down/up, but the route needs the link to be up again.
    }

    /// Destroys path `p`'s TCP connection in the client's kernel (both ends see a reset).
    /// Returns whether `ss` found and destroyed a socket.
    pub fn kill_socket(&self, p: usize) -> bool {
        ss_kill(&self.topo.client_ns, &self.client_addr(p), "dport")
    }

    /// Resident memory of a child (the `ip netns exec` child execs into the program, so
    /// its pid is the program's).
    pub fn rss_kib(child: &Child) -> u64 {
        rss_kib_of(child.id())
    }

    /// Per-path payload bytes the client sent.
    pub fn client_path_bytes_sent(&self) -> Vec<u64> {
        let s = self.client_status();
        s["paths"]
            .as_array()
            .map(|a| a.iter().map(|p| p["bytes_sent"].as_u64().unwrap_or(0)).collect())
            .unwrap_or_default()
    }

    /// Sends the client namespace's own TCP connections to `remote` (on `dport`, or any
    /// port) to the client's transparent listener: the `iptables REDIRECT` rule of
    /// docs/transparent.md.
    pub fn redirect_to_client(&self, remote: &str, dport: Option<u16>) {
        let port = dport.map(|p| p.to_string());
        let to = TRANSPARENT_PORT.to_string();
        let mut args = vec![
            "ip",
            "netns",
            "exec",
            &self.topo.client_ns,
            "iptables",
            "-t",
            "nat",
            "-A",
            "OUTPUT",
            "-p",
            "tcp",
            "-d",
            remote,
        ];
        if let Some(p) = &port {
            args.extend(["--dport", p]);
        }
        args.extend(["-j", "REDIRECT", "--to-ports", &to]);
        sh(&args);
    }

    /// Makes `addr` a "remote" service address: on the server namespace's loopback (where
    /// the origin listens on every address), routed over path 0 in the client namespace.
    pub fn add_remote(&self, addr: &str) {
        self.add_remote_via(addr, &self.topo.client_dev(0));
    }

    /// As [`Lab::add_remote`], routed through the client namespace's device `dev` (a TUN,
    /// say); IPv4 or IPv6.
    pub fn add_remote_via(&self, addr: &str, dev: &str) {
        let host = if addr.contains(':') {
            format!("{addr}/128")
        } else {
            format!("{addr}/32")
        };
        sh(&["ip", "-n", &self.topo.server_ns, "addr", "add", &host, "dev", "lo"]);
        sh(&["ip", "-n", &self.topo.client_ns, "route", "add", &host, "dev", dev]);
    }

    /// Runs a program inside namespace `ns`, output to `log` in the lab's directory.
    pub fn spawn_in(&self, ns: &str, args: &[&str], log: &str) -> Child {
        self.spawn(ns, args, log)
    }
}

/// The `congestion` line of a `[tuning]` table, if any.
fn congestion(opts: &Options) -> String {
    opts.congestion
        .map(|cc| format!("congestion = \"{cc}\"\n"))
        .unwrap_or_default()
}

/// `ip link set <dev> <state>` in namespace `ns`.
fn set_link(ns: &str, dev: &str, state: &str) {
    sh(&["ip", "-n", ns, "link", "set", dev, state]);
}

/// `ss -K` in namespace `ns` on the TCP connection from `src` whose `port` ("sport" or
/// "dport") is the server's; whether it destroyed one (it lists what it destroyed).
fn ss_kill(ns: &str, src: &str, port: &str) -> bool {
    let out = mpflex_netns::command(ns, "ss")
        .args(["-K", "-H", "-n", "-t", "src", src, port, "="])
        .arg(format!(":{SERVER_PORT}"))
        .output()
        .expect("ss");
    out.status.success() && String::from_utf8_lossy(&out.stdout).lines().any(|l| l.contains(src))
}

/// VmRSS of a process, KiB (0 when it is gone).
pub fn rss_kib_of(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

impl Lab {
    pub fn log(&self, which: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("{which}.log"))).unwrap_or_default()
    }

    /// The client's SOCKS address (reachable from inside the client namespace).
    pub fn socks(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], SOCKS_PORT))
    }

    pub fn server_path_addr(&self, p: usize) -> SocketAddr {
        format!("{}:{SERVER_PORT}", self.server_addr(p)).parse().unwrap()
    }
}

/// How a test breaks a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kill {
    /// `ip link set <veth> down` on the client side: the path goes silent and must be
    /// found dead by its timeout.
    LinkDown,
    /// `ss -K` on the path's TCP connection in the client: both ends see it fail at once.
    Reset,
    /// The same in the server.
    ServerReset,
}

/// Samples the peak RSS (KiB) of some processes every 50 ms until dropped.
pub struct RssPeak {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<Vec<u64>>>,
}

impl RssPeak {
    pub fn start(pids: Vec<u32>) -> RssPeak {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut peak = vec![0u64; pids.len()];
            while !flag.load(Ordering::Relaxed) {
                for (i, &pid) in pids.iter().enumerate() {
                    peak[i] = peak[i].max(rss_kib_of(pid));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            peak
        });
        RssPeak {
            stop,
            handle: Some(handle),
        }
    }

    /// Peak RSS of each process, KiB, in the order given.
    pub fn finish(mut self) -> Vec<u64> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().unwrap().join().unwrap()
    }
}

impl Drop for RssPeak {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A process killed when the test ends, passed or failed: a failing test must not leave
/// it running (holding a port, or the output pipe of whoever ran the tests).
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for c in [&mut self.client, &mut self.server, &mut self.origin]
            .into_iter()
            .flatten()
        {
            let _ = c.kill();
            let _ = c.wait();
        }
        // The emulator's threads stop before their interfaces go with the namespaces.
        drop(self.emu.take());
        let failed = std::thread::panicking();
        if failed {
            for which in ["client", "server"] {
                let log = self.log(which);
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                eprintln!("--- {which} log (last lines) ---");
                for l in tail.iter().rev() {
                    eprintln!("{l}");
                }
            }
        }
        // The namespaces go when `topo` is dropped, after this.
        // `MPFLEX_TEST_KEEP=1` keeps them after a passing test too (to study its logs).
        if failed || std::env::var_os("MPFLEX_TEST_KEEP").is_some() {
            eprintln!("configs and logs kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A key pair as `mpflex keygen` prints it: (private, public).
pub fn keygen() -> (String, String) {
    let out = sh(&[BIN, "keygen"]);
    let get = |k: &str| {
        out.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split('"').nth(1))
            .unwrap()
            .to_string()
    };
    (get("private_key"), get("public_key"))
}

/// `bash -c` in namespace `ns` (with pipefail); stdout, or a sentence saying how it failed.
pub fn run_in(ns: &str, script: &str) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "bash", "-c"])
        .arg(format!("set -o pipefail; {script}"))
        .output()
        .unwrap();
    if out.status.success() {
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    } else {
        format!(
            "failed ({}): {}; {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            String::from_utf8_lossy(&out.stdout).trim()
        )
    }
}

/// Debian's headless Chromium, or the full browser (which then needs `--headless`): the
/// command and its extra arguments.
pub fn chromium() -> Option<(&'static str, &'static [&'static str])> {
    if mpflex_netns::have_command("chromium-headless-shell") {
        Some(("chromium-headless-shell", &[]))
    } else if mpflex_netns::have_command("chromium") {
        Some(("chromium", &["--headless"]))
    } else {
        None
    }
}

/// Waits (at most 10 s) until every link of namespace `ns` that is up with a carrier
/// has its IPv6 link-local address and no address is still tentative. The kernel makes a
/// link's link-local address once it sees the carrier (its link watch runs up to a second
/// later), and announces it as usable (`RTM_NEWADDR` without the tentative flag) only
/// when duplicate address detection ends, a second or two after (RFC 4862 5.4); Chromium
/// takes any such change for a new network and fails the connections it is still opening
/// (`net::ERR_NETWORK_CHANGED`), so a browser must start after it.
pub fn wait_for_dad(ns: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let links: serde_json::Value = serde_json::from_str(&sh(&["ip", "-n", ns, "-j", "addr", "show"])).unwrap();
        let unsettled: Vec<String> = links
            .as_array()
            .unwrap()
            .iter()
            .filter(|link| {
                let flags = link["flags"].as_array().cloned().unwrap_or_default();
                let has = |f: &str| flags.iter().any(|x| x == f);
                let v6: Vec<&serde_json::Value> = link["addr_info"]
                    .as_array()
                    .map(|a| a.iter().filter(|a| a["family"] == "inet6").collect())
                    .unwrap_or_default();
                let tentative = v6.iter().any(|a| a["tentative"] == true);
                let link_local = v6.iter().any(|a| a["scope"] == "link");
                tentative || (has("UP") && has("LOWER_UP") && !has("LOOPBACK") && !link_local)
            })
            .map(|link| link["ifname"].as_str().unwrap_or("?").to_string())
            .collect();
        if unsettled.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "in {ns}, {unsettled:?} still without a settled IPv6 link-local address after 10 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Lets every group of namespace `ns` open ICMP echo ("ping") sockets, as the server's
/// echo relay needs (docs/tun.md).
pub fn allow_ping_sockets(ns: &str) {
    sh(&[
        "ip",
        "netns",
        "exec",
        ns,
        "sysctl",
        "-qw",
        "net.ipv4.ping_group_range=0 2147483647",
    ]);
}
