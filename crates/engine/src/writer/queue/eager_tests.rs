//! Unit tests of the eager ramp: queue control with nothing to protect, where the limit
//! leads slow start and ends the ramp by BBR's full-pipe test.

use super::*;
use crate::writer::tests::{hold_limit, info};
use crate::writer::*;
use mpflex_wire::RECORD_OVERHEAD;

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
    // 20 ms of queue: above half the ramp's aim (12 ms), below twice it, and the steady
    // aim with nothing to protect (the target).
    i.rtt = 490_000;
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
    // 20 ms against an aim of 20 is none).
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

/// Every bulk write is a record with its own length, tag and frame header. With nothing
/// to protect, a held path waits until a quarter of its limit (at most a whole frame's
/// record) is free and writes it as one record, instead of a record per segment freed;
/// protecting, it takes each segment as soon as the limit frees it. A window that binds
/// before the limit still gets what it frees.
#[test]
fn with_nothing_to_protect_a_held_path_writes_a_quarter_of_its_limit_at_once() {
    let mut w = PathWriter::new(1 << 20, true, true).with_queue_target(Duration::from_millis(20));
    w.set_protecting(false);
    let mut i = info(0, 250_000); // 2 Mbit/s
    i.min_rtt = 50_000;
    i.rtt = 50_000;
    i.snd_cwnd = 100;
    w.observe(0, &i, None);
    let _ = w.budget(&i, 16_448, true).unwrap();
    let limit = w.queue_limit().unwrap();
    assert_eq!(limit, 17_500, "250 kB/s × (50 + 20) ms");
    let batch = limit / 4 / 1448 * 1448;
    // One segment free: a sliver, held back.
    i.unacked = ((limit - 1448) / 1448) as u32;
    let b = w.budget(&i, 16_448, true).unwrap();
    assert_eq!(b.bulk, 0, "one segment free of {limit}: wait for {batch}");
    assert!(b.retry.is_some());
    // The batch free: written at once, in whole segments.
    i.unacked = ((limit - batch) / 1448) as u32;
    let b = w.budget(&i, 16_448, true).unwrap();
    assert!(
        b.bulk + RECORD_OVERHEAD >= batch as usize,
        "{} B for a batch of {batch}",
        b.bulk
    );
    // Protecting, each segment goes as the limit frees it.
    w.set_protecting(true);
    i.unacked = ((limit - 1448) / 1448) as u32;
    let b = w.budget(&i, 16_448, true).unwrap();
    assert_eq!(b.bulk + RECORD_OVERHEAD, 1448, "protecting: one segment, at once");
    // A window that binds first is not kept waiting for the batch.
    w.set_protecting(false);
    i.unacked = 2;
    i.snd_cwnd = 3;
    let b = w.budget(&i, 16_448, true).unwrap();
    assert_eq!(b.bulk + RECORD_OVERHEAD, 1448, "the window's one segment goes");
}
