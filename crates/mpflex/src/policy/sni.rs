//! The server name (SNI) of a TLS ClientHello, from a stream's first bytes.
//!
//! Bounded and allocation-free until the name is found: it reads one TLS record
//! (RFC 8446 §5.1) holding a ClientHello (§4.1.2) and walks its extensions to
//! `server_name` (RFC 6066 §3), checking every length against what is there. A hello that
//! spans several records, or is not TLS, yields `None`: the name is a hint for policy
//! rules, never required.

/// The longest host name returned (RFC 1035's limit).
const MAX_NAME: usize = 253;

/// A reader that never reads past its slice.
struct Cursor<'a> {
    b: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.b.len() < n {
            return None;
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<usize> {
        self.take(1).map(|b| b[0] as usize)
    }

    fn u16(&mut self) -> Option<usize> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]) as usize)
    }

    fn u24(&mut self) -> Option<usize> {
        self.take(3)
            .map(|b| ((b[0] as usize) << 16) | ((b[1] as usize) << 8) | b[2] as usize)
    }

    /// A sub-cursor over the next `n` bytes.
    fn sub(&mut self, n: usize) -> Option<Cursor<'a>> {
        self.take(n).map(|b| Cursor { b })
    }
}

/// The host name a TLS ClientHello at the start of `first` asks for, lower case.
pub fn server_name(first: &[u8]) -> Option<String> {
    let mut c = Cursor { b: first };
    // Record header: handshake (22), legacy version, length.
    if c.u8()? != 22 {
        return None;
    }
    c.take(2)?;
    let len = c.u16()?;
    // Only what arrived of the record: a name near the start is found even if the
    // record's tail (padding, key shares) is still on its way.
    let mut rec = Cursor {
        b: &c.b[..len.min(c.b.len())],
    };
    // Handshake header: client_hello (1), length.
    if rec.u8()? != 1 {
        return None;
    }
    let hlen = rec.u24()?;
    let mut h = Cursor {
        b: &rec.b[..hlen.min(rec.b.len())],
    };
    h.take(2 + 32)?; // legacy_version, random
    let sid = h.u8()?;
    h.take(sid)?;
    let suites = h.u16()?;
    h.take(suites)?;
    let comp = h.u8()?;
    h.take(comp)?;
    let ext_len = h.u16()?;
    let mut exts = h.sub(ext_len.min(h.b.len()))?;
    while let (Some(ty), Some(n)) = (exts.u16(), exts.u16()) {
        let mut body = exts.sub(n)?;
        if ty != 0 {
            continue;
        }
        // ServerNameList: length, then entries of type (0: host_name) and name.
        let list = body.u16()?;
        let mut list = body.sub(list)?;
        while let Some(kind) = list.u8() {
            let n = list.u16()?;
            let name = list.take(n)?;
            if kind == 0 {
                return valid_name(name);
            }
        }
        return None;
    }
    None
}

fn valid_name(name: &[u8]) -> Option<String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    ok.then(|| String::from_utf8_lossy(name).to_ascii_lowercase())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A ClientHello record asking for `name`, with an extension before server_name.
    pub fn client_hello(name: &str) -> Vec<u8> {
        let mut sni = Vec::new();
        let n = name.len() as u16;
        sni.extend_from_slice(&(n + 3).to_be_bytes());
        sni.push(0);
        sni.extend_from_slice(&n.to_be_bytes());
        sni.extend_from_slice(name.as_bytes());
        let mut exts = Vec::new();
        // supported_versions (43), then server_name (0).
        exts.extend_from_slice(&[0, 43, 0, 3, 2, 3, 4]);
        exts.extend_from_slice(&[0, 0]);
        exts.extend_from_slice(&(sni.len() as u16).to_be_bytes());
        exts.extend_from_slice(&sni);
        let mut hello = vec![3, 3];
        hello.extend_from_slice(&[7; 32]);
        hello.push(32);
        hello.extend_from_slice(&[1; 32]);
        hello.extend_from_slice(&[0, 2, 0x13, 0x01]);
        hello.extend_from_slice(&[1, 0]);
        hello.extend_from_slice(&(exts.len() as u16).to_be_bytes());
        hello.extend_from_slice(&exts);
        let mut hs = vec![1];
        hs.extend_from_slice(&(hello.len() as u32).to_be_bytes()[1..]);
        hs.extend_from_slice(&hello);
        let mut rec = vec![22, 3, 1];
        rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
        rec.extend_from_slice(&hs);
        rec
    }

    #[test]
    fn finds_the_name_of_a_client_hello() {
        assert_eq!(
            server_name(&client_hello("Video.Example.COM")).as_deref(),
            Some("video.example.com")
        );
    }

    #[test]
    fn anything_else_has_no_name() {
        assert_eq!(server_name(b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"), None);
        assert_eq!(server_name(&[]), None);
        assert_eq!(server_name(&[22, 3, 1, 0, 0]), None);
        let mut bad = client_hello("a b");
        assert_eq!(server_name(&bad), None, "not a host name");
        bad = client_hello("example.com");
        bad[5] = 2; // a ServerHello
        assert_eq!(server_name(&bad), None);
    }

    #[test]
    fn a_hello_cut_short_yields_what_arrived() {
        let full = client_hello("example.com");
        for cut in 0..full.len() {
            let got = server_name(&full[..cut]);
            assert!(got.is_none() || got.as_deref() == Some("example.com"), "{cut}: {got:?}");
        }
        assert_eq!(server_name(&full[..full.len()]).as_deref(), Some("example.com"));
    }

    proptest! {
        /// Arbitrary bytes never panic, and never yield a name that is not a host name.
        #[test]
        fn arbitrary_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..600)) {
            if let Some(n) = server_name(&b) {
                prop_assert!(!n.is_empty() && n.len() <= MAX_NAME);
            }
        }

        /// A valid hello with bytes flipped never panics.
        #[test]
        fn mutated_hellos_never_panic(name in "[a-z0-9.-]{1,60}", flips in prop::collection::vec((any::<usize>(), any::<u8>()), 1..8)) {
            let mut b = client_hello(&name);
            for (i, v) in flips {
                let n = b.len();
                b[i % n] = v;
            }
            let _ = server_name(&b);
        }
    }
}
