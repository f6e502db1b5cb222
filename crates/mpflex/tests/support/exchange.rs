//! Byte-checked exchanges through the client's SOCKS5 port, as the soak and the path
//! failure tests run them: an origin that checks what each stream uploads and answers
//! with a pattern the stream checks in turn, and slots that open, exchange and close
//! streams until told to stop, counting what failed.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng;

use super::socks_connect;

/// The byte at `i` of the stream seeded `seed`.
pub fn pattern(seed: u64, i: usize) -> u8 {
    (seed as usize).wrapping_add(i.wrapping_mul(31)) as u8 ^ (i >> 8) as u8
}

/// Reads `n` bytes, checking them against the pattern of `seed`; false if any differs.
pub fn read_checked(s: &mut TcpStream, seed: u64, n: usize) -> std::io::Result<bool> {
    let (mut buf, mut at, mut ok) = (vec![0u8; 16 << 10], 0, true);
    while at < n {
        let k = s.read(&mut buf[..(n - at).min(16 << 10)])?;
        if k == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        ok &= buf[..k].iter().enumerate().all(|(j, &b)| b == pattern(seed, at + j));
        at += k;
    }
    Ok(ok)
}

pub fn write_pattern(s: &mut TcpStream, seed: u64, n: usize) -> std::io::Result<()> {
    let body: Vec<u8> = (0..n).map(|i| pattern(seed, i)).collect();
    s.write_all(&body)
}

/// The origin's listener on `port` (all addresses): an accept queue of 4,096, since a
/// thousand slots reconnecting at once overflow the standard library's 128 — the kernel
/// then answers with SYN cookies and resets connections the origin never accepted, which
/// the slots would count as mpflex's failures.
pub fn origin_listener(port: u16) -> TcpListener {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.set_reuse_address(true).unwrap();
    s.bind(&SocketAddr::from(([0, 0, 0, 0], port)).into()).unwrap();
    s.listen(4_096).unwrap();
    s.into()
}

/// The origin: per connection, reads `down: u32, up: u32, seed: u64` and `up` bytes,
/// answers 1 if they were intact (0 if not), then `down` bytes.
pub fn origin(l: TcpListener) {
    for s in l.incoming().flatten() {
        std::thread::spawn(move || {
            let mut s = s;
            let mut h = [0u8; 16];
            if s.read_exact(&mut h).is_err() {
                return;
            }
            let down = u32::from_be_bytes(h[..4].try_into().unwrap()) as usize;
            let up = u32::from_be_bytes(h[4..8].try_into().unwrap()) as usize;
            let seed = u64::from_be_bytes(h[8..].try_into().unwrap());
            let Ok(ok) = read_checked(&mut s, seed, up) else { return };
            let _ = s
                .write_all(&[ok as u8])
                .and_then(|_| write_pattern(&mut s, !seed, down));
        });
    }
}

#[derive(Default)]
pub struct Tally {
    pub exchanges: AtomicU64,
    pub bytes: AtomicU64,
    /// Exchanges that failed (an error, a reset) or arrived altered.
    pub failed: AtomicU64,
    /// The first few failures: what the application saw.
    pub errors: Mutex<Vec<String>>,
}

impl Tally {
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    pub fn exchanges(&self) -> u64 {
        self.exchanges.load(Ordering::Relaxed)
    }
}

/// One exchange of a random size (at most `max_down` bytes down, `max_up` up) with the
/// origin at `dest`:`port` through the SOCKS5 proxy; whether every byte arrived intact.
pub fn exchange(proxy: SocketAddr, dest: &str, port: u16, max_down: u32, max_up: u32) -> std::io::Result<(bool, u64)> {
    let mut rng = rand::thread_rng();
    let (down, up, seed) = (rng.gen_range(1..=max_down), rng.gen_range(0..=max_up), rng.gen::<u64>());
    let mut s = socks_connect(proxy, dest, port)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut h = down.to_be_bytes().to_vec();
    h.extend_from_slice(&up.to_be_bytes());
    h.extend_from_slice(&seed.to_be_bytes());
    s.write_all(&h)?;
    write_pattern(&mut s, seed, up as usize)?;
    let mut ok = [0u8];
    s.read_exact(&mut ok)?;
    let intact = ok[0] == 1 && read_checked(&mut s, !seed, down as usize)?;
    Ok((intact, u64::from(down + up)))
}

/// One stream slot: opens a stream, exchanges, closes it, again, until `stop`.
pub fn slot(
    proxy: SocketAddr,
    dest: String,
    port: u16,
    (max_down, max_up): (u32, u32),
    tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::Relaxed) {
        match exchange(proxy, &dest, port, max_down, max_up) {
            Ok((true, bytes)) => {
                tally.exchanges.fetch_add(1, Ordering::Relaxed);
                tally.bytes.fetch_add(bytes, Ordering::Relaxed);
            }
            _ if stop.load(Ordering::Relaxed) => {}
            r => {
                tally.failed.fetch_add(1, Ordering::Relaxed);
                let mut errors = tally.errors.lock().unwrap();
                if errors.len() < 10 {
                    errors.push(match r {
                        Err(e) => format!("{:?}: {e}", e.kind()),
                        _ => "bytes altered".to_string(),
                    });
                }
            }
        }
    }
}
