//! UDP through the TUN: one datagram flow per (application, destination) pair, as the
//! transparent UDP ingress does (docs/udp.md); answers go back into the device from the
//! destination the application sent to.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;

use bytes::Bytes;
use mpflex_engine::FlowId;
use mpflex_wire::{flow_close, TargetAddr, MAX_DATAGRAM};
use tokio::sync::mpsc;
use tracing::debug;

use super::packet;
use crate::driver::{FlowMsg, SessionHandle};

/// Destinations refused remembered at most (see `client::udp`).
const REFUSED_MEMORY: usize = 1024;

pub struct Flows {
    h: SessionHandle,
    tx: mpsc::Sender<(FlowId, FlowMsg)>,
    mtu: usize,
    by_pair: HashMap<(SocketAddr, SocketAddr), FlowId>,
    ends: HashMap<FlowId, (SocketAddr, SocketAddr)>,
    refused: HashSet<SocketAddr>,
    out: Vec<Vec<u8>>,
    /// Answers larger than the device's MTU, dropped.
    pub oversize: u64,
}

impl Flows {
    pub fn new(h: SessionHandle, tx: mpsc::Sender<(FlowId, FlowMsg)>, mtu: usize) -> Flows {
        Flows {
            h,
            tx,
            mtu,
            by_pair: HashMap::new(),
            ends: HashMap::new(),
            refused: HashSet::new(),
            out: Vec::new(),
            oversize: 0,
        }
    }

    /// A datagram the application sent to `dst`.
    pub fn from_app(&mut self, app: SocketAddr, dst: SocketAddr, data: &[u8]) {
        if data.len() > MAX_DATAGRAM {
            self.h.count_udp(|u| u.dropped_oversize += 1);
            return;
        }
        if self.refused.contains(&dst) {
            self.h.count_udp(|u| u.dropped_refused += 1);
            return;
        }
        let flow = match self.by_pair.get(&(app, dst)) {
            Some(&f) => f,
            None => {
                let Some(f) = self.h.open_flow(TargetAddr::Ip(dst), self.tx.clone()) else {
                    return;
                };
                debug!(flow = f, %app, %dst, "TUN datagram flow opened");
                self.by_pair.insert((app, dst), f);
                self.ends.insert(f, (app, dst));
                f
            }
        };
        if !self.h.send_datagram(flow, Bytes::copy_from_slice(data)) {
            self.by_pair.remove(&(app, dst));
            self.ends.remove(&flow);
        }
    }

    /// What the session hands a flow: a datagram becomes a packet for the device.
    pub fn from_session(&mut self, flow: FlowId, msg: FlowMsg) {
        match msg {
            FlowMsg::Datagram(d) => {
                let Some(&(app, dst)) = self.ends.get(&flow) else {
                    return;
                };
                match packet::udp(dst, app, &d, self.mtu) {
                    Some(p) => self.out.push(p),
                    None => {
                        self.oversize += 1;
                        debug!(flow, len = d.len(), "TUN: answer larger than the MTU dropped");
                    }
                }
            }
            FlowMsg::Closed(code) => {
                if let Some((app, dst)) = self.ends.remove(&flow) {
                    self.by_pair.remove(&(app, dst));
                    if code == flow_close::REFUSED {
                        if self.refused.len() >= REFUSED_MEMORY {
                            self.refused.clear();
                        }
                        self.refused.insert(dst);
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
            self.h.close_flow(*flow, flow_close::NORMAL);
        }
    }
}
