//! What a packet read from the TUN is, and the UDP packets written back into it (smoltcp's
//! `wire` views and representations: RFC 791, RFC 8200, RFC 768, RFC 9293).

use std::net::{IpAddr, SocketAddr};

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    Icmpv4Packet, Icmpv6Packet, IpAddress, IpProtocol, IpRepr, Ipv4Packet, Ipv6Packet, TcpPacket, UdpPacket, UdpRepr,
};

/// Hop limit of the packets the ingress writes (the usual default, RFC 1700).
const HOP_LIMIT: u8 = 64;

/// A packet read from the TUN, by what the ingress does with it.
#[derive(Debug, PartialEq, Eq)]
pub enum Kind<'a> {
    /// A TCP segment from `app` to `dst`; `syn` when it opens a connection (SYN without
    /// ACK).
    Tcp {
        app: SocketAddr,
        dst: SocketAddr,
        syn: bool,
    },
    /// A UDP datagram.
    Udp {
        app: SocketAddr,
        dst: SocketAddr,
        payload: &'a [u8],
    },
    /// An ICMP (IPv4) or ICMPv6 echo request from `app` to `dst`: `msg` is the whole
    /// ICMP message, `id` its identifier.
    Echo {
        app: IpAddr,
        dst: IpAddr,
        id: u16,
        msg: &'a [u8],
    },
    /// An IPv4 fragment.
    Fragment,
    /// Another protocol (its IP protocol number).
    Other(u8),
    /// Not a well-formed IPv4 or IPv6 packet, or a transport header that does not fit.
    Malformed(&'static str),
}

/// Sorts a packet read from the TUN. Only the headers the ingress needs are checked here;
/// smoltcp checks TCP segments whole (checksum included) as it takes them.
pub fn classify(buf: &[u8]) -> Kind<'_> {
    match buf.first().map(|b| b >> 4) {
        Some(4) => v4(buf),
        Some(6) => v6(buf),
        _ => Kind::Malformed("not IPv4 or IPv6"),
    }
}

fn v4(buf: &[u8]) -> Kind<'_> {
    let Ok(p) = Ipv4Packet::new_checked(buf) else {
        return Kind::Malformed("IPv4 header");
    };
    if !p.verify_checksum() {
        return Kind::Malformed("IPv4 header checksum");
    }
    if p.more_frags() || p.frag_offset() != 0 {
        return Kind::Fragment;
    }
    let (src, dst) = (IpAddr::V4(p.src_addr()), IpAddr::V4(p.dst_addr()));
    let start = usize::from(p.header_len());
    let end = usize::from(p.total_len());
    transport(u8::from(p.next_header()), src, dst, &buf[start..end])
}

fn v6(buf: &[u8]) -> Kind<'_> {
    let Ok(p) = Ipv6Packet::new_checked(buf) else {
        return Kind::Malformed("IPv6 header");
    };
    let (src, dst) = (IpAddr::V6(p.src_addr()), IpAddr::V6(p.dst_addr()));
    let start = smoltcp::wire::IPV6_HEADER_LEN;
    let end = start + usize::from(p.payload_len());
    // Extension headers are not walked: a packet with one counts as another protocol
    // (the host puts none on plain TCP and UDP).
    transport(u8::from(p.next_header()), src, dst, &buf[start..end])
}

fn transport(proto: u8, src: IpAddr, dst: IpAddr, payload: &[u8]) -> Kind<'_> {
    match IpProtocol::from(proto) {
        IpProtocol::Tcp => {
            let Ok(t) = TcpPacket::new_checked(payload) else {
                return Kind::Malformed("TCP header");
            };
            Kind::Tcp {
                app: SocketAddr::new(src, t.src_port()),
                dst: SocketAddr::new(dst, t.dst_port()),
                syn: t.syn() && !t.ack(),
            }
        }
        IpProtocol::Udp => {
            let Ok(u) = UdpPacket::new_checked(payload) else {
                return Kind::Malformed("UDP header");
            };
            if u.dst_port() == 0 || u.src_port() == 0 {
                return Kind::Malformed("UDP port 0");
            }
            let len = usize::from(u.len());
            Kind::Udp {
                app: SocketAddr::new(src, u.src_port()),
                dst: SocketAddr::new(dst, u.dst_port()),
                payload: &payload[8..len],
            }
        }
        IpProtocol::Icmp => echo(proto, src, dst, payload, 8),
        IpProtocol::Icmpv6 => echo(proto, src, dst, payload, 128),
        _ => Kind::Other(proto),
    }
}

/// An echo request (ICMP type 8, RFC 792; ICMPv6 type 128, RFC 4443 §4.1) with a valid
/// checksum; any other ICMP message counts as a protocol the ingress does not carry.
fn echo<'a>(proto: u8, src: IpAddr, dst: IpAddr, msg: &'a [u8], request: u8) -> Kind<'a> {
    if msg.len() < 8 {
        return Kind::Malformed("ICMP header");
    }
    if msg[0] != request || msg[1] != 0 {
        return Kind::Other(proto);
    }
    let ok = match (src, dst) {
        (IpAddr::V4(_), IpAddr::V4(_)) => Icmpv4Packet::new_unchecked(msg).verify_checksum(),
        (IpAddr::V6(s), IpAddr::V6(d)) => Icmpv6Packet::new_unchecked(msg).verify_checksum(&s, &d),
        _ => false,
    };
    if !ok {
        return Kind::Malformed("ICMP checksum");
    }
    Kind::Echo {
        app: src,
        dst,
        id: u16::from_be_bytes([msg[4], msg[5]]),
        msg,
    }
}

/// The echo reply to hand the application: `reply` as the destination sent it (through
/// the server's ping socket, which chose its own identifier), given back the
/// application's identifier `id`, from `from` to `to`. `None` if `reply` is no echo reply
/// of the family, or would not fit `mtu`.
pub fn echo_reply(from: IpAddr, to: IpAddr, id: u16, reply: &[u8], mtu: usize) -> Option<Vec<u8>> {
    let (proto, ty) = match from {
        IpAddr::V4(_) => (IpProtocol::Icmp, 0),
        IpAddr::V6(_) => (IpProtocol::Icmpv6, 129),
    };
    if reply.len() < 8 || reply[0] != ty || reply[1] != 0 {
        return None;
    }
    let (mut buf, start) = ip_packet(from, to, proto, reply.len(), mtu)?;
    let m = &mut buf[start..];
    m.copy_from_slice(reply);
    m[4..6].copy_from_slice(&id.to_be_bytes());
    match (from, to) {
        (IpAddr::V4(_), IpAddr::V4(_)) => Icmpv4Packet::new_unchecked(m).fill_checksum(),
        (IpAddr::V6(s), IpAddr::V6(d)) => Icmpv6Packet::new_unchecked(m).fill_checksum(&s, &d),
        _ => return None,
    }
    Some(buf)
}

/// An IP packet from `from` to `to` (one family) with an empty payload of `len` bytes of
/// protocol `proto`, and where the payload starts; `None` if it would not fit `mtu`.
fn ip_packet(from: IpAddr, to: IpAddr, proto: IpProtocol, len: usize, mtu: usize) -> Option<(Vec<u8>, usize)> {
    if from.is_ipv4() != to.is_ipv4() {
        return None;
    }
    let ip = IpRepr::new(from.into(), to.into(), proto, len, HOP_LIMIT);
    // `IpRepr::buffer_len` is the whole packet, header and payload.
    if ip.buffer_len() > mtu {
        return None;
    }
    let mut buf = vec![0u8; ip.buffer_len()];
    ip.emit(&mut buf[..], &ChecksumCapabilities::default());
    Some((buf, ip.header_len()))
}

/// An IP packet carrying UDP `data` from `from` to `to` (both of one family), or `None`
/// if it would not fit `mtu`.
pub fn udp(from: SocketAddr, to: SocketAddr, data: &[u8], mtu: usize) -> Option<Vec<u8>> {
    let udp = UdpRepr {
        src_port: from.port(),
        dst_port: to.port(),
    };
    let caps = ChecksumCapabilities::default();
    let (src, dst) = (IpAddress::from(from.ip()), IpAddress::from(to.ip()));
    let (mut buf, start) = ip_packet(from.ip(), to.ip(), IpProtocol::Udp, 8 + data.len(), mtu)?;
    let mut p = UdpPacket::new_unchecked(&mut buf[start..]);
    udp.emit(&mut p, &src, &dst, data.len(), |b| b.copy_from_slice(data), &caps);
    Some(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_udp_packet_built_here_reads_back_as_the_same_datagram() {
        let from: SocketAddr = "192.0.2.1:53".parse().unwrap();
        let to: SocketAddr = "10.0.0.2:40000".parse().unwrap();
        let p = udp(from, to, b"hello", 1500).unwrap();
        assert_eq!(
            classify(&p),
            Kind::Udp {
                app: from,
                dst: to,
                payload: b"hello"
            }
        );
        let from6: SocketAddr = "[2001:db8::1]:53".parse().unwrap();
        let to6: SocketAddr = "[fd00::2]:40000".parse().unwrap();
        let p = udp(from6, to6, b"hi", 1500).unwrap();
        assert_eq!(
            classify(&p),
            Kind::Udp {
                app: from6,
                dst: to6,
                payload: b"hi"
            }
        );
        assert!(udp(from, to, &[0; 1500], 1500).is_none(), "larger than the MTU");
    }

    #[test]
    fn an_echo_reply_goes_back_with_the_applications_identifier() {
        for (app, dst) in [("10.0.0.2", "192.0.2.1"), ("fd00::2", "2001:db8::1")] {
            let (app, dst): (IpAddr, IpAddr) = (app.parse().unwrap(), dst.parse().unwrap());
            let v4 = app.is_ipv4();
            // The reply as the server's ping socket read it: its own identifier 0x9999.
            let mut reply = vec![if v4 { 0 } else { 129 }, 0, 0, 0, 0x99, 0x99, 0, 7];
            reply.extend_from_slice(b"payload");
            let p = echo_reply(dst, app, 0x1234, &reply, 1500).unwrap();
            // Read back as if the application had sent it, with the request's type.
            let mut asked = p.clone();
            let off = if v4 { 20 } else { 40 };
            asked[off] = if v4 { 8 } else { 128 };
            match (dst, app) {
                (IpAddr::V4(_), IpAddr::V4(_)) => Icmpv4Packet::new_unchecked(&mut asked[off..]).fill_checksum(),
                (IpAddr::V6(s), IpAddr::V6(d)) => Icmpv6Packet::new_unchecked(&mut asked[off..]).fill_checksum(&s, &d),
                _ => unreachable!(),
            }
            let Kind::Echo {
                app: a,
                dst: d,
                id,
                msg,
            } = classify(&asked)
            else {
                panic!("not an echo: {:?}", classify(&asked))
            };
            assert_eq!((a, d, id, &msg[8..]), (dst, app, 0x1234, &b"payload"[..]));
            // A corrupted checksum is named.
            asked[off + 8] ^= 1;
            assert_eq!(classify(&asked), Kind::Malformed("ICMP checksum"));
            assert!(
                echo_reply(dst, app, 1, &[8, 0, 0, 0, 0, 0, 0, 0], 1500).is_none(),
                "a request is no reply"
            );
        }
    }

    #[test]
    fn bad_packets_are_named_not_trusted() {
        assert_eq!(classify(&[]), Kind::Malformed("not IPv4 or IPv6"));
        assert_eq!(classify(&[0x45, 0, 0]), Kind::Malformed("IPv4 header"));
        let mut p = udp(
            "192.0.2.1:53".parse().unwrap(),
            "10.0.0.2:4".parse().unwrap(),
            b"x",
            1500,
        )
        .unwrap();
        p[9] = 47; // GRE
        p[10] ^= 0xff;
        assert_eq!(classify(&p), Kind::Malformed("IPv4 header checksum"));
        p[10] ^= 0xff;
        // The header checksum covers the protocol byte; recompute it.
        let mut ip = Ipv4Packet::new_unchecked(&mut p);
        ip.fill_checksum();
        assert_eq!(classify(&p), Kind::Other(47));
        let mut q = udp(
            "192.0.2.1:53".parse().unwrap(),
            "10.0.0.2:4".parse().unwrap(),
            b"x",
            1500,
        )
        .unwrap();
        let mut ip = Ipv4Packet::new_unchecked(&mut q);
        ip.set_more_frags(true);
        ip.fill_checksum();
        assert_eq!(classify(&q), Kind::Fragment);
    }
}
