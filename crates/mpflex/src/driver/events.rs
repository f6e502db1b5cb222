//! The engine's events turned into what the driver's tasks act on: wake-ups of path
//! writers and stream tasks, streams and datagram flows handed to the server's accept
//! loops, paths dropped or probed, and the session closed.

use std::sync::Arc;
use std::time::Duration;

use mpflex_engine::{Event, FlowId, SchedulerKind, StreamId};
use mpflex_wire::{CloseCode, FlowCloseCode, ResetCode, TargetAddr};
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use super::{stream, FlowMsg, FlowOpened, FlowSink, Opened, SessionHandle, Shared, StreamSignals, FLOW_BACKLOG};

/// How long the writers get to send a `Close` before a session this side gave up is
/// torn down.
const CLOSE_GRACE: Duration = Duration::from_millis(100);

impl SessionHandle {
    /// Takes every event the engine queued and acts on it, then wakes the timer task if
    /// the engine's next deadline is sooner than the one it sleeps towards.
    pub(super) fn dispatch(&self, sh: &mut Shared) {
        let mut wake_paths = false;
        while let Some(ev) = sh.sess.poll_event() {
            match ev {
                Event::WakePaths => wake_paths = true,
                Event::WakePath(p) => {
                    if let Some(slot) = sh.paths.get(p) {
                        slot.wake.notify_one();
                    }
                }
                Event::StreamReadable(id) => {
                    if let Some(s) = sh.streams.get(&id) {
                        s.readable.notify_one();
                    }
                }
                Event::StreamWritable(id) => {
                    if let Some(s) = sh.streams.get(&id) {
                        s.writable.notify_one();
                    }
                }
                Event::StreamReset { stream, code } => stream_reset(sh, stream, code),
                Event::StreamOpened {
                    stream,
                    addr,
                    scheduler,
                } => self.stream_opened(sh, stream, addr, scheduler),
                Event::ProbePath(p) => {
                    debug!(path = %sh.paths[p].name, "path silent while holding data; probing it");
                    sh.paths[p].probe.notify_one();
                }
                Event::PathTimedOut(p) => {
                    warn!(path = %sh.paths[p].name, "path silent for too long; dropping it");
                    sh.paths[p].kill.cancel();
                }
                Event::PathGone(p) => {
                    info!(path = %sh.paths[p].name, "the client's link of this path is gone; dropping it");
                    sh.paths[p].kill.cancel();
                }
                Event::GaveUp { code } => self.gave_up(code),
                Event::Closed { code } => self.peer_closed(sh, code),
                Event::FlowOpened { flow, addr } => self.flow_opened(sh, flow, addr),
                Event::FlowClosed { flow, code } => {
                    if let Some(sink) = sh.flows.remove(&flow) {
                        stream::say_flow_closed(flow, code, &sink.target);
                        let _ = sink.tx.try_send((flow, FlowMsg::Closed(code)));
                    }
                }
                Event::Datagram { flow, data } => {
                    let full = match sh.flows.get(&flow) {
                        Some(sink) => sink.tx.try_send((flow, FlowMsg::Datagram(data))).is_err(),
                        None => false,
                    };
                    if full {
                        sh.udp.dropped_backlog += 1;
                        debug!(flow, "datagram dropped: the flow's socket is behind");
                    }
                }
            }
        }
        for (p, slot) in sh.paths.iter().enumerate() {
            let held = sh.sess.path_held_back(p);
            slot.held.send_if_modified(|h| std::mem::replace(h, held) != held);
        }
        if wake_paths {
            for p in &sh.paths {
                p.wake.notify_one();
            }
        }
        let next = sh.sess.poll_timeout();
        if next.is_some() && (sh.timer_deadline.is_none() || next < sh.timer_deadline) {
            self.timer.notify_one();
        }
    }

    /// (server) The client opened a stream: its class from the destination, the
    /// scheduler it asks for if this server allows it, and the stream handed to the
    /// accept loop (refused when there is none).
    fn stream_opened(&self, sh: &mut Shared, stream: StreamId, addr: TargetAddr, scheduler: Option<SchedulerKind>) {
        if let Some(class) = self.classes.class_of(&addr) {
            sh.sess.set_stream_class(stream, Some(class));
        }
        // The client's choice of scheduler governs the stream's downloads too, within
        // the schedulers this server allows.
        let mut signals = StreamSignals::to(addr.clone());
        if let Some(kind) = scheduler {
            if self.allowed_schedulers.as_ref().is_none_or(|a| a.contains(&kind)) {
                sh.sess.set_stream_scheduler(stream, Some(kind));
            } else {
                let name = kind.name();
                debug!(
                    stream,
                    name, "the client asked for a scheduler allowed_schedulers leaves out"
                );
                signals.peer_scheduler = Some(kind);
            }
        }
        let signals = Arc::new(signals);
        sh.streams.insert(stream, signals.clone());
        let sent = self
            .opens
            .as_ref()
            .is_some_and(|tx| tx.send(Opened { stream, addr, signals }).is_ok());
        if !sent {
            sh.sess.stream_reset(stream, ResetCode::Refused);
        }
    }

    /// This side gave the session up: it is torn down once the writers had a moment to
    /// send the `Close`.
    fn gave_up(&self, code: CloseCode) {
        warn!(
            code = code.name(),
            "closing the session: the peer acknowledged nothing for tuning.ack_timeout_ms"
        );
        let closed = self.closed.clone();
        tokio::spawn(async move {
            tokio::time::sleep(CLOSE_GRACE).await;
            closed.cancel();
        });
    }

    /// The peer closed the session. (client) A server going away drained hands the
    /// session to another server: every path is dropped and the session moved.
    fn peer_closed(&self, sh: &mut Shared, code: CloseCode) {
        match &self.on_server_gone {
            Some(gone) if code == CloseCode::Draining => {
                info!("the server is going away (drained); moving the session to another server");
                for slot in &sh.paths {
                    slot.kill.cancel();
                }
                for p in 0..sh.sess.num_paths() {
                    sh.sess.path_down(p);
                }
                gone();
            }
            _ => {
                info!(%code, "peer closed the session");
                self.closed.cancel();
            }
        }
    }

    /// (server) The client opened a datagram flow: handed to the accept loop with a
    /// bounded channel for its datagrams, or closed as unreachable when there is none.
    fn flow_opened(&self, sh: &mut Shared, flow: FlowId, addr: TargetAddr) {
        let (tx, rx) = mpsc::channel(FLOW_BACKLOG);
        let sent = self.flow_opens.as_ref().is_some_and(|o| {
            o.send(FlowOpened {
                flow,
                addr: addr.clone(),
                rx,
            })
            .is_ok()
        });
        if sent {
            sh.flows.insert(flow, FlowSink { tx, target: addr });
        } else {
            sh.sess.close_flow(flow, FlowCloseCode::Unreachable);
        }
    }
}

/// The peer reset a stream: its tasks are woken to see it gone.
fn stream_reset(sh: &mut Shared, stream: StreamId, code: ResetCode) {
    debug!(stream, %code, "stream reset by peer");
    if let Some(s) = sh.streams.remove(&stream) {
        sh.streams_refused += u64::from(code == ResetCode::Refused);
        stream::say_refused(stream, code, s.target.as_ref());
        s.readable.notify_one();
        s.writable.notify_one();
    }
}
