//! What a packet read from the TUN is, and the UDP packets written back into it (smoltcp's
//! `wire` views and representations: RFC 791, RFC 8200, RFC 768, RFC 9293).

use std::net::{IpAddr, SocketAddr};

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{IpAddress, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, TcpPacket, UdpPacket, UdpRepr};

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
        _ => Kind::Other(proto),
    }
}

/// An IP packet carrying UDP `data` from `from` to `to` (both of one family), or `None`
/// if it would not fit `mtu`.
pub fn udp(from: SocketAddr, to: SocketAddr, data: &[u8], mtu: usize) -> Option<Vec<u8>> {
    let udp = UdpRepr {
        src_port: from.port(),
        dst_port: to.port(),
    };
    let udp_len = 8 + data.len();
    let caps = ChecksumCapabilities::default();
    let (src, dst) = (IpAddress::from(from.ip()), IpAddress::from(to.ip()));
    let (mut buf, start) = match (from.ip(), to.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let ip = Ipv4Repr {
                src_addr: s,
                dst_addr: d,
                next_header: IpProtocol::Udp,
                payload_len: udp_len,
                hop_limit: HOP_LIMIT,
            };
            let total = ip.buffer_len() + udp_len;
            if total > mtu {
                return None;
            }
            let mut buf = vec![0u8; total];
            ip.emit(&mut Ipv4Packet::new_unchecked(&mut buf), &caps);
            (buf, ip.buffer_len())
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let ip = Ipv6Repr {
                src_addr: s,
                dst_addr: d,
                next_header: IpProtocol::Udp,
                payload_len: udp_len,
                hop_limit: HOP_LIMIT,
            };
            let total = ip.buffer_len() + udp_len;
            if total > mtu {
                return None;
            }
            let mut buf = vec![0u8; total];
            ip.emit(&mut Ipv6Packet::new_unchecked(&mut buf));
            (buf, ip.buffer_len())
        }
        _ => return None,
    };
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
