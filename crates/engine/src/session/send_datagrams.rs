//! What a path sends of the datagram flows: the flow closes it owes, then the
//! datagrams placed on it (the engine's side of the flows is in [`crate::datagram`]).

use std::time::Instant;

use mpflex_wire::{DatagramRun, Frame, MAX_RECORD};

use super::record::Rec;
use super::Session;
use crate::datagram::DatagramClass;
use crate::paths::arrival_secs;

impl Session {
    /// Flow closes owed to this path, then the datagrams placed on it, oldest first
    /// (ahead of stream bytes: issue 24 puts datagrams before bulk, and a realtime one
    /// is worth nothing late). False if the record filled up.
    pub(super) fn write_datagrams(&mut self, rec: Rec, out: &mut Vec<u8>) -> bool {
        let bit = 1u64 << rec.path;
        let mut i = 0;
        while i < self.dgrams.closes.len() {
            let c = &self.dgrams.closes[i];
            if c.on & bit != 0 {
                let f = Frame::FlowClose {
                    flow: c.flow,
                    code: c.code,
                };
                if !rec.fits(out, &f) {
                    return false;
                }
                f.encode(out);
                self.dgrams.closes[i].on &= !bit;
            }
            i += 1;
        }
        self.dgrams.closes.retain(|c| c.on != 0);
        if self.dgrams.queue.is_empty() {
            return true;
        }
        self.dgrams.expire(rec.now);
        self.place_datagrams(rec.now);
        let client = self.cfg.role == crate::Role::Client;
        let none_carries = !self.paths.iter().any(|p| p.carries());
        let slack = self.placement_slack();
        let mut full = false;
        // Bulk datagrams go in their order: once this path leaves one to another, it
        // takes none after it.
        let mut bulk_declined = false;
        let mut run = None;
        for i in 0..self.dgrams.queue.len() {
            let q = &self.dgrams.queue[i];
            let bulk = q.class == DatagramClass::Bulk && q.sent_on == 0;
            if bulk {
                // Late binding, as for stream bytes: a bulk datagram goes to the path
                // asking now unless another delivers it sooner (its one-way delay, its
                // queue and its unsent bytes at its rate) by more than the slack. Each path
                // takes what it drains, so the flow splits by rate, and the receiver puts
                // the order back (what arrives early waits for the gap before it).
                let len = q.data.len() + mpflex_wire::DATAGRAM_HEADER + mpflex_wire::HEADER_LEN;
                let here = !bulk_declined
                    && (none_carries || self.paths.first_within(len, rec.path, rec.used(out), rec.now, slack));
                if !here {
                    bulk_declined = true;
                    continue;
                }
            } else if q.want & bit == 0 {
                continue;
            }
            let flow = q.flow;
            if client && self.dgrams.needs_announce(flow, rec.path) {
                let Some(addr) = self.dgrams.addr(flow).cloned() else {
                    continue;
                };
                let open = Frame::FlowOpen { flow, addr };
                if !rec.fits(out, &open) {
                    full = true;
                    break;
                }
                open.encode(out);
                self.dgrams.announced(flow, rec.path);
            }
            let q = &self.dgrams.queue[i];
            let seq = if bulk { self.dgrams.bulk_seq(flow) } else { q.seq };
            let copied = q.class == DatagramClass::Realtime;
            // Room is checked for the datagram in a frame of its own; one that continues
            // the run before it takes less (its length and payload: `Datagrams`). The
            // largest datagram fills a record of its own, whatever the record's room for
            // stream frames.
            let len = mpflex_wire::HEADER_LEN + mpflex_wire::DATAGRAM_HEADER + q.data.len();
            let fits = rec.takes(rec.used(out), len) || (rec.used(out) == 0 && len <= MAX_RECORD);
            if !fits {
                full = true;
                break;
            }
            run = Some(DatagramRun::push(run, out, flow, seq, copied, &q.data));
            if bulk {
                self.dgrams.bulk_sent(flow);
            }
            let q = &mut self.dgrams.queue[i];
            q.seq = seq;
            let copy = q.sent_on != 0;
            q.sent_on |= bit;
            q.want &= !bit;
            q.first_sent.get_or_insert(rec.now);
            let payload = q.data.len() as u64;
            let c = &mut self.dgrams.counters;
            c.sent += 1;
            c.sent_bytes += payload;
            c.copies += copy as u64;
            self.paths.entry(rec.path).counters.datagrams_sent += 1;
        }
        self.dgrams.prune();
        !full
    }

    /// Chooses the paths of the realtime datagrams not placed yet, and places again those
    /// whose paths stopped carrying (before any of them sent it): the path that delivers
    /// it first now and the next one (a copy). Only paths that carry are chosen, or any
    /// that is up while none carries. Bulk datagrams are not placed ahead: the path that
    /// asks for bytes takes them ([`Session::write_datagrams`]).
    fn place_datagrams(&mut self, now: Instant) {
        let mut usable: Vec<usize> = self.paths.iter().filter(|p| p.carries()).map(|p| p.snap.id).collect();
        if usable.is_empty() {
            usable = self.paths.iter().filter(|p| p.is_up()).map(|p| p.snap.id).collect();
        }
        let mask = usable.iter().fold(0u64, |m, &p| m | (1 << p));
        let mut pending = vec![0usize; self.paths.len()];
        for q in &mut self.dgrams.queue {
            q.want &= mask;
            for &p in &usable {
                if q.want & (1 << p) != 0 {
                    pending[p] += q.data.len();
                }
            }
        }
        let eta = |paths: &crate::paths::Paths, p: usize, len: usize| {
            let e = paths.get(p).expect("a usable path");
            arrival_secs(&e.snap, e.queue.get(now), len)
        };
        for q in &mut self.dgrams.queue {
            if q.want != 0 || q.sent_on != 0 {
                continue;
            }
            let len = q.data.len() + mpflex_wire::DATAGRAM_HEADER + mpflex_wire::HEADER_LEN;
            match q.class {
                DatagramClass::Realtime => {
                    let mut ranked: Vec<(f64, usize)> = usable.iter().map(|&p| (eta(&self.paths, p, len), p)).collect();
                    ranked.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                    for &(_, p) in ranked.iter().take(2) {
                        q.want |= 1 << p;
                    }
                }
                DatagramClass::Bulk => {}
            }
        }
    }
}
