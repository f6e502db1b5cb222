//! A session driven frame by frame, as a peer would: a server with one path, the frames
//! a client sends it, and what it sends back.

use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;
use mpflex_engine::{EngineConfig, Role, Session};
use mpflex_sched::MinRtt;
use mpflex_wire::{Frame, TargetAddr};

/// A server session (shipped defaults, MinRTT) with path 0 up.
pub fn server() -> (Session, Instant) {
    let now = Instant::now();
    let mut s = Session::new(EngineConfig::new(Role::Server), Box::new(MinRtt), now);
    s.path_up(0, now);
    (s, now)
}

/// A client's `Open` of `stream` at `seq` towards 10.0.0.1:80, its first bytes `data`.
pub fn open(seq: u64, stream: u32, data: &[u8]) -> Frame {
    Frame::Open {
        seq,
        stream,
        ts: 0,
        paths: u64::MAX,
        scheduler: 0,
        energy: 0,
        addr: TargetAddr::Ip(SocketAddr::from(([10, 0, 0, 1], 80))),
        data: Bytes::copy_from_slice(data),
    }
}

/// Every frame the session sends on `path` now.
pub fn transmitted(s: &mut Session, path: usize, now: Instant) -> Vec<Frame> {
    let mut frames = Vec::new();
    loop {
        let mut out = Vec::new();
        match s.poll_transmit(path, now, &mut out, 60 * 1024) {
            mpflex_engine::PollTransmit::Sent(_) => {}
            mpflex_engine::PollTransmit::Wait { .. } => return frames,
        }
        frames.extend(mpflex_wire::decode_all(Bytes::from(out)).expect("valid frames"));
    }
}
