//! What a path sends, in order: path-local control, session control, datagrams placed on
//! it, copies it owes, frames of dead paths, interactive frames (if this path delivers
//! them first: `urgent`), then what the scheduler decides of the bulk backlog
//! (`decision`). The path writer's late-binding step around it is `late_binding`.

use std::time::Instant;

use mpflex_sched::End;
use mpflex_wire::{Frame, RECORD_OVERHEAD};

use super::record::{Limits, Put, Rec};
use super::Session;

/// Result of [`Session::poll_transmit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollTransmit {
    /// This many bytes were appended.
    Sent(usize),
    /// Nothing to send on this path now; poll again on [`super::Event::WakePaths`] or at
    /// `until`.
    Wait { until: Option<Instant> },
}

impl Session {
    /// The most one stream frame takes on the wire (its payload limit plus headers): a
    /// `poll_transmit` with at least this much room always makes progress.
    pub fn max_frame_len(&self) -> usize {
        self.cfg.max_frame_data + 64
    }

    /// Appends to `out` what `path` should send now, at most `max` bytes. Call when the
    /// path's socket can take bytes.
    pub fn poll_transmit(&mut self, path: usize, now: Instant, out: &mut Vec<u8>, max: usize) -> PollTransmit {
        let limits = Limits {
            max,
            window: max,
            bulk: max,
            bulk_exact: false,
        };
        self.poll_record(path, now, out, limits)
    }

    /// [`Session::poll_transmit`] with at most `bulk` bytes of bulk frames, cut to fit if
    /// `bulk_exact` (queue control's limit).
    pub(super) fn poll_record(&mut self, path: usize, now: Instant, out: &mut Vec<u8>, limits: Limits) -> PollTransmit {
        self.last_now = self.last_now.max(now);
        if !self.paths.get(path).is_some_and(|p| p.is_up()) {
            return PollTransmit::Wait { until: None };
        }
        let Limits {
            max,
            window,
            bulk,
            bulk_exact,
        } = limits;
        // A capped path takes records only within what is left of its allowance (while
        // too little is left it carries no data: see `Paths::set_allowance`).
        let (max, bulk) = match self.paths.get(path).and_then(|p| p.allowance) {
            Some(left) => (max.min(left as usize), bulk.min(left as usize)),
            None => (max, bulk),
        };
        let rec = Rec {
            path,
            start: out.len(),
            max,
            window: window.min(max),
            now,
            ts: self.ts(now),
            bulk,
            bulk_exact,
        };
        // Path-local control (keepalives, pongs) goes on every path; session control and
        // data only on paths that carry — or on any, while none does.
        if !self.write_path_control(rec, out) {
            return self.sent(rec, out);
        }
        let carries = self.paths.get(path).is_some_and(|p| p.carries());
        if !carries && self.paths.iter().any(|p| p.carries()) {
            // A standby sends the copies of a silent path's frames it was given
            // (`Paths::copy_target`), and nothing else.
            if self.paths.get(path).is_some_and(|p| !p.suspect()) {
                self.write_copies(rec, out);
                if rec.used(out) > 0 {
                    tracing::debug!(path, bytes = rec.used(out), "standby path sent copies");
                }
            }
            return self.sent(rec, out);
        }
        if !self.write_control(rec, out) || !self.write_datagrams(rec, out) || !carries {
            return self.sent(rec, out);
        }
        if !self.write_owed(rec, out) || !self.write_urgent(rec, out) {
            return self.sent(rec, out);
        }
        self.send.promote_for(path, End::Head);
        let none_here = self.send.unsent_end_for(End::Head, path).is_none();
        if none_here && (self.send.outgoing_is_empty() || !self.scheduler.reinjects()) {
            return self.sent(rec, out);
        }
        // Queue control's limit leaves no room for a useful bulk frame.
        if rec.bulk_exact && rec.bulk_room(out) < crate::send::MIN_SPLIT + 64 {
            return self.sent(rec, out);
        }
        self.write_scheduled(rec, out)
    }

    /// Path-local control (pongs, keepalives, close). False if the record filled up.
    fn write_path_control(&mut self, rec: Rec, out: &mut Vec<u8>) -> bool {
        let p = self.paths.entry(rec.path);
        while let Some(f) = p.ctrl.front() {
            if !rec.fits(out, f) {
                return false;
            }
            p.ctrl.pop_front().expect("front").encode(out);
        }
        true
    }

    /// Session control (ACK, windows, arrival reports). False if the record filled up.
    fn write_control(&mut self, rec: Rec, out: &mut Vec<u8>) -> bool {
        if let Some(f) = self.feedback.take_ack(rec.now, self.recv.rcv_next()) {
            if !rec.fits(out, &f) {
                return false;
            }
            f.encode(out);
            self.feedback.ack_sent();
        }
        if self.flow.update_needed {
            let f = Frame::MaxData {
                max: self.flow.rx_max(),
            };
            if !rec.fits(out, &f) {
                return false;
            }
            f.encode(out);
            self.flow.update_needed = false;
        }
        while let Some(&id) = self.windows_needed.first() {
            if let Some(s) = self.streams.get(&id) {
                let f = Frame::Window {
                    stream: id,
                    max: s.rx_max,
                };
                if !rec.fits(out, &f) {
                    return false;
                }
                f.encode(out);
            }
            self.windows_needed.pop_first();
        }
        while let Some(f) = self.feedback.next_report() {
            if !rec.fits(out, f) {
                return false;
            }
            self.feedback.pop_report().expect("front").encode(out);
        }
        true
    }

    /// Copies this path owes (redundant scheduling, stalls), then frames whose paths died,
    /// which go first on whichever path asks. False if the record filled up.
    fn write_owed(&mut self, rec: Rec, out: &mut Vec<u8>) -> bool {
        if !self.write_copies(rec, out) {
            return false;
        }
        while let Some(seq) = self.send.next_retransmit_for(rec.path) {
            let frame = &self.send.get(seq).expect("queued frames are outgoing").frame;
            if !rec.fits(out, frame) {
                return false;
            }
            self.put(rec, seq, out, Put::Resent);
            self.counters.resent_lost += 1;
            self.send.retransmitted(seq);
        }
        true
    }

    /// Copies this path owes (redundant scheduling, stalls, hedges). False if the record
    /// filled up.
    fn write_copies(&mut self, rec: Rec, out: &mut Vec<u8>) -> bool {
        let bit = 1u64 << rec.path;
        while let Some(&seq) = self.paths.get(rec.path).and_then(|p| p.dup.front()) {
            match self.send.get(seq) {
                Some(o) if o.on_paths & bit == 0 && !o.received && o.allowed_on(rec.path) => {
                    if !rec.fits(out, &o.frame) {
                        return false;
                    }
                    let hedged = o.hedged;
                    let payload = self.put(rec, seq, out, Put::Resent);
                    if hedged {
                        tracing::debug!(target: "mpflex_engine::hedge", path = rec.path, seq, "hedged copy sent");
                        self.counters.hedged += 1;
                        self.counters.hedged_payload += payload;
                    } else {
                        self.counters.resent_copies += 1;
                    }
                }
                Some(o) if o.hedged => {
                    tracing::debug!(target: "mpflex_engine::hedge", path = rec.path, seq, received = o.received, "hedged copy not needed");
                }
                _ => {}
            }
            self.paths.entry(rec.path).dup.pop_front();
        }
        true
    }

    /// Encodes outgoing frame `seq` onto the record, stamped with the send time, books the
    /// copy and counts its payload on the path (as new data or sent again) and in the
    /// energy-aware mode. Returns its payload length.
    pub(super) fn put(&mut self, rec: Rec, seq: u64, out: &mut Vec<u8>, put: Put) -> u64 {
        let here = self.paths.get(rec.path).expect("sending path");
        let bif = here.bif(rec.used(out));
        let eta = here.owd.estimate(bif).map(|d| self.clock_us(rec.now) + d);
        let f = self.send.book(seq, rec.path, rec.now, rec.ts, eta);
        f.encode(out);
        let stamp = f.ts().map(|ts| (ts, bif));
        let payload = f.payload_len() as u64;
        let stream = match f {
            Frame::Open { stream, .. } | Frame::Data { stream, .. } => Some(*stream),
            _ => None,
        };
        self.paths.booked(rec.path, rec.now, stamp);
        if let Some(s) = stream.and_then(|id| self.streams.get_mut(&id)).filter(|_| payload > 0) {
            s.carried_on(rec.path, payload);
        }
        let counters = &mut self.paths.entry(rec.path).counters;
        match put {
            Put::New => counters.payload_sent += payload,
            Put::Resent => counters.payload_resent += payload,
        }
        self.note_payload(rec.path, crate::energy::Dir::Up, payload, self.last_now);
        payload
    }

    /// Closes the record: counts it, and until the driver reports the socket again counts
    /// what was just handed over as unsent in it, record overhead included — decisions in
    /// the meantime (is this the faster path with window space? how much room is left in
    /// its window?) must not see it as empty.
    pub(super) fn sent(&mut self, rec: Rec, out: &[u8]) -> PollTransmit {
        let n = rec.used(out);
        if n == 0 {
            return PollTransmit::Wait { until: None };
        }
        self.note_backlog();
        self.unblock_drained();
        let last_now = self.last_now;
        self.paths.record_closed(rec.path, rec.ts, n + RECORD_OVERHEAD);
        self.meter_bytes(rec.path, crate::energy::Dir::Up, n + RECORD_OVERHEAD, last_now);
        let p = self.paths.entry(rec.path);
        p.counters.bytes_sent += n as u64;

        p.last_send = p.last_send.max(last_now);
        // Bytes handed to a socket that held none start a busy spell: silence counts
        // from here (frames booked did so already; this covers control frames).
        if p.held == 0 && p.kernel.unacked == 0 {
            p.progress = p.progress.max(last_now);
        }
        p.snap.notsent = p.snap.notsent.saturating_add((n + RECORD_OVERHEAD) as u32);
        self.paths.spend(rec.path, n as u64);
        PollTransmit::Sent(n)
    }
}
