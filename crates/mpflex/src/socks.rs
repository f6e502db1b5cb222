//! SOCKS5 server side (RFC 1928): no authentication (a user name, RFC 1929, is taken for
//! policy rules, its password unchecked), CONNECT and UDP ASSOCIATE to IPv4,
//! IPv6 or a name. [`accept`] takes CONNECT only; [`accept_request`] UDP ASSOCIATE too,
//! whose datagrams' header [`parse_udp`] and [`encode_udp`] read and write (§7).
//!
//! Every read has a fixed upper size (at most 2 + 255 bytes of greeting and 4 + 1 + 255 + 2
//! bytes of request, all in stack buffers), so a client speaking garbage costs nothing but
//! its connection. The handshake has no timeout of its own: wrap [`accept`] in one.
//!
//! [`accept`] never reads past the end of the request, so bytes an application sends right
//! behind it (optimistic data, before our reply arrives) stay in the stream for the caller.

use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use mpflex_wire::TargetAddr;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const VER: u8 = 5;
const NO_AUTH: u8 = 0;
/// Username/password (RFC 1929): taken as a name for policy rules, not as authentication.
const USER_PASS: u8 = 2;
const NO_ACCEPTABLE: u8 = 0xff;
const CMD_CONNECT: u8 = 1;
const CMD_UDP_ASSOCIATE: u8 = 3;
const ATYP_V4: u8 = 1;
const ATYP_DOMAIN: u8 = 3;
const ATYP_V6: u8 = 4;

/// Reply codes (RFC 1928 §6).
pub const REP_SUCCEEDED: u8 = 0;
pub const REP_GENERAL_FAILURE: u8 = 1;
pub const REP_NOT_ALLOWED: u8 = 2;
pub const REP_NETWORK_UNREACHABLE: u8 = 3;
pub const REP_HOST_UNREACHABLE: u8 = 4;
pub const REP_CONNECTION_REFUSED: u8 = 5;
pub const REP_TTL_EXPIRED: u8 = 6;
pub const REP_COMMAND_NOT_SUPPORTED: u8 = 7;
pub const REP_ADDRESS_NOT_SUPPORTED: u8 = 8;

#[derive(Debug, thiserror::Error)]
pub enum SocksError {
    #[error("not SOCKS5 (version byte {0:#04x})")]
    Version(u8),
    #[error("client offers no acceptable authentication method (only \"no authentication\" is supported)")]
    NoAcceptableMethod,
    #[error("unsupported command {0} (only CONNECT and UDP ASSOCIATE)")]
    Command(u8),
    #[error("unsupported address type {0}")]
    AddressType(u8),
    #[error("malformed request: {0}")]
    Malformed(&'static str),
    #[error("client closed the connection in the middle of the handshake")]
    Truncated,
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

async fn read_exact<S: AsyncRead + Unpin>(s: &mut S, buf: &mut [u8]) -> Result<(), SocksError> {
    match s.read_exact(buf).await {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::UnexpectedEof => Err(SocksError::Truncated),
        Err(e) => Err(e.into()),
    }
}

async fn read_u8<S: AsyncRead + Unpin>(s: &mut S) -> Result<u8, SocksError> {
    let mut b = [0u8; 1];
    read_exact(s, &mut b).await?;
    Ok(b[0])
}

async fn read_u16<S: AsyncRead + Unpin>(s: &mut S) -> Result<u16, SocksError> {
    let mut b = [0u8; 2];
    read_exact(s, &mut b).await?;
    Ok(u16::from_be_bytes(b))
}

/// Sends a failure reply and returns `e`. A failure to send is ignored: the handshake has
/// failed either way, and `e` says why.
async fn fail<S: AsyncWrite + Unpin, T>(s: &mut S, code: u8, e: SocksError) -> Result<T, SocksError> {
    let _ = reply_failure(s, code).await;
    Err(e)
}

/// What a SOCKS5 client asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// CONNECT: the success reply has been sent; the stream carries the application's bytes.
    Connect(TargetAddr),
    /// CONNECT from a client that sent a user name (RFC 1929), for the policy rules'
    /// `users` matcher.
    ConnectAs(TargetAddr, String),
    /// UDP ASSOCIATE, with the address the client says it will send from (all zero if it
    /// does not know yet). No reply has been sent: the caller binds the relay socket and
    /// answers with its address ([`reply_bound`]), or fails.
    UdpAssociate(TargetAddr),
}

/// Runs the SOCKS5 handshake for CONNECT only. On success the success reply (bound
/// address 0.0.0.0:0) has been sent and the stream carries the application's bytes from
/// here on. On a protocol error the matching failure reply has been sent where RFC 1928
/// has one.
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) -> Result<TargetAddr, SocksError> {
    match handshake(s, false).await? {
        Request::Connect(a) | Request::ConnectAs(a, _) => Ok(a),
        Request::UdpAssociate(_) => unreachable!("refused by the handshake"),
    }
}

/// Runs the SOCKS5 handshake for CONNECT or UDP ASSOCIATE (see [`Request`]).
pub async fn accept_request<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) -> Result<Request, SocksError> {
    handshake(s, true).await
}

async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, udp: bool) -> Result<Request, SocksError> {
    // Greeting: VER NMETHODS METHODS[NMETHODS].
    let ver = read_u8(s).await?;
    if ver != VER {
        // Not SOCKS5 (SOCKS4, HTTP, TLS …): there is no reply it would understand.
        return Err(SocksError::Version(ver));
    }
    let n = read_u8(s).await? as usize;
    let mut methods = [0u8; 255];
    read_exact(s, &mut methods[..n]).await?;
    // A client that offers a user name gets asked for it: policy rules may match it. The
    // password is not checked (the listener is the host's own; docs/policy.md).
    let mut user = None;
    if methods[..n].contains(&USER_PASS) {
        s.write_all(&[VER, USER_PASS]).await?;
        // VER(1) ULEN UNAME PLEN PASSWD.
        if read_u8(s).await? != 1 {
            let _ = s.write_all(&[1, 1]).await;
            return Err(SocksError::Malformed("username/password version is not 1"));
        }
        let mut name = [0u8; 255];
        let ulen = read_u8(s).await? as usize;
        read_exact(s, &mut name[..ulen]).await?;
        let plen = read_u8(s).await? as usize;
        let mut pass = [0u8; 255];
        read_exact(s, &mut pass[..plen]).await?;
        s.write_all(&[1, 0]).await?;
        user = Some(String::from_utf8_lossy(&name[..ulen]).into_owned());
    } else if methods[..n].contains(&NO_AUTH) {
        s.write_all(&[VER, NO_AUTH]).await?;
    } else {
        let _ = s.write_all(&[VER, NO_ACCEPTABLE]).await;
        return Err(SocksError::NoAcceptableMethod);
    }

    // Request: VER CMD RSV ATYP DST.ADDR DST.PORT.
    let mut head = [0u8; 4];
    read_exact(s, &mut head).await?;
    let [ver, cmd, rsv, atyp] = head;
    if ver != VER {
        return fail(s, REP_GENERAL_FAILURE, SocksError::Version(ver)).await;
    }
    if rsv != 0 {
        return fail(
            s,
            REP_GENERAL_FAILURE,
            SocksError::Malformed("reserved byte is not zero"),
        )
        .await;
    }
    let addr = match atyp {
        ATYP_V4 => {
            let mut a = [0u8; 4];
            read_exact(s, &mut a).await?;
            TargetAddr::Ip(SocketAddr::new(IpAddr::V4(Ipv4Addr::from(a)), read_u16(s).await?))
        }
        ATYP_V6 => {
            let mut a = [0u8; 16];
            read_exact(s, &mut a).await?;
            TargetAddr::Ip(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(a)), read_u16(s).await?))
        }
        ATYP_DOMAIN => {
            let len = read_u8(s).await? as usize;
            let mut name = [0u8; 255];
            read_exact(s, &mut name[..len]).await?;
            let port = read_u16(s).await?;
            if len == 0 {
                return fail(s, REP_GENERAL_FAILURE, SocksError::Malformed("empty domain name")).await;
            }
            let Ok(name) = std::str::from_utf8(&name[..len]) else {
                return fail(
                    s,
                    REP_GENERAL_FAILURE,
                    SocksError::Malformed("domain name is not UTF-8"),
                )
                .await;
            };
            TargetAddr::Domain(name.to_owned(), port)
        }
        t => return fail(s, REP_ADDRESS_NOT_SUPPORTED, SocksError::AddressType(t)).await,
    };
    if cmd == CMD_UDP_ASSOCIATE && udp {
        return Ok(Request::UdpAssociate(addr));
    }
    if cmd != CMD_CONNECT {
        return fail(s, REP_COMMAND_NOT_SUPPORTED, SocksError::Command(cmd)).await;
    }
    // Success, bound to 0.0.0.0:0: the real connection is made by the server, and
    // answering now saves the application a round trip (its first bytes ride in Open).
    reply(s, REP_SUCCEEDED).await?;
    Ok(match user {
        Some(u) => Request::ConnectAs(addr, u),
        None => Request::Connect(addr),
    })
}

/// Sends a reply with code `code` and bound address `bound` (UDP ASSOCIATE's relay).
pub async fn reply_bound<S: AsyncWrite + Unpin>(s: &mut S, code: u8, bound: SocketAddr) -> std::io::Result<()> {
    let mut v = vec![VER, code, 0];
    TargetAddr::Ip(bound).encode(&mut v);
    s.write_all(&v).await?;
    s.flush().await
}

/// Why a UDP request datagram (RFC 1928 §7) is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UdpError {
    /// FRAG ≠ 0: fragmentation is optional (§7) and not implemented; the RFC lets an
    /// implementation that does not support it drop such datagrams.
    #[error("fragmented datagram (FRAG {0})")]
    Fragmented(u8),
    #[error("malformed UDP request header: {0}")]
    Malformed(&'static str),
}

/// Reads a UDP request: `RSV(2) FRAG(1) ATYP DST.ADDR DST.PORT DATA`. Returns the
/// destination and the payload.
pub fn parse_udp(buf: &[u8]) -> Result<(TargetAddr, &[u8]), UdpError> {
    if buf.len() < 4 {
        return Err(UdpError::Malformed("shorter than a header"));
    }
    if buf[0] != 0 || buf[1] != 0 {
        return Err(UdpError::Malformed("reserved bytes are not zero"));
    }
    if buf[2] != 0 {
        return Err(UdpError::Fragmented(buf[2]));
    }
    let mut rest = &buf[3..];
    let addr = TargetAddr::decode(&mut rest).map_err(|_| UdpError::Malformed("bad destination address"))?;
    Ok((addr, rest))
}

/// Writes a UDP reply header for a datagram from `from`, then `data` (§7).
pub fn encode_udp(from: &TargetAddr, data: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(3 + from.encoded_len() + data.len());
    v.extend_from_slice(&[0, 0, 0]);
    from.encode(&mut v);
    v.extend_from_slice(data);
    v
}

/// Sends a reply with code `code` and an all-zero IPv4 bound address.
pub async fn reply<S: AsyncWrite + Unpin>(s: &mut S, code: u8) -> std::io::Result<()> {
    s.write_all(&[VER, code, 0, ATYP_V4, 0, 0, 0, 0, 0, 0]).await?;
    s.flush().await
}

/// Sends a failure reply (one of the `REP_*` codes). Only meaningful after the method
/// negotiation and before a success reply, i.e. not after [`accept`] returned `Ok`.
pub async fn reply_failure<S: AsyncWrite + Unpin>(s: &mut S, code: u8) -> std::io::Result<()> {
    reply(s, code).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GREETING: [u8; 3] = [5, 1, 0];
    const METHOD_OK: [u8; 2] = [5, 0];

    /// Feeds `input` (then EOF) to `accept`; returns its result, everything it wrote and
    /// whatever it left unread.
    async fn run_full(input: &[u8]) -> (Result<TargetAddr, SocksError>, Vec<u8>, Vec<u8>) {
        let (mut client, mut server) = tokio::io::duplex(4096);
        client.write_all(input).await.unwrap();
        client.shutdown().await.unwrap();
        let r = accept(&mut server).await;
        let mut rest = Vec::new();
        server.read_to_end(&mut rest).await.unwrap();
        drop(server);
        let mut out = Vec::new();
        client.read_to_end(&mut out).await.unwrap();
        (r, out, rest)
    }

    async fn run(input: &[u8]) -> (Result<TargetAddr, SocksError>, Vec<u8>) {
        let (r, out, _) = run_full(input).await;
        (r, out)
    }

    fn request(cmd: u8, addr: &TargetAddr) -> Vec<u8> {
        let mut v = GREETING.to_vec();
        v.extend_from_slice(&[5, cmd, 0]);
        addr.encode(&mut v);
        v
    }

    fn reply_bytes(code: u8) -> Vec<u8> {
        vec![5, code, 0, 1, 0, 0, 0, 0, 0, 0]
    }

    fn success_output() -> Vec<u8> {
        [&METHOD_OK[..], &reply_bytes(0)].concat()
    }

    #[tokio::test]
    async fn ipv4_connect() {
        let (r, out) = run(&[5, 1, 0, 5, 1, 0, 1, 10, 0, 0, 1, 0, 80]).await;
        assert_eq!(r.unwrap(), TargetAddr::Ip("10.0.0.1:80".parse().unwrap()));
        assert_eq!(out, [5, 0, 5, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    }

    #[tokio::test]
    async fn ipv6_connect() {
        let mut req = vec![5, 2, 1, 0, 5, 1, 0, 4];
        req.extend_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
        req.extend_from_slice(&443u16.to_be_bytes());
        let (r, out) = run(&req).await;
        assert_eq!(r.unwrap(), TargetAddr::Ip("[2001:db8::1]:443".parse().unwrap()));
        assert_eq!(out, success_output());
    }

    #[tokio::test]
    async fn domain_connect() {
        let mut req = vec![5, 1, 0, 5, 1, 0, 3, 11];
        req.extend_from_slice(b"example.org");
        req.extend_from_slice(&8080u16.to_be_bytes());
        let (r, out) = run(&req).await;
        assert_eq!(r.unwrap(), TargetAddr::Domain("example.org".into(), 8080));
        assert_eq!(out, success_output());
    }

    #[tokio::test]
    async fn longest_domain_and_unicode() {
        let long = "a".repeat(255);
        let (r, _) = run(&request(1, &TargetAddr::Domain(long.clone(), 1))).await;
        assert_eq!(r.unwrap(), TargetAddr::Domain(long, 1));
        let (r, _) = run(&request(1, &TargetAddr::Domain("bücher.example".into(), 443))).await;
        assert_eq!(r.unwrap(), TargetAddr::Domain("bücher.example".into(), 443));
    }

    #[tokio::test]
    async fn data_behind_the_request_is_left_in_the_stream() {
        let mut input = request(1, &TargetAddr::Domain("example.org".into(), 80));
        input.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        let (r, out, rest) = run_full(&input).await;
        assert_eq!(r.unwrap(), TargetAddr::Domain("example.org".into(), 80));
        assert_eq!(out, success_output());
        assert_eq!(rest, b"GET / HTTP/1.1\r\n\r\n");
    }

    /// UDP ASSOCIATE comes back to the caller with the client's address and no reply
    /// written yet; BIND stays refused.
    #[tokio::test]
    async fn udp_associate_is_handed_to_the_caller() {
        let (mut client, mut server) = tokio::io::duplex(4096);
        client
            .write_all(&[5, 1, 0, 5, 3, 0, 1, 0, 0, 0, 0, 0, 0])
            .await
            .unwrap();
        client.shutdown().await.unwrap();
        let r = accept_request(&mut server).await.unwrap();
        assert_eq!(r, Request::UdpAssociate(TargetAddr::Ip("0.0.0.0:0".parse().unwrap())));
        reply_bound(&mut server, REP_SUCCEEDED, "[::1]:4000".parse().unwrap())
            .await
            .unwrap();
        drop(server);
        let mut out = Vec::new();
        client.read_to_end(&mut out).await.unwrap();
        let mut want = vec![5, 0, 5, 0, 0, 4];
        want.extend_from_slice(&"::1".parse::<Ipv6Addr>().unwrap().octets());
        want.extend_from_slice(&4000u16.to_be_bytes());
        assert_eq!(out, want);

        let (mut client, mut server) = tokio::io::duplex(4096);
        client
            .write_all(&[5, 1, 0, 5, 2, 0, 1, 1, 2, 3, 4, 0, 80])
            .await
            .unwrap();
        assert!(matches!(accept_request(&mut server).await, Err(SocksError::Command(2))));
    }

    /// The §7 header for IPv4, IPv6 and names; FRAG ≠ 0, reserved bytes and truncated
    /// addresses are errors, an empty payload is not.
    #[test]
    fn udp_headers() {
        for addr in [
            TargetAddr::Ip("10.1.2.3:53".parse().unwrap()),
            TargetAddr::Ip("[2001:db8::7]:443".parse().unwrap()),
            TargetAddr::Domain("dns.example".into(), 53),
        ] {
            let d = encode_udp(&addr, b"payload");
            assert_eq!(parse_udp(&d), Ok((addr.clone(), &b"payload"[..])));
            let empty = encode_udp(&addr, b"");
            assert_eq!(parse_udp(&empty), Ok((addr.clone(), &b""[..])));
            for cut in 0..d.len() - 7 {
                assert!(matches!(parse_udp(&d[..cut]), Err(UdpError::Malformed(_))), "cut {cut}");
            }
            let mut frag = d.clone();
            frag[2] = 1;
            assert_eq!(parse_udp(&frag), Err(UdpError::Fragmented(1)));
            let mut rsv = d;
            rsv[0] = 1;
            assert!(matches!(parse_udp(&rsv), Err(UdpError::Malformed(_))));
        }
    }

    #[tokio::test]
    async fn bind_and_udp_are_refused() {
        for cmd in [2u8, 3, 0, 0xff] {
            let (r, out) = run(&[5, 1, 0, 5, cmd, 0, 1, 1, 2, 3, 4, 0, 80]).await;
            assert!(matches!(r, Err(SocksError::Command(c)) if c == cmd), "{r:?}");
            assert_eq!(out, [&METHOD_OK[..], &reply_bytes(REP_COMMAND_NOT_SUPPORTED)].concat());
        }
    }

    /// A client that offers a user name (RFC 1929) is asked for it; the name comes back
    /// with the request, the password is not checked.
    #[tokio::test]
    async fn a_user_name_comes_with_the_request() {
        let mut input = vec![5, 2, 0, 2, 1, 5];
        input.extend_from_slice(b"alice");
        input.push(3);
        input.extend_from_slice(b"pwd");
        input.extend_from_slice(&[5, 1, 0, 1, 10, 0, 0, 1, 0, 80]);
        let (mut client, mut server) = tokio::io::duplex(4096);
        client.write_all(&input).await.unwrap();
        let r = accept_request(&mut server).await.unwrap();
        assert_eq!(
            r,
            Request::ConnectAs(TargetAddr::Ip("10.0.0.1:80".parse().unwrap()), "alice".into())
        );
        drop(server);
        let mut out = Vec::new();
        client.read_to_end(&mut out).await.unwrap();
        assert_eq!(out[..4], [5, 2, 1, 0], "method chosen, then the name accepted");
    }

    #[tokio::test]
    async fn no_acceptable_method() {
        // GSSAPI only.
        let (r, out) = run(&[5, 1, 1]).await;
        assert!(matches!(r, Err(SocksError::NoAcceptableMethod)), "{r:?}");
        assert_eq!(out, [5, 0xff]);
        // No methods at all.
        let (r, out) = run(&[5, 0]).await;
        assert!(matches!(r, Err(SocksError::NoAcceptableMethod)), "{r:?}");
        assert_eq!(out, [5, 0xff]);
    }

    #[tokio::test]
    async fn garbage_bytes() {
        // HTTP, SOCKS4, TLS: refused on the first byte, nothing written back.
        for input in [
            &b"GET / HTTP/1.1\r\n\r\n"[..],
            &[4, 1, 0, 80, 1, 2, 3, 4, 0],
            &[0x16, 3, 1, 0, 0xa5],
        ] {
            let (r, out) = run(input).await;
            assert!(matches!(r, Err(SocksError::Version(v)) if v == input[0]), "{r:?}");
            assert!(out.is_empty());
        }
        // Right greeting, wrong request version.
        let (r, out) = run(&[5, 1, 0, 4, 1, 0, 1, 1, 2, 3, 4, 0, 80]).await;
        assert!(matches!(r, Err(SocksError::Version(4))), "{r:?}");
        assert_eq!(out, [&METHOD_OK[..], &reply_bytes(REP_GENERAL_FAILURE)].concat());
        // Reserved byte set.
        let (r, out) = run(&[5, 1, 0, 5, 1, 7, 1, 1, 2, 3, 4, 0, 80]).await;
        assert!(matches!(r, Err(SocksError::Malformed(_))), "{r:?}");
        assert_eq!(out, [&METHOD_OK[..], &reply_bytes(REP_GENERAL_FAILURE)].concat());
        // Unknown address type.
        let (r, out) = run(&[5, 1, 0, 5, 1, 0, 9]).await;
        assert!(matches!(r, Err(SocksError::AddressType(9))), "{r:?}");
        assert_eq!(out, [&METHOD_OK[..], &reply_bytes(REP_ADDRESS_NOT_SUPPORTED)].concat());
    }

    #[tokio::test]
    async fn truncated_request() {
        let full = [
            request(1, &TargetAddr::Ip("10.0.0.1:80".parse().unwrap())),
            request(1, &TargetAddr::Ip("[2001:db8::1]:443".parse().unwrap())),
            request(1, &TargetAddr::Domain("example.org".into(), 80)),
        ];
        for req in &full {
            for cut in 0..req.len() {
                let (r, _) = run(&req[..cut]).await;
                assert!(
                    matches!(r, Err(SocksError::Truncated)),
                    "cut at {cut} of {req:?}: {r:?}"
                );
            }
            assert!(run(req).await.0.is_ok());
        }
    }

    #[tokio::test]
    async fn zero_length_and_non_utf8_domains() {
        let (r, out) = run(&[5, 1, 0, 5, 1, 0, 3, 0, 0, 80]).await;
        assert!(matches!(r, Err(SocksError::Malformed("empty domain name"))), "{r:?}");
        assert_eq!(out, [&METHOD_OK[..], &reply_bytes(REP_GENERAL_FAILURE)].concat());
        let (r, out) = run(&[5, 1, 0, 5, 1, 0, 3, 2, 0xff, 0xfe, 0, 80]).await;
        assert!(
            matches!(r, Err(SocksError::Malformed("domain name is not UTF-8"))),
            "{r:?}"
        );
        assert_eq!(out, [&METHOD_OK[..], &reply_bytes(REP_GENERAL_FAILURE)].concat());
    }

    #[tokio::test]
    async fn peer_that_stops_reading_does_not_matter() {
        // The client vanishes right after its request: the reply fails to send, but
        // accept still returns (an error), it does not hang or panic.
        let (mut client, mut server) = tokio::io::duplex(64);
        client
            .write_all(&[5, 1, 0, 5, 1, 0, 1, 1, 2, 3, 4, 0, 80])
            .await
            .unwrap();
        drop(client);
        assert!(accept(&mut server).await.is_err());
    }

    #[tokio::test]
    async fn reply_failure_format() {
        let mut v = Vec::new();
        reply_failure(&mut v, REP_CONNECTION_REFUSED).await.unwrap();
        assert_eq!(v, reply_bytes(5));
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    proptest! {
        #[test]
        fn random_input_never_panics(input in prop::collection::vec(any::<u8>(), 0..600)) {
            block_on(async { let _ = run(&input).await; });
        }

        #[test]
        fn random_udp_requests_never_panic(input in prop::collection::vec(any::<u8>(), 0..600)) {
            if let Ok((_, data)) = parse_udp(&input) {
                prop_assert!(data.len() < input.len());
            }
        }

        /// Random bytes behind a valid greeting and request header reach the address parser.
        #[test]
        fn random_request_never_panics(
            cmd in prop_oneof![Just(1u8), any::<u8>()],
            atyp in prop_oneof![Just(1u8), Just(3u8), Just(4u8), any::<u8>()],
            tail in prop::collection::vec(any::<u8>(), 0..300),
        ) {
            let mut input = vec![5, 1, 0, 5, cmd, 0, atyp];
            input.extend_from_slice(&tail);
            let (r, out) = block_on(run(&input));
            if let Ok(TargetAddr::Domain(d, _)) = &r {
                prop_assert!(!d.is_empty() && d.len() <= 255);
            }
            prop_assert!(out.len() <= 12);
        }
    }
}
