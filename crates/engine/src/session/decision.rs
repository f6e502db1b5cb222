//! What the scheduler decides of the bulk backlog for a path, carried out: new frames
//! from the decision's end of the queue (cut to an exact limit, copied for redundant
//! scheduling), copies of frames other paths hold, or a wait.

use mpflex_sched::{Decision, End, PathSnapshot, QueueView};
use mpflex_wire::RECORD_OVERHEAD;

use super::record::{trace_decision, Put, Rec};
use super::{PollTransmit, Session};
use crate::reinject::{self, Request};

/// A scheduler's `Send` decision.
#[derive(Debug, Clone, Copy)]
struct SendNew {
    end: End,
    max_bytes: usize,
    duplicate: bool,
    exact: bool,
}

impl Session {
    /// Asks the scheduler what `rec.path` carries of the backlog, and sends it.
    pub(super) fn write_scheduled(&mut self, rec: Rec, out: &mut Vec<u8>) -> PollTransmit {
        let mut snaps = self.paths.snapshots();
        // The scheduler decides among the paths that may carry the frame this path would
        // send next (a stream's policy): a faster path its stream may not use is no
        // reason for this one to wait. That frame's stream also says which scheduler.
        let head = self
            .send
            .unsent_end_for(End::Head, rec.path)
            .and_then(|seq| self.send.get(seq));
        if let Some(o) = head.filter(|o| o.allowed != crate::send::ALL_PATHS) {
            for s in snaps.iter_mut().filter(|s| !o.allowed_on(s.id)) {
                s.alive = false;
            }
        }
        let sched = head.and_then(|o| o.sched);
        // The scheduler sees the whole backlog, staged or sequenced.
        let (bytes, frames) = self.send.backlog();
        let queue = QueueView {
            bytes,
            frames,
            // Unsent queue (already within the window) plus the credit not yet used.
            send_window: self.flow.send_room().saturating_add(bytes),
            sustained: self.bulk_held(rec.now),
            withheld: self.bulk_withheld(rec.now),
        };
        let budget = rec.bulk_room(out);
        let scheduler = match self.stream_schedulers.iter_mut().find(|(k, _)| Some(*k) == sched) {
            Some((_, s)) => s,
            _ => &mut self.scheduler,
        };
        let decision = scheduler.decide(rec.now, rec.path, &snaps, &queue, budget);
        trace_decision(rec.path, &snaps, &queue, budget, &decision);
        match decision {
            Decision::Send { .. } => self.counters.decisions_send += 1,
            Decision::Wait { .. } => self.counters.decisions_wait += 1,
            Decision::Reinject { .. } => self.counters.decisions_reinject += 1,
        }
        let bit = 1u64 << rec.path;
        match decision {
            Decision::Wait { until } => {
                self.waiting |= bit;
                if rec.used(out) > 0 {
                    return self.sent(rec, out);
                }
                PollTransmit::Wait { until }
            }
            Decision::Send {
                end,
                max_bytes,
                duplicate,
                exact,
            } => {
                let d = SendNew {
                    end,
                    max_bytes,
                    duplicate,
                    exact,
                };
                self.send_new(rec, out, d, budget, &snaps[rec.path])
            }
            Decision::Reinject {
                end,
                max_bytes,
                max_age,
                sooner_only,
            } => {
                let req = Request {
                    path: rec.path,
                    end,
                    max_age,
                    sooner_only,
                    used: rec.used(out),
                    max: rec.max,
                    limit: (rec.used(out) + max_bytes.min(budget)).min(rec.window.max(rec.used(out))),
                };
                self.send_copies(rec, out, req)
            }
        }
    }

    /// Sends never-sent frames as a `Send` decision says.
    fn send_new(&mut self, rec: Rec, out: &mut Vec<u8>, d: SendNew, budget: usize, p: &PathSnapshot) -> PollTransmit {
        // An exact limit (a path's window room) covers the whole record on the wire, the
        // control frames already in it and the record's own overhead included (bytes
        // beyond a path's window wait a round trip in its socket), and a frame larger than
        // what is left of it is cut to fit. A limit the record's room already keeps is no
        // window: whole frames then.
        // Queue control's limit is exact too: a frame larger than the room left under it
        // is cut, or one 16 KB frame would sit ~65 ms in a 2 Mbit/s path's queue.
        let window = d.exact && d.max_bytes < budget;
        let exact = window || rec.bulk_exact;
        let limit = if window {
            (rec.start + d.max_bytes).saturating_sub(RECORD_OVERHEAD)
        } else {
            out.len() + d.max_bytes.min(budget)
        };
        if d.end == End::Tail {
            self.send.promote(u64::MAX);
        }
        // Always make progress: at least one frame goes out if it fits the record.
        let mut first = true;
        let before = out.len();
        loop {
            if d.end == End::Head && self.send.unsent_end_for(d.end, rec.path).is_none() {
                self.send.promote_for(rec.path, d.end);
            }
            let Some(mut seq) = self.send.unsent_end_for(d.end, rec.path) else {
                break;
            };
            let room = limit.saturating_sub(out.len());
            if exact && self.send.get(seq).expect("unsent").frame.encoded_len() > room {
                seq = self.send.split_unsent(seq, d.end, room);
            }
            let len = self.send.get(seq).expect("unsent").frame.encoded_len();
            // Beyond the limit only a decision's first frame, and under a scheduler's
            // limit only into an otherwise empty record: a record of control frames goes
            // alone, and the next decision sees their bytes.
            let over = out.len() + len > limit && (!first || (exact && rec.used(out) > 0));
            if !rec.takes(rec.used(out), len) || over {
                break;
            }
            first = false;
            self.send.take_unsent_seq(seq);
            let allowed = self.send.get(seq).map_or(crate::send::ALL_PATHS, |o| o.allowed);
            self.put(rec, seq, out, Put::New);
            if d.duplicate {
                for other in self.paths.iter_mut() {
                    if other.snap.id != rec.path && other.carries() && allowed & (1u64 << other.snap.id) != 0 {
                        other.dup.push_back(seq);
                    }
                }
            }
        }
        tracing::debug!(
            path = rec.path,
            end = ?d.end,
            max_bytes = d.max_bytes,
            budget,
            sent = out.len() - before,
            cwnd = p.send_cwnd(),
            inflight = p.in_flight,
            notsent = p.notsent,
            "send"
        );
        self.waiting &= !(1u64 << rec.path);
        // Paths told to wait (for this one, say) must look again now.
        if d.duplicate || self.waiting != 0 {
            self.waiting = 0;
            self.wake();
        }
        self.sent(rec, out)
    }

    /// Sends copies of frames other paths carry, as a `Reinject` decision says.
    fn send_copies(&mut self, rec: Rec, out: &mut Vec<u8>, req: Request) -> PollTransmit {
        let picked = reinject::pick(&self.send, &self.paths, req, rec.now, self.clock_us(rec.now));
        let bit = 1u64 << rec.path;
        if picked.seqs.is_empty() {
            self.waiting |= bit;
            if rec.used(out) > 0 {
                return self.sent(rec, out);
            }
            return PollTransmit::Wait { until: picked.next_due };
        }
        for seq in picked.seqs {
            self.put(rec, seq, out, Put::Resent);
            self.counters.resent_scheduler += 1;
        }
        self.waiting &= !bit;
        self.sent(rec, out)
    }
}
