use super::path::path_writer;
use super::*;
use crate::crypto::{client_handshake, generate_keypair, server_handshake, ReplayGuard};
use crate::tcpinfo::{set_linger_zero, tcp_info};
use mpflex_engine::{EngineConfig, Role};
use std::io;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// A path whose peer resets the connection while the kernel still holds unsent bytes
/// must end promptly: such a socket polls writable forever while its unsent count stays
/// frozen. The writer is run alone here (no reader to notice the reset for it), so a
/// writer that spins on that socket never returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writer_ends_when_reset_with_unsent_bytes() {
    // A spinning writer cannot be cancelled, and neither can the runtime holding it:
    // turn a hang into a clear failure.
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    std::thread::spawn({
        let done = done.clone();
        move || {
            std::thread::sleep(Duration::from_secs(20));
            if !done.load(std::sync::atomic::Ordering::SeqCst) {
                eprintln!("path writer still running 20 s after its connection was reset");
                std::process::exit(1);
            }
        }
    });
    let (cpriv, cpub) = generate_keypair();
    let (spriv, spub) = generate_keypair();
    let auth = HashMap::from([(cpub, "c".to_string())]);
    // A small receive buffer at the peer, so the client's kernel cannot hand it much.
    let ls = tokio::net::TcpSocket::new_v4().unwrap();
    ls.set_recv_buffer_size(16 * 1024).unwrap();
    ls.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = ls.listen(1).unwrap();
    let addr = listener.local_addr().unwrap();
    let (mut csock, accepted) = tokio::join!(
        async {
            // A large send buffer, so unsent bytes can pass the low-water mark.
            let cs = tokio::net::TcpSocket::new_v4().unwrap();
            cs.set_send_buffer_size(1 << 20).unwrap();
            cs.connect(addr).await.unwrap()
        },
        async { listener.accept().await.unwrap().0 }
    );
    let mut ssock = accepted;
    let guard = ReplayGuard::default();
    let (ct, st) = tokio::join!(
        client_handshake(&mut csock, &[], &cpriv, &spub),
        server_handshake(&mut ssock, &spriv, &auth, &guard)
    );
    let (ct, _st) = (ct.unwrap(), st.unwrap());

    let sched = mpflex_sched::by_name("minrtt").unwrap();
    // A small low-water mark: the writer waits on the kernel's unsent bytes often.
    let mut cfg = EngineConfig::new(Role::Client);
    cfg.notsent_lowat = 64 * 1024;
    let sess = Session::new(cfg, sched, Instant::now());
    let h = SessionHandle::new(sess, vec!["p".into()], None);
    let generation = h.with(|sh| {
        sh.sess.path_up(0, Instant::now());
        sh.paths[0].generation
    });
    // Far more than the peer will read: unsent bytes stay in the client's kernel.
    let (id, _sig, _) = h.open_stream(TargetAddr::Domain("x".into(), 80), Bytes::new());
    let payload = Bytes::from(vec![7u8; 3 << 20]);
    // The peer's credit, beyond the protocol's initial megabyte.
    h.with(|sh| {
        sh.sess
            .handle_frame(0, mpflex_wire::Frame::MaxData { max: 1 << 30 }, Instant::now())
            .unwrap()
    });
    assert_eq!(h.with(|sh| sh.sess.stream_send(id, payload)), 3 << 20);

    let csock = Arc::new(csock);
    let no_reset = crate::tcpinfo::SsthreshReset::new(&*csock, false);
    let writer = tokio::spawn(path_writer(
        h.clone(),
        0,
        csock.clone(),
        Arc::new(ct),
        generation,
        0,
        no_reset,
    ));
    // The peer reads slowly while `flow` is set. The writer then alternates between
    // writing and waiting for the kernel's unsent bytes to drain below the low-water
    // mark; the reset must find it in that wait, where a reset socket polls writable.
    let flow = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let peer = tokio::spawn({
        let flow = flow.clone();
        async move {
            let mut buf = vec![0u8; 4096];
            while flow.load(std::sync::atomic::Ordering::SeqCst) {
                let _ = tokio::time::timeout(Duration::from_millis(1), ssock.read(&mut buf)).await;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            ssock
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    flow.store(false, std::sync::atomic::Ordering::SeqCst);
    let ssock = peer.await.unwrap();
    // With the peer no longer reading, the writer parks wherever it is; retry until
    // it parked in the low-water wait (path marked not ready, kernel holding more
    // unsent bytes than the mark).
    let mut parked = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(30)).await;
        let ready = h.with(|sh| sh.sess.path_counters(0).map(|(_, s)| s.ready));
        if ready == Some(false) && tcp_info(&*csock).unwrap().notsent_bytes >= 8 * 1024 {
            parked = true;
            break;
        }
        // Parked inside a write instead: let a little drain and look again.
        let _ = ssock.try_read(&mut [0u8; 8192]);
    }
    assert!(parked, "the writer never parked in its low-water wait");
    set_linger_zero(&ssock).unwrap();
    drop(ssock); // RST

    let res = tokio::time::timeout(Duration::from_secs(3), writer)
        .await
        .expect("path writer still running 3 s after its connection was reset")
        .unwrap();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(res.is_err(), "a reset path must end its writer with an error");
    h.closed.cancel();
}

/// A local connection pair: (the application's end, the end mpflex carries).
async fn app_pair() -> (TcpStream, TcpStream) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (app, carried) = tokio::join!(TcpStream::connect(addr), listener.accept());
    (app.unwrap(), carried.unwrap().0)
}

async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..200 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what}: not after 2 s");
}

/// The session window is shared by every stream. A stream that saw free capacity,
/// then read its application while another stream used that capacity up, must keep
/// what it read and queue it once credit comes back, not drop it.
#[tokio::test]
async fn bytes_read_while_others_filled_the_session_window_are_kept() {
    use tokio::io::AsyncWriteExt;
    // The peer's credit until it says more: the protocol's initial credit.
    const WINDOW: u64 = mpflex_wire::INITIAL_SESSION_CREDIT;
    let mut cfg = EngineConfig::new(Role::Client);
    cfg.session_window = WINDOW;
    let sched = mpflex_sched::by_name("minrtt").unwrap();
    let h = SessionHandle::new(Session::new(cfg, sched, Instant::now()), vec!["p".into()], None);
    let target = TargetAddr::Domain("x".into(), 80);
    let (a, sig_a, _) = h.open_stream(target.clone(), Bytes::new());
    let (b, sig_b, _) = h.open_stream(target, Bytes::new());
    let (mut app_a, carried_a) = app_pair().await;
    let (mut app_b, carried_b) = app_pair().await;
    tokio::spawn(run_stream(h.clone(), a, carried_a, sig_a, Bytes::new()));
    tokio::spawn(run_stream(h.clone(), b, carried_b, sig_b, Bytes::new()));
    // Both uplinks have seen the whole window free and wait for their application.
    tokio::time::sleep(Duration::from_millis(100)).await;
    app_b.write_all(&vec![1u8; WINDOW as usize]).await.unwrap();
    eventually("stream b queues the whole window", || {
        h.with(|sh| sh.sess.stream_tx(b)) == Some((WINDOW, false))
    })
    .await;
    // Stream a reads 1000 bytes and the end of its input with no credit left.
    app_a.write_all(&[2u8; 1000]).await.unwrap();
    app_a.shutdown().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(h.with(|sh| sh.sess.stream_tx(a)), Some((0, false)), "nothing fits yet");
    // The peer grants more credit.
    h.with(|sh| {
        sh.sess
            .handle_frame(0, mpflex_wire::Frame::MaxData { max: 2 * WINDOW }, Instant::now())
            .unwrap()
    });
    eventually("stream a queues its 1000 bytes, then its end", || {
        h.with(|sh| sh.sess.stream_tx(a)) == Some((1000, true))
    })
    .await;
    h.closed.cancel();
}

/// A stream reset by the peer reaches the application as a reset, never as a clean
/// end of stream that would pass a truncated body off as complete.
#[tokio::test]
async fn peer_reset_reaches_the_application_as_a_reset() {
    use mpflex_wire::Frame;
    let sched = mpflex_sched::by_name("minrtt").unwrap();
    let sess = Session::new(EngineConfig::new(Role::Client), sched, Instant::now());
    let h = SessionHandle::new(sess, vec!["p".into()], None);
    let (id, sig, _) = h.open_stream(TargetAddr::Domain("x".into(), 80), Bytes::new());
    let (mut app, carried) = app_pair().await;
    tokio::spawn(run_stream(h.clone(), id, carried, sig, Bytes::new()));
    let data = Frame::Data {
        seq: 0,
        stream: id,
        offset: 0,
        ts: 0,
        data: Bytes::from_static(b"hello"),
    };
    h.with(|sh| sh.sess.handle_frame(0, data, Instant::now()).unwrap());
    let mut got = [0u8; 5];
    app.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"hello");
    // Sequence numbers count payload bytes: the reset follows the 5 bytes of data.
    let reset = Frame::Reset {
        seq: 5,
        stream: id,
        code: mpflex_wire::ResetCode::App,
    };
    h.with(|sh| sh.sess.handle_frame(0, reset, Instant::now()).unwrap());
    let mut rest = Vec::new();
    let r = tokio::time::timeout(Duration::from_secs(3), app.read_to_end(&mut rest))
        .await
        .expect("the application saw neither an end nor a reset");
    match r {
        Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionReset, "{e}"),
        Ok(n) => panic!("a reset stream ended cleanly for the application ({n} more bytes)"),
    }
    h.closed.cancel();
}

/// A server's session expires `linger` after its last path ended — not while a path is
/// up, however long — and the wait ends without a clock ticking meanwhile: it is woken by
/// the path ending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_expires_only_after_lingering_without_a_path() {
    let (cpriv, cpub) = generate_keypair();
    let (spriv, spub) = generate_keypair();
    let auth = HashMap::from([(cpub, "c".to_string())]);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (csock, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
    let (mut csock, mut ssock) = (csock.unwrap(), accepted.unwrap().0);
    let guard = ReplayGuard::default();
    let (ct, st) = tokio::join!(
        client_handshake(&mut csock, &[], &cpriv, &spub),
        server_handshake(&mut ssock, &spriv, &auth, &guard)
    );
    let (_ct, st) = (ct.unwrap(), st.unwrap().0);
    let sched = mpflex_sched::by_name("minrtt").unwrap();
    let sess = Session::new(EngineConfig::new(Role::Server), sched, Instant::now());
    let h = SessionHandle::new(sess, vec!["p".into()], None);
    let joined = crate::pathconn::Joined {
        nonces: (0, 0),
        leftover: bytes::BytesMut::new(),
    };
    let path = tokio::spawn({
        let h = h.clone();
        async move { h.run_path(0, ssock, st, joined).await }
    });
    eventually("path up", || h.any_path_up()).await;
    let linger = Duration::from_millis(300);
    let wait = tokio::spawn({
        let h = h.clone();
        async move { h.pathless_for(linger).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!wait.is_finished(), "expired while its path was up");
    let gone = Instant::now();
    drop(csock);
    let _ = path.await;
    let expired = tokio::time::timeout(Duration::from_secs(3), wait)
        .await
        .expect("not expired 3 s after its path ended")
        .unwrap();
    assert!(expired);
    let after = gone.elapsed();
    assert!(
        after >= linger && after < linger + Duration::from_millis(200),
        "expired {after:?} after its path ended"
    );
    h.closed.cancel();
}
