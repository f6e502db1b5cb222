//! Unit tests of the path writer: late binding and queue control.

use super::*;
use crate::owd::BASE_WINDOW;

fn info(notsent: u32, rate: u64) -> TcpInfo {
    TcpInfo {
        state: TCP_ESTABLISHED,
        snd_cwnd: 40,
        snd_mss: 1448,
        notsent_bytes: notsent,
        delivery_rate: rate,
        snd_ssthresh: crate::kernel::INFINITE_SSTHRESH,
        ..TcpInfo::default()
    }
}

/// A backlogged path under queue control: it holds its limit (whole segments).
fn hold_limit(w: &PathWriter, i: &mut TcpInfo) {
    i.unacked = w.queue_limit().unwrap().div_ceil(i.snd_mss as u64) as u32;
}

#[test]
fn late_binding_keeps_ten_ms_of_the_rate_unsent() {
    let mut w = PathWriter::new(1 << 20, true, true);
    assert_eq!(w.lowat(), INITIAL_LOWAT);
    w.observe(0, &info(0, 5_000_000), None);
    assert_eq!(w.lowat(), 50_000, "10 ms of 5 MB/s");
    w.observe(0, &info(0, 5_500_000), None);
    assert_eq!(w.lowat(), 50_000, "a change under a quarter is not applied");
    w.observe(0, &info(0, 500_000), None);
    assert_eq!(w.lowat(), MIN_LOWAT, "never below the minimum");
    w.observe(0, &info(0, 1_000_000_000), None);
    assert_eq!(w.lowat(), 1 << 20, "never above the configured maximum");
}

#[test]
fn late_binding_uses_a_quarter_window_before_a_rate_is_known() {
    let mut w = PathWriter::new(1 << 20, true, true);
    w.observe(0, &info(0, 0), None);
    assert_eq!(w.lowat(), 40 * 1448 / 4);
}

#[test]
fn notsent_at_the_mark_waits_and_below_it_fills_to_the_mark_plus_a_frame() {
    let mut w = PathWriter::new(1 << 20, true, true);
    assert_eq!(w.budget(&info(INITIAL_LOWAT, 0), 16_448, true), Err(WriterStep::Full));
    let b = w.budget(&info(INITIAL_LOWAT - 1000, 0), 16_448, true).unwrap();
    assert_eq!((b.total, b.bulk, b.retry), (1000 + 16_448, 1000 + 16_448, None));
}

#[test]
fn late_binding_ends_a_path_whose_connection_is_gone() {
    let mut w = PathWriter::new(1 << 20, true, true);
    let mut i = info(0, 0);
    i.state = 7; // TCP_CLOSE
    assert_eq!(w.budget(&i, 100, true), Err(WriterStep::Closed { state: 7 }));
    i.state = TCP_CLOSE_WAIT;
    assert!(
        w.budget(&i, 100, true).is_ok(),
        "the peer half-closed: we may still send"
    );
}

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
        let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
        let mut i = info(0, 250_000);
        i.min_rtt = 50_000;
        i.snd_cwnd = 100;
        w.observe(0, &i, None);
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

/// Under queue control the socket paces at most a quarter above the rate the limit
/// stands for once a queue has shown, and keeps its own cap otherwise.
#[test]
fn a_held_path_paces_near_the_rate_its_limit_stands_for() {
    let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
    let mut i = info(0, 250_000);
    i.min_rtt = 50_000;
    i.snd_cwnd = 100;
    w.observe(0, &i, None);
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

/// With nothing to protect (queue control engaged by a sustained transfer only), the
/// limit ramps as slow start does — doubling per step, never past twice the window (slow
/// start's next round trip) — until a queue shows; protecting again, it goes on by half.
#[test]
fn with_nothing_to_protect_the_limit_doubles_up_to_the_window() {
    let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
    w.set_protecting(false);
    let mut i = info(0, 0); // no rate yet: the initial window
    i.min_rtt = 470_000;
    i.rtt = 470_000;
    i.snd_cwnd = 100;
    let t0 = Instant::now();
    let _ = w.budget(&i, 16_448, true).unwrap();
    assert_eq!(w.queue_limit(), Some(10 * 1448));
    hold_limit(&w, &mut i);
    let _ = w.budget(&i, 16_448, true).unwrap();
    w.steer(None, &i, t0);
    assert_eq!(w.queue_limit(), Some(20 * 1448), "held back, no queue: doubles");
    // Never past twice the window: the window's next round trip.
    i.snd_cwnd = 15;
    hold_limit(&w, &mut i);
    let _ = w.budget(&i, 16_448, true).unwrap();
    w.steer(None, &i, t0 + Duration::from_millis(500));
    assert_eq!(w.queue_limit(), Some(30 * 1448), "up to twice the window");
    // Protecting again (a request came), the ramp goes on by half.
    w.set_protecting(true);
    i.snd_cwnd = 200;
    hold_limit(&w, &mut i);
    let _ = w.budget(&i, 16_448, true).unwrap();
    w.steer(None, &i, t0 + Duration::from_millis(1000));
    assert_eq!(w.queue_limit(), Some(45 * 1448));
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

#[test]
fn late_binding_reads_an_application_limited_trickle_as_a_lower_bound() {
    let mut w = PathWriter::new(1 << 20, true, true);
    let busy = w.observe(0, &info(0, 2_000_000), None);
    assert_eq!(busy.delivery_rate, 2_000_000);
    let mut trickle = info(0, 40_000);
    trickle.flags = 1; // application-limited sample
    assert_eq!(w.observe(0, &trickle, Some(3_000_000)).delivery_rate, 2_000_000);
    assert_eq!(w.observe(0, &trickle, Some(3_000_000)).bandwidth, 3_000_000);
}

#[test]
fn late_binding_resets_a_low_threshold_only_where_the_window_restarts() {
    let mut i = info(0, 0);
    i.snd_ssthresh = 7;
    i.rto = 300_000;
    i.last_data_sent = 1000;
    assert!(PathWriter::new(1 << 20, true, true).reset_ssthresh_before_write(&i));
    assert!(
        !PathWriter::new(1 << 20, false, true).reset_ssthresh_before_write(&i),
        "no idle restart (BBR, or the sysctl off): the threshold stays"
    );
    assert!(
        !PathWriter::new(1 << 20, true, false).reset_ssthresh_before_write(&i),
        "off"
    );
    let mut w = PathWriter::new(1 << 20, true, true);
    w.disable_ssthresh_reset();
    assert!(!w.reset_ssthresh_before_write(&i));
}

/// With nothing to protect, a queue read while the path's delivery rate still grows by a
/// quarter per step is the ramp's own transient (slow start's bursts still in the
/// smoothed RTT): the ramp goes on through it, and ends at the first such queue once the
/// rate has stopped growing (BBR's full-pipe test). It also starts from what the path
/// holds (up to its window), not below it.
#[test]
fn with_nothing_to_protect_the_ramp_ends_when_the_rate_stops_growing() {
    let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
    w.set_protecting(false);
    let mut i = info(0, 0);
    i.min_rtt = 470_000;
    i.rtt = 482_000; // 12 ms of queue: above half the aim, below twice it
    i.snd_cwnd = 400;
    i.unacked = 20;
    let t0 = Instant::now();
    let _ = w.budget(&i, 16_448, true).unwrap();
    assert_eq!(w.queue_limit(), Some(20 * 1448), "starts at what the path holds");
    let mut acked = 0u64;
    let mut step = |w: &mut PathWriter, i: &mut TcpInfo, k: u64, delivered: u64| {
        acked += delivered;
        i.bytes_acked = acked;
        hold_limit(w, i);
        let _ = w.budget(i, 16_448, true).unwrap();
        w.steer(None, i, t0 + Duration::from_millis(500 * k));
        w.queue_limit().unwrap() / 1448
    };
    assert_eq!(step(&mut w, &mut i, 0, 0), 40, "the first step has no rate to compare");
    assert_eq!(step(&mut w, &mut i, 1, 30_000), 80, "the rate grew from nothing");
    assert_eq!(step(&mut w, &mut i, 2, 60_000), 160, "doubled: the queue is the ramp's");
    // The rate no longer grows: the same queue now ends the ramp (the correction for
    // 12 ms against an aim of 12 is none).
    assert_eq!(step(&mut w, &mut i, 3, 65_000), 160, "flat: the pipe is full");
    assert_eq!(
        w.phase(),
        QueuePhase::Steady,
        "Ramp → Steady when the rate stops growing"
    );
    assert_eq!(step(&mut w, &mut i, 4, 130_000), 160, "the ramp is over");
}

/// With nothing to protect, a direct cut on a standing queue goes no lower than the rate
/// the path's held bytes show by Little's law (held / (min RTT + queue)): the kernel's
/// rate sample of a path that carried only a scheduler's overflow reads far below its
/// link, and a cut to it starved a 470 ms LTE path for the rest of a chunk. Protecting,
/// the cut trusts the sample (the queue must go now).
#[test]
fn with_nothing_to_protect_a_cut_keeps_the_rate_the_held_bytes_show() {
    let run = |protecting: bool| {
        let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
        w.set_protecting(false);
        // A sample of 100 KB/s, not application-limited.
        let mut i = info(0, 100_000);
        i.min_rtt = 70_000;
        i.rtt = 370_000; // 300 ms of queue
        i.snd_cwnd = 1000;
        i.unacked = 415; // 601 KB held
        let t0 = Instant::now();
        w.observe(0, &i, None);
        let _ = w.budget(&i, 16_448, true).unwrap();
        // Engaged with nothing to protect: the limit starts at what the path holds, and
        // the first step's queue is slow start's (no cut). A round trip later the queue
        // still stands: one step, with or without traffic to protect by then.
        w.steer(None, &i, t0);
        w.set_protecting(protecting);
        hold_limit(&w, &mut i);
        i.bytes_acked = 100_000;
        let _ = w.budget(&i, 16_448, true).unwrap();
        w.steer(None, &i, t0 + Duration::from_millis(400));
        (w.queue_limit().unwrap(), i.in_flight_bytes())
    };
    let (eager, held) = run(false);
    let little = held as f64 / 0.37 * 0.082;
    assert!(
        eager as f64 >= 0.5 * little,
        "cut to {eager} B with nothing to protect; Little's law says {little:.0}"
    );
    assert!(run(true).0 < 20_000, "protecting, the cut trusts the sample");
}

/// With nothing to protect, a queue of twice the aim ends the ramp even while the rate
/// still grows — past the first step after engaging, whose reading is of the queue slow
/// start built before.
#[test]
fn with_nothing_to_protect_a_queue_of_twice_the_aim_ends_the_ramp_after_its_first_step() {
    let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
    w.set_protecting(false);
    let mut i = info(0, 0);
    i.min_rtt = 270_000;
    i.rtt = 300_000; // 30 ms of queue: more than twice the aim of 12
    i.snd_cwnd = 400;
    i.unacked = 20;
    let t0 = Instant::now();
    let _ = w.budget(&i, 16_448, true).unwrap();
    hold_limit(&w, &mut i);
    let _ = w.budget(&i, 16_448, true).unwrap();
    w.steer(None, &i, t0);
    assert_eq!(
        w.queue_limit(),
        Some(40 * 1448),
        "the first step's queue is slow start's"
    );
    i.bytes_acked = 60_000; // the rate grew from nothing
    hold_limit(&w, &mut i);
    let _ = w.budget(&i, 16_448, true).unwrap();
    w.steer(None, &i, t0 + Duration::from_millis(300));
    assert!(
        w.queue_limit().unwrap() <= 40 * 1448,
        "the ramp went on through a standing queue: {:?}",
        w.queue_limit()
    );
}

/// With nothing to protect, the first step after engaging reads the queue slow start's
/// unpaced bursts built (about half a window at the bottleneck, far from a full pipe):
/// it neither cuts the limit nor keeps it from leading the window. Cut there to the
/// kernel's rate sample, a 470 ms LTE path's limit fell below what it held and trailed
/// its window for the rest of a 4 MB chunk (ECF 1.08 × queue control off in the model).
/// Nor does a step in which the path used at least half its limit without the limit
/// binding leave it below twice what the path holds (up to twice the window): slow start
/// doubles per round trip, and a limit that waited a round trip to bind trailed it.
#[test]
fn with_nothing_to_protect_slow_starts_own_queue_neither_cuts_nor_stalls_the_ramp() {
    let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
    w.set_protecting(false);
    let mut i = info(0, 125_000);
    i.min_rtt = 470_000;
    i.rtt = 519_000; // 49 ms of queue: four times the aim
    i.snd_cwnd = 83;
    i.unacked = 83; // 120 KB held: 240 KB/s by Little's law, the sample half of that
    let t0 = Instant::now();
    w.observe(0, &i, None);
    let _ = w.budget(&i, 16_448, true).unwrap();
    assert_eq!(w.queue_limit(), Some(83 * 1448), "starts at what the path holds");
    w.steer(None, &i, t0);
    assert_eq!(w.queue_limit(), Some(166 * 1448), "doubled through slow start's queue");
    // A round trip later the window has doubled too, the rate grew, and the path used
    // most of its limit without the limit holding it back (the scheduler sent less).
    i.snd_cwnd = 166;
    i.unacked = 150;
    i.rtt = 475_000; // 5 ms: under the aim, so the correction alone would not move it
    i.bytes_acked = 120_000;
    i.delivery_rate = 250_000;
    w.observe(0, &i, None);
    w.steer(None, &i, t0 + Duration::from_millis(520));
    assert_eq!(
        w.queue_limit(),
        Some(300 * 1448),
        "twice what the path holds, within twice its window"
    );
}

/// A writer with nothing to protect on a 470 ms path (delivery rate `rate`, smoothed RTT
/// `rtt` µs, window `cwnd` with `unacked` segments out), engaged and through its first
/// steering step: the writer, the socket's state and the step's time.
fn eager_first_step(rate: u64, rtt: u32, cwnd: u32, unacked: u32) -> (PathWriter, TcpInfo, Instant) {
    let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
    w.set_protecting(false);
    let mut i = info(0, rate);
    i.min_rtt = 470_000;
    i.rtt = rtt;
    i.snd_cwnd = cwnd;
    i.unacked = unacked;
    let t0 = Instant::now();
    w.observe(0, &i, None);
    let _ = w.budget(&i, 16_448, true).unwrap();
    w.steer(None, &i, t0);
    (w, i, t0)
}

/// With nothing to protect, bytes waiting in the socket for slow start's window are the
/// ramp's lead over the window, not a queue: with the smoothed RTT at its minimum they
/// neither end the ramp nor cut the limit, however long they take at the rate so far.
#[test]
fn with_nothing_to_protect_bytes_waiting_for_the_window_are_not_a_queue() {
    let (mut w, mut i, t0) = eager_first_step(50_000, 471_000, 39, 39);
    let first = w.queue_limit().unwrap();
    assert_eq!(first, 78 * 1448, "doubled at the first step");
    // A round trip later the window and the rate have doubled; the path holds its limit,
    // 6 KB of it unsent (55 ms at the rate so far), and the RTT shows no queue.
    i.snd_cwnd = 75;
    i.unacked = 74;
    i.notsent_bytes = 6_000;
    i.delivery_rate = 110_000;
    i.bytes_acked = 52_000;
    w.observe(0, &i, None);
    let _ = w.budget(&i, 16_448, true).unwrap();
    w.steer(None, &i, t0 + Duration::from_millis(472));
    assert_eq!(
        w.queue_limit(),
        Some(2 * 75 * 1448),
        "the ramp went on, up to twice the window"
    );
}

/// With nothing to protect, the ramp stops between two steering steps as soon as the
/// path's RTT shows twice the aim of queue with the path holding half the limit: the
/// limit stays at what the path holds (no cut below it), and the ramp is over. A smaller
/// queue leaves the ramp alone until its next step.
#[test]
fn with_nothing_to_protect_a_queue_between_steps_stops_the_ramp_where_the_path_is() {
    let start = |rtt_between: u32| {
        let (mut w, mut i, t0) = eager_first_step(600_000, 472_000, 120, 118);
        let ramped = w.queue_limit().unwrap();
        assert!(ramped >= 2 * 118 * 1448, "the first step doubled the limit: {ramped}");
        // 100 ms later, within the same round trip: slow start filled the pipe.
        i.snd_cwnd = 240;
        i.unacked = 230;
        i.rtt = rtt_between;
        i.bytes_acked = 170_000;
        w.observe(0, &i, None);
        w.steer(None, &i, t0 + Duration::from_millis(100));
        (w, i, t0, ramped)
    };
    let (w, _, _, ramped) = start(482_000); // 10 ms: under twice the aim (24 ms)
    assert_eq!(w.queue_limit(), Some(ramped), "a small queue waits for the next step");

    assert!(matches!(w.phase(), QueuePhase::Ramp(_)));
    let (mut w, mut i, t0, _) = start(500_000); // 30 ms
    assert_eq!(w.queue_limit(), Some(230 * 1448), "stopped at what the path holds");
    assert_eq!(w.phase(), QueuePhase::Steady, "eager Ramp → Steady at the brake");
    // The next step reads the queue the held bytes make: the limit does not ramp again.
    i.rtt = 520_000;
    i.bytes_acked = 400_000;
    i.delivery_rate = 1_100_000;
    hold_limit(&w, &mut i);
    let _ = w.budget(&i, 16_448, true).unwrap();
    w.steer(None, &i, t0 + Duration::from_millis(600));
    assert!(
        w.queue_limit().unwrap() < 230 * 1448,
        "the step after cuts toward the target: {:?}",
        w.queue_limit()
    );
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
