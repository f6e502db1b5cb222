use super::*;
use crate::harness::Pair;

/// The simulated socket reports what the kernel would: the handshake RTT before any
/// acknowledgement, the path's rate once data was acknowledged, a full window.
#[test]
fn the_simulated_socket_reports_like_tcp_info() {
    let t0 = Instant::now();
    let mut s = SimSocket::new((20, 1000).into(), t0);
    assert_eq!(s.info(t0).rtt, 40_000);
    for _ in 0..200 {
        s.write(&[0; 1448]);
    }
    s.advance(t0);
    let i = s.info(t0);
    assert_eq!(i.unacked, s.cwnd, "the window is full");
    assert!(i.notsent_bytes > 0);
    let mut t = t0;
    for _ in 0..300 {
        t += Duration::from_millis(1);
        s.advance(t);
    }
    let i = s.info(t);
    assert!((800_000..=1_100_000).contains(&i.delivery_rate), "{}", i.delivery_rate);
    assert!(i.rtt >= 40_000, "{}", i.rtt);
}

/// The congestion-control model (`PathSpec::buffer`): from the initial window, slow start
/// doubles the window per round trip until the droptail buffer overflows; the drop is
/// detected a round trip later and cuts the window to 0.7 of itself, once per window of
/// drops; no segment waits longer than the buffer holds; and the path still carries most
/// of its rate.
#[test]
fn the_congestion_control_model_starts_slow_and_backs_off_at_the_buffer() {
    let spec = PathSpec {
        buffer: Some(Duration::from_millis(50)),
        ..PathSpec::from((25, 880))
    };
    // Queue control off: this is a test of the socket model's slow start and drops, which
    // queue control keeps the writer from reaching.
    let mut pair = Pair::custom(
        || mpflex_sched::by_name("minrtt").unwrap(),
        &[spec],
        |c| c.queue_target = Duration::ZERO,
    );
    let id = pair.open(b"x");
    let mut cwnd = Vec::new();
    for ms in 0..4000 {
        if pair.client.send_capacity(id) > 0 {
            pair.client.stream_send(id, Bytes::from(vec![0u8; 64 * 1024]));
        }
        pair.step();
        if ms % 50 == 49 {
            cwnd.push(pair.socket(0, true).info(pair.now).snd_cwnd);
        }
    }
    let s = pair.socket(0, true);
    // Sampled every 50 ms, the round trip (50 ms and the segments' serialisation).
    let init = crate::kernel::INIT_CWND;
    assert_eq!(
        cwnd[..3],
        [init, 2 * init, 4 * init],
        "slow start doubles the window per round trip"
    );
    assert!(s.drops >= 1, "slow start never met the buffer");
    let info = s.info(pair.now);
    assert!(
        info.snd_ssthresh < crate::kernel::INFINITE_SSTHRESH,
        "a drop set the threshold"
    );
    // The pipe (50 ms of 880 B/ms, 30 segments) plus the buffer (30 segments) bounds the
    // window where it settles; a cut per drop keeps it there.
    assert!(
        cwnd.iter().skip(20).all(|&c| (15..=75).contains(&c)),
        "the window after start-up: {cwnd:?}"
    );
    assert!(
        s.max_queue_delay <= Duration::from_millis(52),
        "a segment waited {:?} behind a 50 ms buffer",
        s.max_queue_delay
    );
    let got = pair.server_rx.get(&id).map_or(0, Vec::len) as f64;
    assert!(got >= 0.8 * 880.0 * 4000.0, "carried {got} bytes in 4 s at 880 B/ms");
}

/// The congestion-control model restarts the window after an idle spell as Linux does
/// (RFC 2861, `tcp_cwnd_restart`): a send more than an RTO after the last one finds the
/// window halved per RTO of idleness (never below the initial window) and the threshold
/// at three quarters of the old window at least; a shorter pause changes nothing.
#[test]
fn the_congestion_control_model_restarts_the_window_after_idle() {
    let spec = PathSpec {
        buffer: Some(Duration::from_millis(500)),
        ..PathSpec::from((25, 880))
    };
    let t0 = Instant::now();
    let mut s = SimSocket::new(spec, t0);
    let mut t = t0;
    let run = |s: &mut SimSocket, t: &mut Instant, ms: u32, write: bool| {
        for _ in 0..ms {
            if write && s.info(*t).notsent_bytes < 64 * 1024 {
                s.write(&[0; 16 * 1024]);
            }
            *t += Duration::from_millis(1);
            s.advance(*t);
        }
    };
    run(&mut s, &mut t, 220, true);
    run(&mut s, &mut t, 150, false);
    let grown = s.info(t).snd_cwnd;
    assert!(grown >= 8 * crate::kernel::INIT_CWND, "slow start: {grown}");
    // Idle shorter than the RTO: the window stays.
    let rto = Duration::from_micros(s.info(t).rto as u64);
    assert!(rto < Duration::from_millis(400), "{rto:?}");
    run(&mut s, &mut t, 1, true);
    assert_eq!(s.info(t).snd_cwnd, grown, "a pause under the RTO restarts nothing");
    run(&mut s, &mut t, 150, false);
    // Idle for three RTOs and more: at most three halvings, down to the initial window.
    let rto = Duration::from_micros(s.info(t).rto as u64);
    let idle = (rto * 3).as_millis() as u32 + 10;
    let before = s.info(t).snd_cwnd;
    run(&mut s, &mut t, idle, false);
    run(&mut s, &mut t, 1, true);
    let i = s.info(t);
    assert_eq!(i.snd_cwnd, (before / 8).max(crate::kernel::INIT_CWND), "from {before}");
    assert!(
        i.snd_ssthresh >= before * 3 / 4,
        "threshold {} from {before}",
        i.snd_ssthresh
    );
}

/// The pacing model (`PathSpec::pacing`): segments leave at the kernel's pacing rate —
/// twice the window per smoothed RTT in slow start — instead of in bursts as ACKs free
/// the window, so slow start's growth queues far less at the bottleneck before the pipe
/// is full, while the window still doubles per round trip.
#[test]
fn the_pacing_model_spreads_slow_starts_bursts() {
    let run = |pacing: bool| {
        let spec = PathSpec {
            buffer: Some(Duration::from_millis(500)),
            pacing,
            ..PathSpec::from((100, 1000))
        };
        let t0 = Instant::now();
        let mut s = SimSocket::new(spec, t0);
        let mut t = t0;
        // Four round trips of 200 ms: the window reaches 80 segments, under the pipe
        // (200 ms of 1000 B/ms, 138 segments): any queue is a burst's.
        for _ in 0..790 {
            if s.info(t).notsent_bytes < 64 * 1024 {
                s.write(&[0; 16 * 1024]);
            }
            t += Duration::from_millis(1);
            s.advance(t);
        }
        (s.max_queue_delay, s.info(t))
    };
    let (bursty, unpaced) = run(false);
    let (paced_queue, paced) = run(true);
    assert!(
        unpaced.snd_cwnd >= 8 * crate::kernel::INIT_CWND && paced.snd_cwnd >= 8 * crate::kernel::INIT_CWND,
        "slow start: {} unpaced, {} paced",
        unpaced.snd_cwnd,
        paced.snd_cwnd
    );
    assert!(
        paced_queue * 2 <= bursty,
        "paced, slow start queued {paced_queue:?}; unpaced {bursty:?}"
    );
    let ss_rate = 2.0 * paced.snd_cwnd as f64 * 1448.0 / (paced.rtt as f64 / 1e6);
    assert!(
        (paced.pacing_rate as f64 - ss_rate).abs() <= 0.02 * ss_rate,
        "pacing rate {} in slow start, twice the window per RTT is {ss_rate:.0}",
        paced.pacing_rate
    );
}
