//! `video`: a DASH-like player over one persistent connection for `--secs` seconds of
//! video, 5 s segments from ECF's bit-rate ladder, chosen by a buffer-based ABR
//! (`buffer`, the default) or a throughput-based one (`rate`).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::{connect, fields, mbit, request, ClientRun, Fields, Spec, Via};
use crate::record::Record;
use crate::summary::{capacity, median_of, median_text, BarChart, Column, Summary, Table};

pub struct Video;

impl Spec for Video {
    fn name(&self) -> &'static str {
        "video"
    }

    fn variants(&self) -> (&'static [&'static str], &'static [&'static str]) {
        // The buffer-based ABR of ECF's evaluation unless asked.
        (&["buffer", "rate"], &["buffer"])
    }

    fn default_secs(&self) -> f64 {
        120.0
    }

    fn has_capacity(&self) -> bool {
        true
    }

    fn ideal_mbit(&self, capacity_mbit: f64) -> Option<f64> {
        Some(ideal_bitrate(capacity_mbit))
    }

    fn client(&self, run: &ClientRun) -> Result<Fields> {
        let abr = if run.variant.as_deref() == Some("rate") {
            Abr::Rate
        } else {
            Abr::Buffer
        };
        self::run(run.server, &run.via, run.secs, abr)
    }

    fn summary(&self) -> Summary {
        let table = Table {
            heading: |all| {
                let ideal = median_text(all, |r| r.ideal_mbit, |c| format!(", ideal {c:.2} Mbit/s"));
                let cap = median_text(all, capacity, |c| format!(" (capacity {c:.1} Mbit/s)"));
                format!("{ideal}{cap} — median (p10–p90)")
            },
            columns: vec![
                ("average bit rate, Mbit/s", Column::Dist(bitrate, 2)),
                ("% of ideal", Column::Dist(pct_of_ideal, 0)),
                ("bit rate / mptcp", Column::VsMptcp(bitrate)),
                ("stalls", Column::Dist(|r| r.field("stalls"), 0)),
                ("stall time, ms", Column::Dist(|r| r.field("stall_ms"), 0)),
                ("startup, ms", Column::Dist(|r| r.field("startup_ms"), 0)),
            ],
        };
        let chart = BarChart {
            suffix: "bitrate",
            title: "average bit rate",
            y_desc: "average bit rate, Mbit/s (median, p10–p90)",
            bars: vec![(None, bitrate)],
            line: |all| median_of(all, |r| r.ideal_mbit).map(|c| (c, format!("ideal {c:.2} Mbit/s"))),
        };
        Summary::BySystem(table, chart)
    }
}

fn bitrate(r: &Record) -> Option<f64> {
    r.field("bitrate_mbit")
}

fn pct_of_ideal(r: &Record) -> Option<f64> {
    Some(bitrate(r)? / r.ideal_mbit.filter(|c| *c > 0.0)? * 100.0)
}

/// The bit-rate ladder of the ECF streaming experiments, Mbit/s.
pub const LADDER: [f64; 6] = [0.26, 0.64, 1.00, 1.60, 4.14, 8.47];
/// Seconds of video per segment.
pub const SEGMENT_S: f64 = 5.0;
/// The player stops fetching while this much video is buffered ...
pub const BUFFER_MAX_S: f64 = 30.0;
/// ... starts (and resumes after a stall) playing once this much is.
pub const PLAY_AFTER_S: f64 = 10.0;

/// The ideal average bit rate for an aggregate capacity: the highest ladder rate not above
/// it (the ECF evaluation's definition).
pub fn ideal_bitrate(capacity_mbit: f64) -> f64 {
    LADDER
        .iter()
        .copied()
        .filter(|&r| r <= capacity_mbit)
        .fold(LADDER[0], f64::max)
}

/// The ABR: the highest rate not above the harmonic mean of the last three segments'
/// throughputs, with a 20% safety margin while the buffer is below [`PLAY_AFTER_S`].
pub fn choose_rate(throughputs: &[f64], buffer_s: f64) -> usize {
    let recent = &throughputs[throughputs.len().saturating_sub(3)..];
    if recent.is_empty() {
        return 0;
    }
    let hm = recent.len() as f64 / recent.iter().map(|t| 1.0 / t.max(1e-6)).sum::<f64>();
    let budget = if buffer_s < PLAY_AFTER_S { 0.8 * hm } else { hm };
    LADDER.iter().rposition(|&r| r <= budget).unwrap_or(0)
}

/// The buffer-based ABR's reservoir: at or below this much buffered video it fetches the
/// lowest rate.
pub const RESERVOIR_S: f64 = 10.0;
/// Its cushion: the rate rises linearly with the buffer above the reservoir and is the
/// highest once the buffer reaches reservoir + cushion.
pub const CUSHION_S: f64 = 10.0;

/// Which rule picks each segment's rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abr {
    /// Buffer-based (Huang et al., SIGCOMM 2014, the ABR of ECF's evaluation): BBA-0's
    /// rate map with its hysteresis, after a startup phase (as in their BBA-1/2) that follows
    /// [`choose_rate`] until the map asks for more or a download took longer than the
    /// segment plays.
    Buffer,
    /// Throughput-based: [`choose_rate`] for every segment.
    Rate,
}

/// BBA-0's rate map: the ladder index for `buffer_s` seconds buffered, given the previous
/// index. Below the reservoir the lowest rate, above reservoir + cushion the highest; in
/// between the rate f(B) rises linearly, and the index changes only when f(B) passes the
/// next rung up (then the highest rung below f(B)) or falls to the next rung down (then
/// the lowest rung above f(B)).
pub fn bba_rate(buffer_s: f64, prev: usize) -> usize {
    let top = LADDER.len() - 1;
    if buffer_s <= RESERVOIR_S {
        return 0;
    }
    if buffer_s >= RESERVOIR_S + CUSHION_S {
        return top;
    }
    let f = LADDER[0] + (buffer_s - RESERVOIR_S) / CUSHION_S * (LADDER[top] - LADDER[0]);
    let up = LADDER[(prev + 1).min(top)];
    let down = LADDER[prev.saturating_sub(1)];
    if prev < top && f >= up {
        LADDER.iter().rposition(|&r| r < f).unwrap_or(0)
    } else if prev > 0 && f <= down {
        LADDER.iter().position(|&r| r > f).unwrap_or(top)
    } else {
        prev
    }
}

/// An ABR's state across segments.
#[derive(Debug, Clone)]
pub struct AbrState {
    abr: Abr,
    /// [`Abr::Buffer`]'s startup phase is on.
    startup: bool,
    /// The last rate picked (ladder index).
    q: usize,
}

impl AbrState {
    pub fn new(abr: Abr) -> Self {
        AbrState {
            abr,
            startup: abr == Abr::Buffer,
            q: 0,
        }
    }

    /// The ladder index of the next segment, from the segments' throughputs so far
    /// (Mbit/s) and the seconds buffered.
    pub fn choose(&mut self, throughputs: &[f64], buffer_s: f64) -> usize {
        let by_rate = choose_rate(throughputs, buffer_s);
        self.q = match self.abr {
            Abr::Rate => by_rate,
            Abr::Buffer => {
                let map = bba_rate(buffer_s, self.q);
                if self.startup && map <= by_rate {
                    by_rate
                } else {
                    self.startup = false;
                    map
                }
            }
        };
        self.q
    }

    /// A segment took `took` to download: slower than it plays ends the startup phase.
    pub fn downloaded(&mut self, took: Duration) {
        if took.as_secs_f64() > SEGMENT_S {
            self.startup = false;
        }
    }
}

/// `video`: a DASH-like player over one persistent connection for `secs` seconds of video.
/// Stalls count the times playback ran dry after it started; `stall_ms` is the time spent
/// rebuffering (the initial buffering is `startup_ms`).
pub fn run(server: SocketAddr, via: &Via, secs: f64, abr: Abr) -> Result<Fields> {
    struct Player {
        buffer: f64,
        playing: bool,
        clock: Instant,
        stalled_at: Option<Instant>,
        stalls: u32,
        stall: Duration,
    }
    impl Player {
        /// Plays until `now`.
        fn play(&mut self, now: Instant) {
            let dt = (now - self.clock).as_secs_f64();
            if self.playing {
                if self.buffer >= dt {
                    self.buffer -= dt;
                } else {
                    self.stalled_at = Some(self.clock + Duration::from_secs_f64(self.buffer));
                    self.buffer = 0.0;
                    self.playing = false;
                    self.stalls += 1;
                }
            }
            self.clock = now;
        }
    }
    let segments = (secs / SEGMENT_S).ceil().max(1.0) as usize;
    let start = Instant::now();
    let mut c = connect(server, via)?;
    let mut throughputs = Vec::new();
    let mut rates = Vec::new();
    let mut segment_ms = Vec::new();
    let mut p = Player {
        buffer: 0.0,
        playing: false,
        clock: start,
        stalled_at: None,
        stalls: 0,
        stall: Duration::ZERO,
    };
    let mut started_at: Option<Duration> = None;
    let mut player_abr = AbrState::new(abr);
    for seg in 0..segments {
        // Wait for room in the buffer.
        p.play(Instant::now());
        if p.playing && p.buffer > BUFFER_MAX_S - SEGMENT_S {
            std::thread::sleep(Duration::from_secs_f64(p.buffer - (BUFFER_MAX_S - SEGMENT_S)));
            p.play(Instant::now());
        }
        let q = player_abr.choose(&throughputs, p.buffer);
        let bytes = (LADDER[q] * 1e6 / 8.0 * SEGMENT_S) as u64;
        let t = Instant::now();
        request(&mut c, bytes)?;
        let now = Instant::now();
        let took = now - t;
        player_abr.downloaded(took);
        throughputs.push(mbit(bytes, took));
        segment_ms.push(took.as_secs_f64() * 1000.0);
        rates.push(LADDER[q]);
        p.play(now);
        p.buffer += SEGMENT_S;
        if !p.playing && (p.buffer >= PLAY_AFTER_S || seg + 1 == segments) {
            p.playing = true;
            match p.stalled_at.take() {
                Some(at) => p.stall += now - at,
                None => {
                    started_at.get_or_insert(now - start);
                }
            }
        }
    }
    let avg = rates.iter().sum::<f64>() / rates.len() as f64;
    Ok(fields(vec![
        ("bitrate_mbit", avg.into()),
        ("segments", (segments as u64).into()),
        ("stalls", p.stalls.into()),
        ("stall_ms", (p.stall.as_secs_f64() * 1000.0).into()),
        (
            "startup_ms",
            started_at.map_or(0.0, |d| d.as_secs_f64() * 1000.0).into(),
        ),
        ("rates_mbit", rates.into()),
        ("segment_ms", segment_ms.into()),
        ("completion_ms", (start.elapsed().as_secs_f64() * 1000.0).into()),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abr_and_ideal() {
        assert_eq!(ideal_bitrate(8.9), 8.47);
        assert_eq!(ideal_bitrate(8.4), 4.14);
        assert_eq!(ideal_bitrate(0.1), 0.26);
        assert_eq!(choose_rate(&[], 0.0), 0);
        // Full buffer: the harmonic mean itself is the budget.
        assert_eq!(LADDER[choose_rate(&[8.6, 8.8, 8.7], 20.0)], 8.47);
        // Low buffer: 20% margin.
        assert_eq!(LADDER[choose_rate(&[8.6, 8.8, 8.7], 5.0)], 4.14);
        // One slow segment pulls the harmonic mean down hard.
        assert_eq!(LADDER[choose_rate(&[9.0, 9.0, 1.0], 20.0)], 1.60);
    }

    #[test]
    fn buffer_based_rate_map() {
        let top = LADDER.len() - 1;
        // Reservoir and upper reservoir.
        assert_eq!(bba_rate(0.0, top), 0);
        assert_eq!(bba_rate(RESERVOIR_S, 3), 0);
        assert_eq!(bba_rate(RESERVOIR_S + CUSHION_S, 0), top);
        assert_eq!(bba_rate(29.0, 2), top);
        // Halfway, f(B) = 0.26 + 0.5·8.21 = 4.365: up from 1.60 to the highest rung below
        // it (4.14); down from 8.47 only to the lowest rung above it (8.47 stays: 4.365 is
        // not at or below 4.14); from 4.14 nothing moves.
        let mid = RESERVOIR_S + CUSHION_S / 2.0;
        assert_eq!(LADDER[bba_rate(mid, 3)], 4.14);
        assert_eq!(LADDER[bba_rate(mid, top)], 8.47);
        assert_eq!(LADDER[bba_rate(mid, 4)], 4.14);
        // f(B) = 1.0 at 10.9 s. A little above it, 4.14 steps down to the lowest rung
        // above f(B) (1.60).
        let b = RESERVOIR_S + (1.0 - 0.26) / (8.47 - 0.26) * CUSHION_S;
        assert_eq!(LADDER[bba_rate(b + 0.2, 4)], 1.60);
        // ... and 0.64 does not step up until f(B) reaches 1.0, then to the rung below it.
        assert_eq!(LADDER[bba_rate(b - 0.01, 1)], 0.64);
        assert_eq!(LADDER[bba_rate(b + 0.3, 1)], 1.0);
    }

    #[test]
    fn buffer_based_startup_follows_throughput_until_the_map_asks_for_more() {
        let mut a = AbrState::new(Abr::Buffer);
        // No history, empty buffer: both rules say the lowest rate, and startup goes on.
        assert_eq!(a.choose(&[], 0.0), 0);
        // 3.7 Mbit/s measured, 5 s buffered: the throughput rule (0.8 × 3.7) picks 1.60
        // where the map still says 0.26.
        assert_eq!(LADDER[a.choose(&[3.7], 5.0)], 1.60);
        // 12 s buffered, no margin: the harmonic mean 4.58 picks 4.14; the map says 1.60.
        assert_eq!(LADDER[a.choose(&[3.7, 6.0], 12.0)], 4.14);
        // 19 s buffered: the map's f = 7.65 is below the next rung (8.47), so it keeps
        // 4.14, as does the throughput rule: still startup.
        assert_eq!(LADDER[a.choose(&[3.7, 6.0, 6.0], 19.0)], 4.14);
        // 21 s: the map says 8.47, more than throughput allows: the map takes over for good.
        assert_eq!(LADDER[a.choose(&[6.0, 6.0, 6.0], 21.0)], 8.47);
        assert_eq!(LADDER[a.choose(&[9.0, 9.0, 9.0], 5.0)], 0.26);
        // A download slower than real time ends startup too.
        let mut b = AbrState::new(Abr::Buffer);
        assert_eq!(LADDER[b.choose(&[3.7], 5.0)], 1.60);
        b.downloaded(Duration::from_secs(6));
        assert_eq!(LADDER[b.choose(&[3.7, 3.7], 5.0)], 0.26);
        // The throughput ABR has no phases.
        let mut r = AbrState::new(Abr::Rate);
        assert_eq!(LADDER[r.choose(&[9.0, 9.0, 9.0], 5.0)], 4.14);
    }
}
