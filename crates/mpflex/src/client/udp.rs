//! SOCKS5 UDP ASSOCIATE (RFC 1928 §7): a relay socket per association, one datagram flow
//! per destination the application sends to.
//!
//! The association lives as long as its TCP control connection (§7: "A UDP association
//! terminates when the TCP connection that the UDP ASSOCIATE request arrived on
//! terminates"); its flows are closed with it. Datagrams are taken only from the
//! control connection's client address (and port, once the client named it or sent its
//! first datagram), so another host cannot inject into the association. Each dropped
//! datagram (fragmented, malformed, oversized, foreign, to a refused destination) is
//! counted in the session's `udp` counters and logged at debug level.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;

use anyhow::{Context, Result};
use bytes::Bytes;
use mpflex_engine::FlowId;
use mpflex_wire::{FlowCloseCode, TargetAddr, MAX_DATAGRAM};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::mpsc;
use tracing::debug;

use crate::driver::{FlowMsg, SessionHandle, FLOW_BACKLOG};
use crate::socks::{self, UdpError};

/// Runs one association: `hint` is the address the client said it sends from.
pub async fn associate(h: SessionHandle, mut ctrl: TcpStream, hint: TargetAddr) -> Result<()> {
    let local = ctrl.local_addr()?;
    let peer = ctrl.peer_addr()?;
    // The relay listens where the client reached us, so the address in the reply is one
    // it can send to.
    let sock = match UdpSocket::bind(SocketAddr::new(local.ip(), 0)).await {
        Ok(s) => s,
        Err(e) => {
            let _ = socks::reply_failure(&mut ctrl, socks::REP_GENERAL_FAILURE).await;
            return Err(e).context("cannot bind the UDP relay");
        }
    };
    if let Err(e) = crate::listen::deep_receive_buffer(&sock) {
        debug!("UDP relay receive buffer: {e}");
    }
    socks::reply_bound(&mut ctrl, socks::REP_SUCCEEDED, sock.local_addr()?).await?;
    let mut client: Option<SocketAddr> = match hint {
        TargetAddr::Ip(a) if a.port() != 0 && !a.ip().is_unspecified() => Some(a),
        TargetAddr::Ip(a) if a.port() != 0 => Some(SocketAddr::new(peer.ip(), a.port())),
        _ => None,
    };
    debug!(relay = %sock.local_addr()?, %peer, "UDP association");
    let (tx, mut rx) = mpsc::channel::<(FlowId, FlowMsg)>(FLOW_BACKLOG);
    let mut flows: HashMap<TargetAddr, FlowId> = HashMap::new();
    let mut targets: HashMap<FlowId, TargetAddr> = HashMap::new();
    let mut refused: HashSet<TargetAddr> = HashSet::new();
    let mut buf = vec![0u8; 65_536];
    let mut ctrl_buf = [0u8; 64];
    loop {
        tokio::select! {
            r = ctrl.read(&mut ctrl_buf) => match r {
                // The client may send nothing more on the control connection; its end,
                // or an error, ends the association.
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            },
            r = sock.recv_from(&mut buf) => {
                let Ok((n, from)) = r else { continue };
                if from.ip() != peer.ip() || client.is_some_and(|c| c != from) {
                    h.count_udp(|u| u.dropped_foreign += 1);
                    debug!(%from, "datagram from outside the association dropped");
                    continue;
                }
                client.get_or_insert(from);
                let (dst, data) = match socks::parse_udp(&buf[..n]) {
                    Ok(x) => x,
                    Err(e @ UdpError::Fragmented(_)) => {
                        h.count_udp(|u| u.dropped_frag += 1);
                        debug!("SOCKS5 datagram dropped: {e}");
                        continue;
                    }
                    Err(e @ UdpError::Malformed(_)) => {
                        h.count_udp(|u| u.dropped_malformed += 1);
                        debug!("SOCKS5 datagram dropped: {e}");
                        continue;
                    }
                };
                if data.len() > MAX_DATAGRAM {
                    h.count_udp(|u| u.dropped_oversize += 1);
                    debug!(len = data.len(), "datagram larger than a UDP payload dropped");
                    continue;
                }
                if refused.contains(&dst) {
                    h.count_udp(|u| u.dropped_refused += 1);
                    continue;
                }
                let data = Bytes::copy_from_slice(data);
                let flow = match flows.get(&dst) {
                    Some(&f) => f,
                    None => {
                        let Some(f) = h.open_flow(dst.clone(), tx.clone()) else { continue };
                        debug!(flow = f, %dst, "datagram flow opened");
                        flows.insert(dst.clone(), f);
                        targets.insert(f, dst.clone());
                        f
                    }
                };
                if !h.send_datagram(flow, data) {
                    // Closed by the server meanwhile; its close message says why.
                    flows.remove(&dst);
                    targets.remove(&flow);
                }
            }
            Some((flow, msg)) = rx.recv() => match msg {
                FlowMsg::Datagram(d) => {
                    let (Some(to), Some(from)) = (client, targets.get(&flow)) else { continue };
                    if let Err(e) = sock.send_to(&socks::encode_udp(from, &d), to).await {
                        debug!(%to, "datagram to the application not sent: {e}");
                    }
                }
                FlowMsg::Closed(code) => {
                    if let Some(dst) = targets.remove(&flow) {
                        flows.remove(&dst);
                        if code == FlowCloseCode::Refused {
                            forget_some(&mut refused);
                            refused.insert(dst);
                        }
                    }
                }
            },
            _ = h.closed.cancelled() => break,
        }
    }
    for flow in targets.into_keys() {
        h.close_flow(flow, FlowCloseCode::Normal);
    }
    Ok(())
}

/// Destinations refused remembered at most: a flood to ever new denied destinations
/// must not grow the set for ever; forgotten ones are refused again by the server.
const REFUSED_MEMORY: usize = 1024;

fn forget_some<T>(set: &mut HashSet<T>) {
    if set.len() >= REFUSED_MEMORY {
        set.clear();
    }
}

/// Transparent UDP (`TPROXY`): one flow per (application, original destination) pair;
/// answers go back from the original destination's address, so the application sees
/// the peer it sent to. Flows end when the server closes them (its idle timeout).
pub async fn transparent(h: SessionHandle, sock: UdpSocket) -> Result<()> {
    let (tx, mut rx) = mpsc::channel::<(FlowId, FlowMsg)>(FLOW_BACKLOG);
    let mut flows: HashMap<(SocketAddr, SocketAddr), FlowId> = HashMap::new();
    let mut ends: HashMap<FlowId, (SocketAddr, SocketAddr)> = HashMap::new();
    let mut refused: HashSet<SocketAddr> = HashSet::new();
    // One socket per original destination answers every application that sent to it.
    let mut repliers: HashMap<SocketAddr, UdpSocket> = HashMap::new();
    let mut buf = vec![0u8; 65_536];
    loop {
        tokio::select! {
            r = crate::tproxy::recv(&sock, &mut buf) => {
                let (n, app, dst) = match r {
                    Ok(x) => x,
                    Err(e) => {
                        h.count_udp(|u| u.dropped_malformed += 1);
                        debug!("transparent datagram dropped: {e}");
                        continue;
                    }
                };
                let app = crate::tproxy::canonical(app);
                if n > MAX_DATAGRAM || n > buf.len() {
                    h.count_udp(|u| u.dropped_oversize += 1);
                    debug!(n, "datagram larger than a UDP payload dropped");
                    continue;
                }
                if refused.contains(&dst) {
                    h.count_udp(|u| u.dropped_refused += 1);
                    continue;
                }
                let data = Bytes::copy_from_slice(&buf[..n]);
                let flow = match flows.get(&(app, dst)) {
                    Some(&f) => f,
                    None => {
                        let Some(f) = h.open_flow(TargetAddr::Ip(dst), tx.clone()) else { continue };
                        debug!(flow = f, %app, %dst, "transparent datagram flow opened");
                        flows.insert((app, dst), f);
                        ends.insert(f, (app, dst));
                        f
                    }
                };
                if !h.send_datagram(flow, data) {
                    flows.remove(&(app, dst));
                    ends.remove(&flow);
                }
            }
            Some((flow, msg)) = rx.recv() => match msg {
                FlowMsg::Datagram(d) => {
                    let Some(&(app, dst)) = ends.get(&flow) else { continue };
                    let replier = match repliers.entry(dst) {
                        std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                        std::collections::hash_map::Entry::Vacant(v) => match crate::tproxy::reply_socket(dst) {
                            Ok(s) => v.insert(s),
                            Err(e) => {
                                debug!(%dst, "cannot answer from {dst}: {e}");
                                continue;
                            }
                        },
                    };
                    if let Err(e) = replier.send_to(&d, app).await {
                        debug!(%app, "datagram to the application not sent: {e}");
                    }
                }
                FlowMsg::Closed(code) => {
                    if let Some((app, dst)) = ends.remove(&flow) {
                        flows.remove(&(app, dst));
                        if code == FlowCloseCode::Refused {
                            forget_some(&mut refused);
                            refused.insert(dst);
                        }
                        if !ends.values().any(|&(_, d)| d == dst) {
                            repliers.remove(&dst);
                        }
                    }
                }
            },
            _ = h.closed.cancelled() => return Ok(()),
        }
    }
}
