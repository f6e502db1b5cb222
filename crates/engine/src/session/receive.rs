//! What a path delivered: control frames to their sub-machine, sequenced frames through
//! the reorder buffer to their streams.

use std::time::Instant;

use bytes::Bytes;
use mpflex_sched::SchedulerKind;
use mpflex_wire::Frame;

use super::{Event, ProtocolError, Session};
use crate::class::TrafficClass;
use crate::config::Role;
use crate::flow::Stream;
use crate::reinject;
use crate::StreamId;

/// Most `Pong`s one path's control queue holds unsent.
const MAX_QUEUED_PONGS: usize = 4;

impl Session {
    /// A frame arrived on `path`.
    pub fn handle_frame(&mut self, path: usize, frame: Frame, now: Instant) -> Result<(), ProtocolError> {
        self.last_now = self.last_now.max(now);
        if self.paths.heard(path, now, frame.encoded_len()) {
            self.wake();
        }
        self.meter_bytes(path, crate::energy::Dir::Down, frame.encoded_len(), now);
        match frame {
            Frame::Hello { .. } => return Err(ProtocolError::Unexpected("Hello")),
            Frame::HelloAck { .. } => return Err(ProtocolError::Unexpected("HelloAck")),
            Frame::Ping { id } => {
                // A peer that pings faster than it reads must not grow the control queue:
                // beyond a few unsent answers, a ping goes unanswered (its sender measures
                // nothing from a pong that waited behind others anyway).
                let ctrl = &mut self.paths.entry(path).ctrl;
                if ctrl.iter().filter(|f| matches!(f, Frame::Pong { .. })).count() < MAX_QUEUED_PONGS {
                    ctrl.push_back(Frame::Pong { id });
                    self.wake_path(path);
                }
            }
            Frame::Pong { .. } => {}
            Frame::Close { code } => self.events.push_back(Event::Closed { code }),
            Frame::Ack { cum } => {
                let paths = &mut self.paths;
                self.send.on_ack(cum, now, |mask| paths.released(mask, now))?;
                // Acknowledged bytes leave the send buffer: streams it held back go on.
                self.unblock_drained();
            }
            Frame::Owd {
                path: on,
                seq,
                ts,
                delay,
            } => {
                // The frame's age on the session clock (µs, wrapping at 71 minutes).
                let age = std::time::Duration::from_micros(self.ts(now).wrapping_sub(ts) as u64);
                if self.paths.on_report(on as usize, ts, delay, age, now) {
                    self.wake();
                }
                self.send.on_report(seq, now);
            }
            Frame::Stall { cum } => self.on_stall(cum, now),
            // The client's word on the tier of the path it arrived on.
            Frame::Tier { tier } if self.cfg.role == Role::Server => {
                self.paths.set_tier(path, tier, now);
                self.wake();
            }
            Frame::Tier { .. } => return Err(ProtocolError::Unexpected("Tier")),
            // The client's data cap of the path it arrived on, as an absolute count of
            // what this side may have handed the path.
            Frame::Allowance { limit } if self.cfg.role == Role::Server => {
                let sent = self.paths.get(path).map_or(0, |p| p.counters.bytes_sent);
                self.paths.set_allowance(path, Some(limit.saturating_sub(sent)), now);
                self.wake();
            }
            Frame::Allowance { .. } => return Err(ProtocolError::Unexpected("Allowance")),
            Frame::PathGone { path, joins } if self.cfg.role == Role::Server => {
                self.on_path_gone(path as usize, joins);
            }
            Frame::PathGone { .. } => return Err(ProtocolError::Unexpected("PathGone")),
            Frame::Window { stream, max } => self.on_window(stream, max),
            Frame::MaxData { max } => {
                if self.flow.raise(max) {
                    for id in std::mem::take(&mut self.blocked) {
                        self.writable(id);
                    }
                }
            }
            f @ (Frame::Open { .. } | Frame::Data { .. } | Frame::Fin { .. } | Frame::Reset { .. }) => {
                self.on_sequenced(path, f, now)?
            }
            Frame::Datagram {
                flow,
                seq,
                copied,
                data,
            } => self.on_datagram(path, flow, seq, copied, data, now),
            Frame::Datagrams {
                flow,
                seq,
                copied,
                data,
            } => {
                for (i, d) in data.into_iter().enumerate() {
                    self.on_datagram(path, flow, seq.wrapping_add(i as u16), copied, d, now);
                }
            }
            Frame::FlowOpen { .. } if self.cfg.role == Role::Client => return Err(ProtocolError::UnexpectedFlowOpen),
            Frame::FlowOpen { flow, addr } => self.on_flow_open(flow, addr, now),
            Frame::FlowClose { flow, code } => {
                if self.dgrams.remove(flow).is_some() {
                    self.settle_load();
                    if code == mpflex_wire::FlowCloseCode::Refused {
                        self.dgrams.counters.flows_refused += 1;
                    }
                    self.events.push_back(Event::FlowClosed { flow, code });
                }
            }
        }
        Ok(())
    }
    /// Datagram `seq` of `flow` arrived on `path`: a realtime one (`copied`) goes to the
    /// application at once unless its copy came first, a bulk one through the flow's
    /// reorder buffer.
    fn on_datagram(&mut self, path: usize, flow: u32, seq: u16, copied: bool, data: Bytes, now: Instant) {
        if self.dgrams.on_receive(flow, seq, copied, data.len()) {
            if copied {
                // Realtime: as soon as it is here; a late one is worth nothing.
                // Its answers are realtime too: queue control protects them.
                self.realtime_seen = Some(now);
                self.events.push_back(Event::Datagram { flow, data });
            } else {
                let mut ready = Vec::new();
                let up = self.up_mask();
                let a = crate::datagram::reorder::Arrived {
                    path,
                    seq,
                    data,
                    at: now,
                };
                self.dgrams.reorder(flow, a, up, &mut ready);
                self.events
                    .extend(ready.into_iter().map(|(flow, data)| Event::Datagram { flow, data }));
            }
        }
    }

    /// (server) The peer opened a datagram flow (again, if another path told us first).
    /// Beyond `max_flows` it is refused rather than the session cut off: a flood of flows
    /// from one application must not take the others' streams down with it.
    fn on_flow_open(&mut self, flow: crate::FlowId, addr: mpflex_wire::TargetAddr, now: Instant) {
        if self.dgrams.contains(flow) {
            return;
        }
        if self.dgrams.len() >= self.cfg.max_flows {
            self.dgrams.counters.flows_refused += 1;
            tracing::info!(flow, max = self.cfg.max_flows, "datagram flow refused: too many flows");
            let on = self
                .paths
                .iter()
                .filter(|p| p.is_up())
                .fold(0u64, |m, p| m | (1 << p.snap.id));
            self.dgrams.closes.push(crate::datagram::PendingClose {
                flow,
                code: mpflex_wire::FlowCloseCode::TooMany,
                on,
            });
            self.wake();
            return;
        }
        self.start_carrying(now);
        if self.dgrams.accept(flow, addr.clone()) {
            self.events.push_back(Event::FlowOpened { flow, addr });
        }
    }

    fn on_window(&mut self, stream: StreamId, max: u64) {
        let Some(s) = self.streams.get_mut(&stream) else { return };
        if !s.connected {
            // The server sends a stream's first Window once its destination is connected
            // (wire protocol 10): whoever holds the application's connection until then
            // waits on the stream's writability.
            s.connected = true;
            self.events.push_back(Event::StreamWritable(stream));
        }
        if max > s.tx_max {
            s.tx_max = max;
            if self.blocked.remove(&stream) {
                self.writable(stream);
            }
        }
    }

    /// The peer's reorder buffer is filling behind the gap at `cum`: send that frame again
    /// on the fastest path that does not hold it (once per gap).
    fn on_stall(&mut self, cum: u64, now: Instant) {
        if self.stall_served == Some(cum) {
            return;
        }
        let Some(t) = reinject::stall_target(&self.send, &self.paths, cum) else {
            return;
        };
        self.stall_served = Some(cum);
        let p = self.paths.entry(t);
        p.dup.push_front(cum);
        p.counters.stall_reinjections += 1;
        self.wake();
        tracing::debug!(seq = cum, path = t, ?now, "peer stalled on a gap; re-sending it");
    }

    fn on_sequenced(&mut self, path: usize, frame: Frame, now: Instant) -> Result<(), ProtocolError> {
        let seq = frame.seq().expect("sequenced");
        let payload = frame.payload_len() as u64;
        self.note_payload(path, crate::energy::Dir::Down, payload, now);
        if let Some(ts) = frame.ts() {
            // Arrival report: a one-way-delay sample for the sender, and a selective ack.
            self.feedback.report(path, seq, ts, self.ts(now));
        }
        if self.recv.is_duplicate(seq) {
            self.paths.entry(path).counters.duplicate_received += payload;
            // The sender may be retransmitting because our ACK got lost; repeat it.
            self.feedback.ack_now();
            self.wake();
            return Ok(());
        }
        // The sender respects our session window, so the reorder buffer stays below it;
        // a peer that does not is cut off instead of growing our memory.
        if !self
            .recv
            .fits(seq, payload, self.flow.receive_room(), self.cfg.session_window)
        {
            return Err(ProtocolError::SessionWindow);
        }
        // The path split counts bytes as they arrive, not as they are delivered in order;
        // a stream whose Open has not arrived yet is counted from its Open on.
        let carrier = match &frame {
            Frame::Open { stream, .. } | Frame::Data { stream, .. } if payload > 0 => Some(*stream),
            _ => None,
        };
        if let Some(s) = carrier.and_then(|id| self.streams.get_mut(&id)) {
            s.carried_on(path, payload);
        }
        // Streams that took bytes may now take frames waiting further on.
        let mut touched: Vec<StreamId> = Vec::new();
        match frame {
            // A new stream opens at once: its frames follow its Open in the sequence, so
            // none of them can have been mistaken for a closed stream's before it.
            Frame::Open { stream, .. } if !self.streams.contains_key(&stream) => {
                self.recv.mark_delivered(&frame);
                self.deliver(frame)?;
                if let Some(s) = self.streams.get_mut(&stream) {
                    s.carried_on(path, payload);
                }
                touched.push(stream);
            }
            frame => {
                let known = match &frame {
                    Frame::Data { stream, .. } | Frame::Fin { stream, .. } => {
                        touched.push(*stream);
                        self.streams.contains_key(stream)
                    }
                    _ => false,
                };
                self.recv.insert(frame, known);
            }
        }
        self.deliver_in_order(path, &mut touched)?;
        touched.sort_unstable();
        touched.dedup();
        for stream in touched {
            self.deliver_early(stream)?;
        }
        // Smart reinjection: frames stuck behind a gap fill the receive buffer.
        if self.recv.has_gap() {
            let buffered = self.recv.payload() + self.flow.unread();
            if self.feedback.maybe_stall(self.recv.rcv_next(), buffered, &self.cfg) {
                self.wake();
            }
        }
        if self.feedback.on_data(payload, now, &self.cfg) {
            self.wake();
        }
        Ok(())
    }

    /// Delivers the frames that are next in session order.
    fn deliver_in_order(&mut self, path: usize, touched: &mut Vec<StreamId>) -> Result<(), ProtocolError> {
        let mut overlapped = 0;
        while let Some(f) = self.recv.pop_in_order(&mut overlapped) {
            if let Frame::Open { stream, .. } | Frame::Data { stream, .. } = &f {
                if touched.last() != Some(stream) {
                    touched.push(*stream);
                }
            }
            self.deliver(f)?;
        }
        self.paths.entry(path).counters.duplicate_received += overlapped;
        Ok(())
    }

    /// Hands `stream` the frames waiting in the reorder buffer that continue it, ahead of
    /// the session's order.
    fn deliver_early(&mut self, stream: StreamId) -> Result<(), ProtocolError> {
        while let Some(next) = self.streams.get(&stream).map(|s| s.rx_offset) {
            let Some(f) = self.recv.take_for_stream(stream, next) else {
                break;
            };
            self.deliver(f)?;
        }
        Ok(())
    }

    fn deliver(&mut self, frame: Frame) -> Result<(), ProtocolError> {
        match frame {
            Frame::Open {
                stream,
                addr,
                data,
                paths,
                scheduler,
                energy,
                ..
            } => {
                if self.cfg.role == Role::Client {
                    return Err(ProtocolError::UnexpectedOpen);
                }
                if self.streams.contains_key(&stream) {
                    return Err(ProtocolError::DuplicateStream(stream));
                }
                if self.streams.len() >= self.cfg.max_streams {
                    return Err(ProtocolError::TooManyStreams);
                }
                let scheduler = match scheduler {
                    0 => None,
                    n => Some(SchedulerKind::from_wire(n).ok_or(ProtocolError::UnknownScheduler(n))?),
                };
                self.start_carrying(self.last_now);
                self.streams.insert(stream, Stream::new(self.cfg.stream_window));
                self.send.set_class(stream, TrafficClass::Interactive);
                // The client's rule restricts the stream's downloads to its paths too.
                self.send.set_allowed(stream, paths);
                if let Some(s) = self.streams.get_mut(&stream) {
                    s.energy_aware = match energy {
                        1 => Some(true),
                        2 => Some(false),
                        _ => None,
                    };
                }
                self.events.push_back(Event::StreamOpened {
                    stream,
                    addr,
                    scheduler,
                });
                self.deliver_data(stream, data)?;
            }
            Frame::Data {
                stream, offset, data, ..
            } => {
                if self.streams.get(&stream).is_some_and(|s| s.rx_offset != offset) {
                    return Err(ProtocolError::StreamOffset(stream));
                }
                self.deliver_data(stream, data)?
            }
            Frame::Fin { stream, offset, .. } => {
                if let Some(s) = self.streams.get_mut(&stream) {
                    if s.rx_offset != offset {
                        return Err(ProtocolError::StreamOffset(stream));
                    }
                    s.rx_fin = true;
                    self.windows_needed.remove(&stream);
                    self.events.push_back(Event::StreamReadable(stream));
                }
            }
            Frame::Reset { stream, code, .. } => {
                // What arrived before the reset still reaches the application, then the
                // reset, as over the kernel's TCP: Linux hands a reader the bytes that came
                // before an RST, then the error. A relay that dropped them would turn "a
                // reply, then an abort" (a server that answers and closes with the request
                // unread) into an abort alone.
                let unread = self.streams.get_mut(&stream).map(Stream::take_unread);
                if self.forget_stream(stream) {
                    if let Some(tail) = unread.filter(|t| !t.is_empty()) {
                        self.reset_tails.insert(stream, tail);
                    }
                    self.events.push_back(Event::StreamReset { stream, code });
                }
            }
            _ => unreachable!("only sequenced frames are delivered"),
        }
        Ok(())
    }

    fn deliver_data(&mut self, stream: StreamId, data: Bytes) -> Result<(), ProtocolError> {
        let n = data.len() as u64;
        self.flow.on_received(n)?;
        let Some(s) = self.streams.get_mut(&stream) else {
            // Data for a stream reset locally: count it as consumed so the session window
            // does not shrink for good.
            self.flow.on_consumed(n);
            return Ok(());
        };
        if n > 0 {
            // The peer spoke: a request/response turn if this side has nothing queued.
            let drained = !self.send.has_staged(stream) && !self.blocked.contains(&stream);
            s.class.on_peer_data(drained, self.last_now);
            let class = s.class.class();
            self.send.set_class(stream, class);
            if class.is_urgent() {
                self.interactive_seen = Some(self.last_now);
            }
        }
        if s.receive(data, stream)? {
            self.events.push_back(Event::StreamReadable(stream));
        }
        Ok(())
    }
}
