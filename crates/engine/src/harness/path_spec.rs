//! A simulated path's properties: delay, rate, window, bottleneck buffer, loss, pacing,
//! or the fluid model.

use std::time::Duration;

/// One path's properties (the same in both directions).
#[derive(Debug, Clone, Copy)]
pub struct PathSpec {
    /// One-way delay.
    pub delay: Duration,
    /// Bottleneck rate, bytes per millisecond.
    pub rate: usize,
    /// Congestion window, segments (a fixed window, unless `buffer` is set).
    /// `None`: the path's bandwidth-delay product plus ten segments, what a well-behaved
    /// congestion control settles at.
    pub cwnd: Option<u32>,
    /// A droptail bottleneck buffer holding this much of the link's rate, and a
    /// congestion control in place of the fixed window: slow start from the initial
    /// window (growing only while the window limits the sender, as Linux's
    /// `tcp_is_cwnd_limited`), a drop when a segment finds the buffer full, detected a
    /// round trip later, cutting the window to 0.7 of itself (CUBIC's β), then one
    /// segment per round trip (Reno's growth; CUBIC's curve is not modelled), and the
    /// window's restart after an idle spell longer than the RTO (RFC 2861, Linux's
    /// `tcp_cwnd_restart` with `tcp_slow_start_after_idle` on). For tests
    /// of what slow start and a deep buffer do to the engine (a long LTE path's start-up);
    /// `None`: the fixed window and an unbounded queue.
    pub buffer: Option<Duration>,
    /// The fluid model the multipath papers analyse instead of a TCP socket: no window
    /// and no queue anywhere but the link's serialisation, the path ready whenever less
    /// than 2 ms of bytes wait to be serialised, and fixed statistics (RTT twice the
    /// delay, the link's rate). For tests that hold an algorithm to a bound derived in
    /// that model (DEMS's balanced completion); everything else runs on the socket.
    pub ideal: bool,
    /// Probability that a segment is lost on the link (drawn per segment from a
    /// generator seeded by the path's delay and rate, so a run is repeatable). A lost
    /// segment is retransmitted an RTT later (SACK's fast retransmit: the segments
    /// behind it arrive and are acknowledged, and wait for it at the receiver).
    pub loss: f64,
    /// With `buffer`: the kernel paces the segments (as with `SO_MAX_PACING_RATE` set,
    /// which mpflex's path sockets have by default): at twice the window per smoothed RTT
    /// while the window is under half the threshold, at 1.2 times it after
    /// (`tcp_update_pacing_rate`'s slow-start and congestion-avoidance ratios). Unpaced,
    /// each ACK's growth leaves at once and slow start's bursts queue about half a window
    /// at the bottleneck every round trip.
    pub pacing: bool,
}

impl PathSpec {
    /// The same path in the fluid model (see [`PathSpec::ideal`]).
    pub fn ideal(self) -> Self {
        PathSpec { ideal: true, ..self }
    }
}

impl From<(u64, usize)> for PathSpec {
    /// `(one-way delay in ms, bytes per ms)`.
    fn from((delay_ms, rate): (u64, usize)) -> Self {
        PathSpec {
            delay: Duration::from_millis(delay_ms),
            rate,
            cwnd: None,
            buffer: None,
            ideal: false,
            loss: 0.0,
            pacing: false,
        }
    }
}
