//! Policy rules end to end: each match kind routes its stream onto exactly the paths its
//! rule allows (per-path byte counters of the client's status), uploads and downloads
//! alike, and a SIGHUP reload changes the paths of new streams while open streams keep
//! theirs.

mod support;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use support::*;

/// Bytes a path that may not carry a stream may still send meanwhile: keepalives and
/// acknowledgements, never the stream's data.
const CONTROL_SLACK: u64 = 128 * 1024;

/// A sink in the server namespace: accepts on each port, reads until the peer's end, then
/// closes (so a writer that waits for the close knows every byte arrived).
const SINK: &str = r#"
import socket, sys, threading
def serve(c):
    while c.recv(1 << 16):
        pass
    c.close()
def listen(port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(64)
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()
for p in sys.argv[1:]:
    threading.Thread(target=listen, args=(int(p),), daemon=True).start()
threading.Event().wait()
"#;

const SINK_PORTS: [u16; 8] = [7101, 7102, 7103, 7104, 7105, 7106, 7107, 7108];

/// The sink's process, ended with the test.
struct Sink(std::process::Child);

impl Drop for Sink {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_sink(lab: &Lab) -> Sink {
    let mut args = vec!["python3", "-c", SINK];
    let ports: Vec<String> = SINK_PORTS.iter().map(|p| p.to_string()).collect();
    args.extend(ports.iter().map(String::as_str));
    let sink = Sink(lab.spawn_in(&lab.topo.server_ns, &args, "sink.log"));
    // Until the sink listens.
    for _ in 0..100 {
        let ok = in_ns(&lab.topo.server_ns, || {
            SINK_PORTS.iter().all(|p| TcpStream::connect(("127.0.0.1", *p)).is_ok())
        });
        if ok {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    sink
}

/// SOCKS5 CONNECT from the client namespace to `host:port`, with a user name if given.
fn socks(lab: &Lab, host: &str, port: u16, user: Option<&str>) -> TcpStream {
    let proxy: SocketAddr = format!("127.0.0.1:{SOCKS_PORT}").parse().unwrap();
    let (host, user) = (host.to_string(), user.map(str::to_string));
    in_ns(&lab.topo.client_ns, move || {
        let mut s = TcpStream::connect(proxy).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut r = [0u8; 2];
        match &user {
            Some(u) => {
                s.write_all(&[5, 1, 2]).unwrap();
                s.read_exact(&mut r).unwrap();
                assert_eq!(r, [5, 2]);
                let mut auth = vec![1, u.len() as u8];
                auth.extend_from_slice(u.as_bytes());
                auth.extend_from_slice(&[2, b'p', b'w']);
                s.write_all(&auth).unwrap();
                s.read_exact(&mut r).unwrap();
                assert_eq!(r, [1, 0]);
            }
            None => {
                s.write_all(&[5, 1, 0]).unwrap();
                s.read_exact(&mut r).unwrap();
            }
        }
        let mut req = match host.parse::<std::net::Ipv4Addr>() {
            Ok(ip) => [&[5, 1, 0, 1][..], &ip.octets()].concat(),
            Err(_) => [&[5, 1, 0, 3, host.len() as u8][..], host.as_bytes()].concat(),
        };
        req.extend_from_slice(&port.to_be_bytes());
        s.write_all(&req).unwrap();
        let mut rep = [0u8; 10];
        s.read_exact(&mut rep).unwrap();
        assert_eq!(rep[1], 0, "SOCKS reply");
        s
    })
}

/// Writes `first`, then `n` bytes, on a stream.
fn write_n(s: &mut TcpStream, first: &[u8], n: usize) {
    s.write_all(first).unwrap();
    let chunk = vec![0x5au8; 64 * 1024];
    let mut left = n;
    while left > 0 {
        let k = left.min(chunk.len());
        s.write_all(&chunk[..k]).unwrap();
        left -= k;
    }
}

/// Ends the stream and waits for the sink's close: every byte has arrived.
fn finish(mut s: TcpStream) {
    s.shutdown(Shutdown::Write).unwrap();
    let mut buf = [0u8; 64];
    while s.read(&mut buf).unwrap_or(0) > 0 {}
}

/// Sends `n` bytes on a new stream and returns once they arrived.
fn push(lab: &Lab, host: &str, port: u16, first: &[u8], n: usize, user: Option<&str>) {
    // The first bytes go alone, so they reach mpflex as the stream's first read.
    let mut s = socks(lab, host, port, user);
    s.write_all(first).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    write_n(&mut s, &[], n);
    finish(s);
}

/// A TLS 1.3 ClientHello record asking for `name` (RFC 8446 §4.1.2, RFC 6066 §3).
fn client_hello(name: &str) -> Vec<u8> {
    let n = name.len() as u16;
    let mut sni = (n + 3).to_be_bytes().to_vec();
    sni.push(0);
    sni.extend_from_slice(&n.to_be_bytes());
    sni.extend_from_slice(name.as_bytes());
    let mut exts = vec![0, 0];
    exts.extend_from_slice(&(sni.len() as u16).to_be_bytes());
    exts.extend_from_slice(&sni);
    let mut hello = vec![3, 3];
    hello.extend_from_slice(&[7; 32]);
    hello.push(0);
    hello.extend_from_slice(&[0, 2, 0x13, 0x01, 1, 0]);
    hello.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    hello.extend_from_slice(&exts);
    let mut hs = vec![1];
    hs.extend_from_slice(&(hello.len() as u32).to_be_bytes()[1..]);
    hs.extend_from_slice(&hello);
    let mut rec = vec![22, 3, 1];
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend_from_slice(&hs);
    rec
}

fn sent(lab: &Lab) -> Vec<u64> {
    lab.client_path_bytes_sent()
}

fn received(lab: &Lab) -> Vec<u64> {
    lab.client_path_bytes()
}

/// Asserts that between `before` and `after` path `on` carried at least `n` bytes and
/// the other path only control frames.
fn only_on(what: &str, before: &[u64], after: &[u64], on: usize, n: u64) {
    let d: Vec<u64> = after.iter().zip(before).map(|(a, b)| a - b).collect();
    eprintln!("{what}: per-path bytes {d:?}");
    assert!(d[on] >= n, "{what}: path {on} carried {} < {n} ({d:?})", d[on]);
    assert!(
        d[1 - on] < CONTROL_SLACK,
        "{what}: path {} carried {} bytes of a stream its rule keeps off it ({d:?})",
        1 - on,
        d[1 - on]
    );
}

/// The stream's rule in the client's status (the stream is open).
fn rule_hits(lab: &Lab, rule: &str) -> u64 {
    lab.client_status()["rule_hits"][rule].as_u64().unwrap_or(0)
}

const RULES: &str = r#"
[[classes]]
class = "bulk"
ports = [7106]

# Before by-port: the transparent download below goes to the origin's port too.
[[rules]]
name = "by-uid"
uids = [65534]
paths = ["p1"]

[[rules]]
name = "by-sni"
hosts = ["sni.test"]
paths = ["p2"]

[[rules]]
name = "by-user"
users = ["bob"]
paths = ["p2"]

[[rules]]
name = "by-host"
hosts = ["localhost"]
paths = ["p1"]

[[rules]]
name = "by-cidr"
cidrs = ["127.0.0.2/32"]
paths = ["p2"]

[[rules]]
name = "by-class"
traffic = ["bulk"]
paths = ["p1"]

[[rules]]
name = "by-port"
ports = [7101, 8080]
paths = ["p2"]

[[rules]]
name = "by-listener"
listeners = ["socks"]
paths = ["p1"]
"#;

#[test]
fn each_match_kind_routes_a_stream_onto_exactly_its_paths() {
    let test = "each_match_kind_routes_a_stream_onto_exactly_its_paths";
    if !ready(test) || !mpflex_netns::require_tools(test, &["iptables", "setpriv"]) {
        return;
    }
    let lab = Lab::new(Options {
        client_toml: RULES.into(),
        ..Options::default()
    });
    let _sink = start_sink(&lab);
    const N: usize = 4 << 20;
    // (rule, host, port, first bytes, SOCKS user, the path it allows)
    type Case<'a> = (&'a str, &'a str, u16, Vec<u8>, Option<&'a str>, usize);
    let cases: [Case; 7] = [
        ("by-port", "127.0.0.1", 7101, vec![], None, 1),
        ("by-sni", "127.0.0.1", 7102, client_hello("www.sni.test"), None, 1),
        ("by-user", "127.0.0.1", 7103, vec![], Some("bob"), 1),
        ("by-host", "localhost", 7104, vec![], None, 0),
        ("by-cidr", "127.0.0.2", 7105, vec![], None, 1),
        ("by-class", "127.0.0.1", 7106, vec![], None, 0),
        ("by-listener", "127.0.0.1", 7107, vec![], None, 0),
    ];
    for (rule, host, port, first, user, on) in cases {
        let before = sent(&lab);
        push(&lab, host, port, &first, N, user);
        only_on(rule, &before, &sent(&lab), on, N as u64);
        assert_eq!(rule_hits(&lab, rule), 1, "{rule}: {}", lab.client_status()["rule_hits"]);
    }

    // Downloads follow the rule too: the server sends the stream only on its paths.
    let before = received(&lab);
    let (got, want) = lab.download(N as u64);
    assert_eq!(got, want);
    only_on("by-port download", &before, &received(&lab), 1, N as u64);

    // Transparent ingress, by the uid of the application's socket.
    let remote = format!("10.{}.9.9", lab.topo.net);
    lab.add_remote(&remote);
    lab.redirect_to_client(&remote, None);
    let before = received(&lab);
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ip netns exec {} setpriv --reuid=65534 --regid=65534 --clear-groups \
             curl -sS --max-time 60 http://{remote}:{ORIGIN_PORT}/bytes/{N} | sha256sum",
            lab.topo.client_ns
        ))
        .output()
        .unwrap();
    let got = String::from_utf8_lossy(&out.stdout).get(..64).unwrap_or("").to_string();
    assert_eq!(got, lab.expected_sha256(N as u64), "{out:?}");
    only_on("by-uid download", &before, &received(&lab), 0, N as u64);
    assert_eq!(rule_hits(&lab, "by-uid"), 1);
}

#[test]
fn a_sighup_reload_moves_new_streams_and_keeps_open_ones() {
    let test = "a_sighup_reload_moves_new_streams_and_keeps_open_ones";
    if !ready(test) {
        return;
    }
    let rule = |path: &str| format!("[[rules]]\nname = \"sink\"\nports = [7101]\npaths = [\"{path}\"]\n");
    let lab = Lab::new(Options {
        client_toml: rule("p1"),
        ..Options::default()
    });
    let _sink = start_sink(&lab);
    const N: usize = 4 << 20;
    // An open stream under the old rule.
    let mut old = socks(&lab, "127.0.0.1", 7101, None);
    let before = sent(&lab);
    write_n(&mut old, &[], N);
    std::thread::sleep(Duration::from_millis(500));
    only_on("before the reload", &before, &sent(&lab), 0, N as u64);

    // The rule now says p2; the client re-reads its file on SIGHUP.
    let cfg = lab.dir.join("client.toml");
    let text = std::fs::read_to_string(&cfg).unwrap().replace(&rule("p1"), &rule("p2"));
    std::fs::write(&cfg, text).unwrap();
    let pid = lab.client.as_ref().unwrap().id();
    sh(&["kill", "-HUP", &pid.to_string()]);
    let log_says = || lab.log("client").contains("rules reloaded");
    for _ in 0..50 {
        if log_says() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(log_says(), "no reload in the client's log");

    // A new stream follows the new rule...
    let before = sent(&lab);
    push(&lab, "127.0.0.1", 7101, &[], N, None);
    only_on("new stream after the reload", &before, &sent(&lab), 1, N as u64);
    // ...and the open one keeps its paths, and its connection.
    let before = sent(&lab);
    write_n(&mut old, &[], N);
    finish(old);
    only_on("open stream after the reload", &before, &sent(&lab), 0, N as u64);
    assert_eq!(lab.paths_up(), 2);
}

/// The scheduler each end shows for its open stream to `target`: (client up, client
/// down, server up, server down); `None` until both show the stream.
fn stream_schedulers(lab: &Lab, target: &str) -> Option<[String; 4]> {
    let of = |status: &serde_json::Value| -> Option<[String; 2]> {
        let list = status["stream_list"].as_array()?;
        let s = list.iter().find(|s| s["target"] == target)?;
        Some([s["scheduler_up"].as_str()?.into(), s["scheduler_down"].as_str()?.into()])
    };
    let [cu, cd] = of(&lab.client_status())?;
    let [su, sd] = of(&lab.server_status()["sessions"][0])?;
    Some([cu, cd, su, sd])
}

/// `scheduler = "dems"` (DEMS-F by its alias, on both ends) runs DEMS-F both ways: the
/// client for a stream's uploads, the server for its downloads (each end's status shows
/// what it runs for the stream). The alias was once accepted and built DEMS-F for the
/// session, yet its streams ran MinRTT and asked the server for MinRTT, without a word.
#[test]
fn a_scheduler_alias_runs_what_it_names_both_ways() {
    let test = "a_scheduler_alias_runs_what_it_names_both_ways";
    if !ready(test) {
        return;
    }
    let lab = Lab::new(Options {
        scheduler: "dems",
        ..Options::default()
    });
    let _sink = start_sink(&lab);
    let mut s = socks(&lab, "127.0.0.1", SINK_PORTS[0], None);
    s.write_all(b"hello").unwrap();
    let target = format!("127.0.0.1:{}", SINK_PORTS[0]);
    let mut seen = None;
    for _ in 0..100 {
        seen = stream_schedulers(&lab, &target);
        if seen.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let want = "dems-f".to_string();
    assert_eq!(seen, Some([want.clone(), want.clone(), want.clone(), want]));
    assert_eq!(lab.client_status()["scheduler"], "dems-f");
    assert_eq!(lab.server_status()["sessions"][0]["scheduler"], "dems-f");
    finish(s);
}
