//! The TUN's TCP/IP stack: smoltcp over a queue of packets, fed by one task that reads
//! the device, and the connections' halves ([`super::conn`]) that read and write its
//! sockets.
//!
//! smoltcp is driven directly so that a connection gets a socket only for its own SYN:
//! the stack answers for any destination (AnyIP), but each socket listens on exactly one
//! (address, port) and is created just before the SYN that asked for it is handed in.
//! A packet for a connection the stack has no socket for gets an RST (RFC 9293 §3.10.7.1).
//!
//! A SYN is held, unanswered, until the server reports the stream's destination
//! connected (its first `Window`, wire protocol 10): only then does the connection get
//! its socket and the SYN its SYN-ACK. A destination the server refuses or cannot reach
//! gets the held SYN handed in with no socket for it, so the application sees an RST
//! instead of a SYN-ACK: "connection refused", as from the destination itself. With
//! `hosts` matchers in `[[rules]]` the SYN is answered at once instead: the server name
//! they match is in the connection's first bytes, which come only after the handshake.
//!
//! Holding costs the connection one round trip over the paths, which a browser pays once
//! per wave of connections to a host (the page's, then its objects'). So a destination
//! the server connected within the last [`REACHED_FOR`] has its SYNs answered at once,
//! as SOCKS5's reply is: the stream is opened as the application's first bytes arrive,
//! and should the server fail to connect it after all, the application's connection is
//! closed (not refused). Only a held SYN's success renews a destination, so one that has
//! gone away is held again, and refused, at most [`REACHED_FOR`] after it last answered.
//! A destination never reached, or refused, is always held: it gets its RST, never a
//! connection that hangs.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use mpflex_wire::TargetAddr;
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{Device, DeviceCapabilities, Medium, RxToken, TxToken};
use smoltcp::socket::tcp::{self, State};
use smoltcp::time::Instant as SmolInstant;
use smoltcp::wire::{HardwareAddress, IpListenEndpoint};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::conn::{Conn, ConnRead, ConnWrite};
use super::packet::{classify, Kind};
use super::udp::Flows;
use super::TunCounters;
use crate::driver::SessionHandle;

/// The sizes a connection's receive buffer (the window the application's kernel sees)
/// and send buffer may have, each, largest first: a socket gets the largest that keeps
/// all sockets' buffers within [`BUFFER_BUDGET`], the smallest once that is spent.
/// smoltcp's buffers are fixed rings allocated with the socket, so the budget is what
/// bounds the stack's memory with thousands of connections open, and a burst of them
/// cannot starve the host.
const BUFFER_SIZES: [usize; 4] = [256 * 1024, 64 * 1024, 16 * 1024, 4 * 1024];
/// All sockets' buffers together (beyond it each new socket gets the smallest size).
const BUFFER_BUDGET: usize = 64 << 20;
/// Packet buffers kept for reuse between rounds.
const SPARE_PACKETS: usize = 256;
/// Most connections the stack holds at once; a SYN beyond is dropped and counted.
pub const MAX_CONNS: usize = 16_384;
/// A connection whose peer acknowledges nothing it was sent for this long is aborted
/// (smoltcp's socket timeout): a SYN flood's half-open sockets go after it.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(60);
/// Packets read from the device in one round before the stack answers.
pub(super) const READ_BATCH: usize = 64;
/// How long a destination the server connected for a held SYN has its SYNs answered at
/// once.
const REACHED_FOR: Duration = Duration::from_secs(30);
/// Destinations remembered as reached, at most (beyond, the oldest are forgotten).
const MAX_REACHED: usize = 4096;

/// Packets between the device task and smoltcp.
#[derive(Default)]
struct Queues {
    rx: VecDeque<Vec<u8>>,
    tx: Vec<Vec<u8>>,
    /// Buffers of packets written to the device, for smoltcp's next ones: a 64 KiB
    /// segment then costs no allocation and no zeroing.
    spare: Vec<Vec<u8>>,
    mtu: usize,
}

struct Rx(Vec<u8>);
struct Tx<'a> {
    tx: &'a mut Vec<Vec<u8>>,
    spare: &'a mut Vec<Vec<u8>>,
}

impl RxToken for Rx {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl TxToken for Tx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut b = self.spare.pop().unwrap_or_default();
        // smoltcp writes every byte of the packet; only a buffer's growth is zeroed.
        b.resize(len, 0);
        let r = f(&mut b);
        self.tx.push(b);
        r
    }
}

impl Device for Queues {
    type RxToken<'a> = Rx;
    type TxToken<'a> = Tx<'a>;

    fn receive(&mut self, _: SmolInstant) -> Option<(Rx, Tx<'_>)> {
        let p = self.rx.pop_front()?;
        let tx = Tx {
            tx: &mut self.tx,
            spare: &mut self.spare,
        };
        Some((Rx(p), tx))
    }

    fn transmit(&mut self, _: SmolInstant) -> Option<Tx<'_>> {
        Some(Tx {
            tx: &mut self.tx,
            spare: &mut self.spare,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut c = DeviceCapabilities::default();
        c.medium = Medium::Ip;
        c.max_transmission_unit = self.mtu;
        c
    }
}

struct Inner {
    iface: Interface,
    sockets: SocketSet<'static>,
    dev: Queues,
    /// The open connections by (application, destination).
    conns: HashMap<(SocketAddr, SocketAddr), SocketHandle>,
    /// Sockets whose halves are gone, removed once closed.
    released: Vec<SocketHandle>,
    /// SYNs held while the server dials their destination, by (application, destination).
    held: HashMap<(SocketAddr, SocketAddr), Vec<u8>>,
    /// Destinations the server connected, and when it last did ([`REACHED_FOR`]).
    reached: HashMap<SocketAddr, std::time::Instant>,
    /// A refusal has been logged (the first only: a flood must not flood the log).
    refusal_logged: bool,
    /// Bytes of all sockets' buffers ([`BUFFER_BUDGET`]).
    buffered: usize,
    counters: TunCounters,
}

pub struct Stack {
    inner: Mutex<Inner>,
    /// A half queued data, read some, or closed: the stack has something to send.
    pub(super) poked: Notify,
}

impl Stack {
    pub fn new(mtu: usize) -> Stack {
        let mut dev = Queues {
            mtu,
            ..Default::default()
        };
        let mut iface = Interface::new(Config::new(HardwareAddress::Ip), &mut dev, SmolInstant::now());
        // Every destination is ours (AnyIP), and every answer leaves by the device: a
        // default route per family whose gateway no packet names.
        iface.set_any_ip(true);
        let _ = iface
            .routes_mut()
            .add_default_ipv4_route(std::net::Ipv4Addr::new(192, 0, 0, 8));
        let _ = iface.routes_mut().add_default_ipv6_route(std::net::Ipv6Addr::LOCALHOST);
        Stack {
            inner: Mutex::new(Inner {
                iface,
                sockets: SocketSet::new(Vec::new()),
                dev,
                conns: HashMap::new(),
                released: Vec::new(),
                held: HashMap::new(),
                reached: HashMap::new(),
                refusal_logged: false,
                buffered: 0,
                counters: TunCounters::default(),
            }),
            poked: Notify::new(),
        }
    }

    pub(super) fn with_socket<R>(&self, h: SocketHandle, f: impl FnOnce(&mut tcp::Socket<'static>) -> R) -> R {
        let mut g = self.inner.lock().expect("tun stack lock");
        f(g.sockets.get_mut::<tcp::Socket>(h))
    }

    pub(super) fn poke(&self) {
        self.poked.notify_one();
    }

    /// The last half of a connection is gone: the socket goes once closed (an open one
    /// is closed now, with a FIN after what it holds).
    pub(super) fn release(&self, h: SocketHandle) {
        let mut g = self.inner.lock().expect("tun stack lock");
        let s = g.sockets.get_mut::<tcp::Socket>(h);
        if s.is_open() {
            s.close();
        }
        g.released.push(h);
        drop(g);
        self.poke();
    }

    pub(super) fn count(&self, f: impl FnOnce(&mut TunCounters)) {
        f(&mut self.inner.lock().expect("tun stack lock").counters)
    }

    pub fn counters(&self) -> TunCounters {
        self.inner.lock().expect("tun stack lock").counters.clone()
    }

    /// The held SYN of (app, dst) gets its socket and its SYN-ACK: the server connected
    /// the destination. `None` if no SYN is held for it (any more).
    pub(super) fn accept_held(&self, app: SocketAddr, dst: SocketAddr) -> Option<SocketHandle> {
        let h = {
            let mut guard = self.inner.lock().expect("tun stack lock");
            let g = &mut *guard;
            let syn = g.held.remove(&(app, dst))?;
            g.reached_now(dst);
            let h = g.add_socket(app, dst)?;
            g.dev.rx.push_back(syn);
            g.iface.poll(SmolInstant::now(), &mut g.dev, &mut g.sockets);
            h
        };
        self.poke();
        Some(h)
    }

    /// The held SYN of (app, dst) is answered with an RST (no socket takes it): the
    /// server refused or could not reach the destination.
    pub(super) fn refuse_held(&self, app: SocketAddr, dst: SocketAddr) {
        let mut g = self.inner.lock().expect("tun stack lock");
        g.reached.remove(&dst);
        let Some(syn) = g.held.remove(&(app, dst)) else { return };
        g.counters.tcp_refused += 1;
        if !std::mem::replace(&mut g.refusal_logged, true) {
            warn!(%app, %dst, "TUN: a connection's destination was refused or unreachable from the server; its SYN got an RST. More like it are counted (tcp_refused) without a log line");
        }
        g.dev.rx.push_back(syn);
        drop(g);
        self.poke();
    }

    /// Hands TCP packets to smoltcp, a socket first for each new connection's SYN (or,
    /// with `hold`, the SYN held for [`Stack::accept_held`]), then lets it answer; what
    /// it sends goes to `out` (whose buffers, written by now, are kept for reuse first).
    /// Returns the connections accepted now, those whose SYN is
    /// held now, and when smoltcp next wants to run.
    pub(super) fn step(&self, tcp: &mut Vec<Vec<u8>>, out: &mut Vec<Vec<u8>>, hold: bool) -> Stepped {
        let mut g = self.inner.lock().expect("tun stack lock");
        let g = &mut *g;
        let room = SPARE_PACKETS.saturating_sub(g.dev.spare.len());
        g.dev.spare.extend(out.drain(..).take(room));
        out.clear();
        let mut accepted = Vec::new();
        let mut held = Vec::new();
        for p in tcp.drain(..) {
            let Kind::Tcp { app, dst, syn } = classify(&p) else {
                continue;
            };
            if g.held.contains_key(&(app, dst)) {
                // A retransmitted SYN (or anything else) while the server dials.
                continue;
            }
            if syn && !g.conns.contains_key(&(app, dst)) {
                if g.conns.len() + g.held.len() >= MAX_CONNS {
                    g.counters.dropped_conn_limit += 1;
                    debug!(%app, %dst, "TUN: connection dropped, the stack holds as many as it may");
                    continue;
                }
                if hold && !g.reached_lately(dst) {
                    g.held.insert((app, dst), p);
                    held.push((app, dst));
                    continue;
                }
                let Some(h) = g.add_socket(app, dst) else { continue };
                accepted.push((h, dst));
                // The SYN meets its own socket before any other packet is handed in.
                g.dev.rx.push_back(p);
                g.iface.poll(SmolInstant::now(), &mut g.dev, &mut g.sockets);
                continue;
            }
            g.dev.rx.push_back(p);
        }
        let now = SmolInstant::now();
        g.iface.poll(now, &mut g.dev, &mut g.sockets);
        // Sockets whose halves are gone leave once closed.
        let mut i = 0;
        while i < g.released.len() {
            let h = g.released[i];
            let s = g.sockets.get::<tcp::Socket>(h);
            if matches!(s.state(), State::Closed | State::TimeWait) {
                g.buffered -= s.recv_capacity() + s.send_capacity();
                g.released.swap_remove(i);
                g.sockets.remove(h);
                g.conns.retain(|_, v| *v != h);
            } else {
                i += 1;
            }
        }
        g.counters.packets_out += g.dev.tx.len() as u64;
        out.append(&mut g.dev.tx);
        let delay = g
            .iface
            .poll_delay(now, &g.sockets)
            .map_or(Duration::from_secs(1), Duration::from);
        Stepped { accepted, held, delay }
    }
}

/// What one [`Stack::step`] found.
pub(super) struct Stepped {
    pub accepted: Vec<(SocketHandle, SocketAddr)>,
    pub held: Vec<(SocketAddr, SocketAddr)>,
    pub delay: Duration,
}

impl Inner {
    /// The server connected `dst` just now.
    fn reached_now(&mut self, dst: SocketAddr) {
        let now = std::time::Instant::now();
        if self.reached.len() >= MAX_REACHED && !self.reached.contains_key(&dst) {
            self.reached.retain(|_, t| now.duration_since(*t) < REACHED_FOR);
            if self.reached.len() >= MAX_REACHED {
                let oldest = self.reached.iter().min_by_key(|(_, t)| **t).map(|(d, _)| *d);
                if let Some(d) = oldest {
                    self.reached.remove(&d);
                }
            }
        }
        self.reached.insert(dst, now);
    }

    /// Whether the server connected `dst` within [`REACHED_FOR`].
    fn reached_lately(&self, dst: SocketAddr) -> bool {
        self.reached.get(&dst).is_some_and(|t| t.elapsed() < REACHED_FOR)
    }

    /// A socket listening on exactly `dst` for the connection (app, dst), counted.
    fn add_socket(&mut self, app: SocketAddr, dst: SocketAddr) -> Option<SocketHandle> {
        let size = buffer_size(self.buffered);
        let mut s = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0; size]),
            tcp::SocketBuffer::new(vec![0; size]),
        );
        s.set_nagle_enabled(false);
        s.set_timeout(Some(SOCKET_TIMEOUT.into()));
        s.listen(IpListenEndpoint {
            addr: Some(dst.ip().into()),
            port: dst.port(),
        })
        .ok()?;
        let h = self.sockets.add(s);
        self.buffered += 2 * size;
        self.conns.insert((app, dst), h);
        self.counters.tcp_accepted += 1;
        Some(h)
    }
}

/// The size of each of a new socket's two buffers when all sockets' take `buffered`
/// bytes ([`BUFFER_SIZES`]).
fn buffer_size(buffered: usize) -> usize {
    let smallest = BUFFER_SIZES[BUFFER_SIZES.len() - 1];
    BUFFER_SIZES
        .into_iter()
        .find(|s| buffered + 2 * s <= BUFFER_BUDGET)
        .unwrap_or(smallest)
}

/// Reads the device, runs the stack and the datagram flows, until `stop` or the session
/// ends. `dns`: the resolver DNS queries go to instead of their destination.
pub async fn run(
    h: SessionHandle,
    dev: tun_rs::AsyncDevice,
    stack: Arc<Stack>,
    dns: Option<SocketAddr>,
    stop: CancellationToken,
) -> Result<()> {
    let mtu = stack.inner.lock().expect("tun stack lock").dev.mtu;
    let (ftx, mut frx) = tokio::sync::mpsc::channel(crate::driver::FLOW_BACKLOG);
    let mut flows = Flows::new(h.clone(), ftx, mtu, dns);
    let mut buf = vec![0u8; 65_536];
    let mut tcp = Vec::new();
    let mut out = Vec::new();
    let mut logged = Logged::default();
    loop {
        for _ in 0..READ_BATCH {
            let n = match dev.try_recv(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e).context("reading the TUN device"),
            };
            let p = &buf[..n];
            match classify(p) {
                Kind::Tcp { .. } => tcp.push(p.to_vec()),
                Kind::Udp { app, dst, payload } => {
                    stack.count(|c| c.udp_in += 1);
                    flows.datagram(app, dst, payload);
                }
                Kind::Echo { app, dst, id, msg } => {
                    stack.count(|c| c.echo_in += 1);
                    flows.echo(app, dst, id, msg);
                }
                k => stack.count(|c| logged.drop(c, &k)),
            }
            stack.count(|c| c.packets_in += 1);
        }
        // A SYN waits for the server's dial unless a rule needs the connection's first
        // bytes (a TLS server name) to choose its paths.
        let hold = !h.policy.read().expect("policy lock").uses_hosts();
        let Stepped { accepted, held, delay } = stack.step(&mut tcp, &mut out, hold);
        for p in &out {
            if let Err(e) = dev.send(p).await {
                debug!("TUN: packet not written: {e}");
            }
        }
        for (socket, dst) in accepted {
            let conn = Arc::new(Conn::new(stack.clone(), socket));
            let h = h.clone();
            tokio::spawn(async move {
                let (rd, wr) = (ConnRead(conn.clone()), ConnWrite(conn));
                let addr = TargetAddr::Ip(dst);
                if let Err(e) = crate::client::carry(h, rd, wr, addr, "tun", None, Default::default()).await {
                    debug!(%dst, "TUN connection ended: {e:#}");
                }
            });
        }
        for (app, dst) in held {
            tokio::spawn(open_held(h.clone(), stack.clone(), app, dst));
        }
        for p in flows.take_out() {
            if let Err(e) = dev.send(&p).await {
                debug!("TUN: packet not written: {e}");
            }
        }
        stack.count(|c| c.dropped_oversize = flows.oversize);
        tokio::select! {
            r = dev.readable() => r.context("waiting on the TUN device")?,
            _ = stack.poked.notified() => {}
            _ = tokio::time::sleep(delay) => {}
            Some((flow, msg)) = frx.recv() => {
                flows.on_session(flow, msg);
                // Take what else waits too: each turn of this loop steps the whole stack,
                // so one answer a turn lets a UDP stream fill the session's backlog for
                // this ingress (`FLOW_BACKLOG`), which then drops its datagrams.
                for _ in 1..READ_BATCH {
                    let Ok((flow, msg)) = frx.try_recv() else { break };
                    flows.on_session(flow, msg);
                }
            }
            _ = stop.cancelled() => return Ok(()),
            _ = h.closed.cancelled() => return Ok(()),
        }
    }
}

/// How long a SYN is held for the server's answer before it gets an RST (the server's
/// own dial gives up after 10 s).
const HOLD_TIMEOUT: Duration = Duration::from_secs(30);

/// Opens the stream of a held SYN (without first bytes: the application sends none
/// before the handshake), waits for the server to connect its destination, then answers
/// the SYN — a SYN-ACK and the stream carried, or an RST.
async fn open_held(h: SessionHandle, stack: Arc<Stack>, app: SocketAddr, dst: SocketAddr) {
    let facts = crate::policy::Facts {
        listener: Some("tun"),
        ..Default::default()
    };
    let (id, signals, rest) = h.open_stream_with(TargetAddr::Ip(dst), bytes::Bytes::new(), facts);
    let connected = tokio::time::timeout(HOLD_TIMEOUT, async {
        loop {
            // A reset removes the stream's signals and wakes its writer.
            let (ok, gone) = h.with(|sh| (sh.sess.stream_peer_connected(id), !sh.streams.contains_key(&id)));
            if ok || gone {
                return ok;
            }
            signals.writable.notified().await;
        }
    })
    .await
    .unwrap_or(false);
    let socket = if connected { stack.accept_held(app, dst) } else { None };
    let Some(socket) = socket else {
        stack.refuse_held(app, dst);
        // Reset here too if the peer reset it first: what it received before its reset
        // has no application to read it.
        h.with(|sh| {
            sh.streams.remove(&id);
            sh.sess.stream_reset(id, mpflex_wire::ResetCode::App);
        });
        return;
    };
    let conn = Arc::new(Conn::new(stack, socket));
    crate::driver::run_halves(h, id, ConnRead(conn.clone()), ConnWrite(conn), signals, rest).await;
}

/// Logs each kind of dropped packet once (each malformation, each protocol), then only
/// counts it: a flood must not flood the log.
#[derive(Default)]
struct Logged {
    malformed: Vec<&'static str>,
    fragment: bool,
    /// A bit per IP protocol number.
    protocols: [u64; 4],
}

impl Logged {
    fn drop(&mut self, c: &mut TunCounters, k: &Kind<'_>) {
        let (seen, what) = match *k {
            Kind::Malformed(why) => {
                c.dropped_malformed += 1;
                let seen = self.malformed.contains(&why);
                if !seen {
                    self.malformed.push(why);
                }
                (seen, format!("malformed packet ({why})"))
            }
            Kind::Fragment => {
                c.dropped_fragment += 1;
                (std::mem::replace(&mut self.fragment, true), "IPv4 fragment".to_string())
            }
            Kind::Other(p) => {
                c.dropped_protocol += 1;
                let (word, bit) = (usize::from(p / 64), 1u64 << (p % 64));
                let seen = self.protocols[word] & bit != 0;
                self.protocols[word] |= bit;
                (
                    seen,
                    format!("packet of IP protocol {p}, which the TUN ingress does not carry"),
                )
            }
            _ => return,
        };
        if !seen {
            warn!("TUN: dropped a {what}; more like it are dropped and counted without a log line");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_get_smaller_buffers_as_the_budget_is_spent() {
        assert_eq!(buffer_size(0), 256 * 1024);
        assert_eq!(buffer_size(BUFFER_BUDGET - 2 * 256 * 1024), 256 * 1024);
        assert_eq!(buffer_size(BUFFER_BUDGET - 2 * 64 * 1024), 64 * 1024);
        assert_eq!(buffer_size(BUFFER_BUDGET - 1), 4 * 1024);
        assert_eq!(
            buffer_size(10 * BUFFER_BUDGET),
            4 * 1024,
            "beyond the budget: the smallest"
        );
    }

    /// A destination counts as reached once the server connected it for a held SYN, not
    /// after a refusal, and the memory of destinations is bounded: the oldest goes first.
    #[test]
    fn reached_destinations_are_remembered_within_a_bound() {
        let stack = Stack::new(1500);
        let mut g = stack.inner.lock().unwrap();
        let a: SocketAddr = "192.0.2.1:443".parse().unwrap();
        assert!(!g.reached_lately(a));
        g.reached_now(a);
        assert!(g.reached_lately(a));
        g.reached.insert(a, std::time::Instant::now() - REACHED_FOR);
        assert!(!g.reached_lately(a), "expired");
        for port in 0..MAX_REACHED as u16 + 10 {
            g.reached_now(SocketAddr::from(([198, 51, 100, 1], port)));
        }
        assert_eq!(g.reached.len(), MAX_REACHED);
        assert!(g.reached_lately(SocketAddr::from(([198, 51, 100, 1], MAX_REACHED as u16 + 9))));
        drop(g);
        // A refusal forgets it.
        stack.inner.lock().unwrap().reached_now(a);
        stack.refuse_held("10.0.0.2:5000".parse().unwrap(), a);
        assert!(!stack.inner.lock().unwrap().reached_lately(a));
    }
}
