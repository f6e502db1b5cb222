use super::*;
use crate::config::Role;

fn cfg() -> EngineConfig {
    EngineConfig::new(Role::Client)
}

/// A session that has carried a stream since `t0`.
fn busy(t0: Instant) -> Load {
    Load::Carrying { since: t0 }
}

/// The kernel's count restarts with each connection; the path's total goes on.
#[test]
fn kernel_retransmits_add_up_over_reconnections() {
    let now = Instant::now();
    let mut paths = Paths::new(&cfg());
    paths.up(0, now);
    paths.kernel_retransmits(0, 3);
    paths.kernel_retransmits(0, 5);
    paths.kernel_retransmits(0, 5);
    assert_eq!(paths.get(0).unwrap().counters.tcp_retransmits, 5);
    paths.down(0);
    paths.up(0, now);
    paths.kernel_retransmits(0, 2);
    assert_eq!(paths.get(0).unwrap().counters.tcp_retransmits, 7);
}

/// Two idle paths up at `t0`: RTT 50 and 70 ms, 2 Mbit/s each, windows of 100 segments.
fn two_paths(t0: Instant) -> Paths {
    let mut ps = Paths::new(&cfg());
    for (id, rtt_ms) in [(0usize, 50u64), (1, 70)] {
        ps.up(id, t0);
        let s = &mut ps.entry(id).snap;
        s.alive = true;
        s.min_rtt = Duration::from_millis(rtt_ms);
        s.srtt = Duration::from_millis(rtt_ms);
        s.mss = 1448;
        s.cwnd = 100;
        s.delivery_rate = 250_000;
    }
    ps
}

/// An interactive frame goes where it arrives first now: the lower-RTT path while its
/// queue is short, the other once the first path's queue (in flight beyond its
/// bandwidth-delay product, or unsent) outweighs the difference — whatever the smoothed
/// RTTs say.
#[test]
fn an_interactive_frame_goes_where_it_arrives_first_now() {
    let t0 = Instant::now();
    let mut ps = two_paths(t0);
    assert!(ps.urgent_here(1000, 0, 0, t0));
    assert!(!ps.urgent_here(1000, 1, 0, t0), "path 0 delivers 10 ms sooner");
    // 40 ms of queue on path 0: 12.5 KB in the pipe (50 ms) plus 10 KB queued.
    ps.entry(0).snap.in_flight = (12_500 + 10_000) / 1448;
    assert!(
        ps.urgent_here(1000, 1, 0, t0),
        "path 0's queue outweighs its shorter RTT"
    );
    assert!(!ps.urgent_here(1000, 0, 0, t0));
    ps.entry(0).snap.in_flight = 0;
    ps.entry(0).snap.notsent = 10_000;
    assert!(ps.urgent_here(1000, 1, 0, t0), "unsent bytes count too");
    ps.entry(0).snap.notsent = 0;
    ps.entry(0).snap.in_flight = (12_500 + 10_000) / 1448;
    // The peer's reports say path 0's frames meet no queue (its in-flight bytes wait
    // for ACKs on a loaded reverse direction): they win over the model.
    ps.entry(0).queue.sample(1_025_000, t0);
    assert!(ps.urgent_here(1000, 0, 0, t0), "a measured queue wins over the model");
    ps.entry(1).snap.backup = true;
    assert!(
        ps.urgent_here(1000, 0, 0, t0),
        "a backup only when no regular path carries"
    );
    assert!(!ps.urgent_here(1000, 1, 0, t0));
}

/// A path whose congestion window was cut (BBR's ProbeRTT: four segments for 200 ms)
/// delivers a frame written behind a full window a round trip or more later, although
/// its delivery rate still reads the rate before the cut: an interactive frame goes on
/// the other path then, and back once the window is open again.
#[test]
fn a_full_window_delays_an_interactive_frame() {
    let t0 = Instant::now();
    let mut ps = two_paths(t0);
    assert!(ps.urgent_here(1000, 0, 0, t0));
    let s = &mut ps.entry(0).snap;
    s.cwnd = 4;
    s.in_flight = 4;
    s.notsent = 8 * 1448;
    let eta = arrival_secs(&ps.get(0).unwrap().snap, None, 1000);
    // Nine segments beyond a window of four: 2.25 round trips of 50 ms.
    assert!((eta - (0.025 + 0.1125)).abs() < 1e-6, "{eta}");
    assert!(ps.urgent_here(1000, 1, 0, t0), "the window makes path 0 later");
    assert!(!ps.urgent_here(1000, 0, 0, t0));
    let s = &mut ps.entry(0).snap;
    s.cwnd = 100;
    s.notsent = 0;
    assert!(ps.urgent_here(1000, 0, 0, t0), "the window open again");
}

#[test]
fn a_path_holding_data_without_progress_is_stuck_before_it_times_out() {
    let t0 = Instant::now();
    let mut ps = Paths::new(&cfg());
    ps.up(0, t0);
    ps.entry(0).snap.srtt = Duration::from_millis(50);
    ps.booked(0, t0, None);
    // A hedge after max(1.5 × 50 ms, 75 ms) + the ACK delay (5 ms).
    let hedge = Duration::from_millis(80);
    assert_eq!(ps.next_timeout(&cfg(), busy(t0)), Some(t0 + hedge));
    assert_eq!(
        ps.check(0, t0 + hedge - Duration::from_millis(1), &cfg(), busy(t0)),
        PathCheck::Fine
    );
    assert_eq!(ps.check(0, t0 + hedge, &cfg(), busy(t0)), PathCheck::Hedge);
    ps.hedged(0);
    // Suspect after max(3 × 50 ms, 150 ms) + the ACK delay.
    let after = Duration::from_millis(155);
    assert_eq!(
        ps.next_timeout(&cfg(), busy(t0)),
        Some(t0 + after),
        "one hedge per silence"
    );
    assert_eq!(
        ps.check(0, t0 + after - Duration::from_millis(1), &cfg(), busy(t0)),
        PathCheck::Fine
    );
    assert_eq!(ps.check(0, t0 + after, &cfg(), busy(t0)), PathCheck::Stuck);
    ps.mark_suspect(0, t0 + after);
    assert!(!ps.get(0).unwrap().carries());
    assert_eq!(ps.get(0).unwrap().state(), PathState::Suspect);
    assert_eq!(
        ps.check(0, t0 + after, &cfg(), busy(t0)),
        PathCheck::Probe,
        "probed at once"
    );
    ps.probed(0, t0 + after);
    assert_eq!(
        ps.check(0, t0 + after, &cfg(), busy(t0)),
        PathCheck::Fine,
        "already suspect"
    );
    assert_eq!(
        ps.check(0, t0 + after + Duration::from_millis(300), &cfg(), busy(t0)),
        PathCheck::Probe,
        "probed again every 300 ms"
    );
    assert_eq!(
        ps.check(0, t0 + cfg().path_timeout, &cfg(), busy(t0)),
        PathCheck::TimedOut
    );
    assert!(ps.heard(0, t0 + after, 10), "speaking again lifts the suspicion");
    assert!(ps.get(0).unwrap().carries());
}

#[test]
fn without_suspicion_a_silent_path_keeps_its_frames_until_it_times_out() {
    let t0 = Instant::now();
    let cfg = EngineConfig {
        suspicion: false,
        ..cfg()
    };
    let mut ps = Paths::new(&cfg);
    ps.up(0, t0);
    ps.entry(0).snap.srtt = Duration::from_millis(50);
    ps.booked(0, t0, None);
    let keepalive = t0 + cfg.keepalive;
    assert_eq!(
        ps.next_timeout(&cfg, busy(t0)),
        Some(keepalive),
        "no hedge, no suspicion"
    );
    for ms in [80, 155, 1000, 4999] {
        let at = t0 + Duration::from_millis(ms);
        assert_eq!(ps.check(0, at, &cfg, busy(t0)), PathCheck::Fine, "silent {ms} ms");
    }
    assert!(ps.get(0).unwrap().carries());
    assert_eq!(ps.check(0, t0 + cfg.path_timeout, &cfg, busy(t0)), PathCheck::TimedOut);
}

fn reading(unacked: u32, last_ack_ms: u32, acked: u64) -> TcpInfo {
    TcpInfo {
        unacked,
        last_ack_recv: last_ack_ms,
        bytes_acked: acked,
        snd_cwnd: 10,
        ..TcpInfo::default()
    }
}

/// A path that carries only control frames (a downloading client's ACKs) is
/// suspected from its socket: bytes unacknowledged and no ACK for the threshold. An
/// ACK, duplicate or not, is a sign of life; after the suspicion, a duplicate asks
/// for a probe and the first that acknowledges more releases it.
#[test]
fn the_kernel_socket_shows_a_silent_path_and_its_answer() {
    let t0 = Instant::now();
    let ms = |n: u64| t0 + Duration::from_millis(n);
    let mut ps = Paths::new(&cfg());
    ps.up(0, t0);
    ps.up(1, t0);
    ps.entry(0).snap.min_rtt = Duration::from_millis(20);
    ps.read_kernel(0, &reading(0, 0, 100), ms(1000), false);
    // Control bytes written at 1000 ms; the socket shows them unacknowledged.
    ps.read_kernel(0, &reading(2, 20, 100), ms(1020), false);
    assert_eq!(ps.check(0, ms(1150), &cfg(), busy(t0)), PathCheck::Fine);
    assert_eq!(
        ps.check(0, ms(1155), &cfg(), busy(t0)),
        PathCheck::Stuck,
        "150 ms + ACK delay after the socket was last seen empty"
    );
    // A duplicate ACK at 1100 ms (nothing newly acknowledged) is a sign of life.
    ps.read_kernel(0, &reading(2, 10, 100), ms(1110), false);
    assert_eq!(ps.check(0, ms(1200), &cfg(), busy(t0)), PathCheck::Fine);
    assert_eq!(ps.check(0, ms(1255), &cfg(), busy(t0)), PathCheck::Stuck);
    ps.mark_suspect(0, ms(1255));
    assert_eq!(ps.get(1).unwrap().state(), PathState::Active);
    let r = ps.read_kernel(0, &reading(2, 400, 100), ms(1500), false);
    assert!(!r.released, "no new ACK");
    ps.probed(0, ms(1500));
    assert_eq!(ps.check(0, ms(1600), &cfg(), busy(t0)), PathCheck::Fine);
    // A duplicate ACK: the link is back but the connection still waits for its
    // retransmission. Not released; probed at once.
    let r = ps.read_kernel(0, &reading(2, 10, 100), ms(1600), false);
    assert!(!r.released);
    assert_eq!(ps.check(0, ms(1600), &cfg(), busy(t0)), PathCheck::Probe);
    let r = ps.read_kernel(0, &reading(0, 1, 300), ms(1900), false);
    assert!(r.released, "acknowledged: released at once");
    assert_eq!(ps.get(0).unwrap().state(), PathState::Active);
}

/// Only the best tier among the paths that can carry takes new data; the others
/// stand by (or drain what they hold). A lower tier takes over while every better
/// path is down, suspect or degraded.
#[test]
fn tiers_carry_in_order() {
    let t0 = Instant::now();
    let mut ps = Paths::new(&cfg());
    for p in 0..3 {
        ps.up(p, t0);
    }
    ps.set_tier(1, Tier::Secondary, t0);
    ps.set_tier(2, Tier::Backup, t0);
    let states = |ps: &Paths| (0..3).map(|p| ps.get(p).unwrap().state()).collect::<Vec<_>>();
    use PathState::*;
    assert_eq!(states(&ps), [Active, Standby, Standby]);
    assert_eq!(ps.snapshots().iter().filter(|s| s.alive).count(), 1);
    ps.mark_suspect(0, t0);
    assert_eq!(states(&ps), [Suspect, Active, Standby]);
    ps.down(1);
    assert_eq!(states(&ps), [Suspect, Down, Active]);
    ps.booked(2, t0, None);
    assert!(ps.heard(0, t0, 10));
    assert_eq!(
        states(&ps),
        [Active, Down, Draining],
        "the backup delivers what it holds"
    );
    ps.released(0b100, t0);
    assert_eq!(states(&ps), [Active, Down, Standby]);
}
#[test]
fn an_ack_credits_progress_only_to_the_sole_holder() {
    let t0 = Instant::now();
    let later = t0 + Duration::from_secs(1);
    let mut ps = Paths::new(&cfg());
    ps.up(0, t0);
    ps.up(1, t0);
    ps.booked(0, t0, None);
    ps.booked(1, t0, None);
    ps.released(0b11, later);
    for p in 0..2 {
        let e = ps.get(p).unwrap();
        assert_eq!((e.held, e.progress), (0, t0), "path {p}: which copy arrived is unknown");
    }
    ps.booked(0, t0, None);
    ps.released(0b01, later);
    assert_eq!(ps.get(0).unwrap().progress, later);
}

#[test]
fn keepalives_go_only_on_idle_paths() {
    let t0 = Instant::now();
    let mut ps = Paths::new(&cfg());
    ps.up(0, t0);
    assert!(!ps.keepalive(0, t0 + Duration::from_millis(999), &cfg(), busy(t0)));
    assert!(ps.keepalive(0, t0 + cfg().keepalive, &cfg(), busy(t0)));
    assert_eq!(ps.get(0).unwrap().ctrl.front(), Some(&Frame::Ping { id: 1 }));
    assert!(
        !ps.keepalive(0, t0 + cfg().keepalive, &cfg(), busy(t0)),
        "just sent one"
    );
}

/// A session that carries nothing sends a keepalive every `idle_keepalive` (25 s), and
/// its path is dead `path_timeout` (5 s) after the keepalive it should have heard (29 s
/// of silence); carrying, every second and after 5 s of silence, as before.
#[test]
fn an_idle_session_keeps_its_paths_alive_less_often_and_waits_longer() {
    let t0 = Instant::now();
    let s = |n: u64| t0 + Duration::from_secs(n);
    let c = cfg();
    let mut ps = Paths::new(&c);
    ps.up(0, t0);
    assert_eq!(c.idle_keepalive(), Duration::from_secs(25));
    assert_eq!(ps.next_timeout(&c, Load::Idle), Some(s(25)));
    assert!(!ps.keepalive(0, s(24), &c, Load::Idle));
    assert!(ps.keepalive(0, s(25), &c, Load::Idle));
    assert_eq!(
        ps.check(0, s(29) - Duration::from_millis(1), &c, Load::Idle),
        PathCheck::Fine
    );
    assert_eq!(ps.check(0, s(29), &c, Load::Idle), PathCheck::TimedOut);
    assert_eq!(ps.check(0, s(5), &c, busy(t0)), PathCheck::TimedOut);
    // Below `keepalive`, `idle_keepalive` is `keepalive`: nothing changes when idle.
    let off = EngineConfig {
        idle_keepalive: Duration::ZERO,
        ..cfg()
    };
    assert_eq!(ps.check(0, s(5), &off, Load::Idle), PathCheck::TimedOut);
}

/// A path that died while the session carried and whose keepalives went unanswered is
/// dropped `path_timeout` after the first of them, even when the session goes idle
/// before that (the idle allowance is for the peer's slower keepalives, not for ours
/// going unanswered); anything heard answers them.
#[test]
fn unanswered_keepalives_are_not_excused_by_idleness() {
    let t0 = Instant::now();
    let s = |n: u64| t0 + Duration::from_secs(n);
    let c = cfg();
    let mut ps = Paths::new(&c);
    ps.up(0, t0);
    assert!(ps.keepalive(0, s(1), &c, busy(t0)));
    assert!(ps.keepalive(0, s(2), &c, busy(t0)));
    assert_eq!(
        ps.check(0, s(6) - Duration::from_millis(1), &c, Load::Idle),
        PathCheck::Fine
    );
    assert_eq!(ps.check(0, s(6), &c, Load::Idle), PathCheck::TimedOut);
    // Heard after its keepalive: the idle allowance holds again.
    ps.heard(0, s(3), 40);
    assert_eq!(ps.check(0, s(20), &c, Load::Idle), PathCheck::Fine);
}

/// A session that starts carrying after 20 s of idleness: the paths' keepalives are due
/// at once, and a path that hears nothing more is dead 5 s after the start — not 29 s
/// after it last heard, nor 5 s after that (which has passed).
#[test]
fn a_session_that_starts_carrying_checks_its_idle_paths_within_the_path_timeout() {
    let t0 = Instant::now();
    let s = |n: u64| t0 + Duration::from_secs(n);
    let c = cfg();
    let mut ps = Paths::new(&c);
    ps.up(0, t0);
    ps.up(1, t0);
    ps.heard(1, s(19), 10);
    let load = busy(s(20));
    assert_eq!(ps.next_timeout(&c, load), Some(s(1)), "keepalives overdue");
    assert!(ps.keepalive(0, s(20), &c, load));
    assert!(ps.keepalive(1, s(20), &c, load));
    assert_eq!(ps.check(0, s(25) - Duration::from_millis(1), &c, load), PathCheck::Fine);
    assert_eq!(ps.check(0, s(25), &c, load), PathCheck::TimedOut);
    assert_eq!(ps.check(1, s(25), &c, load), PathCheck::TimedOut);
    // Started carrying late in a long silence: never later than idle would have been.
    assert_eq!(ps.check(0, s(29), &c, busy(s(28))), PathCheck::TimedOut);
}

#[test]
fn going_down_forgets_what_the_path_held_and_counts_a_failure() {
    let t0 = Instant::now();
    let mut ps = Paths::new(&cfg());
    ps.up(1, t0);
    ps.booked(1, t0, Some((5, 100)));
    assert!(ps.down(1));
    assert!(!ps.down(1), "only once");
    let p = ps.get(1).unwrap();
    assert_eq!((p.held, p.counters.failures, p.status), (0, 1, PathStatus::Down));
    assert_eq!(ps.get(0).unwrap().status, PathStatus::Down, "never connected");
}

#[test]
fn arrival_reports_are_binned_by_the_bytes_in_flight_at_sending() {
    let t0 = Instant::now();
    let mut ps = Paths::new(&cfg());
    ps.up(0, t0);
    ps.booked(0, t0, Some((100, 0)));
    ps.booked(0, t0, Some((200, 50 * 1024)));
    ps.on_report(0, 100, 1000, Duration::ZERO, t0);
    ps.on_report(0, 200, 9000, Duration::ZERO, t0);
    assert_eq!(ps.snapshots()[0].owd_us, Some(1000), "an empty path's bin");
    ps.entry(0).snap.notsent = 50 * 1024;
    assert_eq!(ps.snapshots()[0].owd_us, Some(9000), "a loaded path's bin");
}

#[test]
fn the_fastest_other_path_is_picked_for_a_stall() {
    let t0 = Instant::now();
    let mut ps = Paths::new(&cfg());
    for (i, ms) in [(0, 10), (1, 30), (2, 20)] {
        ps.up(i, t0);
        ps.entry(i).snap.srtt = Duration::from_millis(ms);
    }
    assert_eq!(ps.fastest_except(0b001), Some(2));
    ps.mark_suspect(2, t0);
    assert_eq!(ps.fastest_except(0b001), Some(1));
}

/// What a silent primary holds is copied to another primary if one carries; while none
/// does, to the backup that would carry were it suspect — not to a path the energy-aware
/// mode holds back, nor to a suspect one, nor to one switched off.
#[test]
fn a_silent_paths_frames_are_copied_where_they_would_go_without_it() {
    let t0 = Instant::now();
    let mut ps = Paths::new(&cfg());
    for (i, ms) in [(0, 10), (1, 30), (2, 20), (3, 5)] {
        ps.up(i, t0);
        ps.entry(i).snap.srtt = Duration::from_millis(ms);
    }
    ps.set_tier(1, Tier::Backup, t0);
    ps.set_tier(2, Tier::Backup, t0);
    ps.set_tier(3, Tier::Off, t0);
    assert!(
        !ps.get(2).unwrap().carries(),
        "a backup stands by while the primary works"
    );
    assert_eq!(ps.copy_target(0), Some(2), "the faster backup");
    ps.set_energy_standby(2, true, t0);
    assert_eq!(ps.copy_target(0), Some(1), "not the energy standby");
    ps.mark_suspect(1, t0);
    assert_eq!(ps.copy_target(0), None, "nothing left that would carry");
    ps.set_energy_standby(2, false, t0);
    ps.set_tier(2, Tier::Primary, t0);
    assert_eq!(ps.copy_target(0), Some(2), "a second primary that carries");
}

/// A path that re-joins after an outage: its new connection's first 16 KB record meets
/// the link's 1.15 MB/s (14 ms of serialisation) while the connection's own estimate is
/// its initial window over its RTT (0.2 MB/s). Taken off at that estimate, 82 ms
/// of correction would put the base 68 ms low for the base's 10 to 20 s, and a 5 ms
/// queue would read 67 ms.
#[test]
fn a_rejoined_paths_first_records_do_not_lower_the_queue_base() {
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let mut ps = Paths::new(&cfg());
    ps.up(0, t0);
    {
        let s = &mut ps.entry(0).snap;
        (s.min_rtt, s.srtt, s.mss, s.cwnd, s.delivery_rate) = (ms(70), ms(80), 1448, 80, 1_150_000);
    }
    // One-way delay 35 ms (clock offset 0); a one-segment record sets the base.
    let report = |ps: &mut Paths, ts: u32, len: usize, delay_us: u32, at: Instant| {
        ps.booked(0, at, Some((ts, 0)));
        ps.record_closed(0, ts, len);
        ps.on_report(0, ts, delay_us, Duration::ZERO, at);
    };
    report(&mut ps, 1_000, 1448, 35_000 + 1_259, t0);
    assert_eq!(ps.queue_delay(0, t0), Some(Duration::ZERO));
    // The outage: the path goes silent and is suspected; the kernel's samples of the
    // retransmissions that end it say 30 KB/s; the connection goes, a new one joins with
    // the initial window.
    ps.mark_suspect(0, t0 + ms(200));
    ps.entry(0).snap.delivery_rate = 30_000;
    let t1 = t0 + Duration::from_secs(4);
    ps.down(0);
    ps.up(0, t1);
    {
        let s = &mut ps.entry(0).snap;
        (s.srtt, s.cwnd, s.delivery_rate) = (ms(73), 10, 200_000);
    }
    let serialised = (16_384.0 / 1_150_000.0 * 1e6) as u32;
    report(&mut ps, 4_010_000, 16_384, 35_000 + serialised, t1 + ms(10));
    // 200 ms later (the recent window has moved on): a one-segment record after 5 ms of
    // queue.
    let t2 = t1 + ms(210);
    report(&mut ps, 4_210_000, 1448, 35_000 + 1_259 + 5_000, t2);
    let q = ps.queue_delay(0, t2).unwrap();
    assert!(q <= ms(6), "the queue reads {q:?}");
    // Once the new connection has had a base window of its own, its own estimate counts.
    let t3 = t1 + REJOIN_RATE_FOR + ms(1);
    let p = ps.get(0).unwrap();
    assert_eq!(Paths::serialisation_rate(p, t3), p.snap.rate_estimate());
    // Until then, the delivery rate of the connection before (not its window over its
    // RTT, 1.45 MB/s).
    assert_eq!(Paths::serialisation_rate(p, t2), 1_150_000.0);
}
