//! What the hostile-client tests share: the server's `/metrics` counters, an honest join
//! timed in-process, room for many descriptors in the test process, and the attacks.

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use mpflex_wire::{Frame, TargetAddr};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// The server's `/metrics` text, scraped with curl inside its namespace.
pub fn server_metrics(lab: &Lab) -> String {
    let url = format!("http://127.0.0.1:{SERVER_STATUS}/metrics");
    let out = mpflex_netns::command(&lab.topo.server_ns, "curl")
        .args(["-sS", "--max-time", "5", &url])
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of the sample `name` (the whole name up to its labels) in a metrics text,
/// summed over its label sets; 0 if absent.
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with(' ') || r.starts_with('{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// One join as the lab's client would make it (preamble, Noise handshake, Hello, the
/// server's answer), from `source` if given; how long it took.
pub async fn timed_join(
    server: SocketAddr,
    source: Option<std::net::IpAddr>,
    client_priv: [u8; 32],
    server_pub: [u8; 32],
) -> anyhow::Result<Duration> {
    let t0 = Instant::now();
    let sock = tokio::net::TcpSocket::new_v4()?;
    if let Some(ip) = source {
        sock.bind(SocketAddr::new(ip, 0))?;
    }
    let mut s = sock.connect(server).await?;
    let pre = mpflex_wire::Route::Any.encode();
    let t = mpflex::crypto::client_handshake(&mut s, &pre, &client_priv, &server_pub).await?;
    let token: [u8; 16] = rand::random();
    mpflex::pathconn::join_as_client(&mut s, &t, token, 0).await?;
    Ok(t0.elapsed())
}

/// The best of `runs` downloads of `size` bytes by the lab's honest client, each
/// checked against its sha256; seconds.
pub fn best_download(lab: &Lab, size: u64, runs: usize) -> f64 {
    let want = lab.expected_sha256(size);
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            assert_eq!(lab.fetch(size), want, "the honest download arrived corrupted or failed");
            t.elapsed().as_secs_f64()
        })
        .fold(f64::MAX, f64::min)
}

/// Raises this process's soft descriptor limit to its hard one; returns the limit.
pub fn raise_nofile() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the struct given.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        r.rlim_cur = r.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &r);
    }
    r.rlim_cur
}

/// A key written as `mpflex keygen` prints it, as bytes.
pub fn key(s: &str) -> [u8; 32] {
    mpflex::crypto::decode_key(s, "test").unwrap()
}

/// The HTTP status code the server's status listener gives `path` asked with `Host: host`.
pub fn status_code_with_host(lab: &Lab, path: &str, host: &str) -> String {
    let url = format!("http://127.0.0.1:{SERVER_STATUS}{path}");
    let out = mpflex_netns::command(&lab.topo.server_ns, "curl")
        .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5", "-H"])
        .arg(format!("Host: {host}"))
        .arg(&url)
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Accepts connections on `port` in namespace `ns` and holds them, silent; the count of
/// those accepted.
pub fn silent_destination(ns: &str, port: u16) -> Arc<AtomicUsize> {
    let accepted = Arc::new(AtomicUsize::new(0));
    let n = accepted.clone();
    let l = in_ns(ns, move || TcpListener::bind(("0.0.0.0", port)).unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming().flatten() {
            n.fetch_add(1, Ordering::Relaxed);
            held.push(s);
        }
    });
    accepted
}

/// Streams still open among `socks` (neither reset nor closed by the far end).
pub fn open_count(socks: &[TcpStream]) -> usize {
    socks
        .iter()
        .filter(|s| {
            let (mut b, mut r) = ([0u8; 16], *s);
            matches!(r.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
        })
        .count()
}

/// Opens `n` streams through the SOCKS5 listener `proxy` to `dest`:`port`; those the
/// proxy accepted, non-blocking.
pub fn hold_streams(proxy: SocketAddr, dest: &str, port: u16, n: usize) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for _ in 0..n {
        if let Ok(s) = socks_connect(proxy, dest, port) {
            s.set_nonblocking(true).unwrap();
            held.push(s);
        }
    }
    held
}

pub struct Attack {
    /// Bytes the server sent the attacker.
    pub read: Arc<AtomicU64>,
    /// When the server closed the attacker's connection (since the attack started).
    pub closed_after: Option<Duration>,
}

/// The memory attacker: joins with a valid key, grants unlimited credit, opens `streams`
/// streams asking the lab's origin for `each` bytes, reads its socket, pings to keep its
/// path alive, and acknowledges nothing, until `stop` or the server closes it.
pub async fn never_acknowledge(
    server: SocketAddr,
    keys: ([u8; 32], [u8; 32]),
    streams: u32,
    each: u64,
    read: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) -> Attack {
    let t0 = Instant::now();
    let mut s = tokio::net::TcpStream::connect(server).await.expect("connect");
    let t = mpflex::crypto::client_handshake(&mut s, &mpflex_wire::Route::Any.encode(), &keys.0, &keys.1)
        .await
        .expect("handshake with a valid key");
    let (_, joined) = mpflex::pathconn::join_as_client(&mut s, &t, rand::random(), 0)
        .await
        .expect("join");
    let mut nonce = joined.nonces.0;
    let mut frames = vec![Frame::MaxData { max: u64::MAX }];
    let mut seq = 0;
    for i in 0..streams {
        let stream = 2 * i + 1;
        let req = Bytes::from(format!("GET /bytes/{each} HTTP/1.0\r\n\r\n"));
        let span = req.len() as u64;
        frames.push(Frame::Open {
            seq,
            stream,
            ts: 0,
            paths: u64::MAX,
            scheduler: 0,
            energy: 0,
            addr: TargetAddr::Ip(SocketAddr::from(([127, 0, 0, 1], ORIGIN_PORT))),
            data: req,
        });
        frames.push(Frame::Window { stream, max: u64::MAX });
        seq += span;
    }
    let seal = |frames: &[Frame], nonce: &mut u64| {
        let mut plain = Vec::new();
        for f in frames {
            f.encode(&mut plain);
        }
        let mut wire = Vec::new();
        mpflex::crypto::seal(&t, nonce, &plain, &mut wire).unwrap();
        wire
    };
    let (mut rd, mut wr) = s.into_split();
    wr.write_all(&seal(&frames, &mut nonce)).await.unwrap();
    let mut buf = BytesMut::with_capacity(1 << 20);
    let mut ping = tokio::time::interval(Duration::from_millis(500));
    let mut id = 0;
    loop {
        if stop.load(Ordering::Relaxed) {
            return Attack {
                read,
                closed_after: None,
            };
        }
        tokio::select! {
            r = rd.read_buf(&mut buf) => match r {
                Ok(0) | Err(_) => return Attack { read, closed_after: Some(t0.elapsed()) },
                Ok(n) => {
                    read.fetch_add(n as u64, Ordering::Relaxed);
                    buf.clear();
                }
            },
            _ = ping.tick() => {
                id += 1;
                let w = seal(&[Frame::Ping { id }], &mut nonce);
                if wr.write_all(&w).await.is_err() {
                    return Attack { read, closed_after: Some(t0.elapsed()) };
                }
            }
        }
    }
}

/// A client process of `key` with its own SOCKS5 port, over the lab's two paths.
pub fn hostile_client(lab: &Lab, key: &str, i: usize) -> (std::process::Child, SocketAddr) {
    let socks = SOCKS_PORT + 100 + i as u16;
    let mut cfg = format!(
        "private_key = \"{key}\"\nserver_public_key = \"{}\"\nsocks_listen = \"127.0.0.1:{socks}\"\n\
         status_listen = \"127.0.0.1:{}\"\n",
        lab.server_pub,
        CLIENT_STATUS + 100 + i as u16
    );
    for p in 0..2 {
        cfg += &format!(
            "[[paths]]\nname = \"p{p}\"\nserver = \"{}:{SERVER_PORT}\"\nsource = \"{}\"\n",
            lab.server_addr(p),
            lab.client_addr(p)
        );
    }
    let file = lab.dir.join(format!("hostile{i}.toml"));
    std::fs::write(&file, cfg).unwrap();
    let cns = lab.topo.client_ns.clone();
    let child = lab.spawn_in(
        &cns,
        &[BIN, "client", "--config", file.to_str().unwrap()],
        &format!("hostile{i}.log"),
    );
    let addr = SocketAddr::from(([127, 0, 0, 1], socks));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !in_ns(&cns, move || TcpStream::connect(addr).is_ok()) {
        assert!(Instant::now() < deadline, "a hostile client never listened on {addr}");
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, addr)
}
