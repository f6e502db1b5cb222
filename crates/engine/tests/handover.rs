//! Path supervision on the shared harness (virtual clock): a path that goes dark is
//! suspected within its threshold and released as soon as it answers; a path whose
//! quality trends towards failure is left before it fails (WearMan's proactive handover);
//! a path with steady random loss is never demoted; tiers carry in order.
//!
//! The workload is the lab's `handover`: a constant 2 Mbit/s download of 1000-byte
//! messages, one every 4 ms, whose longest gap between arrivals at the application is
//! what a user notices.

use std::time::Duration;

use bytes::Bytes;
use mpflex_engine::harness::{placeholder_addr, Pair as Sim, PathSpec};
use mpflex_engine::{EngineConfig, PathState, Tier};

const MESSAGE: usize = 1000;
/// One message every 4 ms: 2 Mbit/s.
const EVERY_MS: u64 = 4;

/// A WiFi-like path (RTT 50 ms, 7 Mbit/s) and an LTE-like one (RTT 70 ms, 9.2 Mbit/s), as
/// the lab's `seed-default` profile.
fn wifi() -> PathSpec {
    (25, 880).into()
}

fn lte() -> PathSpec {
    (35, 1150).into()
}

/// What a streaming run saw.
struct Streamed {
    sim: Sim,
    /// When each message was complete at the client's application (ms from the start).
    arrivals: Vec<u64>,
    sent: usize,
}

impl Streamed {
    /// The longest gap between consecutive arrivals among messages that arrived within
    /// `[from, to)` ms (the gap ending in the first counts).
    fn max_gap(&self, from: u64, to: u64) -> u64 {
        self.arrivals
            .windows(2)
            .filter(|w| w[1] >= from && w[1] < to)
            .map(|w| w[1] - w[0])
            .max()
            .unwrap_or(0)
    }

    fn lost(&self) -> usize {
        self.sent - self.arrivals.len()
    }
}

/// Streams for `secs` (then waits up to 20 s for the rest), calling `at(sim, ms)` every
/// millisecond before the step.
fn stream(
    specs: &[PathSpec],
    tune: impl Fn(&mut EngineConfig),
    secs: u64,
    mut at: impl FnMut(&mut Sim, u64),
) -> Streamed {
    let mut sim = Sim::custom(|| mpflex_sched::by_name("minrtt").unwrap(), specs, tune);
    let id = sim.client.open_stream(placeholder_addr());
    assert_eq!(sim.client.stream_send(id, Bytes::from_static(b"GET")), 3);
    let mut sent = 0;
    let mut arrivals = Vec::new();
    let end = secs * 1000;
    for ms in 0..end + 20_000 {
        at(&mut sim, ms);
        if ms < end && ms % EVERY_MS == 0 && sim.server_rx.contains_key(&id) {
            let n = sim.server.stream_send(id, Bytes::from(vec![sent as u8; MESSAGE]));
            assert_eq!(n, MESSAGE, "flow control never holds a 2 Mbit/s stream back");
            sent += 1;
        }
        sim.step();
        let got = sim.client_rx.get(&id).map_or(0, Vec::len) / MESSAGE;
        while arrivals.len() < got {
            arrivals.push(ms);
        }
        if ms >= end && arrivals.len() == sent {
            break;
        }
    }
    Streamed { sim, arrivals, sent }
}

/// WiFi goes dark at 3 s without either side being told. After max(1.5 × 50 ms, 75 ms) +
/// the ACK delay without a sign of life the sender copies what WiFi holds to LTE, and
/// after max(3 × 50 ms, 150 ms) + the ACK delay it suspects WiFi and re-sends the rest;
/// the receiver suspects it too (its ACKs on it go unacknowledged) and sends its control
/// over LTE. The stream's longest gap is the hedge's delay plus LTE's one-way delay and a
/// few messages' worth: well under the 371–521 ms kernel MPTCP took in the lab.
#[test]
fn a_dark_path_is_suspected_within_its_threshold_and_nothing_is_lost() {
    let s = stream(
        &[wifi(), lte()],
        |_| {},
        6,
        |sim, ms| {
            if ms == 3000 {
                sim.blackhole(0);
            }
            if ms == 3500 {
                for (side, sess) in [("server", &sim.server), ("client", &sim.client)] {
                    let c = sess.path_counters(0).unwrap().0;
                    assert_eq!(c.suspicions, 1, "{side} never suspected the dark path");
                    assert_eq!(c.failures, 0, "{side}: suspicion, not the path timeout");
                    assert_eq!(sess.path_state(0), PathState::Suspect, "{side}");
                    assert_eq!(sess.path_state(1), PathState::Active, "{side}");
                }
            }
        },
    );
    let gap = s.max_gap(2900, 6000);
    println!("blackhole: longest gap {gap} ms");
    assert_eq!(s.lost(), 0);
    assert!(gap <= 180, "longest gap {gap} ms");
    assert!(
        s.sim.probes.iter().any(|&(p, _)| p == 0),
        "the client asks for probes of the dark path"
    );
}

/// WiFi is the only path up when it goes dark: its sender suspects it and has nowhere to
/// re-send what it holds. A path that comes up then (an interface that appears, a
/// cellular path the energy-aware mode dialled only now) takes what the silent one
/// held at once, not after the silent one's path timeout.
#[test]
fn what_a_lone_silent_path_held_goes_on_a_path_that_comes_up() {
    // Queue control off: with no path carrying, its bound on bytes ahead of the paths
    // holds the fixed-rate messages back; this measures the gap on the paths.
    let s = stream(
        &[wifi(), lte()],
        |c| c.queue_target = Duration::ZERO,
        6,
        |sim, ms| {
            if ms == 0 {
                sim.kill(1);
            }
            if ms == 3000 {
                sim.blackhole(0);
            }
            if ms == 3300 {
                assert_eq!(sim.server.path_state(0), PathState::Suspect);
                sim.revive(1);
            }
        },
    );
    // Over the whole run: a stall would end after the stream's 6 s.
    let gap = s.max_gap(2900, u64::MAX);
    println!("lone path dark, another up 300 ms later: longest gap {gap} ms");
    assert_eq!(s.lost(), 0);
    // The outage (300 ms) plus LTE's one-way delay and a few messages' worth.
    assert!(gap <= 450, "longest gap {gap} ms");
}

/// The same outage with LTE's congestion window at ten segments, where CUBIC leaves an
/// idle connection (RFC 2861's restart after idle, `tcp_slow_start_after_idle`; BBR keeps
/// its window): LTE carried nothing for seconds before WiFi went dark. The copies of what
/// WiFi held are sealed into records, and a record is opened only once all of it arrived:
/// a record one byte beyond what ten segments carry waits a whole LTE round trip (70 ms)
/// for the ACKs that let its tail go. The gap must not grow by that round trip.
#[test]
fn a_dark_path_is_replaced_within_the_window_an_idle_path_restarts_with() {
    let restarted = PathSpec {
        cwnd: Some(10),
        ..lte()
    };
    // Queue control off: the stream's messages are handed over whole at a fixed rate,
    // and under queue control the bound on bytes ahead of the paths holds them back
    // while the dark path still counts as carrying; this measures the gap on the paths.
    let s = stream(
        &[wifi(), restarted],
        |c| c.queue_target = Duration::ZERO,
        6,
        |sim, ms| {
            if ms == 3000 {
                sim.blackhole(0);
            }
        },
    );
    let gap = s.max_gap(2900, 6000);
    println!("blackhole, LTE window 10 segments: longest gap {gap} ms");
    assert_eq!(s.lost(), 0);
    assert!(gap <= 160, "longest gap {gap} ms");
}

/// The link comes back at 4 s, but the silent connection's kernel would retransmit only at
/// its backed-off timer, 5 s later. The driver's probe connection (here: a reconnection as
/// soon as a probe is made after the link is back) gets through at once, and the path
/// carries the stream again within a probe interval and a handshake of the link's return.
/// Within the old connection, the first ACK releases the path at once too.
#[test]
fn a_suspect_path_is_released_as_soon_as_it_answers() {
    let mut healed = false;
    let mut back_at = None;
    let s = stream(
        &[wifi(), lte()],
        |_| {},
        8,
        |sim, ms| {
            if ms == 2000 {
                sim.blackhole(0);
            }
            if ms == 4000 {
                sim.heal(0, Duration::from_secs(5));
                healed = true;
            }
            // A probe made after the heal gets through a handshake (three round trips) later.
            if healed && back_at.is_none() {
                if let Some(&(_, t)) = sim.probes.iter().rev().find(|&&(p, _)| p == 0) {
                    let made = (t - sim.start).as_millis() as u64;
                    if made >= 4000 && ms >= made + 150 {
                        sim.reconnect(0);
                        back_at = Some(ms);
                    }
                }
            }
        },
    );
    let back = back_at.expect("a probe got through");
    println!("probe connection up {} ms after the link", back - 4000);
    assert!(back - 4000 <= 300 + 150 + 5, "{} ms", back - 4000);
    assert_eq!(s.lost(), 0);
    assert_eq!(s.sim.server.path_state(0), PathState::Active);
    let wifi_after = s.sim.server.path_counters(0).unwrap().0.payload_sent;
    assert!(wifi_after > 500_000, "WiFi carried {wifi_after} B after it came back");

    // The same outage, answered within the old connection 100 ms after the link returns.
    let mut released = None;
    stream(
        &[wifi(), lte()],
        |_| {},
        6,
        |sim, ms| {
            if ms == 2000 {
                sim.blackhole(0);
            }
            if ms == 4000 {
                sim.heal(0, Duration::from_millis(100));
            }
            if ms > 4000 && released.is_none() && sim.server.path_state(0) == PathState::Active {
                released = Some(ms);
            }
        },
    );
    let released = released.expect("released");
    println!("released {} ms after the link came back", released - 4000);
    // The retransmission at +100 ms crosses (25 ms) and its ACK returns (25 ms).
    assert!(released - 4000 <= 160, "released {} ms after", released - 4000);
}

/// The path's link `f` of the way out of coverage: its loss from 0 to 10 %, its rate from
/// 7 to 3.2 Mbit/s (above the stream's 2), and with `delay` its RTT from 50 to 150 ms.
fn walking_away(f: f64, delay: bool) -> PathSpec {
    PathSpec {
        delay: Duration::from_micros((25_000.0 + if delay { 50_000.0 * f } else { 0.0 }) as u64),
        rate: (880.0 - 480.0 * f) as usize,
        loss: 0.10 * f,
        ..wifi()
    }
}

/// The lab's `degrade`: the link `f` of the way out of coverage, its rate falling to 7 %
/// (0.5 Mbit/s, a quarter of the stream's), its loss rising to 10 % and its one-way delay
/// by 50 ms.
fn fading(f: f64) -> PathSpec {
    PathSpec {
        delay: Duration::from_micros((25_000.0 + 50_000.0 * f) as u64),
        rate: (880.0 * (1.0 - 0.93 * f)) as usize,
        loss: 0.10 * f,
        ..wifi()
    }
}

/// WiFi fades as in the lab's `degrade` ([`fading`]) from 5 s and goes dark at 10 s; the
/// stream left it for LTE as its RTT rose (no proactive logic). Shortly before the outage
/// LTE's BBR probes its minimum RTT: its window is four segments for 200 ms, a third of
/// what the stream needs. A scheduler that reads that window as a full path hands the rest
/// to the fading WiFi, where it crawls at a quarter of the stream's rate until the outage
/// strands it (224–390 ms gaps in the lab). Waiting for LTE, the stream goes on at four
/// segments per LTE round trip and catches up when the probe ends.
#[test]
fn a_minimum_rtt_probe_does_not_send_the_stream_to_a_fading_path() {
    let s = stream(
        &[wifi(), lte()],
        |c| c.proactive = false,
        14,
        |sim, ms| {
            if (5000..10_000).contains(&ms) && ms % 250 == 0 {
                sim.set_spec(0, fading((ms - 5000) as f64 / 5000.0));
            }
            match ms {
                9600 => sim.probe_rtt(1, true),
                9800 => sim.probe_rtt(1, false),
                10_000 => sim.blackhole(0),
                _ => {}
            }
        },
    );
    let gap = s.max_gap(4900, 13_000);
    println!("fading WiFi, LTE probing its RTT: longest gap {gap} ms");
    assert_eq!(s.lost(), 0);
    assert!(gap <= 100, "longest gap {gap} ms");
}

/// Streams 14 s while WiFi walks out of coverage from 5 s to 10 s ([`walking_away`]) and
/// goes dark at 10 s: the longest gap from 4.9 s to 13 s, messages lost, and when the
/// server demoted WiFi (ms).
fn walk_away(proactive: bool, delay: bool) -> (u64, usize, Option<u64>) {
    let mut demoted_at = None;
    let s = stream(
        &[wifi(), lte()],
        |c| c.proactive = proactive,
        14,
        |sim, ms| {
            if (5000..10_000).contains(&ms) && ms % 250 == 0 {
                sim.set_spec(0, walking_away((ms - 5000) as f64 / 5000.0, delay));
            }
            if ms == 10_000 {
                sim.blackhole(0);
            }
            if demoted_at.is_none() && sim.server.path_counters(0).unwrap().0.demotions > 0 {
                demoted_at = Some(ms);
            }
        },
    );
    (s.max_gap(4900, 13_000), s.lost(), demoted_at)
}

/// WiFi's loss rises from 0 to 10 % over 5 s while its RTT holds (the schedulers, which
/// weigh RTTs, keep using it) and it goes dark at 10 s. The supervisor demotes it on the
/// loss trend before it fails and copies what it holds to LTE (make-before-break), so the
/// stream never waits long: its longest gap stays within 100 ms. Without the proactive
/// logic the same run waits for the suspicion at the outage. When the RTT rises too, the
/// schedulers leave WiFi on their own and both stay short.
#[test]
fn a_degrading_path_is_left_before_it_fails() {
    let (on, lost_on, demoted) = walk_away(true, false);
    let (off, lost_off, never) = walk_away(false, false);
    println!("degrade (loss): longest gap {on} ms proactive (demoted at {demoted:?} ms), {off} ms without");
    assert_eq!((lost_on, lost_off), (0, 0));
    assert!(never.is_none());
    let demoted = demoted.expect("the degrading path was demoted");
    assert!((5000..10_000).contains(&demoted), "demoted at {demoted} ms");
    assert!(on <= 100, "longest gap {on} ms with the proactive logic");
    assert!(off >= 2 * on, "{off} ms without: the outage is felt");
    let (on, lost_on, demoted) = walk_away(true, true);
    let (off, lost_off, _) = walk_away(false, true);
    println!("degrade (loss and delay): longest gap {on} ms proactive (demoted at {demoted:?} ms), {off} ms without");
    assert_eq!((lost_on, lost_off), (0, 0));
    assert!(on <= 100, "longest gap {on} ms with the proactive logic");
}

/// A path with 1 % random loss and a stable rate, streaming for five simulated minutes
/// beside a clean one: never demoted and never suspected (WearMan's thresholds must not
/// make a lossy but working link ping-pong).
#[test]
fn steady_random_loss_never_demotes_a_path() {
    let lossy = PathSpec { loss: 0.01, ..wifi() };
    let s = stream(&[lossy, lte()], |c| c.proactive = true, 300, |_, _| {});
    assert_eq!(s.lost(), 0);
    for (side, sess) in [("server", &s.sim.server), ("client", &s.sim.client)] {
        let (c, _) = sess.path_counters(0).unwrap();
        println!(
            "{side}: {} kernel retransmissions, {} demotions, {} suspicions, {} B sent",
            c.tcp_retransmits, c.demotions, c.suspicions, c.payload_sent
        );
        assert_eq!(c.demotions, 0, "{side}: demoted");
        assert_eq!(c.suspicions, 0, "{side}: suspected");
    }
    let c = s.sim.server.path_counters(0).unwrap().0;
    assert!(c.tcp_retransmits >= 300, "the loss was real: {}", c.tcp_retransmits);
    assert!(
        c.payload_sent > 60_000_000,
        "the lossy path carried the stream: {}",
        c.payload_sent
    );
    // Nor are its frames copied to the other path: a loss costs a round trip, not a hedge.
    let copies = s.sim.server.path_counters(1).unwrap().0.payload_resent;
    println!("copied to the other path: {copies} B");
    assert!(copies < c.payload_sent / 1000, "{copies} B copied");
}

/// A backup path (the client's configuration; the server learns it from the client)
/// carries no payload while the primary works, though it is faster; it takes the stream
/// over within the blackhole's threshold when the primary goes dark, and hands it back
/// (draining, then standing by) when the primary returns.
#[test]
fn a_backup_carries_nothing_while_the_primary_works_and_takes_over_when_it_fails() {
    let fast_backup: PathSpec = (10, 1150).into();
    let mut primary_back = None;
    let s = stream(
        &[wifi(), fast_backup],
        |_| {},
        12,
        |sim, ms| {
            if ms == 0 {
                let now = sim.now;
                sim.client.set_path_tier(1, Tier::Backup, now);
            }
            if ms == 1 {
                assert_eq!(sim.client.path_state(1), PathState::Standby);
            }
            if ms == 4000 {
                let c = sim.server.path_counters(1).unwrap().0;
                assert_eq!(sim.server.path_tier(1), Tier::Backup, "the server learnt the tier");
                assert_eq!(c.payload_sent + c.payload_resent, 0, "the backup carried payload");
                assert_eq!(sim.server.path_state(1), PathState::Standby);
                sim.blackhole(0);
            }
            if ms == 8000 {
                sim.reconnect(0);
                primary_back = Some(ms);
            }
        },
    );
    let gap = s.max_gap(3900, 7000);
    println!("backup takeover: longest gap {gap} ms");
    assert_eq!(s.lost(), 0);
    // The primary's frames are copied to the backup at two thirds of its suspicion
    // threshold (80 ms of silence): 50 ms of the primary's path, 80 ms, the backup's 10.
    assert!(gap <= 150, "longest gap {gap} ms");
    let backup = s.sim.server.path_counters(1).unwrap().0;
    assert!(backup.payload_sent > 500_000, "the backup took over: {backup:?}");
    assert_eq!(s.sim.server.path_state(1), PathState::Standby, "handed back");
    let primary = s.sim.server.path_counters(0).unwrap().0;
    assert!(primary.payload_sent > 2_000_000, "{primary:?}");
}

/// A bulk download for a simulated minute over a lossy WiFi (1 %) and an LTE whose window
/// holds four times its bandwidth-delay product (its RTT four times its minimum, from the
/// download's own queue): neither is demoted or suspected. Their queues and losses under
/// load are the download's, not a failing link's.
#[test]
fn a_bulk_transfer_filling_its_queues_is_not_degradation() {
    let lossy = PathSpec { loss: 0.01, ..wifi() };
    let bloated = PathSpec {
        cwnd: Some(4 * 70 * 1150 / 1448),
        ..lte()
    };
    let mut sim = Sim::custom(
        || mpflex_sched::by_name("minrtt").unwrap(),
        &[lossy, bloated],
        |c| c.proactive = true,
    );
    let id = sim.client.open_stream(placeholder_addr());
    sim.client.stream_send(id, Bytes::from_static(b"GET"));
    for _ in 0..60_000 {
        if sim.server_rx.contains_key(&id) && sim.server.send_capacity(id) > 0 {
            sim.server.stream_send(id, Bytes::from(vec![7u8; 64 * 1024]));
        }
        sim.step();
    }
    let got = sim.client_rx.get(&id).map_or(0, Vec::len);
    println!("bulk: {:.1} Mbit/s", got as f64 * 8.0 / 60.0 / 1e6);
    assert!(got > 60 * 1_500_000, "{got} B in a minute");
    for p in 0..2 {
        let (c, snap) = sim.server.path_counters(p).unwrap();
        println!(
            "path {p}: srtt {:?} (min {:?}), {} retransmissions, {} demotions, {} suspicions",
            snap.srtt, snap.min_rtt, c.tcp_retransmits, c.demotions, c.suspicions
        );
        assert_eq!((c.demotions, c.suspicions), (0, 0), "path {p}");
    }
}
