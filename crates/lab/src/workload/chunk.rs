//! `chunk`: a download of each `--sizes` size, timed from the request (in `fresh` mode
//! from before the connect) to the last byte. The oracle splits it over two single-path
//! connections at a share `--share` of the first.

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};

use super::{connect, request, split, timed, ClientRun, Fields, Spec, Via};
use crate::arrivals::PayloadLog;
use crate::summary::Summary;
use crate::units::unix_us;

pub struct Chunk;

impl Spec for Chunk {
    fn name(&self) -> &'static str {
        "chunk"
    }

    fn warm_mode(&self) -> bool {
        true
    }

    fn chunks(&self) -> bool {
        true
    }

    fn client(&self, _: &ClientRun) -> Result<Fields> {
        bail!("chunk runs through chunk-client")
    }

    fn summary(&self) -> Summary {
        Summary::BySize
    }
}

/// Bytes a `warm` chunk measurement transfers on its connections first (then ~1 s idle).
pub const WARM_UP_BYTES: u64 = 1 << 20;

/// One chunk measurement, as `chunk-client` runs it.
#[derive(Debug, Clone)]
pub struct ChunkRun {
    pub server: SocketAddr,
    pub via: Via,
    pub size: u64,
    pub warm: bool,
    /// Oracle: a second server and the way to it; `share` of the chunk goes to the first.
    pub split: Option<(SocketAddr, Via)>,
    pub share: f64,
}

/// What `chunk-client` measured, printed as one JSON line.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Timed {
    /// The chunk's completion.
    pub ms: f64,
    /// `warm` mode: the warm-up's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_ms: Option<f64>,
    /// When the chunk's clock started and stopped, µs since the Unix epoch (the clock the
    /// emulator's logs use): each path's last arrival is read between them.
    pub from_us: u64,
    pub to_us: u64,
}

/// Times one chunk: the chunk's milliseconds, in `warm` mode the warm-up's, and when.
pub fn client(run: &ChunkRun) -> Result<Timed> {
    // The parts: (server, via, bytes, warm-up bytes). The warm-up is 1 MB in all, split
    // like the chunk: every system warms its paths with the same megabyte (a split that
    // warmed each connection with a whole megabyte would give each path the window of a
    // transfer twice the size the others had).
    let (first, second) = split(run.size, run.share);
    let (warm_first, warm_second) = split(WARM_UP_BYTES, run.share);
    let mut parts = vec![(run.server, run.via.clone(), first, warm_first)];
    if let Some((s2, via)) = &run.split {
        parts.push((*s2, via.clone(), second, warm_second));
    }
    parts.retain(|p| p.2 > 0);
    // Warm mode: the connections warm up side by side (as one multipath connection's
    // paths do), and the time until the last has its share is printed after the chunk's.
    let (mut conns, warm_up_ms) = if run.warm {
        let t = Instant::now();
        let conns = warm_up(&parts)?;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        std::thread::sleep(Duration::from_secs(1));
        (conns, Some(ms))
    } else {
        (parts.iter().map(|_| None).collect(), None)
    };
    let t = Instant::now();
    let from_us = unix_us();
    std::thread::scope(|sc| -> Result<()> {
        let hs: Vec<_> = parts
            .iter()
            .zip(conns.iter_mut())
            .map(|((srv, v, bytes, _), c)| sc.spawn(move || timed(*srv, v, *bytes, c.as_mut())))
            .collect();
        for h in hs {
            h.join().map_err(|_| anyhow!("worker panicked"))??;
        }
        Ok(())
    })?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    Ok(Timed {
        ms,
        warmup_ms: warm_up_ms,
        from_us,
        to_us: unix_us(),
    })
}

/// Bytes a path must carry in one packet for that packet to count as the chunk's data in
/// [`path_finish_ms`]: acknowledgements carry none, and mpflex's control frames (a
/// keepalive on an idle path) are well under it. A chunk's last segment on a path may be
/// smaller, but it arrives one serialisation time after a full one (under 2 ms here).
pub const DATA_PACKET: u32 = 200;

/// Each path's last-byte arrival (DEMS: "subflows finish together"), ms after the
/// chunk's clock started, from what the links delivered towards the client during the
/// chunk; none for a path that carried none of it.
pub fn path_finish_ms(down: &[PayloadLog], t: &Timed) -> Vec<Option<f64>> {
    down.iter()
        .map(|log| {
            log.last_within(t.from_us, t.to_us, DATA_PACKET)
                .map(|at| (at - t.from_us) as f64 / 1000.0)
        })
        .collect()
}

/// The spread of the paths' finishes, ms: the last path's last byte minus the first
/// path's, over the paths that carried some of the chunk (none with fewer than two).
pub fn finish_gap_ms(finish: &[Option<f64>]) -> Option<f64> {
    let f: Vec<f64> = finish.iter().flatten().copied().collect();
    (f.len() >= 2).then(|| {
        let max = f.iter().copied().fold(f64::MIN, f64::max);
        let min = f.iter().copied().fold(f64::MAX, f64::min);
        max - min
    })
}

/// Connects every part and moves its warm-up bytes, all side by side.
fn warm_up(parts: &[(SocketAddr, Via, u64, u64)]) -> Result<Vec<Option<TcpStream>>> {
    std::thread::scope(|sc| {
        let hs: Vec<_> = parts
            .iter()
            .map(|(srv, v, _, warm_bytes)| {
                sc.spawn(move || -> Result<Option<TcpStream>> {
                    let mut c = connect(*srv, v)?;
                    if *warm_bytes > 0 {
                        request(&mut c, *warm_bytes)?;
                    }
                    Ok(Some(c))
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().map_err(|_| anyhow!("worker panicked"))?)
            .collect::<Result<Vec<_>>>()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_finish_at_their_last_data_packet_within_the_chunk() {
        let t = Timed {
            ms: 500.0,
            warmup_ms: None,
            from_us: 1_000_000,
            to_us: 1_500_000,
        };
        let log = |e: &[(u64, u32)]| PayloadLog {
            entries: e.to_vec(),
            full: false,
        };
        let down = [
            // Warm-up before the chunk, data, then a keepalive-sized frame.
            log(&[(900_000, 1448), (1_100_000, 1448), (1_200_000, 1448), (1_300_000, 60)]),
            // Data to the end; a redundant copy after the chunk was read does not count.
            log(&[(1_050_000, 1448), (1_499_000, 1448), (1_600_000, 1448)]),
            // Only the warm-up.
            log(&[(950_000, 1448)]),
        ];
        let f = path_finish_ms(&down, &t);
        assert_eq!(f, [Some(200.0), Some(499.0), None]);
        assert_eq!(finish_gap_ms(&f), Some(299.0));
        assert_eq!(finish_gap_ms(&f[..1]), None);
        assert_eq!(finish_gap_ms(&[None, Some(3.0)]), None);
    }
}
