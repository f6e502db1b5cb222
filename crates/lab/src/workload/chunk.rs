//! `chunk`: a download of each `--sizes` size, timed from the request (in `fresh` mode
//! from before the connect) to the last byte. The oracle splits it over two single-path
//! connections at a share `--share` of the first.

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};

use super::{connect, request, split, timed, ClientRun, Fields, Spec, Via};
use crate::summary::Summary;

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

/// Times one chunk: milliseconds, and in `warm` mode the warm-up's milliseconds after.
pub fn client(run: &ChunkRun) -> Result<(f64, Option<f64>)> {
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
    Ok((t.elapsed().as_secs_f64() * 1000.0, warm_up_ms))
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
