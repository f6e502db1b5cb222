//! A pool of three `mpflex server`s behind the repository's HAProxy configuration
//! (deploy/haproxy/), in namespaces: the client namespace reaches the server namespace
//! over two links (10.<net>.1.0/24, 10.<net>.2.0/24); HAProxy listens on port 7000 of
//! both, the servers on 0.0.0.0:710<id> (so a client may also reach one directly, for
//! comparison), an HTTP origin on 127.0.0.1:8080. Everything goes on drop.
#![allow(dead_code)]

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::support::{in_ns, sh, spawn_in_ns, Layout, Topology, BIN, ORIGIN_PORT};

pub const BALANCER_PORT: u16 = 7000;
pub const SERVERS: u16 = 3;

static TAG: AtomicU32 = AtomicU32::new(0);

/// Whether the balancer tests can run here (root, HAProxy, python3 for the origin).
pub fn ready(test: &str) -> bool {
    mpflex_netns::require_root(test) && mpflex_netns::require_tools(test, &["ip", "python3", "haproxy", "tc"])
}

pub fn server_port(id: u16) -> u16 {
    7100 + id
}

pub fn status_port(id: u16) -> u16 {
    9190 + id
}

pub struct KeyPair {
    pub private: String,
    pub public: String,
}

pub fn keygen() -> KeyPair {
    let (private, public) = crate::support::keygen();
    KeyPair { private, public }
}

/// The balancer host's buffer settings (docs/balancer.md): HAProxy's `tune.rcvbuf.server`
/// and the `net.ipv4.tcp_notsent_lowat` sysctl, as deployed, or without them to measure
/// what they buy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buffers {
    /// Both, as deploy/haproxy/ and docs/balancer.md set them.
    Tuned,
    /// `tune.rcvbuf.server` only.
    NoSysctl,
    /// Neither.
    None,
}

impl Buffers {
    pub fn name(self) -> &'static str {
        match self {
            Buffers::Tuned => "tuned",
            Buffers::NoSysctl => "no-sysctl",
            Buffers::None => "none",
        }
    }
}

/// How a client's paths reach the pool.
#[derive(Clone, Copy)]
pub enum Via {
    Balancer,
    /// Server `id` directly, on the same links.
    Direct(u16),
}

pub struct Pool {
    pub topo: Topology,
    pub dir: PathBuf,
    /// Index `id - 1`.
    pub servers: Vec<Option<Child>>,
    haproxy: Option<Child>,
    origin: Option<Child>,
    pub clients: Vec<Child>,
    /// The pool's key (every server has it; clients pin it).
    pub server_key: KeyPair,
    /// Keys the servers accept, by name: "test" (the clients here), "other".
    pub client_key: KeyPair,
    pub other_key: KeyPair,
}

impl Pool {
    /// `rate_mbit`: a rate limit on each link and direction (0: none); `server_toml`:
    /// lines added to every server's configuration (top level), `{port}` replaced by the
    /// server's port and `{addr0}` by the server namespace's address on the first link.
    pub fn new(rate_mbit: u32, server_toml: &str) -> Pool {
        Pool::with_buffers(rate_mbit, server_toml, Buffers::Tuned)
    }

    /// [`Pool::new`] with the balancer host's buffer settings `buffers`.
    pub fn with_buffers(rate_mbit: u32, server_toml: &str, buffers: Buffers) -> Pool {
        let layout = Layout {
            kind: "bal",
            paths: 2,
            emulator: false,
            ipv6: false,
            mptcp: false,
        };
        let topo = Topology::with(layout, TAG.fetch_add(1, Ordering::SeqCst)).unwrap_or_else(|e| panic!("{e:#}"));
        let dir = std::env::temp_dir().join(&topo.name);
        std::fs::create_dir_all(&dir).unwrap();
        let mut pool = Pool {
            topo,
            dir,
            servers: Vec::new(),
            haproxy: None,
            origin: None,
            clients: Vec::new(),
            server_key: keygen(),
            client_key: keygen(),
            other_key: keygen(),
        };
        if rate_mbit > 0 {
            for p in 0..2 {
                for (ns, dev) in [
                    (&pool.topo.client_ns, pool.topo.client_dev(p)),
                    (&pool.topo.server_ns, pool.topo.server_dev(p)),
                ] {
                    sh(&[
                        "ip",
                        "netns",
                        "exec",
                        ns,
                        "tc",
                        "qdisc",
                        "add",
                        "dev",
                        &dev,
                        "root",
                        "tbf",
                        "rate",
                        &format!("{rate_mbit}mbit"),
                        "burst",
                        "64kb",
                        "latency",
                        "30ms",
                    ]);
                }
            }
        }
        // The balancer host's setting (docs/balancer.md): HAProxy's sockets towards the
        // clients hold little unsent data, so the servers' late binding sees the links.
        if buffers == Buffers::Tuned {
            sh(&[
                "ip",
                "netns",
                "exec",
                &pool.topo.server_ns,
                "sysctl",
                "-qw",
                "net.ipv4.tcp_notsent_lowat=131072",
            ]);
        }
        let origin = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/origin.py");
        pool.origin = Some(pool.spawn(
            &pool.topo.server_ns.clone(),
            &["python3", origin, "127.0.0.1", &ORIGIN_PORT.to_string()],
            "origin.log",
        ));
        // The pool's sessions share two client keys, each standing for many clients:
        // the sessions one key may hold are not limited here.
        for id in 1..=SERVERS {
            std::fs::write(
                pool.dir.join(format!("server{id}.toml")),
                format!(
                    "listen = [\"0.0.0.0:{port}\"]\nprivate_key = \"{key}\"\nstatus_listen = \"127.0.0.1:{status}\"\n\
                     server_id = {id}\n{extra}\n\
                     [[clients]]\nname = \"test\"\npublic_key = \"{c}\"\n\
                     [[clients]]\nname = \"other\"\npublic_key = \"{o}\"\n\
                     [acl]\nallow_loopback = true\n\
                     [limits]\nmax_sessions_per_client = 10000\n",
                    port = server_port(id),
                    extra = server_toml
                        .replace("{port}", &server_port(id).to_string())
                        .replace("{addr0}", &pool.topo.server_addr(0)),
                    key = pool.server_key.private,
                    status = status_port(id),
                    c = pool.client_key.public,
                    o = pool.other_key.public,
                ),
            )
            .unwrap();
            pool.servers.push(None);
            pool.start_server(id);
        }
        pool.start_haproxy(buffers);
        pool.wait_port(ORIGIN_PORT);
        pool
    }

    fn spawn(&self, ns: &str, args: &[&str], log: &str) -> Child {
        let log = File::create(self.dir.join(log)).unwrap();
        mpflex_netns::command(ns, args[0])
            .args(&args[1..])
            .env("RUST_LOG", "info")
            .env("MPFLEX_RUNTIME_DIR", self.dir.join("run"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn")
    }

    pub fn start_server(&mut self, id: u16) {
        let cfg = self.dir.join(format!("server{id}.toml"));
        let child = self.spawn(
            &self.topo.server_ns.clone(),
            &[BIN, "server", "--config", cfg.to_str().unwrap()],
            &format!("server{id}.log"),
        );
        self.servers[id as usize - 1] = Some(child);
        self.wait_port(server_port(id));
    }

    /// Starts HAProxy with the repository's configuration, its addresses from the
    /// environment, as that configuration expects; with [`Buffers::None`], without its
    /// `tune.rcvbuf.server`.
    fn start_haproxy(&mut self, buffers: Buffers) {
        let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/haproxy/haproxy.cfg");
        let cfg = if buffers == Buffers::None {
            let text = std::fs::read_to_string(repo).unwrap();
            assert!(text.contains("tune.rcvbuf.server"), "{repo} sets tune.rcvbuf.server");
            let kept: Vec<&str> = text.lines().filter(|l| !l.contains("tune.rcvbuf.server")).collect();
            let copy = self.dir.join("haproxy.cfg");
            std::fs::write(&copy, kept.join("\n") + "\n").unwrap();
            copy
        } else {
            PathBuf::from(repo)
        };
        let log = File::create(self.dir.join("haproxy.log")).unwrap();
        let mut cmd = mpflex_netns::command(&self.topo.server_ns, "haproxy");
        cmd.arg("-db")
            .arg("-f")
            .arg(&cfg)
            .env("MPFLEX_BIND", format!(":{BALANCER_PORT}"))
            .env(
                "MPFLEX_MAP",
                concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/haproxy/servers.map"),
            )
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        for id in 1..=SERVERS {
            cmd.env(format!("MPFLEX_SERVER_{id}"), format!("127.0.0.1:{}", server_port(id)));
        }
        self.haproxy = Some(cmd.spawn().expect("haproxy"));
        self.wait_port(BALANCER_PORT);
        // The first health checks pass before any client arrives.
        std::thread::sleep(Duration::from_millis(300));
    }

    /// Waits for `port` on 127.0.0.1 in the server namespace.
    fn wait_port(&self, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if in_ns(&self.topo.server_ns, move || {
                TcpStream::connect(("127.0.0.1", port)).is_ok()
            }) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("port {port} never opened; logs in {}", self.dir.display());
    }

    /// A client configuration: two paths, one per link, `via` the balancer or straight to
    /// a server; `socks`/`status`: its listen ports (0: none).
    pub fn client_toml(&self, via: Via, socks: u16, status: u16) -> String {
        let port = match via {
            Via::Balancer => BALANCER_PORT,
            Via::Direct(id) => server_port(id),
        };
        let mut t = format!(
            "private_key = \"{}\"\nserver_public_key = \"{}\"\n",
            self.client_key.private, self.server_key.public
        );
        if socks > 0 {
            t += &format!("socks_listen = \"127.0.0.1:{socks}\"\n");
        }
        if status > 0 {
            t += &format!("status_listen = \"127.0.0.1:{status}\"\n");
        }
        for p in 0..2 {
            t += &format!(
                "[[paths]]\nname = \"p{p}\"\nserver = \"{}:{port}\"\nsource = \"{}\"\n",
                self.topo.server_addr(p),
                self.topo.client_addr(p)
            );
        }
        t
    }

    /// Starts an `mpflex client` process; returns its index in `clients`.
    pub fn spawn_client(&mut self, name: &str, toml: &str) -> usize {
        let cfg = self.dir.join(format!("{name}.toml"));
        std::fs::write(&cfg, toml).unwrap();
        let c = self.spawn(
            &self.topo.client_ns.clone(),
            &[BIN, "client", "--config", cfg.to_str().unwrap()],
            &format!("{name}.log"),
        );
        self.clients.push(c);
        self.clients.len() - 1
    }

    /// Status JSON of server `id` (Null if it does not answer).
    pub fn server_status(&self, id: u16) -> serde_json::Value {
        http_json(&self.topo.server_ns, status_port(id))
    }

    /// Status JSON of a client with `status_listen` on `port`.
    pub fn client_status(&self, port: u16) -> serde_json::Value {
        http_json(&self.topo.client_ns, port)
    }

    /// Per server (index id - 1): the sessions it holds as (session id, paths up).
    pub fn placement(&self) -> Vec<Vec<(String, usize)>> {
        (1..=SERVERS)
            .map(|id| {
                let s = self.server_status(id);
                s["sessions"]
                    .as_array()
                    .map(|list| {
                        list.iter()
                            .map(|x| {
                                let up = x["paths"]
                                    .as_array()
                                    .map_or(0, |p| p.iter().filter(|p| p["up"] == true).count());
                                (x["session"].as_str().unwrap_or("").to_string(), up)
                            })
                            .collect()
                    })
                    .unwrap_or_default()
            })
            .collect()
    }

    /// The server (id) holding the session of the client whose status is on `port`,
    /// once both of its paths are up there.
    pub fn server_of(&self, status: u16) -> Option<u16> {
        let s = self.client_status(status);
        let session = s["session"].as_str()?.to_string();
        let up = s["paths"].as_array()?.iter().filter(|p| p["up"] == true).count();
        if up < 2 {
            return None;
        }
        self.placement()
            .iter()
            .position(|list| list.iter().any(|(id, up)| *id == session && *up == 2))
            .map(|i| i as u16 + 1)
    }

    /// Waits until the client with status on `port` has both paths up on one server.
    pub fn wait_placed(&self, status: u16, within: Duration) -> u16 {
        let deadline = Instant::now() + within;
        loop {
            if let Some(id) = self.server_of(status) {
                return id;
            }
            assert!(
                Instant::now() < deadline,
                "client with status :{status} not placed within {within:?}; logs in {}",
                self.dir.display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn signal_server(&mut self, id: u16, sig: i32) -> Child {
        let c = self.servers[id as usize - 1].take().expect("server running");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(c.id() as i32, sig) };
        c
    }

    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("{name}.log"))).unwrap_or_default()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let children = self
            .clients
            .iter_mut()
            .chain(self.servers.iter_mut().flatten())
            .chain(self.haproxy.iter_mut())
            .chain(self.origin.iter_mut());
        for c in children {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            eprintln!("configs and logs kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// GET /status from 127.0.0.1:`port` in namespace `ns`.
pub fn http_json(ns: &str, port: u16) -> serde_json::Value {
    in_ns(ns, move || {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
            return serde_json::Value::Null;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
        let _ = s.write_all(format!("GET /status HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes());
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out);
        text.split_once("\r\n\r\n")
            .and_then(|(_, body)| serde_json::from_str(body).ok())
            .unwrap_or(serde_json::Value::Null)
    })
}

/// Downloads `n` bytes from the origin through the SOCKS5 port `socks` of a client in
/// namespace `ns`; the number of body bytes that arrived, or why it failed.
pub fn fetch(ns: &str, socks: u16, n: u64, timeout: Duration) -> Result<u64, String> {
    let ns = ns.to_string();
    spawn_in_ns(&ns, move || {
        let proxy = std::net::SocketAddr::from(([127, 0, 0, 1], socks));
        let mut s = crate::support::socks_connect(proxy, "127.0.0.1", ORIGIN_PORT).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())?;
        write!(
            s,
            "GET /bytes/{n} HTTP/1.1\r\nHost: origin\r\nConnection: close\r\n\r\n"
        )
        .map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; 256 * 1024];
        let mut head = Vec::new();
        let mut body = 0u64;
        loop {
            let k = s.read(&mut buf).map_err(|e| format!("after {body} bytes: {e}"))?;
            if k == 0 {
                break;
            }
            if body == 0 && !head.windows(4).any(|w| w == b"\r\n\r\n") {
                head.extend_from_slice(&buf[..k]);
                if let Some(at) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                    body = (head.len() - at - 4) as u64;
                }
            } else {
                body += k as u64;
            }
            if body >= n {
                break;
            }
        }
        if body == n {
            Ok(body)
        } else {
            Err(format!("{body} of {n} bytes arrived"))
        }
    })
    .join()
    .unwrap_or_else(|_| Err("fetch thread panicked".into()))
}

/// Runs `sessions` client sessions with the real client code (`mpflex::client::run`) in
/// one process: this test process, on a runtime of two threads in the client namespace.
/// Every session has its own token, both paths, and SOCKS5 on 127.0.0.1:20000 + its index.
/// Returns a handle whose drop ends them.
pub fn run_sessions(ns: &str, toml: &str, sessions: usize) -> Sessions {
    let cfg: mpflex::config::ClientConfig = toml::from_str(toml).unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let s = stop.clone();
    let thread = spawn_in_ns(ns, move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut tasks = Vec::new();
            for i in 0..sessions {
                let mut c = cfg.clone();
                // A client needs an ingress; each session gets a SOCKS port of its own.
                c.socks_listen = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 20_000 + i as u16)));
                c.status_listen = None;
                tasks.push(tokio::spawn(mpflex::client::run(c, s.clone())));
                // Spread the handshakes a little, as real clients would arrive.
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            s.cancelled().await;
            for t in tasks {
                if let Ok(Err(e)) = t.await {
                    eprintln!("client session ended: {e:#}");
                }
            }
        });
    });
    Sessions {
        stop,
        thread: Some(thread),
    }
}

pub struct Sessions {
    stop: tokio_util::sync::CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Sessions {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// CPU time (user + system) of process `pid`, in clock ticks.
pub fn cpu_ticks(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let get = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name.
    get(11) + get(12)
}

pub fn run_quiet(cmd: &mut Command) {
    let _ = cmd.output();
}
