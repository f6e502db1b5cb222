//! Resets through mpflex as over the kernel's TCP, side by side with a direct connection:
//! a destination that answers and then resets (it closes with the request unread, as a
//! server refusing a request does) has its whole answer read by the application, then the
//! reset; an application that sends and then resets has every byte it sent reach the
//! destination, then the reset. The same destination program runs beside the test (the
//! direct case) and in the server's namespace (reached through SOCKS5 and through the TUN),
//! and each case must read the same through mpflex as directly.

mod support;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

/// The destination's port in the server's namespace (the direct one takes any free port
/// beside the test).
const PORT: u16 = 9_301;
/// The answer a destination sends before its reset, and what the application sends
/// before its own: more than a frame, and more than a socket buffer holds unread.
const ANSWER: usize = 600_000;
const SENT: usize = 700_000;
/// The request body a destination leaves unread, so that its close is a reset.
const BODY: usize = 32 * 1024;

/// The destination, listening on the port it is given (0: any; it prints the port), on
/// 127.0.0.1 or the address it is given. `ANSWER n m` (then a request body of m bytes it
/// never reads): waits until the body is in, sends n bytes, waits until the application's
/// side has acknowledged them, and closes with the body unread (an RST). `SINK`: reads
/// until the end or a reset and appends "<bytes> <eof|reset>" to the results file.
const DESTINATION: &str = r#"
import fcntl, socket, struct, sys, termios, threading, time
port, results = int(sys.argv[1]), sys.argv[2]
host = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind((host, port))
ls.listen(16)
print(ls.getsockname()[1], flush=True)
def unacked(c):
    return struct.unpack("i", fcntl.ioctl(c.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
def unread(c):
    return struct.unpack("i", fcntl.ioctl(c.fileno(), termios.FIONREAD, b"\0" * 4))[0]
def serve(c):
    head = b""
    while b"\n" not in head:
        b = c.recv(1)
        if not b:
            return
        head += b
    if head.startswith(b"ANSWER"):
        _, n, body = head.split()
        while unread(c) < int(body):
            time.sleep(0.01)
        c.sendall(bytes(i % 251 for i in range(int(n))))
        while unacked(c) > 0:
            time.sleep(0.01)
        c.close()
        return
    n, how = 0, "eof"
    try:
        while True:
            b = c.recv(65536)
            if not b:
                break
            n += len(b)
    except ConnectionResetError:
        how = "reset"
    with open(results, "a") as f:
        f.write(f"{n} {how}\n")
while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

/// Bytes the kernel holds for `s` that its peer has not acknowledged.
fn unacked(s: &TcpStream) -> i32 {
    let mut n: libc::c_int = 0;
    // SAFETY: TIOCOUTQ writes one int through a valid pointer.
    unsafe { libc::ioctl(s.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
    n
}

/// Asks for an answer with a request body the destination never reads, waits until the
/// answer and the reset are in, then reads: (bytes read, whether a reset ended them).
fn answer_then_reset(mut s: TcpStream) -> (usize, bool) {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(format!("ANSWER {ANSWER} {BODY}\n").as_bytes()).unwrap();
    s.write_all(&vec![b'x'; BODY]).unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let (mut n, mut buf) = (0, vec![0u8; 65536]);
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (n, false),
            Ok(k) => {
                assert!(
                    buf[..k].iter().enumerate().all(|(i, &b)| b == ((n + i) % 251) as u8),
                    "answer corrupted near byte {n}"
                );
                n += k;
            }
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return (n, true),
            Err(e) => panic!("after {n} bytes: {e}"),
        }
    }
}

/// Sends [`SENT`] bytes, waits until they are acknowledged, then resets the connection.
fn send_then_reset(mut s: TcpStream) {
    s.write_all(b"SINK\n").unwrap();
    s.write_all(&vec![b'y'; SENT]).unwrap();
    let t = Instant::now();
    while unacked(&s) > 0 {
        assert!(t.elapsed() < Duration::from_secs(20), "never acknowledged");
        std::thread::sleep(Duration::from_millis(10));
    }
    socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO)).unwrap();
}

/// The last line of a destination's results, once it is there.
fn last_result(path: &std::path::Path, lines: usize) -> String {
    let t = Instant::now();
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().count() >= lines {
            return text.lines().last().unwrap().to_string();
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the destination reported nothing: {text:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The destination beside the test, on a free port: (process, its address).
fn spawn_direct(script: &std::path::Path, results: &std::path::Path, host: &str) -> (Child, SocketAddr) {
    let mut child = Command::new("python3")
        .arg(script)
        .arg("0")
        .arg(results)
        .arg(host)
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("the destination said {line:?}"));
    (child, SocketAddr::from(([127, 0, 0, 1], port)))
}

/// The TUN device the client runs beside its SOCKS5 listener.
const TUN_TOML: &str = "[tun]\nname = \"mpfr0\"\nipv4 = \"10.233.0.1/30\"\nipv6 = \"fd00:6d70:666c::1/126\"\n";

/// How the application in the client's namespace reaches the destination.
#[derive(Clone, Copy, Debug)]
enum Ingress {
    Socks5,
    Tun,
}

#[test]
fn resets_carry_what_came_before_them_as_direct_tcp_does() {
    if !ready("resets_carry_what_came_before_them_as_direct_tcp_does") {
        return;
    }
    let lab = Lab::new(Options {
        client_toml: TUN_TOML.to_string(),
        ..Options::default()
    });
    // An address of the server's namespace that the client's namespace routes into the TUN.
    let routed = format!("10.{}.9.9", lab.topo.net);
    lab.add_remote_via(&routed, "mpfr0");
    let script = lab.dir.join("destination.py");
    std::fs::write(&script, DESTINATION).unwrap();
    let (direct_results, via_results) = (lab.dir.join("direct.txt"), lab.dir.join("via.txt"));
    let (direct, direct_at) = spawn_direct(&script, &direct_results, "127.0.0.1");
    let _direct = KillOnDrop(direct);
    let script_s = script.to_string_lossy().to_string();
    let via_s = via_results.to_string_lossy().to_string();
    let _remote = KillOnDrop(lab.spawn_in(
        &lab.topo.server_ns,
        &["python3", &script_s, &PORT.to_string(), &via_s, "0.0.0.0"],
        "destination.log",
    ));
    std::thread::sleep(Duration::from_millis(500));
    let proxy = lab.socks();
    let connect = move |how: Ingress| match how {
        Ingress::Socks5 => socks_connect(proxy, "127.0.0.1", PORT).unwrap(),
        Ingress::Tun => TcpStream::connect((routed.as_str(), PORT)).unwrap(),
    };

    // A destination answers, then resets.
    let direct_got = answer_then_reset(TcpStream::connect(direct_at).unwrap());
    assert_eq!(direct_got, (ANSWER, true), "the kernel's own behaviour changed");
    // The application sends, then resets.
    send_then_reset(TcpStream::connect(direct_at).unwrap());
    let direct_sink = last_result(&direct_results, 1);
    assert_eq!(
        direct_sink,
        format!("{SENT} reset"),
        "the kernel's own behaviour changed"
    );

    for (n, how) in [Ingress::Socks5, Ingress::Tun].into_iter().enumerate() {
        let c = connect.clone();
        let via_got = in_ns(&lab.topo.client_ns, move || answer_then_reset(c(how)));
        eprintln!("{how:?}: answer then reset: direct {direct_got:?}, through mpflex {via_got:?}");
        assert_eq!(
            via_got,
            direct_got,
            "{how:?}: through mpflex the application read otherwise; logs in {}",
            lab.dir.display()
        );
        let c = connect.clone();
        in_ns(&lab.topo.client_ns, move || send_then_reset(c(how)));
        let via_sink = last_result(&via_results, n + 1);
        eprintln!("{how:?}: send then reset: direct {direct_sink:?}, through mpflex {via_sink:?}");
        assert_eq!(
            via_sink,
            direct_sink,
            "{how:?}: through mpflex the destination read otherwise; logs in {}",
            lab.dir.display()
        );
    }
}
