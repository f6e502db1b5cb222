//! Path encryption and authentication: the Noise IK handshake (via `snow`) and the record
//! layer on top of a path's TCP connection.
//!
//! The client knows the server's static public key (pinned in its config); the server
//! knows the public keys of the clients it serves. IK authenticates both in one round
//! trip. The first handshake message carries a timestamp; the server rejects stale ones
//! and remembers recently seen ephemeral keys, so a captured handshake replayed later gets
//! nothing. A server that rejects a handshake closes the connection without a byte.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use base64::Engine as _;
use bytes::{Buf, BytesMut};
use mpflex_wire::record;
use ring::aead::{Aad, LessSafeKey, Nonce, Tag, UnboundKey, AES_256_GCM};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub const NOISE_PARAMS: &str = "Noise_IK_25519_AESGCM_SHA256";
/// Prologue binds the handshake to this protocol and version.
const PROLOGUE: &[u8] = b"mpflex/1";
/// A handshake whose timestamp is further than this from the server's clock is refused.
pub const REPLAY_WINDOW: Duration = Duration::from_secs(60);
const MAX_NOISE_MSG: usize = 65535;
/// e (32) + encrypted s (32 + 16) + encrypted 8-byte timestamp (8 + 16).
const IK_FIRST_MESSAGE_LEN: usize = 32 + 48 + 8 + 16;
const TAG: usize = record::TAG_LEN;

pub fn encode_key(k: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(k)
}

pub fn decode_key(s: &str, what: &str) -> Result<[u8; 32]> {
    // Private keys pass through here: the decoded copy is wiped when dropped.
    let v = zeroize::Zeroizing::new(
        base64::engine::general_purpose::STANDARD
            .decode(s.trim())
            .with_context(|| format!("{what}: not valid base64 (paste the key whole, as `mpflex keygen` prints it)"))?,
    );
    v.as_slice().try_into().map_err(|_| {
        anyhow::anyhow!(
            "{what}: a key is 32 bytes, this one is {} (paste the key whole, as `mpflex keygen` prints it)",
            v.len()
        )
    })
}

/// A fresh X25519 key pair: (private, public).
pub fn generate_keypair() -> ([u8; 32], [u8; 32]) {
    let kp = snow::Builder::new(NOISE_PARAMS.parse().expect("valid params"))
        .generate_keypair()
        .expect("keypair generation");
    (kp.private.try_into().unwrap(), kp.public.try_into().unwrap())
}

/// The public key belonging to a private key.
pub fn public_key(private: &[u8; 32]) -> [u8; 32] {
    // X25519 base-point multiplication, done by running a throw-away handshake would be
    // roundabout; snow exposes the DH through its resolver.
    use snow::resolvers::{CryptoResolver, DefaultResolver};
    let mut dh = DefaultResolver
        .resolve_dh(&snow::params::DHChoice::Curve25519)
        .expect("curve25519");
    dh.set(private);
    dh.pubkey().try_into().expect("32-byte key")
}

async fn write_msg<W: AsyncWrite + Unpin>(w: &mut W, msg: &[u8]) -> Result<()> {
    write_msg_after(w, &[], msg).await
}

/// Writes `prefix` and then `msg` with its length, in one write (one segment).
async fn write_msg_after<W: AsyncWrite + Unpin>(w: &mut W, prefix: &[u8], msg: &[u8]) -> Result<()> {
    let mut buf = Vec::with_capacity(prefix.len() + 2 + msg.len());
    buf.extend_from_slice(prefix);
    buf.extend_from_slice(&(msg.len() as u16).to_be_bytes());
    buf.extend_from_slice(msg);
    w.write_all(&buf).await?;
    Ok(())
}

async fn read_msg<R: AsyncRead + Unpin>(r: &mut R) -> Result<Vec<u8>> {
    let mut len = [0u8; 2];
    r.read_exact(&mut len).await?;
    let n = u16::from_be_bytes(len) as usize;
    let mut msg = vec![0u8; n];
    r.read_exact(&mut msg).await?;
    Ok(msg)
}

/// Client side of the handshake. `preamble` (the routing preamble) goes out in the same
/// write as the first handshake message: sent apart, Nagle would hold the handshake until
/// the peer's delayed ACK of the preamble.
pub async fn client_handshake<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    preamble: &[u8],
    private: &[u8; 32],
    server_public: &[u8; 32],
) -> Result<Transport> {
    let mut hs = snow::Builder::new(NOISE_PARAMS.parse()?)
        .local_private_key(private)
        .remote_public_key(server_public)
        .prologue(PROLOGUE)
        .build_initiator()?;
    let ts = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as u64;
    let mut buf = vec![0u8; 1024];
    let n = hs.write_message(&ts.to_be_bytes(), &mut buf)?;
    write_msg_after(s, preamble, &buf[..n]).await?;
    // The server answers nothing to a client it does not accept, so a close is all there
    // is to go on: name the three causes.
    let reply = read_msg(s).await.context(
        "the server closed the handshake: check that this client's public key is in the server's \
         [[clients]], that server_public_key is the server's public key and that both clocks are \
         right (the server's log names the cause)",
    )?;
    let mut payload = vec![0u8; reply.len()];
    hs.read_message(&reply, &mut payload)
        .context("server's handshake reply does not authenticate")?;
    Transport::from_handshake(hs)
}

/// A connection to the path port that closed without sending a byte: a port probe, a
/// health check or a script waiting for the port to open, not a failed handshake.
#[derive(Debug, thiserror::Error)]
#[error("closed before sending anything")]
pub struct SilentPeer;

/// Remembers recently seen handshakes so that none is accepted twice.
#[derive(Default)]
pub struct ReplayGuard {
    seen: Mutex<HashMap<[u8; 32], Instant>>,
}

impl ReplayGuard {
    /// True if `ephemeral` was not seen within the window (and records it).
    fn fresh(&self, ephemeral: [u8; 32], now: Instant) -> bool {
        let mut seen = self.seen.lock().unwrap();
        if seen.len() > 4096 {
            seen.retain(|_, t| now.duration_since(*t) < 2 * REPLAY_WINDOW);
        }
        seen.insert(ephemeral, now).is_none()
    }
}

/// Server side of the handshake. `authorised` maps a client public key to its name.
/// Returns the client's public key. On any failure the caller closes the connection
/// without writing anything.
pub async fn server_handshake<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    private: &[u8; 32],
    authorised: &HashMap<[u8; 32], String>,
    replay: &ReplayGuard,
) -> Result<(Transport, [u8; 32])> {
    // The first IK message has a fixed size (ephemeral key, encrypted static key, encrypted
    // timestamp); anything else is not mpflex and is cut off before reading further.
    let mut len = [0u8; 2];
    match s.read(&mut len).await? {
        0 => return Err(SilentPeer.into()),
        1 => s.read_exact(&mut len[1..]).await.map(drop)?,
        _ => {}
    }
    let n = u16::from_be_bytes(len) as usize;
    if n != IK_FIRST_MESSAGE_LEN {
        bail!("not an mpflex handshake (message length {n})");
    }
    let mut msg = vec![0u8; n];
    s.read_exact(&mut msg).await?;
    let mut hs = snow::Builder::new(NOISE_PARAMS.parse()?)
        .local_private_key(private)
        .prologue(PROLOGUE)
        .build_responder()?;
    let mut payload = vec![0u8; msg.len()];
    let n = hs
        .read_message(&msg, &mut payload)
        .context("handshake does not decrypt")?;
    let client: [u8; 32] = hs
        .get_remote_static()
        .context("no client key")?
        .try_into()
        .map_err(|_| anyhow::anyhow!("bad client key length"))?;
    if !authorised.contains_key(&client) {
        bail!("client key {} is not authorised", encode_key(&client));
    }
    if n != 8 {
        bail!("handshake payload has {n} bytes, expected a timestamp");
    }
    let ts = u64::from_be_bytes(payload[..8].try_into().unwrap());
    let now_ms = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as u64;
    if now_ms.abs_diff(ts) > REPLAY_WINDOW.as_millis() as u64 {
        bail!("handshake timestamp is {} ms off the server clock", now_ms.abs_diff(ts));
    }
    if !replay.fresh(msg[..32].try_into().unwrap(), Instant::now()) {
        bail!("replayed handshake");
    }
    let mut buf = vec![0u8; 1024];
    let n = hs.write_message(&[], &mut buf)?;
    write_msg(s, &buf[..n]).await?;
    Ok((Transport::from_handshake(hs)?, client))
}

/// Largest plaintext per record.
pub const MAX_PLAINTEXT: usize = mpflex_wire::MAX_RECORD;

/// The record keys of one path connection: the two keys the finished Noise handshake
/// splits into (initiator-to-responder, responder-to-initiator), used as Noise transport
/// messages use them — AES-256-GCM, nonce = 32 zero bits and the 64-bit big-endian record
/// number, no associated data — but sealed and opened in place, so a record costs no
/// copy and no allocation beyond the cipher itself.
pub struct Transport {
    send: LessSafeKey,
    recv: LessSafeKey,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Transport(AES-256-GCM, keys hidden)")
    }
}

impl Transport {
    fn from_handshake(mut hs: snow::HandshakeState) -> Result<Self> {
        Self::from_handshake_keys(&mut hs)
    }

    fn from_handshake_keys(hs: &mut snow::HandshakeState) -> Result<Self> {
        if !hs.is_handshake_finished() {
            bail!("handshake not finished");
        }
        // The raw keys are wiped once ring holds them.
        let (i2r, r2i) = hs.dangerously_get_raw_split();
        let (i2r, r2i) = (zeroize::Zeroizing::new(i2r), zeroize::Zeroizing::new(r2i));
        let key = |k: &[u8; 32]| {
            UnboundKey::new(&AES_256_GCM, k)
                .map(LessSafeKey::new)
                .map_err(|_| anyhow::anyhow!("bad record key"))
        };
        let (send, recv) = if hs.is_initiator() { (i2r, r2i) } else { (r2i, i2r) };
        Ok(Transport {
            send: key(&send)?,
            recv: key(&recv)?,
        })
    }
}

fn nonce(n: u64) -> Nonce {
    let mut b = [0u8; 12];
    b[4..].copy_from_slice(&n.to_be_bytes());
    Nonce::assume_unique_for_key(b)
}

/// Noise's REKEY(k) (spec §4.2, §11.3): the first 32 bytes of encrypting 32 zero bytes
/// under `k` with the reserved nonce 2⁶⁴−1. One-way: the next key does not give back the
/// one before it, so a key read from memory exposes no record sealed before the switch.
fn next_key(k: &LessSafeKey) -> Result<LessSafeKey> {
    let mut raw = zeroize::Zeroizing::new([0u8; 32]);
    // The tag (ciphertext bytes 32..48) is not part of the key.
    let _tag = k
        .seal_in_place_separate_tag(nonce(u64::MAX), Aad::empty(), &mut raw[..])
        .map_err(|_| anyhow::anyhow!("rekey failed"))?;
    UnboundKey::new(&AES_256_GCM, &raw[..])
        .map(LessSafeKey::new)
        .map_err(|_| anyhow::anyhow!("bad record key"))
}

/// Record bytes sealed under one key before the sender moves to the next. AES-256-GCM's
/// confidentiality margin holds for about 2³⁸ bytes under one key (RFC 8446 §5.5: 2²⁴·⁵
/// records of 16 KiB); a gibibyte stays far below it, and rekeying is one block
/// encryption and a key schedule, so even at 10 Gbit/s a switch a second costs nothing.
pub const REKEY_AFTER_BYTES: u64 = 1 << 30;
/// Time a key seals for before the sender moves to the next: WireGuard's REKEY_AFTER_TIME.
/// Bounds what one key taken from a running process exposes to two minutes of traffic.
pub const REKEY_AFTER_TIME: Duration = Duration::from_secs(120);
/// Largest record number: 2⁶⁴−1 is the nonce REKEY reserves (Noise spec §5.1).
const MAX_NONCE: u64 = u64::MAX - 1;

/// When a path's sender moves to its next key (`tuning.rekey_after_bytes`,
/// `tuning.rekey_after_ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rekey {
    pub after_bytes: u64,
    pub after: Duration,
}

impl Default for Rekey {
    fn default() -> Self {
        Rekey {
            after_bytes: REKEY_AFTER_BYTES,
            after: REKEY_AFTER_TIME,
        }
    }
}

/// Seals one record in place under `key` and record number `*nonce_n`, and advances it.
fn seal_in_place(key: &LessSafeKey, nonce_n: &mut u64, rec: &mut [u8]) -> Result<()> {
    if *nonce_n > MAX_NONCE {
        bail!("record numbers exhausted");
    }
    let n = rec.len() - record::LEN_PREFIX;
    debug_assert!((TAG..=MAX_NOISE_MSG).contains(&n));
    let (body, tag) = rec[record::LEN_PREFIX..].split_at_mut(n - TAG);
    let t = key
        .seal_in_place_separate_tag(nonce(*nonce_n), Aad::empty(), body)
        .map_err(|_| anyhow::anyhow!("record encryption failed"))?;
    tag.copy_from_slice(t.as_ref());
    *nonce_n += 1;
    Ok(())
}

/// Encrypts, in place, the record occupying `rec` (as laid out by
/// [`mpflex_wire::record::begin`] and [`mpflex_wire::record::end`]) under record number
/// `*nonce`, and advances the number. Under the handshake's key: for the join exchange,
/// which a [`Sealer`] continues.
pub fn seal_record(t: &Transport, nonce_n: &mut u64, rec: &mut [u8]) -> Result<()> {
    seal_in_place(&t.send, nonce_n, rec)
}

/// Encrypts one record (`plaintext` ≤ [`MAX_PLAINTEXT`]) and appends `len | ciphertext`.
pub fn seal(t: &Transport, nonce: &mut u64, plaintext: &[u8], out: &mut Vec<u8>) -> Result<()> {
    if plaintext.len() > MAX_PLAINTEXT {
        bail!("record of {} bytes exceeds {MAX_PLAINTEXT}", plaintext.len());
    }
    let start = record::begin(out);
    out.extend_from_slice(plaintext);
    let end = record::end(out, start);
    seal_record(t, nonce, &mut out[start..end])
}

/// A path's sending side after the join: seals the writer's records and moves to the
/// next key (Noise REKEY) once the current one has sealed [`Rekey::after_bytes`] or for
/// [`Rekey::after`]. The switch is announced in band, without a round trip: a record with
/// no plaintext (the key update; no other record is empty) sealed under the old key, and
/// every record after it under the new one. The receiver derives the same key on opening
/// it, so neither end waits.
pub struct Sealer {
    nonce: u64,
    /// The current key once the first switch has happened; the handshake's before.
    key: Option<LessSafeKey>,
    sealed: u64,
    since: Instant,
    rekey: Rekey,
    rekeys: u64,
}

impl Sealer {
    /// Continues after `nonce` records were sealed under the handshake's key.
    pub fn new(nonce: u64, rekey: Rekey, now: Instant) -> Self {
        Sealer {
            nonce,
            key: None,
            sealed: 0,
            since: now,
            rekey,
            rekeys: 0,
        }
    }

    /// Key switches so far.
    pub fn rekeys(&self) -> u64 {
        self.rekeys
    }

    /// Seals the records laid out at `records` in `wire`. A key switch falls due only
    /// here, between batches: if one is due, the key update record goes in front of the
    /// batch, which is sealed under the new key.
    pub fn seal_batch(
        &mut self,
        t: &Transport,
        wire: &mut Vec<u8>,
        records: &[Range<usize>],
        now: Instant,
    ) -> Result<()> {
        let mut shift = 0;
        if self.sealed >= self.rekey.after_bytes || now.duration_since(self.since) >= self.rekey.after {
            let mut update = Vec::with_capacity(mpflex_wire::RECORD_OVERHEAD);
            let start = record::begin(&mut update);
            record::end(&mut update, start);
            let key = self.key.as_ref().unwrap_or(&t.send);
            seal_in_place(key, &mut self.nonce, &mut update)?;
            self.key = Some(next_key(key)?);
            (self.sealed, self.since) = (0, now);
            self.rekeys += 1;
            shift = update.len();
            wire.splice(0..0, update);
        }
        let key = self.key.as_ref().unwrap_or(&t.send);
        for r in records {
            if r.len() <= mpflex_wire::RECORD_OVERHEAD {
                bail!("an empty record would read as a key update");
            }
            seal_in_place(key, &mut self.nonce, &mut wire[r.start + shift..r.end + shift])?;
            self.sealed += r.len() as u64;
        }
        Ok(())
    }
}

/// Splits complete records off the front of a receive buffer and decrypts them in place.
/// A key update record (no plaintext) moves it to the next key: the records after it open
/// under that key only, and one sealed under the old key fails authentication.
pub struct Opener {
    nonce: u64,
    /// The current key once the peer has switched; the handshake's before.
    key: Option<LessSafeKey>,
    rekeys: u64,
}

impl Opener {
    pub fn new() -> Self {
        Self::starting_at(0)
    }

    /// Continues after `nonce` records were already opened.
    pub fn starting_at(nonce: u64) -> Self {
        Opener {
            nonce,
            key: None,
            rekeys: 0,
        }
    }

    /// Records opened so far.
    pub fn nonce(&self) -> u64 {
        self.nonce
    }

    /// Key switches so far.
    pub fn rekeys(&self) -> u64 {
        self.rekeys
    }

    /// The next record's plaintext, if a whole record is buffered: split off the front of
    /// `buf` and decrypted where it lies. Key updates on the way are applied, not returned.
    pub fn open(&mut self, t: &Transport, buf: &mut BytesMut) -> Result<Option<BytesMut>> {
        let (plain, used) = self.open_in(t, buf)?;
        let mut rec = buf.split_to(used);
        Ok(plain.map(|plain| {
            rec.truncate(plain.end);
            rec.advance(plain.start);
            rec
        }))
    }

    /// [`Opener::open`] on the records at the front of `buf`, decrypted where they lie:
    /// where the next record's plaintext lies in `buf` (`None` until a whole record is
    /// in), and how many bytes of `buf` were opened (that record and the key updates
    /// before it: they are not to be opened again).
    pub fn open_in(&mut self, t: &Transport, buf: &mut [u8]) -> Result<(Option<Range<usize>>, usize)> {
        let mut at = 0;
        loop {
            let Some(n) = record::peek_len(&buf[at..])? else {
                return Ok((None, at));
            };
            let start = at + record::LEN_PREFIX;
            if buf.len() < start + n {
                return Ok((None, at));
            }
            if self.nonce > MAX_NONCE {
                bail!("record numbers exhausted");
            }
            let (body, tag) = buf[start..start + n].split_at_mut(n - TAG);
            let tag = Tag::try_from(&*tag).expect("16-byte tag");
            let key = self.key.as_ref().unwrap_or(&t.recv);
            key.open_in_place_separate_tag(nonce(self.nonce), Aad::empty(), tag, body, 0..)
                .map_err(|_| anyhow::anyhow!("record failed authentication"))?;
            self.nonce += 1;
            at = start + n;
            if n == TAG {
                self.key = Some(next_key(key)?);
                self.rekeys += 1;
                continue;
            }
            return Ok((Some(start..start + n - TAG), at));
        }
    }
}

impl Default for Opener {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn handshake_records_and_replay() {
        let (cpriv, cpub) = generate_keypair();
        let (spriv, spub) = generate_keypair();
        assert_eq!(public_key(&cpriv), cpub);
        let mut auth = HashMap::new();
        auth.insert(cpub, "c".to_string());
        let guard = ReplayGuard::default();

        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        let (c, s) = tokio::join!(client_handshake(&mut a, &[], &cpriv, &spub), async {
            server_handshake(&mut b, &spriv, &auth, &guard).await
        });
        let c = c.unwrap();
        let (s, who) = s.unwrap();
        assert_eq!(who, cpub);

        let mut nonce = 0;
        let mut wire = Vec::new();
        seal(&c, &mut nonce, b"hello", &mut wire).unwrap();
        seal(&c, &mut nonce, b"world", &mut wire).unwrap();
        let mut buf = BytesMut::from(&wire[..]);
        let mut op = Opener::new();
        assert_eq!(&op.open(&s, &mut buf).unwrap().unwrap()[..], b"hello");
        assert_eq!(&op.open(&s, &mut buf).unwrap().unwrap()[..], b"world");
        assert!(op.open(&s, &mut buf).unwrap().is_none());

        // Tampering is detected.
        let mut wire2 = Vec::new();
        seal(&c, &mut nonce, b"x", &mut wire2).unwrap();
        let last = wire2.len() - 1;
        wire2[last] ^= 1;
        assert!(op.open(&s, &mut BytesMut::from(&wire2[..])).is_err());
    }

    #[tokio::test]
    async fn unknown_client_and_replay_are_refused() {
        let (cpriv, cpub) = generate_keypair();
        let (spriv, spub) = generate_keypair();
        let guard = ReplayGuard::default();
        // Capture the client's first message.
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        let client = tokio::spawn(async move { client_handshake(&mut a, &[], &cpriv, &spub).await });
        let first = read_msg(&mut b).await.unwrap();
        drop(b);
        let _ = client.await;

        let mut auth = HashMap::new();
        // Not authorised: refused.
        let mut replay_in = Vec::new();
        replay_in.extend_from_slice(&(first.len() as u16).to_be_bytes());
        replay_in.extend_from_slice(&first);
        let mut io = tokio_test_io(&replay_in);
        assert!(server_handshake(&mut io, &spriv, &auth, &guard).await.is_err());
        // Authorised: first use accepted, the replay refused.
        auth.insert(cpub, "c".into());
        let guard = ReplayGuard::default();
        let mut io = tokio_test_io(&replay_in);
        assert!(server_handshake(&mut io, &spriv, &auth, &guard).await.is_ok());
        let mut io = tokio_test_io(&replay_in);
        let err = server_handshake(&mut io, &spriv, &auth, &guard).await.unwrap_err();
        assert!(err.to_string().contains("replayed"), "{err}");
    }

    /// Our in-place records are Noise transport messages: snow's own transport opens what
    /// we seal and we open what it seals, in both directions; keys are per direction, a
    /// record replayed or reordered does not open, and a reflected one neither.
    #[test]
    fn records_are_noise_transport_messages() {
        let (ours_i, ours_r, snow_i, snow_r) = noise_pair();

        let msg = vec![0x5au8; 40_000];
        // Ours -> snow, initiator to responder.
        let (mut wire, mut nonce) = (Vec::new(), 7u64);
        seal(&ours_i, &mut nonce, &msg, &mut wire).unwrap();
        assert_eq!(nonce, 8);
        // What the engine counts against a path's window for each record.
        assert_eq!(wire.len(), msg.len() + mpflex_wire::RECORD_OVERHEAD);
        let mut out = vec![0u8; MAX_NOISE_MSG];
        let k = snow_r.read_message(7, &wire[2..], &mut out).unwrap();
        assert_eq!(&out[..k], &msg[..]);
        // Snow -> ours, responder to initiator.
        let k = snow_r.write_message(3, b"from snow", &mut out).unwrap();
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&(k as u16).to_be_bytes());
        buf.extend_from_slice(&out[..k]);
        let keep = buf.clone();
        assert_eq!(
            &Opener::starting_at(3).open(&ours_i, &mut buf).unwrap().unwrap()[..],
            b"from snow"
        );
        // Wrong record number (replayed or reordered): refused.
        assert!(Opener::starting_at(4).open(&ours_i, &mut keep.clone()).is_err());
        // Reflected back to its sender's side: refused (one key per direction).
        assert!(Opener::starting_at(3).open(&ours_r, &mut keep.clone()).is_err());
        // An oversized record cannot be built.
        let mut big = Vec::new();
        assert!(seal(&ours_i, &mut nonce, &vec![0u8; MAX_PLAINTEXT + 1], &mut big).is_err());
        let _ = snow_i;
    }

    /// Both ends of one IK handshake: our record keys and snow's transport states, split
    /// from the same handshake (initiator, responder, snow's initiator, snow's responder).
    fn noise_pair() -> (
        Transport,
        Transport,
        snow::StatelessTransportState,
        snow::StatelessTransportState,
    ) {
        let (cpriv, cpub) = generate_keypair();
        let (spriv, spub) = generate_keypair();
        let params = || NOISE_PARAMS.parse::<snow::params::NoiseParams>().unwrap();
        let mut i = snow::Builder::new(params())
            .local_private_key(&cpriv)
            .remote_public_key(&spub)
            .prologue(PROLOGUE)
            .build_initiator()
            .unwrap();
        let mut r = snow::Builder::new(params())
            .local_private_key(&spriv)
            .prologue(PROLOGUE)
            .build_responder()
            .unwrap();
        let (mut m, mut p) = (vec![0u8; 1024], vec![0u8; 1024]);
        let n = i.write_message(&[], &mut m).unwrap();
        r.read_message(&m[..n], &mut p).unwrap();
        let n = r.write_message(&[], &mut m).unwrap();
        i.read_message(&m[..n], &mut p).unwrap();
        assert_eq!(r.get_remote_static().unwrap(), cpub);
        let ours_i = Transport::from_handshake_keys(&mut i).unwrap();
        let ours_r = Transport::from_handshake_keys(&mut r).unwrap();
        (
            ours_i,
            ours_r,
            i.into_stateless_transport_mode().unwrap(),
            r.into_stateless_transport_mode().unwrap(),
        )
    }

    /// Lays out one record per payload in a fresh wire buffer, as the engine does.
    fn lay_out(payloads: &[&[u8]]) -> (Vec<u8>, Vec<Range<usize>>) {
        let (mut wire, mut records) = (Vec::new(), Vec::new());
        for p in payloads {
            let start = record::begin(&mut wire);
            wire.extend_from_slice(p);
            records.push(start..record::end(&mut wire, start));
        }
        (wire, records)
    }

    /// A sender that switches keys at every batch, many times over, in both directions:
    /// every record opens, in order, and both ends count the same switches. Our switch is
    /// Noise's REKEY: snow, rekeyed at each key update record, opens the same stream.
    #[test]
    fn records_open_across_many_key_switches() {
        let (ours_i, ours_r, _, mut snow_r) = noise_pair();
        let every = Rekey {
            after_bytes: 1,
            after: Duration::from_secs(3600),
        };
        let now = Instant::now();
        for (tx, rx) in [(&ours_i, &ours_r), (&ours_r, &ours_i)] {
            let mut sealer = Sealer::new(1, every, now);
            let mut opener = Opener::starting_at(1);
            let mut buf = BytesMut::new();
            for batch in 0..200u32 {
                let a = batch.to_be_bytes();
                let b = vec![batch as u8; 3000];
                let (mut wire, records) = lay_out(&[&a, &b]);
                sealer.seal_batch(tx, &mut wire, &records, now).unwrap();
                buf.extend_from_slice(&wire);
                assert_eq!(&opener.open(rx, &mut buf).unwrap().unwrap()[..], &a);
                assert_eq!(&opener.open(rx, &mut buf).unwrap().unwrap()[..], &b[..]);
                assert!(opener.open(rx, &mut buf).unwrap().is_none());
            }
            // The first batch goes under the handshake's key (nothing sealed yet).
            assert_eq!((sealer.rekeys(), opener.rekeys()), (199, 199));
            assert_eq!(opener.nonce(), 1 + 200 * 2 + 199);
        }
        // Snow reads ours: a key update record (empty) is followed by rekey_incoming.
        let mut sealer = Sealer::new(0, every, now);
        let mut out = vec![0u8; MAX_NOISE_MSG];
        let mut n = 0;
        for batch in 0..20u8 {
            let (mut wire, records) = lay_out(&[&[batch; 100]]);
            sealer.seal_batch(&ours_i, &mut wire, &records, now).unwrap();
            let mut at = 0;
            while at < wire.len() {
                let len = u16::from_be_bytes([wire[at], wire[at + 1]]) as usize;
                let k = snow_r.read_message(n, &wire[at + 2..at + 2 + len], &mut out).unwrap();
                n += 1;
                if k == 0 {
                    snow_r.rekey_incoming();
                } else {
                    assert_eq!(&out[..k], &[batch; 100]);
                }
                at += 2 + len;
            }
        }
        assert_eq!(n, 20 + 19);
    }

    /// Volume and time each bring the switch; below both, the key stays.
    #[test]
    fn a_key_switches_by_volume_and_by_time() {
        let (ours_i, _, _, _) = noise_pair();
        let t0 = Instant::now();
        let rekey = Rekey {
            after_bytes: 10_000,
            after: Duration::from_secs(120),
        };
        let mut sealer = Sealer::new(0, rekey, t0);
        let batch = |s: &mut Sealer, at: Instant| {
            let (mut wire, records) = lay_out(&[&[7u8; 4000]]);
            s.seal_batch(&ours_i, &mut wire, &records, at).unwrap();
            wire.len()
        };
        assert_eq!(batch(&mut sealer, t0), 4018);
        assert_eq!(batch(&mut sealer, t0), 4018);
        assert_eq!(batch(&mut sealer, t0), 4018);
        assert_eq!(sealer.rekeys(), 0);
        // 12,054 bytes sealed: the next batch carries the key update in front.
        assert_eq!(batch(&mut sealer, t0), 4018 + mpflex_wire::RECORD_OVERHEAD);
        assert_eq!(sealer.rekeys(), 1);
        assert_eq!(batch(&mut sealer, t0 + Duration::from_secs(119)), 4018);
        assert_eq!(batch(&mut sealer, t0 + Duration::from_secs(120)), 4036);
        assert_eq!(sealer.rekeys(), 2);
    }

    /// Once the peer has switched, a record sealed under the key before the switch does not
    /// open (nor one under a key the peer never announced), and a forged key update (not
    /// sealed under the current key) is refused.
    #[test]
    fn a_record_under_the_old_key_is_refused_after_the_switch() {
        let (ours_i, ours_r, _, _) = noise_pair();
        let now = Instant::now();
        let every = Rekey {
            after_bytes: 1,
            after: Duration::from_secs(3600),
        };
        // Sent under the handshake's key at record number 1, kept for replaying later.
        let mut sealer = Sealer::new(0, every, now);
        let (mut first, records) = lay_out(&[b"one"]);
        sealer.seal_batch(&ours_i, &mut first, &records, now).unwrap();
        let (mut second, records) = lay_out(&[b"two"]);
        sealer.seal_batch(&ours_i, &mut second, &records, now).unwrap();
        assert_eq!(sealer.rekeys(), 1);
        let mut opener = Opener::new();
        let mut buf = BytesMut::from(&first[..]);
        assert_eq!(&opener.open(&ours_r, &mut buf).unwrap().unwrap()[..], b"one");
        buf.extend_from_slice(&second);
        assert_eq!(&opener.open(&ours_r, &mut buf).unwrap().unwrap()[..], b"two");
        // The old key at the right record number: what an attacker holding it could forge.
        let mut old = Vec::new();
        seal(&ours_i, &mut 3, b"three", &mut old).unwrap();
        assert!(opener.open(&ours_r, &mut BytesMut::from(&old[..])).is_err());

        // A key update sealed under a key the receiver does not hold is not applied.
        let mut opener = Opener::new();
        let mut forged = Vec::new();
        seal(&ours_r, &mut 0, b"", &mut forged).unwrap();
        assert!(opener.open(&ours_r, &mut BytesMut::from(&forged[..])).is_err());
        assert_eq!(opener.rekeys(), 0);
    }

    /// A duplex stream pre-loaded with `input`, whose output is discarded.
    fn tokio_test_io(input: &[u8]) -> tokio::io::DuplexStream {
        let (a, mut b) = tokio::io::duplex(1 << 16);
        let input = input.to_vec();
        tokio::spawn(async move {
            b.write_all(&input).await.unwrap();
            let mut sink = Vec::new();
            let _ = b.read_to_end(&mut sink).await;
        });
        a
    }
}
