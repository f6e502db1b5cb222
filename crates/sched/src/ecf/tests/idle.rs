//! ECF across idle spells, slow start and what the paths hold: windows remembered and
//! restarted, base RTTs, BBR estimates, queued bytes.

use super::*;

/// After an idle spell the kernel restarts x_s's window at its next write; x_s is handed
/// what that window sends at once, not the old window's worth (the rest would wait a
/// whole RTT_s in its socket).
#[test]
fn an_idle_slow_path_is_handed_what_its_restarted_window_sends() {
    let now = Instant::now();
    let mut paths = fast_full(10, 100);
    paths[1].cwnd = 57;
    paths[1].restart_cwnd = Some(28);
    // A long backlog: x_f would need many rounds, so x_s sends (test 1).
    let k = queue(2000 * MSS);
    assert_eq!(
        fixed(0).decide(now, 1, &paths, &k, 1 << 20),
        Decision::head(28 * MSS as usize)
    );
    paths[1].restart_cwnd = None;
    assert_eq!(
        fixed(0).decide(now, 1, &paths, &k, 1 << 20),
        Decision::head(57 * MSS as usize)
    );
}

#[test]
fn remembers_the_window_across_an_idle_reset() {
    // δ = 0, 10 ms / 100 ms, backlog 200 segments. With x_f's window 10: (1) 21·10 ≥ 100,
    // send on x_s. With its pre-idle window 40: (1) 6·10 < 100 and (2) 20·100 ≥ 20: wait.
    let t0 = Instant::now();
    let k = queue(200 * MSS);
    let mut idle = [path(0, 10), path(1, 100)];
    idle[0].cwnd = 40;
    let mut busy = fast_full(10, 100); // cwnd 10 after the kernel's restart
    busy[0].in_flight = 10;

    // Idle for 1 s (> RTO ≈ 210 ms), then seen busy with the reset window: remembered.
    let mut s = fixed(0);
    s.decide(t0, 0, &idle, &k, 4096);
    s.decide(t0 + Duration::from_millis(500), 0, &idle, &k, 4096);
    let t1 = t0 + Duration::from_secs(1);
    assert!(is_wait(s.decide(t1, 1, &busy, &k, 4096)));
    assert_eq!(s.mem[0].rec_cwnd, 40);
    // Without the idle history the small window decides.
    assert!(!is_wait(fixed(0).decide(t1, 1, &busy, &k, 4096)));
    // Idle shorter than the RTO: no reset assumed.
    let mut short = fixed(0);
    short.decide(t0, 0, &idle, &k, 4096);
    assert!(!is_wait(short.decide(
        t0 + Duration::from_millis(100),
        1,
        &busy,
        &k,
        4096
    )));
    // The saved window is dropped once the kernel's grows back to it.
    let mut grown = busy.clone();
    grown[0].cwnd = 40;
    grown[0].in_flight = 40;
    s.decide(t1, 1, &grown, &k, 4096);
    assert_eq!(s.mem[0].rec_cwnd, 0);
    assert!(!is_wait(s.decide(t1, 1, &busy, &k, 4096)));
}

/// After an idle restart the kernel's first rate samples are the restart's own (a
/// window of 10 per RTT); the remembered window is capped by the rate before the idle
/// spell instead, or the rate cap would undo the idle protection.
#[test]
fn remembered_window_is_capped_by_the_rate_before_the_idle_spell() {
    let t0 = Instant::now();
    let k = queue(200 * MSS);
    let mut idle = [path(0, 10), path(1, 100)];
    idle[0].cwnd = 40;
    idle[0].delivery_rate = 40 * MSS * 100; // 40 segments per 10 ms
    let mut busy = fast_full(10, 100);
    busy[0].in_flight = 10;
    busy[0].delivery_rate = 10 * MSS * 100; // the restart's 10 per 10 ms
    let mut s = fixed(0);
    s.decide(t0, 0, &idle, &k, 4096);
    let t1 = t0 + Duration::from_secs(1);
    assert!(is_wait(s.decide(t1, 1, &busy, &k, 4096)));
    assert_eq!(s.mem[0].rec_rate, 40 * MSS * 100);
    assert_eq!(s.window_bytes(0, &busy[0]), 40 * MSS as u128);
    // A path that delivered slowly before the idle spell keeps a small window.
    let mut slow = idle.clone();
    slow[0].delivery_rate = 10 * MSS * 100;
    let mut t = fixed(0);
    t.decide(t0, 0, &slow, &k, 4096);
    assert!(!is_wait(t.decide(t1, 1, &busy, &k, 4096)));
}

#[test]
fn path_without_rtt_sample_is_not_waited_for() {
    let now = Instant::now();
    let mut paths = fast_full(10, 100);
    paths[0].srtt = Duration::ZERO;
    assert_eq!(fixed(0).decide(now, 1, &paths, &queue(MSS), 4096), Decision::head(4096));
}

/// Near a burst's end x_s is handed bytes only while its window has room. 10 ms / 100 ms,
/// windows of 10, δ = 0, 100 segments queued: test (1) fails ((1 + 10)·10 ≥ 100), so x_s
/// sends; the backlog is within one round of the two paths (1,448,000 + 144,800 B/s over
/// 110 ms = 175,208 bytes). With 4 of its 10 segments in flight x_s takes 6; with a
/// full window it asks again 100/16 = 6.25 ms later. Far from the end (2000 segments)
/// it keeps its socket fed as before (one segment beyond a full window).
#[test]
fn near_a_bursts_end_the_slow_path_waits_for_window_room() {
    let now = Instant::now();
    let mut paths = fast_full(10, 100);
    let near = queue(100 * MSS);
    paths[1].in_flight = 4;
    assert_eq!(
        fixed(0).decide(now, 1, &paths, &near, 1 << 20),
        Decision::in_window(End::Head, 6 * MSS as usize)
    );
    paths[1].in_flight = 10;
    assert_eq!(
        fixed(0).decide(now, 1, &paths, &near, 1 << 20),
        Decision::Wait {
            until: Some(now + Duration::from_micros(6250))
        }
    );
    let far = queue(2000 * MSS);
    assert_eq!(
        fixed(0).decide(now, 1, &paths, &far, 1 << 20),
        Decision::head(MSS as usize)
    );
}

/// The window memory follows every statistics update ([`Scheduler::observe`]), not
/// only the decisions: a path idle while nothing was queued (so nobody asked) is still
/// known to have had 40 segments before the kernel restarted it at 10.
#[test]
fn observes_idle_windows_without_being_asked() {
    let t0 = Instant::now();
    let k = queue(200 * MSS);
    let mut idle = [path(0, 10), path(1, 100)];
    idle[0].cwnd = 40;
    let mut busy = fast_full(10, 100);
    busy[0].in_flight = 10;
    let mut s = fixed(0);
    s.observe(t0, &idle);
    s.observe(t0 + Duration::from_millis(500), &idle);
    let t1 = t0 + Duration::from_secs(1);
    s.observe(t1, &busy);
    assert_eq!(s.mem[0].rec_cwnd, 40);
    assert!(is_wait(s.decide(t1, 1, &busy, &k, 4096)));
}

#[test]
fn drain_time_counts_slow_start_rounds() {
    // Steady state: k / w rounds, the published k/CWND·RTT.
    assert_eq!(drain_time(100, 10, 10, 1000), 10_000);
    assert_eq!(drain_time(100, 40, 10, 1000), 10_000);
    // From 10 doubling to 40: rounds of 10 and 20, then 170 at 40 a round.
    assert_eq!(drain_time(200, 10, 40, 1000), 1000 + 1000 + 170 * 1000 / 40);
    // Done within slow start: 10, then 15 of the second round's 20.
    assert_eq!(drain_time(25, 10, 40, 1000), 1000 + 15 * 1000 / 20);
    assert_eq!(drain_time(0, 10, 40, 1000), 0);
}

/// A traced state at the start of a 256 KB chunk on seed-default (BBR, warm), LTE
/// asking: WiFi (x_f) srtt 63 ms (base 50), 94 segments, 2 in flight and 30 KB unsent,
/// delivering 564 KB/s and pacing at 2.5 MB/s (BBR's start-up gain); LTE idle after the
/// warm-up, whose start-up queue left its srtt at 195 ms (base 70), one control segment
/// in flight, 1.1 MB/s, restarted to 10 segments; 229 KB queued in 16 KB frames. Read at
/// 195 ms LTE is slower than WiFi draining a third of the chunk and ECF waits. At its
/// real RTT LTE sends.
#[test]
fn an_idle_path_is_read_at_its_base_rtt_not_the_queue_of_its_last_burst() {
    let now = Instant::now();
    let mut paths = [
        PathSnapshot {
            min_rtt: ms(50),
            rttvar: ms(8),
            cwnd: 94,
            in_flight: 2,
            notsent: 29_966,
            ready: false,
            delivery_rate: 564_000,
            pacing_rate: 2_495_000,
            ..path(0, 63)
        },
        PathSnapshot {
            min_rtt: ms(70),
            rttvar: ms(20),
            cwnd: 164,
            restart_cwnd: Some(10),
            in_flight: 1,
            delivery_rate: 1_112_000,
            pacing_rate: 3_178_000,
            ..path(1, 195)
        },
    ];
    let k = QueueView {
        bytes: 229_782,
        frames: 14,
        ..QueueView::default()
    };
    let stale = EcfConfig {
        idle_rtt: false,
        ..EcfConfig::default()
    };
    assert!(is_wait(Ecf::new(stale).decide(now, 1, &paths, &k, 65536)));
    assert!(matches!(
        Ecf::default().decide(now, 1, &paths, &k, 65536),
        Decision::Send { .. }
    ));
    // Once LTE carries a window its srtt is what counts again.
    paths[1].in_flight = 160;
    assert_eq!(paths[1].rtt_now(), paths[1].srtt);
}

/// Later in such a chunk (BBR, 70 ms, warm), LTE asking with 131 KB queued: WiFi (x_f)
/// srtt 61 ms, 95 segments, 20 in flight and 37 KB unsent, delivering 543 KB/s and
/// pacing at 2.46 MB/s, 2.89 × its bandwidth estimate of 852 KB/s (BBR's start-up gain);
/// LTE 43 segments in flight of 164. Capped at the pacing rate WiFi's window reads as
/// 2.2 MB/s, three times what the 7 Mbit/s link carries, and ECF waits. At BBR's
/// bandwidth estimate LTE sends.
#[test]
fn a_bbr_window_is_read_at_its_bandwidth_estimate_not_its_pacing_rate() {
    let now = Instant::now();
    let mut paths = [
        PathSnapshot {
            min_rtt: ms(50),
            rttvar: ms(8),
            cwnd: 95,
            in_flight: 20,
            notsent: 36_764,
            ready: false,
            delivery_rate: 543_000,
            pacing_rate: 2_463_000,
            ..path(0, 61)
        },
        PathSnapshot {
            min_rtt: ms(70),
            rttvar: ms(20),
            cwnd: 164,
            in_flight: 43,
            notsent: 4_921,
            delivery_rate: 1_112_000,
            pacing_rate: 3_203_000,
            ..path(1, 191)
        },
    ];
    let k = QueueView {
        bytes: 131_304,
        frames: 8,
        ..QueueView::default()
    };
    // Test (2) as published, to see the rate alone.
    let cfg = EcfConfig {
        fast_completion: false,
        ..EcfConfig::default()
    };
    assert!(is_wait(Ecf::new(cfg).decide(now, 1, &paths, &k, 65536)));
    paths[0].bandwidth = 852_000;
    paths[1].bandwidth = 1_108_000;
    assert!(matches!(
        Ecf::new(cfg).decide(now, 1, &paths, &k, 65536),
        Decision::Send { .. }
    ));
    assert!(matches!(
        Ecf::default().decide(now, 1, &paths, &k, 65536),
        Decision::Send { .. }
    ));
}

/// Near that chunk's end, LTE asking with 66 KB queued: WiFi (x_f) srtt 73 ms, a window
/// of 63 KB at its 862 KB/s, 44 segments in flight and 35 KB unsent, so k and its own
/// queue take it (1 + 101/63) · 73 = 189 ms; LTE, 66 segments in flight at 1.12 MB/s,
/// would have the 66 KB there in 181 ms. Test (2) with x_f's lower bound (2 · 73 + 15 =
/// 161 ms) judges LTE slower and waits; with x_f's completion estimate LTE sends.
#[test]
fn the_second_test_counts_what_the_fast_path_has_queued() {
    let now = Instant::now();
    let mut paths = [
        PathSnapshot {
            min_rtt: ms(50),
            rttvar: ms(1),
            cwnd: 94,
            in_flight: 44,
            notsent: 34_887,
            ready: false,
            delivery_rate: 667_000,
            pacing_rate: 2_464_000,
            bandwidth: 862_000,
            ..path(0, 73)
        },
        PathSnapshot {
            min_rtt: ms(70),
            rttvar: ms(15),
            cwnd: 164,
            in_flight: 66,
            notsent: 4_908,
            delivery_rate: 1_113_000,
            pacing_rate: 3_203_000,
            bandwidth: 1_120_000,
            ..path(1, 196)
        },
    ];
    let k = QueueView {
        bytes: 65_652,
        frames: 4,
        ..QueueView::default()
    };
    let published = EcfConfig {
        fast_completion: false,
        ..EcfConfig::default()
    };
    assert!(is_wait(Ecf::new(published).decide(now, 1, &paths, &k, 65536)));
    assert!(matches!(
        Ecf::default().decide(now, 1, &paths, &k, 65536),
        Decision::Send { .. }
    ));
    // With WiFi's own queue gone the lower bound stands, and ECF waits.
    paths[0].in_flight = 0;
    paths[0].notsent = 0;
    paths[0].ready = false;
    assert!(is_wait(Ecf::default().decide(now, 1, &paths, &k, 65536)));
}

/// A traced state at the start of a 256 KB chunk on seed-default-270 (CUBIC, warm):
/// WiFi (x_f) idle for 1.1 s before, 53 segments at 857 KB/s, restarted by the kernel to
/// 10 segments, 29 KB unsent; LTE (x_s) srtt 279 ms, 51 segments, idle and ready; 229 KB
/// queued in 16 KB frames; `waiting` still set by the end of the warm-up burst. Published
/// ECF reads WiFi as draining 258 KB at 71 KB per 83 ms round (384 ms) against β-widened
/// 1.25 · 345 ms and waits, leaving the whole chunk to WiFi. WiFi really restarts at
/// 14 KB a round and needs 515 ms; and the hysteresis belongs to the burst that set it.
#[test]
fn a_restarted_fast_path_slow_starts_and_the_hysteresis_ends_with_the_burst() {
    let t0 = Instant::now();
    let mut idle = [path(0, 83), path(1, 279)];
    for p in idle.iter_mut() {
        p.rttvar = Duration::from_millis(10);
    }
    idle[0].cwnd = 53;
    idle[0].delivery_rate = 857_000;
    idle[0].pacing_rate = 857_000;
    idle[1].cwnd = 51;
    idle[1].delivery_rate = 257_000;
    idle[1].pacing_rate = 300_000;
    let mut busy = idle.clone();
    busy[0].cwnd = 10;
    busy[0].in_flight = 2;
    busy[0].notsent = 29_000;
    busy[0].ready = false;
    busy[0].delivery_rate = 802_000;
    let k = QueueView {
        bytes: 229_000,
        frames: 14,
        ..QueueView::default()
    };
    let t1 = t0 + Duration::from_millis(1100);
    let run = |cfg: EcfConfig, empty_queue_seen: bool| {
        let mut s = Ecf::new(cfg);
        s.observe(t0, &idle);
        s.waiting = true; // set by the end of the previous burst
        if empty_queue_seen {
            s.decide(t0, 0, &idle, &QueueView::default(), 65536);
        }
        s.observe(t1, &busy);
        assert_eq!(s.mem[0].rec_cwnd, 53);
        s.decide(t1, 1, &busy, &k, 65536)
    };
    let published = EcfConfig {
        delta: Delta::Fixed(Duration::from_millis(10)),
        slow_start: false,
        burst_hysteresis: false,
        ..EcfConfig::default()
    };
    assert!(is_wait(run(published, true)));
    // Either change alone sends on LTE.
    let slow_start = EcfConfig {
        slow_start: true,
        ..published
    };
    assert!(!is_wait(run(slow_start, true)));
    let burst = EcfConfig {
        burst_hysteresis: true,
        ..published
    };
    assert!(!is_wait(run(burst, true)));
    // The hysteresis is cleared by the burst's end, not by the new burst itself.
    assert!(is_wait(run(burst, false)));
    assert!(!is_wait(run(EcfConfig::default(), false)));
}

/// A remembered window with the kernel's own not yet restarted (or a path never idle)
/// drains at the published rate: the slow-start rounds apply only below the tests'
/// window.
#[test]
fn slow_start_changes_nothing_without_a_smaller_send_window() {
    let now = Instant::now();
    let paths = fast_full(10, 100);
    for k in [11 * MSS, 30 * MSS, 200 * MSS] {
        let published = EcfConfig {
            slow_start: false,
            ..EcfConfig::default()
        };
        let mut a = Ecf::new(published);
        let mut b = Ecf::default();
        assert_eq!(
            a.decide(now, 1, &paths, &queue(k), 65536),
            b.decide(now, 1, &paths, &queue(k), 65536)
        );
    }
}
