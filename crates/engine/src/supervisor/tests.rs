use super::*;

/// A reading of a connection that has sent `segs` data segments, `retrans` of them
/// again, with the given RTT, rate and window.
fn info(segs: u32, retrans: u32, acked: u64, rtt_ms: u64, rate: u64, full: bool) -> TcpInfo {
    TcpInfo {
        data_segs_out: segs,
        total_retrans: retrans,
        bytes_acked: acked,
        rtt: (rtt_ms * 1000) as u32,
        min_rtt: 50_000,
        delivery_rate: rate,
        snd_cwnd: 20,
        unacked: if full { 20 } else { 5 },
        // A path with its window full carries all it can; otherwise the application
        // (the scheduler) limits it.
        flags: (!full) as u8,
        ..TcpInfo::default()
    }
}

/// Feeds `secs` of readings every 10 ms; `f(t)` gives (segments per reading,
/// retransmitted per reading, RTT ms, rate, window full). Returns the verdicts' times.
fn feed(
    q: &mut Quality,
    t0: Instant,
    from_ms: u64,
    to_ms: u64,
    counts: &mut (u32, u32, u64),
    f: impl Fn(u64) -> (u32, u32, u64, u64, bool),
) -> Vec<(u64, Verdict)> {
    let mut out = Vec::new();
    for ms in (from_ms..to_ms).step_by(10) {
        let (s, r, rtt, rate, full) = f(ms);
        counts.0 += s;
        counts.1 += r;
        counts.2 += s as u64 * 1448;
        let v = q.read(
            &info(counts.0, counts.1, counts.2, rtt, rate, full),
            t0 + Duration::from_millis(ms),
        );
        if v != Verdict::Unchanged {
            out.push((ms, v));
        }
    }
    out
}

#[test]
fn a_steady_path_stays_healthy_and_a_failing_one_is_demoted_within_about_a_second() {
    let t0 = Instant::now();
    let mut q = Quality::default();
    let mut c = (0, 0, 0);
    // 10 s at 2 segments per 10 ms, 1 % of them retransmitted (one per 500 ms).
    let v = feed(&mut q, t0, 0, 10_000, &mut c, |ms| {
        (2, (ms % 500 == 0) as u32, 55, 250_000, false)
    });
    assert!(v.is_empty(), "{v:?}");
    // The RTT triples while the window is not full (the delay is not our queue).
    let v = feed(&mut q, t0, 10_000, 12_000, &mut c, |_| (2, 0, 160, 250_000, false));
    assert_eq!(v.len(), 1, "{v:?}");
    let (at, verdict) = v[0];
    assert_eq!(verdict, Verdict::Demoted);
    assert!((10_750..=11_300).contains(&at), "demoted at {at} ms");
    // Clear again: promoted only after the dwell (3 s of clear bins).
    let v = feed(&mut q, t0, 12_000, 20_000, &mut c, |_| (1, 0, 55, 250_000, false));
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].0 >= 14_700, "promoted at {} ms", v[0].0);
}

#[test]
fn a_queue_of_the_paths_own_making_is_not_degradation() {
    let t0 = Instant::now();
    let mut q = Quality::default();
    let mut c = (0, 0, 0);
    // A bulk transfer filling a 500 ms buffer: RTT 10× the minimum, window full,
    // the rate steady.
    let v = feed(&mut q, t0, 0, 30_000, &mut c, |_| (10, 0, 570, 1_100_000, true));
    assert!(v.is_empty(), "{v:?}");
}

/// A LAN-like path (minimum RTT in microseconds) with one burst's sample far above
/// its rate and a millisecond's queue: neither the burst nor the factor is a collapse.
#[test]
fn a_rate_spike_and_a_tiny_rtt_are_no_collapse() {
    let t0 = Instant::now();
    let mut q = Quality::default();
    let mut c = (0, 0, 0);
    let lan = |segs: u32, acked: u64, rate: u64| TcpInfo {
        data_segs_out: segs,
        bytes_acked: acked,
        rtt: 3_600,
        min_rtt: 7,
        delivery_rate: rate,
        snd_cwnd: 20,
        unacked: 20,
        ..TcpInfo::default()
    };
    let mut verdicts = Vec::new();
    for ms in (0..20_000u64).step_by(10) {
        c.0 += 10;
        c.2 += 14_480;
        let rate = if ms == 100 { 2_000_000_000 } else { 24_000_000 };
        let v = q.read(&lan(c.0, c.2, rate), t0 + Duration::from_millis(ms));
        if v != Verdict::Unchanged {
            verdicts.push((ms, v));
        }
    }
    assert!(verdicts.is_empty(), "{verdicts:?}: {}", q.why());
}

#[test]
fn rising_loss_demotes_and_a_ping_pong_doubles_the_dwell() {
    let t0 = Instant::now();
    let mut q = Quality::default();
    let mut c = (0, 0, 0);
    feed(&mut q, t0, 0, 5_000, &mut c, |_| (3, 0, 55, 300_000, false));
    // 10 % loss.
    let v = feed(&mut q, t0, 5_000, 8_000, &mut c, |ms| {
        (3, (ms % 30 == 0) as u32, 55, 300_000, false)
    });
    assert_eq!(v.first().map(|v| v.1), Some(Verdict::Demoted), "{v:?}");
    // Promotion after 3 s of clear bins.
    let v = feed(&mut q, t0, 8_000, 13_000, &mut c, |_| (1, 0, 55, 300_000, false));
    let promoted = v.iter().find(|v| v.1 == Verdict::Promoted).expect("promoted").0;
    // Lossy again soon after: demoted; the next promotion takes twice as long.
    let v = feed(&mut q, t0, 13_000, 16_000, &mut c, |ms| {
        (3, (ms % 30 == 0) as u32, 55, 300_000, false)
    });
    let demoted = v.iter().find(|v| v.1 == Verdict::Demoted).expect("demoted").0;
    assert!(demoted > promoted);
    let v = feed(&mut q, t0, 16_000, 30_000, &mut c, |_| (1, 0, 55, 300_000, false));
    let again = v.iter().find(|v| v.1 == Verdict::Promoted).expect("promoted").0;
    assert!(again - 16_000 >= 5_900, "promoted after {} ms", again - 16_000);
}

#[test]
fn the_poisson_tail_matches_hand_computed_values() {
    // λ = 0.84: P(X ≥ 4) = 1 − e^−λ (1 + λ + λ²/2 + λ³/6).
    let l: f64 = 0.84;
    let want = 1.0 - (-l).exp() * (1.0 + l + l * l / 2.0 + l * l * l / 6.0);
    assert!((poisson_tail(4, l) - want).abs() < 1e-9, "{}", poisson_tail(4, l));
    assert_eq!(poisson_tail(2, 3.0), 1.0, "at or below the mean");
    assert_eq!(poisson_tail(0, 0.5), 1.0);
    // A fast path's window (λ = 2000): far above the mean is far from likely, and no
    // underflow makes it look likely.
    assert!(poisson_tail(2300, 2000.0) < 1e-9);
    assert!(poisson_tail(2050, 2000.0) > 0.1);
}

/// 1 % random loss at about 50 segments a second for five minutes (an upload's path
/// held by queue control: about a hundred segments in the loss window, where 3 % is
/// three or four losses): never demoted. A rise to 10 % still is.
#[test]
fn steady_random_loss_over_few_segments_is_no_trend() {
    let t0 = Instant::now();
    let mut q = Quality::default();
    let mut c = (0, 0, 0);
    // A fixed-seed generator: one segment every 20 ms, each lost with probability 1 %.
    let rng = std::cell::Cell::new(0x2545_f491_4f6c_dd1du64);
    let lost = |p: f64| {
        let mut x = rng.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        rng.set(x);
        ((x >> 11) as f64 / (1u64 << 53) as f64) < p
    };
    let v = feed(&mut q, t0, 0, 300_000, &mut c, |ms| {
        let seg = (ms % 20 == 0) as u32;
        (seg, seg * lost(0.01) as u32, 55, 75_000, false)
    });
    assert!(v.is_empty(), "{v:?}: {}", q.why());
    let v = feed(&mut q, t0, 300_000, 310_000, &mut c, |ms| {
        let seg = (ms % 20 == 0) as u32;
        (seg, seg * lost(0.10) as u32, 55, 75_000, false)
    });
    assert_eq!(v.first().map(|v| v.1), Some(Verdict::Demoted), "{v:?}");
}

/// A transfer starting on a path that carried only requests: its congestion control's
/// start-up overshoots the buffer (8 % of its segments lost for two seconds) while the
/// rate grows tenfold. Not degradation.
#[test]
fn losses_while_the_rate_grows_are_not_degradation() {
    let t0 = Instant::now();
    let mut q = Quality::default();
    let mut c = (0, 0, 0);
    let v = feed(&mut q, t0, 0, 5_000, &mut c, |ms| {
        ((ms % 100 == 0) as u32, 0, 55, 30_000, false)
    });
    assert!(v.is_empty());
    let v = feed(&mut q, t0, 5_000, 7_000, &mut c, |ms| {
        (4, (ms % 30 == 0) as u32, 60, 300_000, false)
    });
    assert!(v.is_empty(), "{v:?}: {}", q.why());
}

#[test]
fn false_alarms_raise_the_suspicion_threshold_for_a_while() {
    let t0 = Instant::now();
    let mut s = Suspicion::default();
    let rtt = Duration::from_millis(20);
    let ack = Duration::from_millis(5);
    assert_eq!(s.threshold(rtt, ack, t0), Duration::from_millis(155));
    assert_eq!(
        s.threshold(Duration::from_millis(100), ack, t0),
        Duration::from_millis(305),
        "three minimum RTTs on a long path"
    );
    s.start(t0);
    s.release(t0 + Duration::from_millis(300), Duration::from_millis(155));
    assert_eq!(s.threshold(rtt, ack, t0), Duration::from_millis(305), "doubled");
    // A real outage (10 s) does not raise it further.
    let t1 = t0 + Duration::from_secs(1);
    s.start(t1);
    s.release(t1 + Duration::from_secs(10), Duration::from_millis(305));
    assert_eq!(s.threshold(rtt, ack, t1), Duration::from_millis(305));
    assert_eq!(
        s.threshold(rtt, ack, t0 + Duration::from_secs(31)),
        Duration::from_millis(155),
        "decays after 30 s without a false alarm"
    );
}
