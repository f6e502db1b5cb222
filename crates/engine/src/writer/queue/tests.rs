//! Unit tests of queue control: the limit's ramp, cuts, holds and base probes, one per
//! transition of [`QueuePhase`].

use super::*;
use crate::writer::tests::{hold_limit, info};
use crate::writer::*;

#[test]
fn queue_control_keeps_what_a_path_holds_within_its_rate_times_min_rtt_plus_target() {
    let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
    let mut i = info(0, 1_000_000);
    i.min_rtt = 50_000;
    w.observe(0, &i, None);
    // 1 MB/s × (50 + 20) ms = 70,000 bytes.
    i.unacked = 40; // 57,920 bytes in flight
    i.snd_cwnd = 100;
    let b = w.budget(&i, 16_448, true).unwrap();
    // 12,080 bytes of room: 8 whole segments, less the record's prefix and tag.
    assert_eq!(b.bulk, 8 * 1448 - RECORD_OVERHEAD);
    assert!(
        b.bulk_limited() && b.total > b.bulk,
        "interactive frames are not held back"
    );
    i.snd_cwnd = 44; // the window sends 4 segments more now
    let b = w.budget(&i, 16_448, true).unwrap();
    assert_eq!(b.bulk, 4 * 1448 - RECORD_OVERHEAD, "no more than the window sends");
    i.snd_cwnd = 100;
    i.unacked = 48; // 69,504: less than a segment of room
    let b = w.budget(&i, 16_448, true).unwrap();
    assert_eq!((b.bulk, b.retry), (0, Some(Duration::from_millis(7))));
    assert_eq!(b.total, 10_000 + 16_448, "the socket still takes interactive frames");
    let mut off = PathWriter::new(1 << 20, true, true);
    assert!(
        !off.budget(&i, 16_448, true).unwrap().bulk_limited(),
        "off unless configured"
    );
    let mut fresh = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
    i.min_rtt = u32::MAX;
    let b = fresh.budget(&i, 16_448, true).unwrap();
    assert_eq!(
        fresh.queue_limit(),
        Some(10 * 1448),
        "no minimum RTT yet: the initial window, not unlimited"
    );
    assert_eq!(b.bulk, 0, "69,504 bytes held are over it");
    assert!(
        !fresh.budget(&i, 16_448, false).unwrap().bulk_limited() && fresh.queue_limit().is_none(),
        "disengaged: no limit, and the next engagement starts afresh"
    );
}

/// Engaged on a path that carried only requests, the limit starts at its congestion
/// window, not at rate × (min RTT + target) from an estimate the exchanges inflated.
#[test]
fn the_limit_starts_no_higher_than_the_congestion_window() {
    let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
    let mut i = info(0, 72_000_000); // loopback exchanges: 72 MB/s
    i.min_rtt = 20;
    i.snd_cwnd = 12;
    w.observe(0, &i, None);
    let _ = w.budget(&i, 16_448, true).unwrap();
    assert_eq!(w.queue_limit(), Some(12 * 1448), "not 72 MB/s × 20 ms = 1.44 MB");
}

/// Under a standing queue of twice the aim or more, one step brings the limit to the
/// bottleneck's rate × (min RTT + aim), from a limit far above it.
#[test]
fn a_bloated_queue_cuts_the_limit_to_the_measured_rate_at_once() {
    let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
    let mut i = info(0, 20_000_000); // an early sample far above the link
    i.min_rtt = 1_000;
    i.rtt = 480_000;
    i.snd_cwnd = 200; // 289,600 bytes: the window fills a 500 ms buffer
    i.unacked = 200;
    w.observe(0, &i, None);
    let _ = w.budget(&i, 16_448, true).unwrap();
    assert_eq!(w.queue_limit(), Some(200 * 1448));
    i.delivery_rate = 500_000; // the bottleneck's
    let t0 = Instant::now();
    w.steer(Some(Duration::from_millis(470)), &i, t0);
    // 500 KB/s × (1 + 12) ms.
    assert_eq!(w.queue_limit(), Some(6_500));
    // An application-limited sample says nothing about the bottleneck: a quarter.
    let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
    i.flags = 1;
    w.observe(0, &i, None);
    let _ = w.budget(&i, 16_448, true).unwrap();
    let before = w.queue_limit().unwrap();
    hold_limit(&w, &mut i);
    w.steer(Some(Duration::from_millis(470)), &i, t0);
    assert_eq!(w.queue_limit(), Some((before as f64 * (1.0 - MAX_STEP)) as u64));
    // Nor does a sample taken while the window held the path below the limit (BBR's
    // minimum-RTT probe: four segments).
    let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
    i.flags = 0;
    i.unacked = 200;
    w.observe(0, &i, None);
    let _ = w.budget(&i, 16_448, true).unwrap();
    let before = w.queue_limit().unwrap();
    hold_limit(&w, &mut i);
    i.snd_cwnd = 4;
    i.delivery_rate = 100_000;
    w.steer(Some(Duration::from_millis(470)), &i, t0);
    assert_eq!(w.queue_limit(), Some((before as f64 * (1.0 - MAX_STEP)) as u64));
}

/// The direct cut takes the largest rate sample of the last two steps: one read
/// across a pause in the sending is low. A lower rate that persists wins after that.
#[test]
fn a_low_rate_sample_does_not_cut_the_limit_below_the_last_steps_peak() {
    let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
    let mut i = info(0, 4_000_000);
    i.min_rtt = 50_000;
    i.rtt = 300_000; // 250 ms of queue
    i.snd_cwnd = 200;
    w.observe(0, &i, None);
    let _ = w.budget(&i, 16_448, true).unwrap();
    assert_eq!(w.queue_limit(), Some(280_000)); // 4 MB/s × 70 ms
    let horizon = 0.050 + 0.020 * STEER_AIM;
    let t0 = Instant::now();
    let step = |w: &mut PathWriter, i: &mut TcpInfo, rate: u64, at: u64| {
        hold_limit(w, i);
        let _ = w.budget(i, 16_448, true).unwrap();
        i.delivery_rate = rate;
        w.steer(None, i, t0 + Duration::from_millis(at));
        w.queue_limit().unwrap() as f64
    };
    let first = step(&mut w, &mut i, 1_000_000, 0);
    assert!((first - 1_000_000.0 * horizon).abs() < 2.0, "{first}");
    let second = step(&mut w, &mut i, 300_000, 350);
    assert!(
        (second - first * (1.0 - MAX_STEP)).abs() < 2.0,
        "{second}: a quarter, not to the low sample"
    );
    let third = step(&mut w, &mut i, 300_000, 1_000);
    assert!(
        (third - 300_000.0 * horizon).abs() < 2.0,
        "{third}: the lower rate persisted"
    );
}

/// Once per base window a held path drains its queue: its bulk budget is half its
/// limit for two smoothed RTTs (200 ms at least), and the drained readings do not
/// raise the limit. A path whose window drained it meanwhile (BBR's own probe) is
/// not probed.
#[test]
fn a_held_path_drains_its_queue_once_per_base_window() {
    let run = |window_drains: bool| {
        let (mut w, mut i) = observed_path(250_000);
        let t0 = Instant::now();
        let _ = w.budget(&i, 16_448, true).unwrap();
        let mut probed = Vec::new(); // (ms, limit) while the bulk budget was halved
        for ms in (0..26_000u64).step_by(50) {
            let now = t0 + Duration::from_millis(ms);
            // At the aim (12 ms of queue) and backlogged.
            i.rtt = 62_000;
            i.snd_cwnd = if window_drains && ms == 6_000 { 4 } else { 100 };
            hold_limit(&w, &mut i);
            let _ = w.budget(&i, 16_448, true).unwrap();
            w.steer(None, &i, now);
            // Holding 60 % of its limit, the path takes bulk bytes unless it probes.
            let limit = w.queue_limit().unwrap();
            i.unacked = (limit as f64 * 0.6 / 1448.0) as u32;
            if w.budget(&i, 16_448, true).unwrap().bulk == 0 {
                probed.push((ms, limit));
            }
        }
        (probed, w.base_probes)
    };
    let (probed, probes) = run(false);
    assert_eq!(probes, 3, "{probed:?}");
    let first: Vec<_> = probed.iter().filter(|p| p.0 < 12_000).map(|p| p.0).collect();
    assert!((7_900..=9_000).contains(&first[0]), "{probed:?}");
    let span = first[first.len() - 1] - first[0];
    assert!((150..=250).contains(&span), "{probed:?}");
    assert!(probed.iter().any(|p| (15_900..=17_200).contains(&p.0)), "{probed:?}");
    assert!(
        probed.windows(2).all(|p| p[1].1 <= p[0].1),
        "the limit rose: {probed:?}"
    );
    // The window held the path at 6 s (its own budget is then 0, not a probe): the
    // probes due at 8 and 16 s are not needed (within 12 s of it); the next, at 24, is.
    let (probed, probes) = run(true);
    assert_eq!(probes, 1, "{probed:?}");
    assert!(probed.iter().all(|p| p.0 == 6_000 || p.0 >= 23_900), "{probed:?}");
}

/// With nothing to protect, a probe that falls due waits until shortly before the
/// one-way reading would lose its base, and interactive traffic brings it on at once;
/// protecting, the probes keep their period whatever the reading keeps.
#[test]
fn with_nothing_to_protect_a_held_path_probes_only_before_its_base_would_be_lost() {
    let run = |protecting: &dyn Fn(u64) -> bool, kept_until: &dyn Fn(Duration) -> Option<Duration>| {
        let (mut w, mut i) = observed_path(250_000);
        let t0 = Instant::now();
        let _ = w.budget(&i, 16_448, true).unwrap();
        let mut probes = Vec::new(); // when each probe started, ms
        for ms in (0..40_000u64).step_by(50) {
            let now = t0 + Duration::from_millis(ms);
            i.rtt = 70_000; // at the target, backlogged
            hold_limit(&w, &mut i);
            let _ = w.budget(&i, 16_448, true).unwrap();
            // The ramp ends on the path's own queue while protecting; then the run's
            // setting.
            w.set_protecting(protecting(ms) || ms == 0);
            w.set_base_kept_until(kept_until(Duration::from_millis(ms)).map(|d| t0 + d));
            let before = w.base_probes;
            w.steer(None, &i, now);
            if w.base_probes > before {
                probes.push(ms);
            }
        }
        probes
    };
    // The base lives to 20 s, then (a probe's sample in the window from 10 s) to 30 s,
    // then to 40 s.
    let kept = |t: Duration| {
        let s = t.as_secs();
        Some(Duration::from_secs(if s < 10 { 20 } else { s / 10 * 10 + 10 }))
    };
    let alone = |_| false;
    let probes = run(&alone, &kept);
    assert_eq!(probes.len(), 3, "{probes:?}");
    assert!(
        probes
            .iter()
            .zip([18_000, 28_000, 38_000])
            .all(|(&p, want)| (want..want + 200).contains(&p)),
        "{probes:?}"
    );
    // No one-way reading: once per base probe period, as while protecting.
    let periodic = run(&alone, &|_| None);
    assert_eq!(periodic.len(), 4, "{periodic:?}");
    assert!((7_900..=9_000).contains(&periodic[0]), "{periodic:?}");
    assert_eq!(run(&|_| true, &kept).len(), 4, "protecting: every period");
    // Interactive traffic from 12 s: the probe due since 8 s comes at once.
    let far = |_| Some(Duration::from_secs(100));
    let probes = run(&|ms| ms >= 12_000, &far);
    assert_eq!(probes.first(), Some(&12_000), "{probes:?}");
}

/// Under queue control the socket paces at most a quarter above the rate the limit
/// stands for once a queue has shown, and keeps its own cap otherwise.
#[test]
fn a_held_path_paces_near_the_rate_its_limit_stands_for() {
    let (mut w, mut i) = observed_path(250_000);
    assert_eq!(w.pacing_cap(), None, "not engaged");
    let _ = w.budget(&i, 16_448, true).unwrap();
    let limit = w.queue_limit().unwrap() as f64; // 250 KB/s × 70 ms
    assert_eq!(limit, 17_500.0);
    let horizon = 0.050 + 0.020 * STEER_AIM;
    assert_eq!(w.pacing_cap(), None, "ramping: the socket's own");
    hold_limit(&w, &mut i); // held back by the limit
    let _ = w.budget(&i, 16_448, true).unwrap();
    i.rtt = 70_000; // a queue: the ramp ends
    w.steer(None, &i, Instant::now());
    let limit = w.queue_limit().unwrap() as f64;
    let cap = w.pacing_cap().unwrap() as f64;
    assert!((cap / (1.25 * limit / horizon) - 1.0).abs() < 1e-3, "{cap}");
    let _ = w.budget(&i, 16_448, false).unwrap();
    assert_eq!(w.pacing_cap(), None, "disengaged: the socket's own cap again");
}

/// The limit converges to what gives the target queue on a path whose rate estimate
/// is 60 % high: a fluid bottleneck where the queue is what the path holds beyond its
/// pipe.
#[test]
fn until_a_queue_shows_the_limit_grows_by_half_per_step() {
    let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
    let mut i = info(0, 0); // no rate yet: the initial window
    i.min_rtt = 50_000;
    i.rtt = 50_000;
    let t0 = Instant::now();
    let _ = w.budget(&i, 16_448, true).unwrap();
    assert_eq!(w.queue_limit(), Some(10 * 1448));
    hold_limit(&w, &mut i); // backlogged: limited
    let _ = w.budget(&i, 16_448, true).unwrap();
    w.steer(None, &i, t0);
    assert_eq!(w.queue_limit(), Some(15 * 1448));
    // A queue (8 ms, below the aim) while the limit holds nothing back is not the
    // limit's: the ramp goes on.
    i.rtt = 58_000;
    i.unacked = 0;
    let _ = w.budget(&i, 16_448, true).unwrap();
    w.steer(None, &i, t0 + Duration::from_millis(100));
    assert_eq!(w.queue_limit(), Some(15 * 1448));
    i.rtt = 50_000;
    hold_limit(&w, &mut i);
    let _ = w.budget(&i, 16_448, true).unwrap();
    w.steer(None, &i, t0 + Duration::from_millis(200));
    assert_eq!(
        w.queue_limit(),
        Some(15 * 1448 * 3 / 2),
        "held back, no queue: the ramp grows"
    );
    // A queue at the aim while the limit holds bytes back ends the ramp; an empty one
    // after it no longer jumps.
    i.rtt = 65_000;
    hold_limit(&w, &mut i);
    let _ = w.budget(&i, 16_448, true).unwrap();
    w.steer(None, &i, t0 + Duration::from_millis(300));
    let at_aim = w.queue_limit().unwrap();
    i.rtt = 50_000;
    hold_limit(&w, &mut i);
    let _ = w.budget(&i, 16_448, true).unwrap();
    w.steer(None, &i, t0 + Duration::from_millis(400));
    let after = w.queue_limit().unwrap();
    assert!(after as f64 <= at_aim as f64 * 1.25 + 1.0, "{at_aim} → {after}");
}

/// A queue read while the path holds little of its limit and the limit held nothing
/// back (a path carrying only pings) neither cuts the limit nor ends its ramp.
#[test]
fn a_queue_the_path_did_not_fill_leaves_the_limit_alone() {
    let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
    let mut i = info(0, 0);
    i.min_rtt = 50_000;
    i.rtt = 80_000; // 30 ms of queue: a cut if the path's
    i.unacked = 1; // a ping in flight
    let t0 = Instant::now();
    let _ = w.budget(&i, 16_448, true).unwrap();
    for step in 0..10 {
        w.steer(None, &i, t0 + Duration::from_millis(100 * step));
        let _ = w.budget(&i, 16_448, true).unwrap();
    }
    assert_eq!(w.queue_limit(), Some(10 * 1448));
    // The bulk comes: the ramp is still on.
    hold_limit(&w, &mut i);
    i.rtt = 50_000;
    let _ = w.budget(&i, 16_448, true).unwrap();
    w.steer(None, &i, t0 + Duration::from_secs(2));
    assert_eq!(w.queue_limit(), Some(15 * 1448));
}

/// A response's first 64 KB go unheld (interactive): the queue their burst makes is
/// not the limit's, and the ramp goes on through it.
#[test]
fn a_queue_made_by_bytes_beyond_the_limit_does_not_end_the_ramp() {
    let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
    let mut i = info(0, 0);
    i.min_rtt = 50_000;
    i.rtt = 70_000;
    let t0 = Instant::now();
    let _ = w.budget(&i, 16_448, true).unwrap();
    hold_limit(&w, &mut i);
    i.unacked += 64 * 1024 / 1448; // the interactive burst on top
    let _ = w.budget(&i, 16_448, true).unwrap();
    w.steer(None, &i, t0);
    assert_eq!(w.queue_limit(), Some(15 * 1448), "the ramp's step");
    // Once the path holds what the limit let through, the same queue ends the ramp.
    hold_limit(&w, &mut i);
    let _ = w.budget(&i, 16_448, true).unwrap();
    w.steer(None, &i, t0 + Duration::from_millis(100));
    assert!(w.queue_limit().unwrap() < 15 * 1448);
}

#[test]
fn steering_corrects_a_rate_estimate_that_errs_high() {
    let target = Duration::from_millis(20);
    let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(target);
    let (rate, min_rtt) = (250_000.0, 0.050); // bytes/s, s
    let mut i = info(0, 400_000);
    i.min_rtt = 50_000;
    w.observe(0, &i, None);
    let t0 = Instant::now();
    let mut limit = 0.0;
    for step in 0..60 {
        let now = t0 + Duration::from_millis(50 * step);
        // The path holds its limit (it is backlogged): the queue is what it holds
        // beyond rate × min RTT.
        let _ = w.budget(&i, 16_448, true).unwrap();
        hold_limit(&w, &mut i);
        let _ = w.budget(&i, 16_448, true).unwrap();
        limit = w.queue_limit().unwrap() as f64;
        let queue = ((limit - rate * min_rtt) / rate).max(0.0);
        i.rtt = ((min_rtt + queue) * 1e6) as u32;
        w.steer(None, &i, now);
    }
    let queue_ms = (limit - rate * min_rtt) / rate * 1e3;
    let aim = 20.0 * STEER_AIM;
    assert!((queue_ms - aim).abs() < 2.0, "queue {queue_ms:.1} ms, limit {limit:.0}");
    // An empty queue on a limited path raises the limit (a rate estimate too low
    // must not starve it): once a queue was seen, by at most a quarter per step.
    let before = w.queue_limit().unwrap();
    i.rtt = i.min_rtt;
    let _ = w.budget(&i, 16_448, true).unwrap();
    w.steer(None, &i, t0 + Duration::from_secs(4));
    let after = w.queue_limit().unwrap();
    assert!(
        after > before && after as f64 <= before as f64 * 1.25 + 1.0,
        "{before} → {after}"
    );
    // The lower of the two readings counts: a one-way reading of no queue wins over
    // an RTT inflated by the reverse direction.
    i.rtt = i.min_rtt + 100_000;
    let _ = w.budget(&i, 16_448, true).unwrap();
    w.steer(Some(Duration::ZERO), &i, t0 + Duration::from_secs(5));
    assert!(w.queue_limit().unwrap() > after);
}

/// A path of `rate` bytes/s and a 50 ms minimum RTT (100 segments of window), its writer
/// (20 ms target) having observed it once.
fn observed_path(rate: u64) -> (PathWriter, TcpInfo) {
    let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
    let mut i = info(0, rate);
    i.min_rtt = 50_000;
    i.snd_cwnd = 100;
    w.observe(0, &i, None);
    (w, i)
}

/// A path of 1 MB/s and 50 ms, its writer engaged and holding its limit (protecting).
fn held_path() -> (PathWriter, TcpInfo, Instant) {
    let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
    let mut i = info(0, 1_000_000);
    i.min_rtt = 50_000;
    i.rtt = 50_000;
    i.snd_cwnd = 100;
    w.observe(0, &i, None);
    let _ = w.budget(&i, 16_448, true).unwrap();
    hold_limit(&w, &mut i);
    let _ = w.budget(&i, 16_448, true).unwrap();
    (w, i, Instant::now())
}

/// Off → Ramp when queue control engages; any phase → Off when it disengages.
#[test]
fn queue_control_ramps_when_engaged_and_is_off_when_not() {
    let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
    assert_eq!(w.phase(), QueuePhase::Off);
    let i = info(0, 1_000_000);
    let _ = w.budget(&i, 16_448, true).unwrap();
    assert!(matches!(w.phase(), QueuePhase::Ramp(_)), "{:?}", w.phase());
    let _ = w.budget(&i, 16_448, false).unwrap();
    assert_eq!(w.phase(), QueuePhase::Off);
    assert_eq!(w.queue_limit(), None);
}

/// Ramp → Steady (protecting): a queue of half the aim or more, made by bytes the
/// limit held back, ends the ramp; a smaller one does not.
#[test]
fn a_queue_of_the_paths_own_bytes_ends_the_ramp() {
    let (mut w, mut i, t0) = held_path();
    i.rtt = 55_000; // 5 ms: under half the aim (6 ms)
    w.steer(None, &i, t0);
    assert!(matches!(w.phase(), QueuePhase::Ramp(_)), "{:?}", w.phase());
    hold_limit(&w, &mut i);
    let _ = w.budget(&i, 16_448, true).unwrap();
    i.rtt = 62_000; // 12 ms
    w.steer(None, &i, t0 + Duration::from_millis(100));
    assert_eq!(w.phase(), QueuePhase::Steady);
}

/// Steady → BaseProbe once per base window, holding half the limit; BaseProbe → Steady
/// when the probe's time is up.
#[test]
fn a_steady_path_probes_its_base_and_returns() {
    let (mut w, mut i, t0) = held_path();
    i.rtt = 62_000;
    w.steer(None, &i, t0);
    assert_eq!(w.phase(), QueuePhase::Steady);
    let limit = w.queue_limit().unwrap();
    w.steer(None, &i, t0 + Duration::from_millis(100)); // schedules the first probe
    let at = t0 + Duration::from_millis(100) + BASE_WINDOW - Duration::from_secs(2);
    w.steer(None, &i, at);
    let QueuePhase::BaseProbe { until } = w.phase() else {
        panic!("no probe: {:?}", w.phase())
    };
    assert_eq!(
        until,
        at + Duration::from_millis(200),
        "two 50 ms RTTs, at least 200 ms"
    );
    let mut idle = info(0, 1_000_000);
    idle.min_rtt = 50_000;
    let b = w.budget(&idle, 16_448, true).unwrap();
    let half = w.queue_limit().unwrap() / 2;
    assert!(b.bulk as u64 <= half && limit > 0, "held to half the limit: {b:?}");
    w.steer(None, &i, until);
    assert_eq!(w.phase(), QueuePhase::Steady);
    assert_eq!(w.base_probes, 1);
}

/// Once the ramp is over, steering aims the queue reading at [`STEER_AIM`] of the target
/// while interactive traffic is there to protect, and at the target itself with nothing
/// to protect: a reading between the two (15 ms of a 20 ms target) lowers the limit in
/// the one case and raises it in the other.
#[test]
fn with_nothing_to_protect_the_steady_aim_is_the_target() {
    let steady = |protecting: bool| {
        let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
        let mut i = info(0, 250_000);
        i.min_rtt = 50_000;
        i.rtt = 65_000;
        i.snd_cwnd = 100;
        w.observe(0, &i, None);
        let _ = w.budget(&i, 16_448, true).unwrap();
        let t0 = Instant::now();
        hold_limit(&w, &mut i);
        let _ = w.budget(&i, 16_448, true).unwrap();
        // A queue of the path's own bytes ends the ramp.
        w.steer(Some(Duration::from_millis(15)), &i, t0);
        assert_eq!(w.phase(), QueuePhase::Steady);
        w.set_protecting(protecting);
        let before = w.queue_limit().unwrap() as f64;
        hold_limit(&w, &mut i);
        let _ = w.budget(&i, 16_448, true).unwrap();
        w.steer(Some(Duration::from_millis(15)), &i, t0 + Duration::from_millis(100));
        w.queue_limit().unwrap() as f64 / before
    };
    let want = |aim_ms: f64| ((50.0 + aim_ms) / 65.0).sqrt();
    let (guarded, alone) = (steady(true), steady(false));
    assert!(
        (guarded - want(20.0 * STEER_AIM)).abs() < 1e-3,
        "protecting: × {guarded}"
    );
    assert!((alone - want(20.0)).abs() < 1e-3, "nothing to protect: × {alone}");
    assert!(guarded < 1.0 && alone > 1.0);
}
