use super::*;
use crate::test_util::path;

/// A backlog of segment-sized frames: the thesis's packets, so the tests below pin the
/// published arithmetic; `whole_frames_on_a_slow_path_take_their_time` uses 16 KB ones.
fn queue(bytes: u64) -> QueueView {
    QueueView {
        bytes,
        frames: bytes.div_ceil(MSS) as usize,
        ..QueueView::default()
    }
}

const MSS: u64 = 1448;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn fixed(ms: u64) -> Ecf {
    Ecf::new(EcfConfig {
        delta: Delta::Fixed(Duration::from_millis(ms)),
        ..EcfConfig::default()
    })
}

/// x_f (path 0) has a full window and is not ready; x_s (path 1) asks.
fn fast_full(rtt_f: u64, rtt_s: u64) -> [PathSnapshot; 2] {
    let mut paths = [path(0, rtt_f), path(1, rtt_s)];
    paths[0].in_flight = paths[0].cwnd;
    paths[0].ready = false;
    paths
}

fn is_wait(d: Decision) -> bool {
    matches!(d, Decision::Wait { .. })
}

/// A WiFi path of 7.04 Mbit/s and 55 ms under BBR keeps two BDPs in its window
/// (67 segments ≈ 97 KB); LTE (9.185 Mbit/s, RTT 270 ms) asks with a 256 KB backlog.
/// Read as a rate, the WiFi window says WiFi drains the backlog in ~200 ms, so published
/// ECF waits; WiFi really needs ~300 ms, longer than one LTE round. With the window capped
/// at delivery rate · srtt (48 KB) test (1) fails and LTE sends.
#[test]
fn window_capped_by_delivery_rate() {
    let now = Instant::now();
    let mut paths = fast_full(55, 270);
    paths[0].cwnd = 67;
    paths[0].in_flight = 67;
    paths[0].delivery_rate = 880_000;
    paths[0].rttvar = Duration::from_millis(5);
    paths[1].cwnd = 120;
    paths[1].delivery_rate = 1_148_000;
    paths[1].rttvar = Duration::from_millis(10);
    // BBR paces at about its bandwidth estimate: the pacing rate caps it the same.
    paths[0].pacing_rate = 900_000;
    let published = EcfConfig {
        rate_cap: false,
        ..EcfConfig::default()
    };
    assert!(is_wait(Ecf::new(published).decide(
        now,
        1,
        &paths,
        &queue(256 * 1024),
        65536
    )));
    assert!(matches!(
        Ecf::default().decide(now, 1, &paths, &queue(256 * 1024), 65536),
        Decision::Send { .. }
    ));
}

/// A CUBIC path in slow start delivers half of what its window sends (the samples
/// lag a doubling window) but paces at twice window / srtt. A state with LTE at 470 ms:
/// WiFi (x_f) srtt 99 ms, 46 segments, full, 27 KB unsent, 839 KB/s; LTE srtt 487 ms, 17
/// segments, 13 in flight, delivering 16 KB/s and pacing at 101 KB/s; 541 KB queued in
/// 16 KB frames. Capped by the delivery rate LTE's window is 7.8 KB, a frame takes it
/// 1.4 s and ECF waits; by the pacing rate the window stands and LTE sends.
#[test]
fn a_window_in_slow_start_is_not_capped_by_its_lagging_delivery_rate() {
    let now = Instant::now();
    let mut paths = fast_full(99, 487);
    paths[0].cwnd = 46;
    paths[0].in_flight = 46;
    paths[0].notsent = 27_430;
    paths[0].delivery_rate = 839_000;
    paths[0].pacing_rate = 807_000;
    paths[1].cwnd = 17;
    paths[1].in_flight = 13;
    paths[1].delivery_rate = 16_000;
    paths[1].pacing_rate = 101_000;
    let q = QueueView {
        bytes: 541_365,
        frames: 33,
        ..QueueView::default()
    };
    assert!(matches!(
        fixed(10).decide(now, 1, &paths, &q, 65536),
        Decision::Send { .. }
    ));
    paths[1].pacing_rate = 0;
    assert!(is_wait(fixed(10).decide(now, 1, &paths, &q, 65536)));
}

/// ECF's video case (the paper's 0.3 / 8.6 Mbit/s pair, shaped like its testbed): LTE
/// 8.6 Mbit/s (srtt 100 ms, window 110 KB, full) is x_f; WiFi 0.3 Mbit/s (srtt 1 s,
/// window 26 segments ≈ 37.6 KB/s) asks with a 1 MB segment queued in 16 KB frames. LTE drains it in about
/// (1 + 1 MB/110 KB)·100 ms ≈ 1.0 s; one WiFi round is 1 s if a frame were a packet, so
/// the published test sends on WiFi — but a 16 KB frame needs another 0.4 s there.
#[test]
fn whole_frames_on_a_slow_path_take_their_time() {
    let now = Instant::now();
    let mut paths = fast_full(100, 1000);
    paths[0].cwnd = 76;
    paths[0].in_flight = 76;
    paths[0].rttvar = Duration::from_millis(5);
    paths[1].cwnd = 26;
    paths[1].rttvar = Duration::from_millis(20);
    let q = crate::test_util::queue(1 << 20);
    assert_eq!(q.frames, 64, "16 KB frames");
    let published = EcfConfig {
        frame_time: false,
        ..EcfConfig::default()
    };
    assert!(matches!(
        Ecf::new(published).decide(now, 1, &paths, &q, 65536),
        Decision::Send { .. }
    ));
    assert!(is_wait(Ecf::default().decide(now, 1, &paths, &q, 65536)));
    // Segment-sized frames change nothing.
    assert!(matches!(
        Ecf::default().decide(now, 1, &paths, &queue(1 << 20), 65536),
        Decision::Send { .. }
    ));
}

/// The same pair between video segments: WiFi idle, its srtt back at 20 ms from
/// keepalives, delivering 37.5 KB/s when loaded; LTE idle at 100 ms and 1.1 MB/s. For
/// 16 KB frames LTE is x_f: WiFi asking waits while LTE is ready, and LTE sends.
#[test]
fn idle_slow_path_with_a_short_srtt_is_not_the_fastest_for_frames() {
    let now = Instant::now();
    let mut paths = [path(0, 100), path(1, 20)];
    paths[0].cwnd = 76;
    paths[0].delivery_rate = 1_100_000;
    paths[1].cwnd = 26;
    paths[1].delivery_rate = 37_500;
    let frames = crate::test_util::queue(1 << 20);
    assert!(is_wait(Ecf::default().decide(now, 1, &paths, &frames, 65536)));
    assert_eq!(
        Ecf::default().decide(now, 0, &paths, &frames, 65536),
        Decision::head(65536)
    );
    // Segment-sized frames, or the published order: WiFi has the smaller srtt.
    assert_eq!(
        Ecf::default().decide(now, 1, &paths, &queue(1 << 20), 65536),
        Decision::head(65536)
    );
    let published = EcfConfig {
        frame_time: false,
        ..EcfConfig::default()
    };
    assert!(is_wait(Ecf::new(published).decide(now, 0, &paths, &frames, 65536)));
}

/// With nothing left to send, the fastest path re-sends what the others hold; the
/// slower path waits; the published form never re-sends.
#[test]
fn fastest_path_reinjects_once_the_queue_is_empty() {
    let now = Instant::now();
    let paths = [path(0, 100), path(1, 1000)];
    let empty = QueueView::default();
    let mut ecf = Ecf::default();
    assert!(ecf.reinjects());
    assert_eq!(
        ecf.decide(now, 0, &paths, &empty, 65536),
        Decision::Reinject {
            end: End::Head,
            max_bytes: 65536,
            max_age: None,
            sooner_only: true,
        }
    );
    assert!(is_wait(ecf.decide(now, 1, &paths, &empty, 65536)));
    let published = Ecf::new(EcfConfig {
        reinject: false,
        ..EcfConfig::default()
    });
    assert!(!published.reinjects());
}

#[test]
fn thesis_example_waits_for_the_fast_path() {
    // The thesis's example: 10 ms and 100 ms, both CWND 10, one packet left. Waiting takes
    // ~20 ms, the slow path 100 ms. Floored test (2): 100 ≥ 20 + δ, so wait iff δ ≤ 80 ms.
    let now = Instant::now();
    let paths = fast_full(10, 100);
    // Default δ = max(rttvar) = 25 ms (test paths have rttvar = srtt/4).
    let mut s = Ecf::default();
    assert_eq!(
        s.decide(now, 1, &paths, &queue(MSS), 65536),
        Decision::Wait {
            until: Some(now + Duration::from_millis(10))
        }
    );
    assert!(s.waiting);
    assert!(is_wait(fixed(80).decide(now, 1, &paths, &queue(MSS), 65536)));
    // One past the boundary: the slow path sends its window space.
    assert_eq!(
        fixed(81).decide(now, 1, &paths, &queue(MSS), 65536),
        Decision::in_window(End::Head, 10 * MSS as usize)
    );
    // Kernel-like δ is ≥ 100 ms (rttvar_us never below rto_min): does not wait.
    let mut k = Ecf::new(EcfConfig {
        delta: Delta::KernelLike,
        ..EcfConfig::default()
    });
    assert_eq!(k.delta(&paths[0], &paths[1]), Duration::from_millis(100));
    assert!(!is_wait(k.decide(now, 1, &paths, &queue(MSS), 65536)));
}

#[test]
fn literal_formula_sends_the_eleventh_packet() {
    // The thesis's "11th packet": without the floor, (1/10)·100 = 10 ≥ 20 + δ fails.
    let now = Instant::now();
    let mut s = Ecf::new(EcfConfig {
        floor_backlog: false,
        delta: Delta::Fixed(Duration::ZERO),
        ..EcfConfig::default()
    });
    let d = s.decide(now, 1, &fast_full(10, 100), &queue(MSS), 65536);
    assert_eq!(d, Decision::in_window(End::Head, 10 * MSS as usize));
}

#[test]
fn large_backlog_uses_the_slow_path_too() {
    // δ = 0: (1 + k/cw)·10 < 100 ⇔ k < 9 windows.
    let now = Instant::now();
    let paths = fast_full(10, 100);
    let cw = 10 * MSS;
    let mut s = fixed(0);
    assert!(is_wait(s.decide(now, 1, &paths, &queue(8 * cw), 1 << 20)));
    let mut s = fixed(0);
    assert_eq!(
        s.decide(now, 1, &paths, &queue(9 * cw), 1 << 20),
        Decision::in_window(End::Head, cw as usize)
    );
    assert!(!s.waiting);
    // The slow path's chunk is its free window space, and never more than the budget.
    let mut p = paths.clone();
    p[1].in_flight = 4;
    assert_eq!(
        fixed(0).decide(now, 1, &p, &queue(50 * cw), 1 << 20),
        Decision::head(6 * MSS as usize)
    );
    assert_eq!(fixed(0).decide(now, 1, &p, &queue(50 * cw), 1000), Decision::head(1000));
}

#[test]
fn hysteresis_keeps_waiting_until_the_wider_bound_fails() {
    // δ = 0, β = 0.25: (1) holds for k < 9 windows, (3) for k < 11.5 windows.
    let now = Instant::now();
    let paths = fast_full(10, 100);
    let cw = 10 * MSS;
    let mut s = fixed(0);
    assert!(!is_wait(s.decide(now, 1, &paths, &queue(10 * cw), 1 << 20)));
    assert!(is_wait(s.decide(now, 1, &paths, &queue(5 * cw), 1 << 20)));
    assert!(s.waiting);
    assert!(is_wait(s.decide(now, 1, &paths, &queue(10 * cw), 1 << 20)));
    assert!(is_wait(s.decide(now, 1, &paths, &queue(11 * cw), 1 << 20)));
    assert!(!is_wait(s.decide(now, 1, &paths, &queue(12 * cw), 1 << 20)));
    assert!(!s.waiting);
    assert!(!is_wait(s.decide(now, 1, &paths, &queue(10 * cw), 1 << 20)));
}

#[test]
fn second_test_failing_keeps_the_waiting_bit() {
    // RTT 40 / 75 ms, δ = 10 ms. k = 1 window: (1) 80 < 85 holds, (2) 75 ≥ 90 fails.
    let now = Instant::now();
    let paths = fast_full(40, 75);
    let cw = 10 * MSS;
    let mut s = fixed(10);
    s.waiting = true;
    assert!(!is_wait(s.decide(now, 1, &paths, &queue(cw), 1 << 20)));
    assert!(s.waiting, "inner else leaves waiting alone");
    // k = 1.5 windows: (2) 112.5 ≥ 90 holds; (1) 100 < 85 fails without hysteresis but
    // (3) 100 < 106.25 holds with it.
    assert!(is_wait(s.decide(now, 1, &paths, &queue(15 * MSS), 1 << 20)));
    assert!(!is_wait(fixed(10).decide(now, 1, &paths, &queue(15 * MSS), 1 << 20)));
}

#[test]
fn fast_path_with_room_or_asking_behaves_like_minrtt() {
    let now = Instant::now();
    let paths = [path(0, 10), path(1, 100)];
    let mut s = Ecf::default();
    assert_eq!(s.decide(now, 0, &paths, &queue(MSS), 4096), Decision::head(4096));
    assert_eq!(
        s.decide(now, 1, &paths, &queue(MSS), 4096),
        Decision::Wait { until: None }
    );
    // x_f full but still asked (ready): it takes the whole budget.
    let mut p = fast_full(10, 100);
    p[0].ready = true;
    assert_eq!(s.decide(now, 0, &p, &queue(MSS), 4096), Decision::head(4096));
    // Single path.
    assert_eq!(
        s.decide(now, 0, &[path(0, 100)], &queue(MSS), 4096),
        Decision::head(4096)
    );
}

#[test]
fn unsent_bytes_on_the_fast_path_count_against_it() {
    // δ = 0: 8 windows of backlog wait; the same plus 2 windows unsent in x_f's socket
    // make (1) fail: (1 + 10)·10 ≥ 100.
    let now = Instant::now();
    let mut paths = fast_full(10, 100);
    let cw = 10 * MSS;
    assert!(is_wait(fixed(0).decide(now, 1, &paths, &queue(8 * cw), 1 << 20)));
    paths[0].notsent = 2 * cw as u32;
    assert!(!is_wait(fixed(0).decide(now, 1, &paths, &queue(8 * cw), 1 << 20)));
}

#[test]
fn three_paths_compare_fastest_with_the_minrtt_choice() {
    // Proposition 1: x_f = 10 ms (full); 50 ms is MinRTT's pick; 100 ms waits for it.
    let now = Instant::now();
    let mut paths = [path(0, 10), path(1, 50), path(2, 100)];
    paths[0].in_flight = 10;
    paths[0].ready = false;
    let mut s = fixed(0);
    assert_eq!(
        s.decide(now, 2, &paths, &queue(MSS), 4096),
        Decision::Wait { until: None }
    );
    // 50 ms vs 10 ms, one packet: (1) 20 < 50, (2) 50 ≥ 20: wait for x_f.
    assert!(is_wait(s.decide(now, 1, &paths, &queue(MSS), 4096)));
    // With the 50 ms path full too, the 100 ms path is compared with x_f.
    paths[1].in_flight = 10;
    assert!(is_wait(fixed(0).decide(now, 2, &paths, &queue(MSS), 4096)));
    // A dead x_f is ignored: the 50 ms path becomes x_f; the 100 ms path compares with it:
    // (1) 2·50 = 100 < 100 fails, so it sends.
    paths[0].alive = false;
    assert!(!is_wait(fixed(0).decide(now, 2, &paths, &queue(MSS), 4096)));
}

/// Five paths (10, 50, 100, 200, 400 ms): only MinRTT's choice among the rest compares
/// itself with x_f, the slower ones wait for it; as the choices fill up the comparison
/// moves down the list, and a bulk backlog the bound on bytes ahead holds back
/// (`sustained`) is carried by each of them within its window.
#[test]
fn five_paths_compare_fastest_with_the_minrtt_choice() {
    let now = Instant::now();
    let mut paths: Vec<PathSnapshot> = [10, 50, 100, 200, 400]
        .iter()
        .enumerate()
        .map(|(i, &ms)| path(i, ms))
        .collect();
    paths[0].in_flight = 10;
    paths[0].ready = false;
    let none = Decision::Wait { until: None };
    for slower in 2..5 {
        assert_eq!(fixed(0).decide(now, slower, &paths, &queue(MSS), 4096), none);
    }
    // 50 ms vs 10 ms for one packet: wait for x_f.
    assert!(is_wait(fixed(0).decide(now, 1, &paths, &queue(MSS), 4096)));
    // 50 ms full too: 100 ms is compared with x_f and waits (2·10 < 100, 100 ≥ 20).
    paths[1].in_flight = 10;
    assert!(is_wait(fixed(0).decide(now, 2, &paths, &queue(MSS), 4096)));
    assert_eq!(fixed(0).decide(now, 3, &paths, &queue(MSS), 4096), none);
    // A held-back bulk backlog: every path that MinRTT would pick sends, the slowest too
    // once the four faster ones are full.
    let bulk = QueueView {
        sustained: true,
        ..queue(1 << 20)
    };
    for p in &mut paths[2..4] {
        p.in_flight = 10;
    }
    assert_eq!(
        fixed(0).decide(now, 4, &paths, &bulk, 1 << 20),
        Decision::in_window(End::Head, 10 * MSS as usize)
    );
    // x_f dead: the 50 ms path is x_f.
    paths[0].alive = false;
    paths[1].ready = false;
    for p in &mut paths[2..4] {
        p.in_flight = 0;
    }
    // 100 ms vs 50 ms: (1) 2·50 = 100 ≥ 100 holds, so it sends.
    assert!(!is_wait(fixed(0).decide(now, 2, &paths, &queue(MSS), 4096)));
}

#[test]
fn backups_and_dead_paths() {
    let now = Instant::now();
    let mut paths = fast_full(10, 100);
    // A backup x_f does not count while a regular path is alive.
    paths[0].backup = true;
    assert_eq!(fixed(0).decide(now, 1, &paths, &queue(MSS), 4096), Decision::head(4096));
    assert_eq!(
        fixed(0).decide(now, 0, &paths, &queue(MSS), 4096),
        Decision::Wait { until: None }
    );
    // Never send on a dead path, even the fastest.
    let mut paths = [path(0, 10), path(1, 100)];
    paths[0].alive = false;
    assert_eq!(
        Ecf::default().decide(now, 0, &paths, &queue(MSS), 4096),
        Decision::Wait { until: None }
    );
    // Only backups alive: they are used.
    let mut paths = [path(0, 10), path(1, 100)];
    paths[0].alive = false;
    paths[1].backup = true;
    assert_eq!(
        Ecf::default().decide(now, 1, &paths, &queue(MSS), 4096),
        Decision::head(4096)
    );
}

#[test]
fn wait_is_capped_when_the_fast_path_stalls() {
    // δ = 0, β = 0.25: cap = 1.25 · 100 ms from the start of the wait.
    let t0 = Instant::now();
    let paths = fast_full(10, 100);
    let mut s = fixed(0);
    assert!(is_wait(s.decide(t0, 1, &paths, &queue(MSS), 4096)));
    let t1 = t0 + Duration::from_millis(120);
    assert_eq!(
        s.decide(t1, 1, &paths, &queue(MSS), 4096),
        Decision::Wait {
            until: Some(t0 + Duration::from_millis(125))
        }
    );
    let t2 = t0 + Duration::from_millis(125);
    assert_eq!(
        s.decide(t2, 1, &paths, &queue(MSS), 4096),
        Decision::in_window(End::Head, 4096.min(10 * MSS as usize))
    );
    // A send (here the fast path's) ends the wait; the next one starts afresh.
    assert!(is_wait(s.decide(t2, 1, &paths, &queue(MSS), 4096)));
    let mut back = paths.clone();
    back[0].ready = true;
    back[0].in_flight = 0;
    assert!(!is_wait(s.decide(t2, 0, &back, &queue(MSS), 4096)));
    assert!(s.wait_since.is_none());
}

mod idle;

/// A chunk's last 20 KB with the fast path's window full: x_s waits for it (ECF). The same
/// 20 KB as the window the bound on bytes ahead lets through of a held bulk transfer
/// (`QueueView::sustained`) is no end in sight: x_s sends.
#[test]
fn a_backlog_held_back_is_not_waited_out() {
    let now = Instant::now();
    let paths = fast_full(50, 270);
    assert!(is_wait(Ecf::default().decide(now, 1, &paths, &queue(20_000), 65536)));
    let held = QueueView {
        sustained: true,
        ..queue(20_000)
    };
    assert!(!is_wait(Ecf::default().decide(now, 1, &paths, &held, 65536)));
    // The same from a transfer's first refusal, before a second of backlog: the
    // application holds more than the queued bytes show.
    let withheld = QueueView {
        withheld: true,
        ..queue(20_000)
    };
    assert!(!is_wait(Ecf::default().decide(now, 1, &paths, &withheld, 65536)));
}
