//! Destination addresses, encoded the SOCKS5 way (ATYP | address | port).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::{Buf, BufMut};

use crate::{WireError, MAX_DOMAIN};

const ATYP_V4: u8 = 1;
const ATYP_DOMAIN: u8 = 3;
const ATYP_V6: u8 = 4;

/// Where an application stream wants to go.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TargetAddr {
    Ip(SocketAddr),
    /// A name resolved by the server (so DNS answers fit the server's location).
    Domain(String, u16),
}

impl TargetAddr {
    pub fn port(&self) -> u16 {
        match self {
            TargetAddr::Ip(a) => a.port(),
            TargetAddr::Domain(_, p) => *p,
        }
    }

    pub fn encoded_len(&self) -> usize {
        match self {
            TargetAddr::Ip(SocketAddr::V4(_)) => 1 + 4 + 2,
            TargetAddr::Ip(SocketAddr::V6(_)) => 1 + 16 + 2,
            TargetAddr::Domain(d, _) => 1 + 1 + d.len() + 2,
        }
    }

    pub fn encode(&self, out: &mut impl BufMut) {
        match self {
            TargetAddr::Ip(SocketAddr::V4(a)) => {
                out.put_u8(ATYP_V4);
                out.put_slice(&a.ip().octets());
                out.put_u16(a.port());
            }
            TargetAddr::Ip(SocketAddr::V6(a)) => {
                out.put_u8(ATYP_V6);
                out.put_slice(&a.ip().octets());
                out.put_u16(a.port());
            }
            TargetAddr::Domain(d, p) => {
                // Constructors keep names within MAX_DOMAIN; clamp anyway so the length
                // byte can never disagree with the bytes that follow.
                let name = &d.as_bytes()[..d.len().min(MAX_DOMAIN)];
                out.put_u8(ATYP_DOMAIN);
                out.put_u8(name.len() as u8);
                out.put_slice(name);
                out.put_u16(*p);
            }
        }
    }

    pub fn decode(buf: &mut &[u8]) -> Result<Self, WireError> {
        let bad = |what| WireError::Malformed { frame: "address", what };
        if buf.remaining() < 1 {
            return Err(bad("missing address type"));
        }
        match buf.get_u8() {
            ATYP_V4 => {
                if buf.remaining() < 6 {
                    return Err(bad("short IPv4 address"));
                }
                let mut o = [0u8; 4];
                buf.copy_to_slice(&mut o);
                let port = buf.get_u16();
                Ok(TargetAddr::Ip(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(o)), port)))
            }
            ATYP_V6 => {
                if buf.remaining() < 18 {
                    return Err(bad("short IPv6 address"));
                }
                let mut o = [0u8; 16];
                buf.copy_to_slice(&mut o);
                let port = buf.get_u16();
                Ok(TargetAddr::Ip(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(o)), port)))
            }
            ATYP_DOMAIN => {
                if buf.remaining() < 1 {
                    return Err(bad("missing domain length"));
                }
                let n = buf.get_u8() as usize;
                if n == 0 {
                    return Err(bad("empty domain name"));
                }
                if buf.remaining() < n + 2 {
                    return Err(bad("short domain name"));
                }
                let name = std::str::from_utf8(&buf[..n]).map_err(|_| bad("domain is not UTF-8"))?;
                let name = name.to_owned();
                buf.advance(n);
                let port = buf.get_u16();
                Ok(TargetAddr::Domain(name, port))
            }
            _ => Err(bad("unknown address type")),
        }
    }
}

impl fmt::Display for TargetAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetAddr::Ip(a) => write!(f, "{a}"),
            TargetAddr::Domain(d, p) => write!(f, "{d}:{p}"),
        }
    }
}
