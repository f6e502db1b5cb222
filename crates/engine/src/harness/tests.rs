use super::*;

/// A bulk upload over two paths: every byte arrives, each socket's unsent bytes stay
/// within the late-binding budget (the low-water mark plus one frame), and both paths
/// carry data.
#[test]
fn late_binding_keeps_notsent_within_the_budget_during_a_bulk_transfer() {
    let mut pair = Pair::new("minrtt", &[(10, 1000), (30, 2000)]);
    let data: Vec<u8> = (0..3_000_000u32).map(|i| i as u8).collect();
    let id = pair.open(&data[..1000]);
    let mut off = 1000;
    for _ in 0..20_000 {
        if off < data.len() {
            off += pair.client.stream_send(id, Bytes::copy_from_slice(&data[off..]));
        }
        pair.step();
        if pair.server_rx.get(&id).is_some_and(|r| r.len() == data.len()) {
            break;
        }
    }
    assert!(pair.server_rx[&id] == data, "upload incomplete or corrupted");
    for p in 0..2 {
        let s = pair.socket(p, true);
        let budget = crate::NOTSENT_LOWAT as usize + pair.client.max_frame_len() + 64;
        assert!(s.max_notsent <= budget, "path {p}: {} unsent", s.max_notsent);
        let sent = pair.client.path_counters(p).unwrap().0.payload_sent;
        assert!(sent > 300_000, "path {p} carried only {sent} bytes");
    }
}

/// An upload over a path whose window is four times its bandwidth-delay product fills
/// the bottleneck queue with ~3 × 60 ms; with a 20 ms queue target, and a small
/// request every 100 ms on another stream (the interactive traffic queue control
/// protects), the segments wait the target on average (a millisecond of slack: the
/// simulation's clock) and never more than half as much again, while the path still
/// carries ≥ 90 % of its rate (all after the first second). With no interactive
/// stream, queue control stands aside and the upload fills the queue as without it —
/// unless it engages for a sustained backlog (`queue_control_sustained`), when the
/// upload alone keeps the queue near the target and carries ≥ 97 % of the rate.
#[test]
fn queue_control_keeps_a_bloated_bottleneck_queue_near_its_target() {
    let run = |target_ms: u64, pings: bool, sustained: bool| {
        let spec = PathSpec {
            cwnd: Some(4 * 60 * 1000 / MSS),
            ..PathSpec::from((30, 1000))
        };
        let mut pair = Pair::custom(
            || mpflex_sched::by_name("minrtt").unwrap(),
            &[spec],
            |c| {
                c.queue_target = Duration::from_millis(target_ms);
                c.queue_control_sustained = sustained;
            },
        );
        let id = pair.open(b"x");
        let ping = pair.open(b"ping");
        // The window is open from the start (no slow start here), so the first round
        // trip, before the path has a rate, is not controlled: measure after it.
        let mut got_at_start = 0;
        for ms in 0..6000 {
            if pair.client.send_capacity(id) > 0 {
                pair.client.stream_send(id, Bytes::from(vec![0u8; 64 * 1024]));
            }
            if pings && ms % 100 == 0 {
                pair.client.stream_send(ping, Bytes::from_static(b"ping"));
            }
            pair.step();
            if ms == 999 {
                pair.reset_socket_maxima();
                got_at_start = pair.server_rx.get(&id).map_or(0, Vec::len);
            }
        }
        let got = pair.server_rx.get(&id).map_or(0, Vec::len) - got_at_start;
        let s = pair.socket(0, true);
        (s.mean_queue_delay(), s.max_queue_delay, got as f64 / 5000.0 / 1000.0)
    };
    let (bloat, _, _) = run(0, true, false);
    let (mean, max, utilisation) = run(20, true, false);
    let (alone, _, _) = run(20, false, false);
    let (sustained, sustained_max, sustained_rate) = run(20, false, true);
    println!(
        "queue: {bloat:?} without control; with a 20 ms target {mean:?} on average, {max:?} at most ({utilisation:.3} of the rate); {alone:?} with nothing to protect; {sustained:?} on average, {sustained_max:?} at most ({sustained_rate:.3} of the rate) engaged for the sustained upload"
    );
    // Engaged for a sustained upload alone, the queue is steered to the target itself
    // and each write waits for a quarter of the limit (12.5 ms of the rate here, the
    // swing above the target), so the link is used to within its framing.
    assert!(
        sustained <= Duration::from_millis(21) && sustained_max <= Duration::from_millis(35),
        "queue {sustained:?} on average, {sustained_max:?} at most, engaged for a sustained upload"
    );
    assert!(
        sustained_rate >= 0.97,
        "the path carried {sustained_rate:.3} of its rate"
    );
    assert!(bloat > Duration::from_millis(100), "no bloat to control: {bloat:?}");
    assert!(
        mean <= Duration::from_millis(21),
        "queue {mean:?} on average with a 20 ms target"
    );
    assert!(
        max <= Duration::from_millis(30),
        "queue {max:?} at most with a 20 ms target"
    );
    assert!(utilisation >= 0.9, "the path carried {utilisation:.2} of its rate");
    assert!(
        alone > Duration::from_millis(100),
        "held back with no interactive stream: {alone:?}"
    );
}

/// BBR's minimum-RTT probe holds a path's window at four segments for 200 ms: its
/// queue drains, and for a while after it the queue readings (the lowest one-way delay
/// of the last 100 ms, the smoothed RTT) still show the empty queue while the limit
/// binds again. Queue control must not read that as room: a limit raised so fills a
/// small bottleneck buffer, and its losses hold requests behind retransmissions
/// (docs/latency.md). An upload beside a small request every 100 ms on one bloated
/// path: probes do not raise the limit above what it reached before them (read as
/// room, 27.0 KB after the first against 23.9 KB at most before).
#[test]
fn queue_control_holds_its_limit_through_a_probe_of_the_minimum_rtt() {
    let spec = PathSpec {
        cwnd: Some((4 * 2 * 25 * 250 / MSS as usize) as u32),
        ..PathSpec::from((25, 250))
    };
    let mut pair = Pair::custom(|| mpflex_sched::by_name("minrtt").unwrap(), &[spec], |_| {});
    pair.probe_rtt(0, false);
    let bulk = pair.open(b"bulk");
    let ping = pair.open(b"ping");
    // The largest limit from 3 s to the first probe, and from it on.
    let (mut before, mut after) = (0u64, 0u64);
    for ms in 1..=12_000u64 {
        if pair.client.send_capacity(bulk) > 0 {
            pair.client.stream_send(bulk, Bytes::from(vec![0u8; 64 * 1024]));
        }
        if ms % 100 == 0 {
            pair.client.stream_send(ping, Bytes::from_static(b"ping"));
        }
        // Probes every 2 s from 6 s on (BBR's come every 10 s; more here, in less time).
        if ms >= 6000 && ms % 2000 == 0 {
            pair.probe_rtt(0, true);
        } else if ms > 6000 && ms % 2000 == 200 {
            pair.probe_rtt(0, false);
        }
        pair.step();
        let limit = pair.writer(0, true).queue_limit().unwrap_or(0);
        if (3000..6000).contains(&ms) {
            before = before.max(limit);
        } else if ms >= 6000 {
            after = after.max(limit);
        }
    }
    println!("queue control's limit: {before} B at most before the probes, {after} B from the first on");
    assert!(
        after as f64 <= before as f64 * 1.1,
        "the limit rose from {before} to {after} B after the probes"
    );
}

/// What `ping_under_bulk` measured: request/response times before and during the
/// bulk transfer (ms), and the bulk's share of the paths' summed rate.
struct PingRun {
    idle: Vec<f64>,
    loaded: Vec<f64>,
    utilisation: f64,
    /// Hedged payload bytes both sides sent, and first copies' payload.
    hedged: u64,
    first: u64,
}

/// The median (infinite for no samples: no exchange completed).
fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::INFINITY;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn p99(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[(v.len() * 99 / 100).min(v.len() - 1)]
}

/// A 1 KB request/response every 100 ms over two bloated paths (windows of four
/// bandwidth-delay products, as a deep LTE buffer allows): alone for 2 s, then beside
/// a bulk transfer in the direction `upload` says, for 6 s.
fn ping_under_bulk(target_ms: u64, upload: bool) -> PingRun {
    ping_run(target_ms, upload, 0.0, 8000, |_| {})
}

/// [`ping_under_bulk`] for `ms` milliseconds, the first path losing each segment with
/// probability `loss`, the engines tuned by `tune`.
fn ping_run(target_ms: u64, upload: bool, loss: f64, end_ms: u64, tune: impl Fn(&mut EngineConfig)) -> PingRun {
    let specs: Vec<PathSpec> = [(25u64, 250usize), (35, 290)]
        .iter()
        .enumerate()
        .map(|(i, &(delay, rate))| PathSpec {
            cwnd: Some((4 * 2 * delay as usize * rate / MSS as usize) as u32),
            loss: if i == 0 { loss } else { 0.0 },
            ..PathSpec::from((delay, rate))
        })
        .collect();
    let mut pair = Pair::custom(
        || mpflex_sched::by_name("minrtt").unwrap(),
        &specs,
        |c| {
            c.queue_target = Duration::from_millis(target_ms);
            tune(c)
        },
    );
    let bulk = pair.open(b"bulk");
    let ping = pair.open(&[1u8; 1000]);
    let (mut asked, mut answered, mut sent) = (pair.now, 0usize, 1usize);
    let mut waiting = true;
    let (mut idle, mut loaded) = (Vec::new(), Vec::new());
    let mut got_at = (0, 0);
    for ms in 1..=end_ms {
        let loading = ms > 2000;
        if loading {
            let tx = if upload { &mut pair.client } else { &mut pair.server };
            if tx.send_capacity(bulk) > 0 {
                tx.stream_send(bulk, Bytes::from(vec![0u8; 64 * 1024]));
            }
        }
        if ms % 100 == 0 && !waiting {
            // An interactive request is never held back by the bound on bytes ahead
            // of the paths that the bulk fills.
            assert_eq!(pair.client.stream_send(ping, Bytes::from(vec![1u8; 1000])), 1000);
            sent += 1;
            asked = pair.now;
            waiting = true;
        }
        pair.step();
        // The server answers each request once it has all of it.
        let requests = pair.server_rx.get(&ping).map_or(0, Vec::len) / 1000;
        if requests > answered {
            answered = requests;
            assert_eq!(pair.server.stream_send(ping, Bytes::from(vec![2u8; 1000])), 1000);
        }
        if waiting && pair.client_rx.get(&ping).map_or(0, Vec::len) == sent * 1000 {
            waiting = false;
            let rtt = (pair.now - asked).as_secs_f64() * 1000.0;
            // The first exchange opens the stream; the first second of the bulk is its
            // start-up.
            if ms > 3000 {
                loaded.push(rtt);
            } else if (200..2000).contains(&ms) {
                idle.push(rtt);
            }
        }
        if ms == 3000 {
            got_at.0 = bulk_got(&pair, bulk, upload);
        }
        if ms == end_ms {
            got_at.1 = bulk_got(&pair, bulk, upload);
        }
    }
    let rate: usize = specs.iter().map(|s| s.rate).sum();
    let hedged = pair.client.counters().hedged_payload + pair.server.counters().hedged_payload;
    let first: u64 = (0..specs.len())
        .map(|p| {
            pair.client.path_counters(p).map_or(0, |c| c.0.payload_sent)
                + pair.server.path_counters(p).map_or(0, |c| c.0.payload_sent)
        })
        .sum();
    PingRun {
        idle,
        loaded,
        utilisation: (got_at.1 - got_at.0) as f64 / (end_ms - 3000) as f64 / rate as f64,
        hedged,
        first,
    }
}

fn bulk_got(pair: &Pair, bulk: StreamId, upload: bool) -> usize {
    let rx = if upload { &pair.server_rx } else { &pair.client_rx };
    rx.get(&bulk).map_or(0, Vec::len)
}

/// Under a bulk transfer in either direction, an interactive request/response goes
/// before the bulk bytes queued in the session and, with queue control, waits at the
/// bottleneck only for the target: its median stays within the idle median + 20 ms
/// and its 99th percentile within + 60 ms (the latency issue's floors), while the bulk
/// keeps ≥ 90 % of the paths' rate. Without queue control the bottleneck queue alone
/// adds well over 100 ms.
#[test]
fn an_interactive_request_under_bulk_waits_for_the_queue_target_only() {
    for upload in [true, false] {
        let on = ping_under_bulk(20, upload);
        let off = ping_under_bulk(0, upload);
        let (idle, p50, p99_) = (median(&on.idle), median(&on.loaded), p99(&on.loaded));
        println!(
            "{}: idle {idle:.0} ms; loaded p50 {p50:.0} p99 {p99_:.0} ms at {:.3} of the rate; without control p50 {:.0} ms",
            if upload { "upload" } else { "download" },
            on.utilisation,
            median(&off.loaded)
        );
        assert!(on.loaded.len() >= 40, "{} exchanges", on.loaded.len());
        assert!(p50 <= idle + 20.0, "p50 {p50:.0} ms, idle {idle:.0} ms");
        assert!(p99_ <= idle + 60.0, "p99 {p99_:.0} ms, idle {idle:.0} ms");
        assert!(on.utilisation >= 0.9, "bulk at {:.3} of the rate", on.utilisation);
        assert!(median(&off.loaded) > idle + 100.0, "no bloat to control");
    }
}

/// A request lost at the bottleneck waits for its retransmission (here a round trip
/// later, SACK's fast retransmit), and so does one behind a lost segment of the
/// upload: with 3 % of the first path's segments lost in both directions, exchanges
/// take up to a round trip more. A hedged copy on the second path (10 ms slower one
/// way) arrives first then: the slowest exchanges stay within the second path's extra
/// delay and queue of the median, and the copies cost the small frames' bytes only
/// (≤ 5 % of what the paths carried here). Without loss nothing is hedged.
#[test]
fn a_hedged_request_is_not_held_by_a_loss_on_its_path() {
    let on = ping_run(20, true, 0.03, 20_000, |c| c.hedge_interactive = true);
    let off = ping_run(20, true, 0.03, 20_000, |c| c.hedge_interactive = false);
    let idle = median(&on.idle);
    let worst = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    println!(
        "hedged: p50 {:.0} p99 {:.0} max {:.0} ms, {} of {} payload bytes hedged, {:.3} of the rate; \
         not hedged: p50 {:.0} p99 {:.0} max {:.0} ms, {:.3}; idle {idle:.0} ms; {} and {} exchanges",
        median(&on.loaded),
        p99(&on.loaded),
        worst(&on.loaded),
        on.hedged,
        on.first,
        on.utilisation,
        median(&off.loaded),
        p99(&off.loaded),
        worst(&off.loaded),
        off.utilisation,
        on.loaded.len(),
        off.loaded.len(),
    );
    assert!(on.loaded.len() >= 120 && off.loaded.len() >= 120);
    // A path that loses nothing is not hedged, loaded as it is.
    assert_eq!(ping_run(20, true, 0.0, 8000, |c| c.hedge_interactive = true).hedged, 0);
    assert_eq!(off.hedged, 0, "hedging off sends no copies");
    assert!(
        worst(&off.loaded) >= median(&off.loaded) + 40.0,
        "no loss held a request: nothing to hedge against"
    );
    assert!(
        worst(&on.loaded) <= median(&on.loaded) + 35.0,
        "a hedged exchange waited {:.0} ms against a median {:.0}",
        worst(&on.loaded),
        median(&on.loaded)
    );
    assert!(
        on.hedged > 0 && on.hedged * 20 <= on.first,
        "{} hedged of {}",
        on.hedged,
        on.first
    );
    // The copies take their bytes' share of the second path's rate (~2 % of both).
    assert!(
        on.utilisation >= off.utilisation - 0.03,
        "hedging cost the bulk {:.3} of the rate",
        off.utilisation - on.utilisation
    );
}

/// Under queue control (a small request every 100 ms beside the upload engages it),
/// and with nothing to protect once it has kept the session backlogged for a second,
/// an application that writes as fast as it is let sees the path's rate: what the session accepted and the peer's application has not received stays
/// within the path's bytes in flight (rate × (RTT + target), times the steering's
/// gain) plus the bound ahead of it (rate × target + a frame) — without it, the
/// stream's whole 4 MB window.
#[test]
fn queue_control_bounds_what_the_application_has_written_ahead_of_the_path() {
    let run = |target_ms: u64, pings: bool| {
        let spec = PathSpec {
            cwnd: Some(4 * 60 * 250 / MSS),
            ..PathSpec::from((30, 250))
        };
        let mut pair = Pair::custom(
            || mpflex_sched::by_name("minrtt").unwrap(),
            &[spec],
            |c| c.queue_target = Duration::from_millis(target_ms),
        );
        let id = pair.open(b"x");
        let ping = pair.open(b"ping");
        let (mut written, mut ahead) = (1usize, 0usize);
        for ms in 0..8000 {
            if pings && ms % 100 == 0 {
                pair.client.stream_send(ping, Bytes::from_static(b"ping"));
            }
            let cap = pair.client.send_capacity(id) as usize;
            if cap > 0 {
                written += pair.client.stream_send(id, Bytes::from(vec![0u8; cap.min(1 << 20)]));
            }
            if pings && target_ms > 0 && ms >= 2000 && ms % 100 == 50 {
                // The bulk took all the room ahead of the paths; a request still goes.
                assert_eq!(pair.client.send_capacity(id), 0);
                assert_eq!(pair.client.stream_send(ping, Bytes::from_static(b"ping")), 4);
            }
            pair.step();
            if ms >= 2000 {
                ahead = ahead.max(written - pair.server_rx.get(&id).map_or(0, Vec::len));
            }
        }
        let got = pair.server_rx.get(&id).map_or(0, Vec::len);
        (ahead, got as f64 / 8000.0 / 250.0)
    };
    let (ahead, utilisation) = run(20, true);
    let (unbounded, _) = run(0, true);
    // With no request to protect, the bound applies once the application has kept
    // the session backlogged for a second (measured from 2 s in).
    let (alone, alone_utilisation) = run(20, false);
    println!(
        "ahead of the application: {ahead} B with control ({utilisation:.3} of the rate), {alone} B with nothing \
         to protect ({alone_utilisation:.3}), {unbounded} B without"
    );
    let frame = EngineConfig::new(Role::Client).max_frame_data + 64;
    // 250 B/ms: 20 KB in flight over 60 + 20 ms, twice that at the steering's highest
    // gain; ahead of the path max(5 KB, MIN_AHEAD) and a frame; the application's
    // writes land a frame at a time.
    let bound = 2 * 250 * 80 + super::super::session::MIN_AHEAD as usize + 2 * frame + 4 * MSS as usize;
    assert!(ahead <= bound, "{ahead} B ahead, bound {bound}");
    // With nothing to protect the path's own queue is not held to the target: its
    // whole window (4 × 15 KB) may be in flight on top of the bound ahead.
    let bound_alone = bound + 4 * 60 * 250;
    assert!(
        alone <= bound_alone,
        "{alone} B ahead with nothing to protect, bound {bound_alone}"
    );
    assert!(alone_utilisation >= 0.9, "{alone_utilisation:.3} of the rate");
    assert!(utilisation >= 0.9, "{utilisation:.3} of the rate");
    assert!(unbounded > 1 << 20, "only {unbounded} B ahead without control");
}

/// Engaged for a sustained upload (`queue_control_sustained`), queue control holds
/// the path below its window for as long as the upload lasts, so every delivery-rate
/// sample is application-limited and the kernel keeps the highest of them. A single
/// sample far above the link's rate (real kernels give them) must not widen the bound
/// on bytes ahead of the path for the rest of the upload: it stays at its floor
/// (rate × target is below `MIN_AHEAD` here) plus a frame, as before the sample, and
/// the path still carries its rate.
#[test]
fn a_spurious_rate_sample_does_not_widen_the_bound_ahead_of_a_held_path() {
    let run = |spurious: bool| {
        let spec = PathSpec {
            cwnd: Some(4 * 20 * 750 / MSS),
            ..PathSpec::from((10, 750))
        };
        let mut pair = Pair::custom(
            || mpflex_sched::by_name("minrtt").unwrap(),
            &[spec],
            |c| {
                c.queue_target = Duration::from_millis(20);
                c.queue_control_sustained = true;
            },
        );
        let id = pair.open(b"x");
        let mut ahead = 0;
        let mut got_at = 0;
        for ms in 0..6000 {
            let cap = pair.client.send_capacity(id) as usize;
            if cap > 0 {
                pair.client.stream_send(id, Bytes::from(vec![0u8; cap.min(16 * 1024)]));
            }
            if spurious && ms == 2000 {
                pair.socket_mut(0, true).spurious_rate_sample(20_000_000);
            }
            pair.step();
            if ms == 2000 {
                got_at = pair.server_rx.get(&id).map_or(0, Vec::len);
            }
            if ms >= 2500 {
                ahead = ahead.max(pair.client.ahead_bytes());
            }
        }
        let got = pair.server_rx.get(&id).map_or(0, Vec::len) - got_at;
        (ahead, got as f64 / 4000.0 / 750.0)
    };
    let (ahead, utilisation) = run(false);
    let (spurious, spurious_utilisation) = run(true);
    println!(
        "ahead of the path: {ahead} B ({utilisation:.3} of the rate); {spurious} B after a 20 MB/s sample \
         ({spurious_utilisation:.3})"
    );
    let frame = (EngineConfig::new(Role::Client).max_frame_data + 64) as u64;
    // The room is counted in payload bytes, what is ahead with its frames' headers.
    let bound = super::super::session::MIN_AHEAD + frame + 2 * 64;
    assert!(ahead <= bound, "{ahead} B ahead, bound {bound}");
    assert!(spurious <= bound, "{spurious} B ahead after the sample, bound {bound}");
    assert!(utilisation >= 0.9, "{utilisation:.3} of the rate");
    assert!(spurious_utilisation >= 0.9, "{spurious_utilisation:.3} of the rate");
}
