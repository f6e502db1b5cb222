//! UDP through the TUN: one datagram flow per (application, destination) pair, as the
//! transparent UDP ingress does (docs/udp.md); answers go back into the device from the
//! destination the application sent to.
//!
//! ICMP echo rides the same flows: a flow to port 0 of an address carries echo requests
//! (the whole ICMP or ICMPv6 message) one way and the replies back; the server sends them
//! from an unprivileged ping socket (`crate::server`), one flow per (application,
//! destination, identifier).

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};

use bytes::Bytes;
use mpflex_engine::FlowId;
use mpflex_wire::{FlowCloseCode, TargetAddr, MAX_DATAGRAM};
use tokio::sync::mpsc;
use tracing::debug;

use super::packet;
use crate::driver::{FlowMsg, SessionHandle};

/// Destinations refused remembered at most (see `client::udp`).
const REFUSED_MEMORY: usize = 1024;

/// What a flow carries for whom.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    /// UDP from the application's address to the destination's.
    Udp(SocketAddr, SocketAddr),
    /// ICMP echo from the application to the destination, with the application's
    /// identifier.
    Echo(IpAddr, IpAddr, u16),
}

impl Key {
    /// The flow's destination on the wire (port 0: ICMP echo); a DNS query's is `dns`
    /// when given (`tun.dns_via = "server"`). Answers go back from the destination the
    /// application sent to, whichever the flow's.
    fn target(self, dns: Option<SocketAddr>) -> SocketAddr {
        match (self, dns) {
            (Key::Udp(_, dst), Some(resolver)) if dst.port() == DNS_PORT => resolver,
            (Key::Udp(_, dst), _) => dst,
            (Key::Echo(_, dst, _), _) => SocketAddr::new(dst, 0),
        }
    }
}

/// DNS over UDP (RFC 1035 §4.2.1).
const DNS_PORT: u16 = 53;

pub struct Flows {
    h: SessionHandle,
    tx: mpsc::Sender<(FlowId, FlowMsg)>,
    mtu: usize,
    /// Where DNS queries go instead of their destination.
    dns: Option<SocketAddr>,
    by_pair: HashMap<Key, FlowId>,
    ends: HashMap<FlowId, Key>,
    refused: HashSet<SocketAddr>,
    out: Vec<Vec<u8>>,
    /// Answers larger than the device's MTU, dropped.
    pub oversize: u64,
}

impl Flows {
    pub fn new(h: SessionHandle, tx: mpsc::Sender<(FlowId, FlowMsg)>, mtu: usize, dns: Option<SocketAddr>) -> Flows {
        Flows {
            h,
            tx,
            mtu,
            dns,
            by_pair: HashMap::new(),
            ends: HashMap::new(),
            refused: HashSet::new(),
            out: Vec::new(),
            oversize: 0,
        }
    }

    /// A datagram the application sent to `dst`.
    pub fn datagram(&mut self, app: SocketAddr, dst: SocketAddr, data: &[u8]) {
        self.send(Key::Udp(app, dst), data);
    }

    /// An echo request (the whole ICMP message) the application sent to `dst`.
    pub fn echo(&mut self, app: IpAddr, dst: IpAddr, id: u16, msg: &[u8]) {
        self.send(Key::Echo(app, dst, id), msg);
    }

    fn send(&mut self, key: Key, data: &[u8]) {
        let dst = key.target(self.dns);
        if data.len() > MAX_DATAGRAM {
            self.h.count_udp(|u| u.dropped_oversize += 1);
            return;
        }
        if self.refused.contains(&dst) {
            self.h.count_udp(|u| u.dropped_refused += 1);
            return;
        }
        let flow = match self.by_pair.get(&key) {
            Some(&f) => f,
            None => {
                let Some(f) = self.h.open_flow(TargetAddr::Ip(dst), self.tx.clone()) else {
                    return;
                };
                debug!(flow = f, %dst, "TUN datagram flow opened");
                self.by_pair.insert(key, f);
                self.ends.insert(f, key);
                f
            }
        };
        if !self.h.send_datagram(flow, Bytes::copy_from_slice(data)) {
            self.by_pair.remove(&key);
            self.ends.remove(&flow);
        }
    }

    /// What the session hands a flow: a datagram becomes a packet for the device.
    pub fn on_session(&mut self, flow: FlowId, msg: FlowMsg) {
        match msg {
            FlowMsg::Datagram(d) => {
                let Some(&key) = self.ends.get(&flow) else {
                    return;
                };
                let p = match key {
                    Key::Udp(app, dst) => packet::udp(dst, app, &d, self.mtu),
                    Key::Echo(app, dst, id) => packet::echo_reply(dst, app, id, &d, self.mtu),
                };
                match p {
                    Some(p) => self.out.push(p),
                    None => {
                        self.oversize += 1;
                        debug!(
                            flow,
                            len = d.len(),
                            "TUN: answer larger than the MTU (or no echo reply) dropped"
                        );
                    }
                }
            }
            FlowMsg::Closed(code) => {
                if let Some(key) = self.ends.remove(&flow) {
                    self.by_pair.remove(&key);
                    if code == FlowCloseCode::Refused {
                        if self.refused.len() >= REFUSED_MEMORY {
                            self.refused.clear();
                        }
                        self.refused.insert(key.target(self.dns));
                    }
                }
            }
        }
    }

    /// The packets to write into the device.
    pub fn take_out(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.out)
    }
}

impl Drop for Flows {
    fn drop(&mut self) {
        for flow in self.ends.keys() {
            self.h.close_flow(*flow, FlowCloseCode::Normal);
        }
    }
}
