//! SOCKS5 server side (RFC 1928): no authentication, CONNECT to IPv4, IPv6 or a name.
//!
//! Reads are bounded by the protocol (at most 2 + 255 + 4 + 1 + 255 + 2 bytes), so a client
//! speaking garbage costs nothing but its connection.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use mpflex_wire::TargetAddr;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const VER: u8 = 5;
const NO_AUTH: u8 = 0;
const NO_ACCEPTABLE: u8 = 0xff;
const CMD_CONNECT: u8 = 1;

/// Reply codes (RFC 1928 §6).
pub const REP_GENERAL_FAILURE: u8 = 1;
pub const REP_COMMAND_NOT_SUPPORTED: u8 = 7;
pub const REP_ADDRESS_NOT_SUPPORTED: u8 = 8;

#[derive(Debug, thiserror::Error)]
pub enum SocksError {
    #[error("not SOCKS5 (version byte {0:#04x})")]
    Version(u8),
    #[error("client offers no acceptable authentication method")]
    NoAcceptableMethod,
    #[error("unsupported command {0} (only CONNECT)")]
    Command(u8),
    #[error("unsupported address type {0}")]
    AddressType(u8),
    #[error("malformed request: {0}")]
    Malformed(&'static str),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// Runs the SOCKS5 handshake; on success the success reply has been sent and the stream
/// carries the application's bytes from here on.
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) -> Result<TargetAddr, SocksError> {
    let ver = s.read_u8().await?;
    if ver != VER {
        return Err(SocksError::Version(ver));
    }
    let n = s.read_u8().await? as usize;
    if n == 0 {
        s.write_all(&[VER, NO_ACCEPTABLE]).await?;
        return Err(SocksError::NoAcceptableMethod);
    }
    let mut methods = [0u8; 255];
    s.read_exact(&mut methods[..n]).await?;
    if !methods[..n].contains(&NO_AUTH) {
        s.write_all(&[VER, NO_ACCEPTABLE]).await?;
        return Err(SocksError::NoAcceptableMethod);
    }
    s.write_all(&[VER, NO_AUTH]).await?;

    let mut head = [0u8; 4];
    s.read_exact(&mut head).await?;
    if head[0] != VER {
        return Err(SocksError::Version(head[0]));
    }
    if head[2] != 0 {
        reply(s, REP_GENERAL_FAILURE).await?;
        return Err(SocksError::Malformed("reserved byte is not zero"));
    }
    let addr = match head[3] {
        1 => {
            let mut a = [0u8; 4];
            s.read_exact(&mut a).await?;
            let port = s.read_u16().await?;
            TargetAddr::Ip(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(a)), port))
        }
        4 => {
            let mut a = [0u8; 16];
            s.read_exact(&mut a).await?;
            let port = s.read_u16().await?;
            TargetAddr::Ip(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(a)), port))
        }
        3 => {
            let len = s.read_u8().await? as usize;
            let mut name = [0u8; 255];
            s.read_exact(&mut name[..len]).await?;
            let port = s.read_u16().await?;
            if len == 0 {
                reply(s, REP_GENERAL_FAILURE).await?;
                return Err(SocksError::Malformed("empty domain name"));
            }
            let Ok(name) = std::str::from_utf8(&name[..len]) else {
                reply(s, REP_GENERAL_FAILURE).await?;
                return Err(SocksError::Malformed("domain name is not UTF-8"));
            };
            TargetAddr::Domain(name.to_owned(), port)
        }
        t => {
            reply(s, REP_ADDRESS_NOT_SUPPORTED).await?;
            return Err(SocksError::AddressType(t));
        }
    };
    if head[1] != CMD_CONNECT {
        reply(s, REP_COMMAND_NOT_SUPPORTED).await?;
        return Err(SocksError::Command(head[1]));
    }
    // Success, bound to 0.0.0.0:0: the real connection is made by the server, and
    // answering now saves the application a round trip (its first bytes ride in Open).
    reply(s, 0).await?;
    Ok(addr)
}

/// Sends a reply with an all-zero bound address.
pub async fn reply<S: AsyncWrite + Unpin>(s: &mut S, code: u8) -> std::io::Result<()> {
    s.write_all(&[VER, code, 0, 1, 0, 0, 0, 0, 0, 0]).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    async fn run(input: &[u8]) -> (Result<TargetAddr, SocksError>, Vec<u8>) {
        let (mut client, mut server) = tokio::io::duplex(4096);
        client.write_all(input).await.unwrap();
        client.shutdown().await.unwrap();
        let r = accept(&mut server).await;
        drop(server);
        let mut out = Vec::new();
        client.read_to_end(&mut out).await.unwrap();
        (r, out)
    }

    #[tokio::test]
    async fn ipv4_connect() {
        let (r, out) = run(&[5, 1, 0, 5, 1, 0, 1, 10, 0, 0, 1, 0, 80]).await;
        assert_eq!(r.unwrap(), TargetAddr::Ip("10.0.0.1:80".parse().unwrap()));
        assert_eq!(out, [5, 0, 5, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    }

    #[tokio::test]
    async fn ipv6_connect() {
        let mut req = vec![5, 2, 2, 0, 5, 1, 0, 4];
        req.extend_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
        req.extend_from_slice(&443u16.to_be_bytes());
        let (r, _) = run(&req).await;
        assert_eq!(r.unwrap(), TargetAddr::Ip("[2001:db8::1]:443".parse().unwrap()));
    }

    #[tokio::test]
    async fn domain_connect() {
        let mut req = vec![5, 1, 0, 5, 1, 0, 3, 11];
        req.extend_from_slice(b"example.org");
        req.extend_from_slice(&8080u16.to_be_bytes());
        let (r, _) = run(&req).await;
        assert_eq!(r.unwrap(), TargetAddr::Domain("example.org".into(), 8080));
    }

    #[tokio::test]
    async fn bind_and_udp_are_refused() {
        for cmd in [2u8, 3] {
            let (r, out) = run(&[5, 1, 0, 5, cmd, 0, 1, 1, 2, 3, 4, 0, 80]).await;
            assert!(matches!(r, Err(SocksError::Command(c)) if c == cmd));
            assert_eq!(out[2..4], [5, REP_COMMAND_NOT_SUPPORTED]);
        }
    }

    #[tokio::test]
    async fn no_acceptable_method() {
        let (r, out) = run(&[5, 1, 2]).await;
        assert!(matches!(r, Err(SocksError::NoAcceptableMethod)));
        assert_eq!(out, [5, 0xff]);
    }

    #[tokio::test]
    async fn garbage_and_truncation() {
        assert!(matches!(
            run(b"GET / HTTP/1.1\r\n").await.0,
            Err(SocksError::Version(b'G'))
        ));
        assert!(matches!(
            run(&[5, 1, 0, 5, 1, 0, 1, 10]).await.0,
            Err(SocksError::Io(_))
        ));
        assert!(matches!(run(&[]).await.0, Err(SocksError::Io(_))));
        let (r, out) = run(&[5, 1, 0, 5, 1, 0, 9]).await;
        assert!(matches!(r, Err(SocksError::AddressType(9))));
        assert_eq!(out[2..4], [5, REP_ADDRESS_NOT_SUPPORTED]);
    }

    #[tokio::test]
    async fn bad_domains() {
        let (r, _) = run(&[5, 1, 0, 5, 1, 0, 3, 0, 0, 80]).await;
        assert!(matches!(r, Err(SocksError::Malformed(_))));
        let (r, _) = run(&[5, 1, 0, 5, 1, 0, 3, 2, 0xff, 0xfe, 0, 80]).await;
        assert!(matches!(r, Err(SocksError::Malformed(_))));
    }

    proptest! {
        #[test]
        fn random_input_never_panics(input in prop::collection::vec(any::<u8>(), 0..600)) {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async { let _ = run(&input).await; });
        }
    }
}
