//! Interactive frames: each goes on the path where it arrives first now, ahead of bulk
//! frames and outside the schedulers' placing, and a small one is hedged with a copy on a
//! second path when that copy would arrive before a loss could be repaired.

use std::time::Instant;

use super::record::{Put, Rec};
use super::Session;

/// The largest interactive frame payload that is hedged: a request, a small response, a
/// keystroke's echo. Larger frames belong to bursts whose copies would cost more than a
/// round trip saved on one frame.
pub const HEDGE_MAX_PAYLOAD: u64 = 2048;

/// Hedged payload a session may send beyond its share ([`HEDGE_SHARE`]) of the bytes it
/// sent: its first requests are hedged whatever came before.
pub const HEDGE_ALLOWANCE: u64 = 64 * 1024;

/// Hedged payload stays within 1/`HEDGE_SHARE` of the bytes the session's paths carried
/// in both directions (first copies sent, everything received), beyond
/// [`HEDGE_ALLOWANCE`]: a session of nothing but small requests pays at most an eighth
/// more bytes.
pub const HEDGE_SHARE: u64 = 8;

impl Session {
    /// Interactive frames, as long as this is the path on which each arrives first now
    /// (a burst of them spreads over the paths as they fill). False if the record filled
    /// up.
    pub(super) fn write_urgent(&mut self, rec: Rec, out: &mut Vec<u8>) -> bool {
        self.send.promote_urgent();
        while let Some(seq) = self.send.urgent_front_for(rec.path) {
            let frame = &self.send.get(seq).expect("urgent frames are outgoing").frame;
            if !self
                .paths
                .urgent_here(frame.encoded_len(), rec.path, rec.used(out), rec.now)
            {
                // That path's writer was woken when the frame was queued.
                return true;
            }
            if !rec.fits(out, frame) {
                return false;
            }
            self.send.take_urgent_seq(seq);
            let payload = self.put(rec, seq, out, Put::New);
            self.hedge(seq, rec.path, payload, rec.now);
            if tracing::enabled!(tracing::Level::DEBUG) {
                let eta: Vec<String> = self
                    .paths
                    .iter()
                    .map(|p| {
                        let s = &p.snap;
                        format!(
                            "{}:{:.1}ms(q={:?} srtt={}us min={}us cwnd={} inflight={} notsent={} rate={})",
                            s.id,
                            crate::paths::arrival_secs(s, p.queue.get(rec.now), payload as usize) * 1000.0,
                            p.queue.get(rec.now),
                            s.srtt.as_micros(),
                            s.min_rtt.as_micros(),
                            s.send_cwnd(),
                            s.in_flight,
                            s.notsent,
                            s.delivery_rate
                        )
                    })
                    .collect();
                tracing::debug!(path = rec.path, seq, payload, ?eta, "urgent");
            }
        }
        true
    }

    /// Queues a copy of interactive frame `seq`, just handed to `path`, on the path that
    /// would deliver it next, if that copy would arrive before `path` could repair a loss
    /// of it (`Paths::hedge_target`). A request lost at a loaded bottleneck (a drop-tail
    /// uplink queue under a bulk upload) waits in the peer's TCP receive queue for the
    /// retransmission: a round trip after the loss shows, a retransmission timeout (200 ms
    /// at least) when it was the tail. The copy makes that wait the second path's delay
    /// — ReMP TCP's and the redundant scheduler's idea, spent on the frames whose latency
    /// is the point and whose bytes are few ([`HEDGE_MAX_PAYLOAD`], within
    /// [`HEDGE_SHARE`] of the session's bytes).
    fn hedge(&mut self, seq: u64, path: usize, payload: u64, now: Instant) {
        if !self.cfg.hedge_interactive || payload == 0 || payload > HEDGE_MAX_PAYLOAD {
            return;
        }
        // The session's bytes in both directions: a server answering an upload's
        // requests sends little but its paths carry the upload.
        let carried: u64 = self
            .paths
            .iter()
            .map(|p| p.counters.payload_sent + p.counters.bytes_received)
            .sum();
        if self.counters.hedged_payload + payload > HEDGE_ALLOWANCE + carried / HEDGE_SHARE {
            return;
        }
        let Some(o) = self.send.get(seq) else { return };
        let len = o.frame.encoded_len();
        let Some(to) = self.paths.hedge_target(len, path, o.allowed, now) else {
            tracing::debug!(target: "mpflex_engine::hedge", path, seq, "interactive frame not hedged: its path lost nothing lately, or no other path delivers it in time");
            return;
        };
        tracing::debug!(target: "mpflex_engine::hedge", path, to, seq, payload, "interactive frame hedged");
        self.send.mark_hedged(seq);
        self.paths.entry(to).dup.push_back(seq);
        self.wake_path(to);
    }
}
