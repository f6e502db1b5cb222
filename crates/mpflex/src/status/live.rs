//! The live view's data: a sampler reads the sessions once a second and keeps the last
//! [`HISTORY_SECS`] of each path's rates, RTT and queue, so a page opened late (`GET /`)
//! and `mpflex status --watch` both show the last minutes at once. `GET /live.json`
//! returns the sessions now with that history.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use serde_json::json;

use super::snapshot::{PathView, SessionView};

/// The page, embedded in the binary: no file to install, nothing fetched from elsewhere.
pub const PAGE: &str = include_str!("live.html");

/// Seconds of history kept per path.
pub const HISTORY_SECS: usize = 300;
/// How often the sampler reads the sessions.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// Most streams `live.json` lists per session (the largest first); `/status` lists all.
pub const LIVE_STREAMS: usize = 50;

#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    /// Bytes per second sent and received on the path since the sample before.
    tx: u64,
    rx: u64,
    srtt_us: u64,
    queue_us: Option<u64>,
    /// Unacknowledged plus unsent bytes in the path's socket.
    in_flight: u64,
}

#[derive(Debug)]
struct Series {
    /// When the counters were last read, and their values then.
    last: (Instant, u64, u64),
    samples: VecDeque<Sample>,
}

/// Per (session, path): the last [`HISTORY_SECS`] samples.
#[derive(Debug, Default)]
pub struct History {
    series: HashMap<(String, usize), Series>,
}

impl History {
    /// Reads the sessions at `now`: a sample per path from the change of its counters since
    /// the last reading. Paths of sessions that are gone are forgotten.
    pub fn record(&mut self, now: Instant, sessions: &[SessionView]) {
        let mut seen = HashSet::new();
        for s in sessions {
            for p in &s.snap.paths {
                let Some(c) = &p.counters else { continue };
                let key = (s.session.clone(), p.id);
                seen.insert(key.clone());
                let series = self.series.entry(key).or_insert_with(|| Series {
                    last: (now, c.bytes_sent, c.bytes_received),
                    samples: VecDeque::new(),
                });
                let dt = now.saturating_duration_since(series.last.0).as_secs_f64();
                // The first reading only sets the baseline.
                if dt < 0.05 {
                    continue;
                }
                // Counters start over only with a new session, which has a new key; a
                // decrease is treated as a restart from zero all the same.
                let rate = |new: u64, old: u64| (new.checked_sub(old).unwrap_or(new) as f64 / dt) as u64;
                series.samples.push_back(Sample {
                    at: now,
                    tx: rate(c.bytes_sent, series.last.1),
                    rx: rate(c.bytes_received, series.last.2),
                    srtt_us: p.snap.srtt.as_micros() as u64,
                    queue_us: p.queue_delay.map(|d| d.as_micros() as u64),
                    in_flight: p.in_flight_bytes() + p.snap.notsent as u64,
                });
                series.last = (now, c.bytes_sent, c.bytes_received);
                while series.samples.len() > HISTORY_SECS {
                    series.samples.pop_front();
                }
            }
        }
        self.series.retain(|k, _| seen.contains(k));
    }

    fn get(&self, session: &str, path: usize) -> Option<&Series> {
        self.series.get(&(session.to_string(), path))
    }
}

/// Microseconds as milliseconds to 10 µs (a LAN's RTT is well under a millisecond).
fn ms(us: u64) -> f64 {
    (us as f64 / 10.0).round() / 100.0
}

fn path_json(p: &PathView, series: Option<&Series>, now: Instant) -> serde_json::Value {
    let samples: Vec<&Sample> = series.map(|s| s.samples.iter().collect()).unwrap_or_default();
    let last = samples.last();
    let c = p.counters.clone().unwrap_or_default();
    let ago = |s: &Sample| -((now.saturating_duration_since(s.at).as_millis() as f64 / 100.0).round() / 10.0);
    json!({
        "id": p.id,
        "name": p.name,
        "state": p.state_name(),
        "backup": p.backup,
        "tier": p.tier.wire(),
        "tx_rate": last.map_or(0, |s| s.tx),
        "rx_rate": last.map_or(0, |s| s.rx),
        "srtt_ms": ms(p.snap.srtt.as_micros() as u64),
        "min_rtt_ms": ms(p.snap.min_rtt.as_micros() as u64),
        "queue_ms": p.queue_delay.map(|d| ms(d.as_micros() as u64)),
        "cwnd": p.snap.cwnd,
        "in_flight_bytes": p.in_flight_bytes() + p.snap.notsent as u64,
        "sent_bytes": c.bytes_sent,
        "received_bytes": c.bytes_received,
        "resent_bytes": c.payload_resent,
        "tcp_retransmits": c.tcp_retransmits,
        "failures": c.failures,
        "history": {
            "t": samples.iter().map(|s| ago(s)).collect::<Vec<_>>(),
            "tx": samples.iter().map(|s| s.tx).collect::<Vec<_>>(),
            "rx": samples.iter().map(|s| s.rx).collect::<Vec<_>>(),
            "srtt_ms": samples.iter().map(|s| ms(s.srtt_us)).collect::<Vec<_>>(),
            "queue_ms": samples.iter().map(|s| s.queue_us.map(ms)).collect::<Vec<_>>(),
            "in_flight": samples.iter().map(|s| s.in_flight).collect::<Vec<_>>(),
        },
    })
}

/// `GET /live.json`: the sessions now, each path with its history.
pub fn live_json(role: &str, sessions: &[SessionView], history: &History, now: Instant) -> serde_json::Value {
    let list: Vec<serde_json::Value> = sessions
        .iter()
        .map(|s| {
            let snap = &s.snap;
            let paths: Vec<serde_json::Value> = snap
                .paths
                .iter()
                .map(|p| path_json(p, history.get(&s.session, p.id), now))
                .collect();
            let mut streams: Vec<_> = snap.stream_list.iter().collect();
            // The streams carrying the most come first; ties by id, so rows stay put.
            streams.sort_by_key(|st| (std::cmp::Reverse(st.paths.iter().sum::<u64>()), st.id));
            let stream_list: Vec<serde_json::Value> = streams
                .iter()
                .take(LIVE_STREAMS)
                .map(|st| {
                    json!({"id": st.id, "target": st.target, "class": st.class.name(),
                           "pinned": st.pinned, "paths": st.paths})
                })
                .collect();
            json!({
                "client": s.client,
                "session": s.session,
                "scheduler": snap.scheduler,
                "streams": snap.streams,
                "held_bytes": {"send": snap.held.0, "receive": snap.held.1},
                "ahead_bytes": snap.ahead,
                "paths": paths,
                "stream_list": stream_list,
            })
        })
        .collect();
    json!({
        "role": role,
        "interval_ms": SAMPLE_EVERY.as_millis() as u64,
        "history_secs": HISTORY_SECS,
        "sessions": list,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::metrics::tests::sample_session;

    #[test]
    fn rates_come_from_the_change_between_readings_and_the_history_is_bounded() {
        let t0 = Instant::now();
        let mut s = sample_session();
        let mut h = History::default();
        h.record(t0, std::slice::from_ref(&s));
        let v = live_json("server", std::slice::from_ref(&s), &h, t0);
        assert_eq!(
            v["sessions"][0]["paths"][0]["history"]["tx"],
            json!([]),
            "a baseline only"
        );
        for i in 1..=(HISTORY_SECS as u64 + 10) {
            for p in &mut s.snap.paths {
                let c = p.counters.as_mut().unwrap();
                c.bytes_sent += 1000 * i;
                c.bytes_received += 500;
            }
            h.record(t0 + Duration::from_secs(i), std::slice::from_ref(&s));
        }
        let now = t0 + Duration::from_secs(HISTORY_SECS as u64 + 10);
        let v = live_json("server", std::slice::from_ref(&s), &h, now);
        let p = &v["sessions"][0]["paths"][0];
        assert_eq!(p["tx_rate"], (HISTORY_SECS as u64 + 10) * 1000);
        assert_eq!(p["rx_rate"], 500);
        assert_eq!(p["state"], "active");
        assert_eq!(p["queue_ms"], 4.0);
        assert_eq!(p["history"]["tx"].as_array().unwrap().len(), HISTORY_SECS);
        assert_eq!(p["history"]["t"][HISTORY_SECS - 1], 0.0);
        assert_eq!(p["history"]["t"][0], -((HISTORY_SECS - 1) as f64));
        assert_eq!(v["sessions"][0]["paths"][1]["state"], "suspect");
        assert_eq!(v["sessions"][0]["stream_list"][0]["paths"], json!([10, 20]));
        // A session that went away takes its history with it.
        h.record(now + Duration::from_secs(1), &[]);
        assert!(h.series.is_empty());
    }
}
