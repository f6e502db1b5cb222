//! A test harness: a client and a server engine joined by simulated paths, with a
//! virtual clock (the shape of quinn-proto's `Pair`).
//!
//! Each direction of a path is a simulated kernel TCP socket over a link: the sending
//! session's own path writer ([`Session::drive_writer`]) reads the socket's `TCP_INFO` (unsent bytes, congestion window, in-flight segments, RTT,
//! delivery rate) and hands it records; the socket puts them on the link as its window
//! allows; the link serialises them at its rate and delivers them after its one-way
//! delay, and the acknowledgement comes back after the same delay. So late binding,
//! scheduling, reinjection and path failure run exactly as in the real data plane, but
//! deterministically, in milliseconds, without sockets or root.

mod path_spec;
mod socket;

use std::collections::HashMap;
use std::ops::Range;
use std::time::{Duration, Instant};

use bytes::Bytes;
use mpflex_sched::Scheduler;
use mpflex_wire::{decode_all, record};

pub use path_spec::PathSpec;
pub use socket::{SimSocket, MSS};

use crate::writer::{PathWriter, WriterStep};
use crate::{EngineConfig, Event, FlowId, RecvResult, Role, Session, StreamId};

/// One direction of a path: the sender's socket (its writer is the sending session's).
#[derive(Debug)]
struct Direction {
    sock: SimSocket,
}

/// A client and a server session over simulated paths.
pub struct Pair {
    pub start: Instant,
    pub now: Instant,
    pub client: Session,
    pub server: Session,
    specs: Vec<PathSpec>,
    /// `dirs[path][0]`: client to server; `[1]`: server to client.
    dirs: Vec<[Direction; 2]>,
    /// Bytes each side's applications received, per stream, and whether the stream ended.
    pub client_rx: HashMap<StreamId, Vec<u8>>,
    pub server_rx: HashMap<StreamId, Vec<u8>>,
    pub client_fin: HashMap<StreamId, bool>,
    pub server_fin: HashMap<StreamId, bool>,
    /// The client's [`Event::ProbePath`] requests, oldest first, with their time (the
    /// driver would dial a probe connection; a test decides whether it gets through).
    pub probes: Vec<(usize, Instant)>,
    /// Datagrams each side's applications received: (flow, payload, arrival time).
    pub client_datagrams: Vec<(FlowId, Bytes, Instant)>,
    pub server_datagrams: Vec<(FlowId, Bytes, Instant)>,
    /// Flows the server was asked to open, and closes each side heard.
    pub server_flows: HashMap<FlowId, mpflex_wire::TargetAddr>,
    pub flow_closes: Vec<(bool, FlowId, mpflex_wire::FlowCloseCode)>,
}

fn direction(spec: PathSpec, now: Instant) -> Direction {
    Direction {
        sock: SimSocket::new(spec, now),
    }
}

impl Pair {
    /// Two engines running `sched`, over paths given as (one-way delay ms, bytes per ms),
    /// with the shipped configuration ([`EngineConfig::new`]).
    pub fn new(sched: &str, paths: &[(u64, usize)]) -> Pair {
        Self::with(sched, paths, |_| {})
    }

    /// The same, with the engines' configuration adjusted by `tune` (a test that changes
    /// the shipped configuration says why).
    pub fn with(sched: &str, paths: &[(u64, usize)], tune: impl Fn(&mut EngineConfig)) -> Pair {
        let specs: Vec<PathSpec> = paths.iter().map(|&p| p.into()).collect();
        Self::custom(|| mpflex_sched::by_name(sched).expect("a scheduler name"), &specs, tune)
    }

    /// Engines running the schedulers `make` builds, over `specs`.
    pub fn custom(make: impl Fn() -> Box<dyn Scheduler>, specs: &[PathSpec], tune: impl Fn(&mut EngineConfig)) -> Pair {
        let now = Instant::now();
        let cfg = |role| {
            let mut c = EngineConfig::new(role);
            tune(&mut c);
            c
        };
        let mut client = Session::new(cfg(Role::Client), make(), now);
        let mut server = Session::new(cfg(Role::Server), make(), now);
        let mut dirs = Vec::new();
        for (i, &spec) in specs.iter().enumerate() {
            dirs.push([direction(spec, now), direction(spec, now)]);
            client.path_up(i, now);
            server.path_up(i, now);
        }
        Pair {
            start: now,
            now,
            client,
            server,
            specs: specs.to_vec(),
            dirs,
            client_rx: HashMap::new(),
            server_rx: HashMap::new(),
            client_fin: HashMap::new(),
            server_fin: HashMap::new(),
            probes: Vec::new(),
            client_datagrams: Vec::new(),
            server_datagrams: Vec::new(),
            server_flows: HashMap::new(),
            flow_closes: Vec::new(),
        }
    }

    /// The path dies and both ends are told (a connection reset).
    pub fn kill(&mut self, path: usize) {
        for d in &mut self.dirs[path] {
            d.sock = SimSocket::new(self.specs[path], self.now);
            d.sock.dark = true;
        }
        self.client.path_down(path);
        self.server.path_down(path);
    }

    /// The client's link of the path goes (carrier lost, address gone): nothing crosses
    /// it any more, and only the client knows (its link watcher tells it).
    pub fn link_lost(&mut self, path: usize) {
        for d in &mut self.dirs[path] {
            d.sock.dark = true;
        }
        self.client.path_down(path);
    }

    /// The path stops delivering anything, but neither side is told (a link that went
    /// dark without a reset).
    pub fn blackhole(&mut self, path: usize) {
        for d in &mut self.dirs[path] {
            d.sock.dark = true;
        }
    }

    /// A dark path works again; its connections retransmit what it dropped `after` from
    /// now (their backed-off retransmission timers).
    pub fn heal(&mut self, path: usize, after: Duration) {
        let now = self.now;
        for d in &mut self.dirs[path] {
            d.sock.heal(now, after);
        }
    }

    /// A probe connection of a suspect path got through: it replaces the old one on both
    /// sides (what the driver does when a probe joins).
    pub fn reconnect(&mut self, path: usize) {
        self.revive(path);
    }

    /// A new connection of the path comes up.
    pub fn revive(&mut self, path: usize) {
        for d in &mut self.dirs[path] {
            *d = direction(self.specs[path], self.now);
        }
        self.client.path_up(path, self.now);
        self.server.path_up(path, self.now);
    }

    /// The path's link changes (delay, rate, loss) for the segments sent from now on, in
    /// both directions; the connections keep their windows.
    pub fn set_spec(&mut self, path: usize, spec: PathSpec) {
        self.specs[path] = spec;
        for d in &mut self.dirs[path] {
            d.sock.set_spec(spec);
        }
    }

    /// The path's connections hold their windows at four segments (`on`), as BBR does
    /// for about 200 ms every 10 s to measure the minimum RTT, or reopen them; from then
    /// on they report a bandwidth estimate, as BBR's do.
    pub fn probe_rtt(&mut self, path: usize, on: bool) {
        for d in &mut self.dirs[path] {
            d.sock.probing_rtt = on;
            d.sock.bbr = true;
        }
    }

    /// The path's link as it is now.
    pub fn spec(&self, path: usize) -> PathSpec {
        self.specs[path]
    }

    /// The simulated socket of `path` in the client-to-server (`upload`) or the other
    /// direction.
    pub fn socket(&self, path: usize, upload: bool) -> &SimSocket {
        &self.dirs[path][if upload { 0 } else { 1 }].sock
    }

    /// The path writer of `path` in the client-to-server (`upload`: the client's) or the
    /// other direction (the server's): queue control's limit, for tests.
    pub fn writer(&self, path: usize, upload: bool) -> &PathWriter {
        let sess = if upload { &self.client } else { &self.server };
        sess.path_writer(path).expect("the path came up")
    }

    /// The simulated socket of `path` in the client-to-server (`upload`) or the other
    /// direction, to change.
    pub fn socket_mut(&mut self, path: usize, upload: bool) -> &mut SimSocket {
        &mut self.dirs[path][if upload { 0 } else { 1 }].sock
    }

    /// Forgets the sockets' maxima (unsent bytes, queue delay), to measure from now on.
    pub fn reset_socket_maxima(&mut self) {
        for d in self.dirs.iter_mut().flatten() {
            d.sock.max_notsent = 0;
            d.sock.max_queue_delay = Duration::ZERO;
            d.sock.queue_delay_sum = Duration::ZERO;
            d.sock.queue_delay_samples = 0;
        }
    }

    /// One millisecond of virtual time; the applications read everything.
    pub fn step(&mut self) {
        self.tick();
        self.drain_apps();
    }

    /// One millisecond of virtual time; the applications read nothing.
    pub fn step_no_drain(&mut self) {
        self.tick();
        while self.server.poll_event().is_some() {}
    }

    /// One millisecond of virtual time: acknowledgements and segments arrive and the
    /// receivers handle what they complete, timers fire, then every path writer runs (as
    /// the driver's readers, timers and writers all run before the next millisecond).
    pub fn tick(&mut self) {
        self.now += Duration::from_millis(1);
        let now = self.now;
        let ms = (now - self.start).as_millis() as u64;
        for (p, dirs) in self.dirs.iter_mut().enumerate() {
            for (dir, d) in dirs.iter_mut().enumerate() {
                let rx = if dir == 0 { &mut self.server } else { &mut self.client };
                d.sock.advance(now);
                while let Some(rec) = d.sock.take_arrived() {
                    deliver(rx, p, rec, now);
                }
            }
        }
        for s in [&mut self.client, &mut self.server] {
            if s.poll_timeout().is_some_and(|t| t <= now) {
                s.handle_timeout(now);
            }
        }
        for (p, dirs) in self.dirs.iter_mut().enumerate() {
            for (dir, d) in dirs.iter_mut().enumerate() {
                let tx = if dir == 0 { &mut self.client } else { &mut self.server };
                let _span = tracing::debug_span!("writer", ms, path = p, server = dir == 1).entered();
                run_writer(tx, p, d, now);
            }
        }
    }

    /// The applications read everything that arrived.
    pub fn drain_apps(&mut self) {
        let now = self.now;
        for (sess, rx, fin, dgrams, client) in [
            (
                &mut self.client,
                &mut self.client_rx,
                &mut self.client_fin,
                &mut self.client_datagrams,
                true,
            ),
            (
                &mut self.server,
                &mut self.server_rx,
                &mut self.server_fin,
                &mut self.server_datagrams,
                false,
            ),
        ] {
            while let Some(ev) = sess.poll_event() {
                match ev {
                    Event::StreamOpened { stream, .. } => {
                        rx.entry(stream).or_default();
                    }
                    Event::ProbePath(p) if client => self.probes.push((p, now)),
                    Event::Datagram { flow, data } => dgrams.push((flow, data, now)),
                    Event::FlowOpened { flow, addr } => {
                        self.server_flows.insert(flow, addr);
                    }
                    Event::FlowClosed { flow, code } => self.flow_closes.push((client, flow, code)),
                    _ => {}
                }
            }
            for id in sess.stream_ids() {
                loop {
                    match sess.stream_recv(id, 1 << 20) {
                        RecvResult::Data(b) => rx.entry(id).or_default().extend_from_slice(&b),
                        RecvResult::Fin => {
                            fin.insert(id, true);
                        }
                        RecvResult::Blocked | RecvResult::Gone => break,
                    }
                }
            }
        }
    }

    /// (client) Opens a stream to a placeholder destination carrying `first` bytes.
    pub fn open(&mut self, first: &[u8]) -> StreamId {
        let id = self.client.open_stream(placeholder_addr());
        assert_eq!(self.client.stream_send(id, Bytes::copy_from_slice(first)), first.len());
        id
    }

    /// One request and its `size`-byte response on a new stream, the server's application
    /// writing as the session takes it (as the proxy's reader does): the time from the
    /// request to the response's last byte at the client. Panics if the response is not
    /// complete within a minute of simulated steps.
    pub fn request(&mut self, size: usize) -> std::time::Duration {
        let id = self.open(b"GET");
        let t0 = self.now;
        let mut sent = 0usize;
        for _ in 0..60_000 {
            if self.server_rx.contains_key(&id) && sent < size {
                while sent < size {
                    let n = (self.server.send_capacity(id) as usize).min(size - sent).min(64 * 1024);
                    let took = self.server.stream_send(id, Bytes::from(vec![7u8; n]));
                    sent += took;
                    if n == 0 || took < n {
                        break;
                    }
                }
                if sent == size {
                    self.server.stream_finish(id);
                }
            }
            self.step();
            if self.client_fin.get(&id) == Some(&true) {
                break;
            }
        }
        assert_eq!(self.client_rx.get(&id).map_or(0, Vec::len), size, "response incomplete");
        self.now - t0
    }
}

/// The destination streams of the harness name (nothing connects to it).
pub fn placeholder_addr() -> mpflex_wire::TargetAddr {
    mpflex_wire::TargetAddr::Ip(std::net::SocketAddr::from(([127, 0, 0, 1], 80)))
}

fn deliver(rx: &mut Session, path: usize, rec: Vec<u8>, now: Instant) {
    // Records here are never sealed: strip the length prefix and the tag's room.
    let plain = rec[record::LEN_PREFIX..rec.len() - record::TAG_LEN].to_vec();
    for f in decode_all(Bytes::from(plain)).expect("the engine writes valid frames") {
        rx.handle_frame(path, f, now)
            .expect("no protocol error between two engines");
    }
}

/// Runs the path writer of `tx` on `path` until it waits.
fn run_writer(tx: &mut Session, path: usize, d: &mut Direction, now: Instant) {
    let mut out = Vec::new();
    let mut records: Vec<Range<usize>> = Vec::new();
    for _ in 0..1000 {
        out.clear();
        records.clear();
        let info = d.sock.info(now);
        let bandwidth = d.sock.cc_bandwidth();
        match tx.drive_writer(path, &info, bandwidth, now, &mut out, &mut records) {
            WriterStep::Write { .. } => {
                for r in &records {
                    d.sock.write(&out[r.clone()]);
                }
                d.sock.advance(now);
            }
            WriterStep::Full | WriterStep::Throttled { .. } | WriterStep::Idle { .. } | WriterStep::Closed { .. } => {
                return
            }
        }
    }
    panic!("path {path}'s writer never waited");
}

#[cfg(test)]
mod tests;
