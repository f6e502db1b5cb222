//! Resets through mpflex as over the kernel's TCP, side by side with a direct connection:
//! a destination that answers and then resets (it closes with the request unread, as a
//! server refusing a request does) has its whole answer read by the application, then the
//! reset; an application that sends and then resets has every byte it sent reach the
//! destination, then the reset. The same destination program runs beside the test (the
//! direct case) and in the server's namespace (reached through SOCKS5 over both paths),
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

/// The destination, listening on the port it is given (0: any; it prints the port). `ANSWER n` (then a request body it never reads): waits for the body,
/// sends n bytes, waits until the application's side has acknowledged them, and closes
/// with the body unread (an RST). `SINK`: reads until the end or a reset and appends
/// "<bytes> <eof|reset>" to the results file.
const DESTINATION: &str = r#"
import fcntl, socket, struct, sys, termios, threading, time
port, results = int(sys.argv[1]), sys.argv[2]
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", port))
ls.listen(16)
print(ls.getsockname()[1], flush=True)
def unacked(c):
    return struct.unpack("i", fcntl.ioctl(c.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
def serve(c):
    head = b""
    while b"\n" not in head:
        b = c.recv(1)
        if not b:
            return
        head += b
    if head.startswith(b"ANSWER"):
        time.sleep(0.3)
        c.sendall(bytes(i % 251 for i in range(int(head.split()[1]))))
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
    s.write_all(format!("ANSWER {ANSWER}\n").as_bytes()).unwrap();
    s.write_all(&vec![b'x'; 32 * 1024]).unwrap();
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
fn spawn_direct(script: &std::path::Path, results: &std::path::Path) -> (Child, SocketAddr) {
    let mut child = Command::new("python3")
        .arg(script)
        .arg("0")
        .arg(results)
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

#[test]
fn resets_carry_what_came_before_them_as_direct_tcp_does() {
    if !ready("resets_carry_what_came_before_them_as_direct_tcp_does") {
        return;
    }
    let lab = Lab::new(Options::default());
    let script = lab.dir.join("destination.py");
    std::fs::write(&script, DESTINATION).unwrap();
    let (direct_results, via_results) = (lab.dir.join("direct.txt"), lab.dir.join("via.txt"));
    let (direct, direct_at) = spawn_direct(&script, &direct_results);
    let _direct = KillOnDrop(direct);
    let script_s = script.to_string_lossy().to_string();
    let via_s = via_results.to_string_lossy().to_string();
    let _remote = KillOnDrop(lab.spawn_in(
        &lab.topo.server_ns,
        &["python3", &script_s, &PORT.to_string(), &via_s],
        "destination.log",
    ));
    std::thread::sleep(Duration::from_millis(500));
    let proxy = lab.socks();

    // A destination answers, then resets.
    let direct_got = answer_then_reset(TcpStream::connect(direct_at).unwrap());
    let via_got = in_ns(&lab.topo.client_ns, move || {
        answer_then_reset(socks_connect(proxy, "127.0.0.1", PORT).unwrap())
    });
    eprintln!("answer then reset: direct {direct_got:?}, through mpflex {via_got:?}");
    assert_eq!(direct_got, (ANSWER, true), "the kernel's own behaviour changed");
    assert_eq!(
        via_got,
        direct_got,
        "through mpflex the application read otherwise; logs in {}",
        lab.dir.display()
    );

    // The application sends, then resets.
    send_then_reset(TcpStream::connect(direct_at).unwrap());
    in_ns(&lab.topo.client_ns, move || {
        send_then_reset(socks_connect(proxy, "127.0.0.1", PORT).unwrap())
    });
    let (direct_sink, via_sink) = (last_result(&direct_results, 1), last_result(&via_results, 1));
    eprintln!("send then reset: direct {direct_sink:?}, through mpflex {via_sink:?}");
    assert_eq!(
        direct_sink,
        format!("{SENT} reset"),
        "the kernel's own behaviour changed"
    );
    assert_eq!(
        via_sink,
        direct_sink,
        "through mpflex the destination read otherwise; logs in {}",
        lab.dir.display()
    );
}
