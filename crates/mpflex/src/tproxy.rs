//! The `TPROXY` ingress (the router case: the applications are on a LAN behind this host).
//!
//! UDP: datagrams diverted to the client by a `TPROXY` rule keep their original
//! destination, which the kernel hands over with each datagram (`IP_RECVORIGDSTADDR`,
//! `IPV6_RECVORIGDSTADDR`; linux/in.h, ip(7)). Answers must come from that destination,
//! so they go out of a socket bound to it, a non-local address, which `IP_TRANSPARENT`
//! permits (ip(7); it needs `CAP_NET_ADMIN`).
//!
//! TCP: a listener with `IP_TRANSPARENT` accepts connections to any address a `TPROXY`
//! rule diverts to it, and an accepted connection's local address is the destination
//! the application asked for (the kernel's Documentation/networking/tproxy.rst): no
//! conntrack entry and no NAT, unlike `REDIRECT` (`crate::redirect`).
//!
//! The rules (the exact commands, nftables and iptables, are in docs/transparent.md and
//! docs/udp.md):
//! `nft add rule ip mangle prerouting iifname "lan0" meta l4proto udp tproxy to :1082 meta mark set 1`
//! with `ip rule add fwmark 1 lookup 100` and `ip route add local 0.0.0.0/0 dev lo table 100`.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, RawFd};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use tokio::io::Interest;
use tokio::net::{TcpListener, TcpStream, UdpSocket};

/// linux/in.h and linux/in6.h.
const IP_TRANSPARENT: libc::c_int = 19;
const IP_RECVORIGDSTADDR: libc::c_int = 20;
const IP_ORIGDSTADDR: libc::c_int = 20;
const IPV6_TRANSPARENT: libc::c_int = 75;
const IPV6_RECVORIGDSTADDR: libc::c_int = 74;
const IPV6_ORIGDSTADDR: libc::c_int = 74;

fn set(fd: RawFd, level: libc::c_int, opt: libc::c_int) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: `one` outlives the call and its size is passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            &one as *const _ as *const libc::c_void,
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A UDP socket with `IP_TRANSPARENT` (and `IPV6_TRANSPARENT` for IPv6) bound to `addr`,
/// which need not be local.
fn transparent_socket(addr: SocketAddr, recv_orig: bool) -> io::Result<Socket> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    let fd = s.as_raw_fd();
    if addr.is_ipv4() {
        set(fd, libc::SOL_IP, IP_TRANSPARENT)?;
        if recv_orig {
            set(fd, libc::SOL_IP, IP_RECVORIGDSTADDR)?;
        }
    } else {
        set(fd, libc::SOL_IPV6, IPV6_TRANSPARENT)?;
        // A dual-stack listener receives IPv4 datagrams too, whose destination comes
        // in the IPv4 option.
        set(fd, libc::SOL_IP, IP_TRANSPARENT).ok();
        if recv_orig {
            set(fd, libc::SOL_IPV6, IPV6_RECVORIGDSTADDR)?;
            set(fd, libc::SOL_IP, IP_RECVORIGDSTADDR).ok();
        }
    }
    s.set_nonblocking(true)?;
    s.bind(&SockAddr::from(addr))?;
    Ok(s)
}

/// The listener `TPROXY` rules send datagrams to.
pub fn listen(addr: SocketAddr) -> io::Result<UdpSocket> {
    let s = transparent_socket(addr, true).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("transparent_udp_listen {addr}: {e} (IP_TRANSPARENT needs CAP_NET_ADMIN)"),
        )
    })?;
    let s = UdpSocket::from_std(s.into())?;
    crate::listen::deep_receive_buffer(&s)?;
    Ok(s)
}

/// The TCP listener `TPROXY` rules send connections to: `IP_TRANSPARENT` on IPv4, and
/// on IPv6 `IPV6_TRANSPARENT` plus the IPv4 option, so one `[::]` listener takes both
/// families (as the UDP one).
pub fn listen_tcp(addr: SocketAddr) -> io::Result<TcpListener> {
    let bind = || -> io::Result<TcpListener> {
        let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        s.set_reuse_address(true)?;
        let fd = s.as_raw_fd();
        if addr.is_ipv4() {
            set(fd, libc::SOL_IP, IP_TRANSPARENT)?;
        } else {
            set(fd, libc::SOL_IPV6, IPV6_TRANSPARENT)?;
            set(fd, libc::SOL_IP, IP_TRANSPARENT).ok();
        }
        s.set_nonblocking(true)?;
        s.bind(&SockAddr::from(addr))?;
        s.listen(1024)?;
        TcpListener::from_std(s.into())
    };
    bind().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("transparent_tproxy_listen {addr}: {e} (IP_TRANSPARENT needs CAP_NET_ADMIN)"),
        )
    })
}

/// The destination a connection accepted on [`listen_tcp`] was sent to: its local
/// address. A connection made to the listener itself (to an address of this host, not
/// diverted) is an `InvalidInput` error, so that it cannot be carried back to this host.
pub fn original_dst_tcp(stream: &TcpStream, listener_port: u16) -> io::Result<SocketAddr> {
    let dst = canonical(stream.local_addr()?);
    if dst.port() == listener_port && is_local(dst.ip()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("connection to {dst} was not diverted by TPROXY (its destination is the listener itself)"),
        ));
    }
    Ok(dst)
}

/// Whether `ip` is an address of this host (in this network namespace): a socket without
/// `IP_TRANSPARENT` can bind to it (`EADDRNOTAVAIL` otherwise; ip(7)).
fn is_local(ip: IpAddr) -> bool {
    std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// A socket to answer an application from `from` (the destination it sent to).
pub fn reply_socket(from: SocketAddr) -> io::Result<UdpSocket> {
    UdpSocket::from_std(transparent_socket(from, false)?.into())
}

/// One datagram: its length, its sender and the destination it was sent to.
pub async fn recv(sock: &UdpSocket, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, SocketAddr)> {
    loop {
        sock.readable().await?;
        match sock.try_io(Interest::READABLE, || recv_orig(sock.as_raw_fd(), buf)) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            r => return r,
        }
    }
}

fn recv_orig(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, SocketAddr)> {
    // SAFETY: every pointer in `msg` refers to a local that outlives the call, with its
    // size; the control messages are read only within `msg_controllen`, as CMSG_* do.
    unsafe {
        let mut src: libc::sockaddr_storage = zeroed();
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        let mut control = [0u64; 16];
        let mut msg: libc::msghdr = zeroed();
        msg.msg_name = &mut src as *mut _ as *mut libc::c_void;
        msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = size_of::<[u64; 16]>();
        let n = libc::recvmsg(fd, &mut msg, libc::MSG_TRUNC);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let from = sockaddr(&src).ok_or_else(|| io::Error::other("datagram without a source address"))?;
        let mut dst = None;
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            let (level, ty) = ((*c).cmsg_level, (*c).cmsg_type);
            if (level == libc::SOL_IP && ty == IP_ORIGDSTADDR) || (level == libc::SOL_IPV6 && ty == IPV6_ORIGDSTADDR) {
                let mut ss: libc::sockaddr_storage = zeroed();
                let len =
                    ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize).min(size_of::<libc::sockaddr_storage>());
                std::ptr::copy_nonoverlapping(libc::CMSG_DATA(c), &mut ss as *mut _ as *mut u8, len);
                dst = sockaddr(&ss);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
        let dst = dst.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "datagram without its original destination (sent to the listener itself, not diverted by TPROXY)",
            )
        })?;
        Ok((n as usize, from, canonical(dst)))
    }
}

fn sockaddr(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let a = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let a = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it stands for.
pub fn canonical(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), v6.port()),
            None => a,
        },
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection made to the listener's own address was not diverted: refused, so it
    /// cannot be carried back to this host. One to the same port on another address
    /// (what a TPROXY rule hands over) is its destination.
    #[tokio::test]
    async fn a_connection_to_the_listener_itself_is_refused() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let _c = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        let e = original_dst_tcp(&s, port).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        // Another listener port: the local address is the destination.
        assert_eq!(
            original_dst_tcp(&s, port.wrapping_add(1)).unwrap(),
            SocketAddr::from(([127, 0, 0, 1], port))
        );
        assert!(is_local(IpAddr::from([127, 0, 0, 1])));
        assert!(
            !is_local(IpAddr::from([192, 0, 2, 77])),
            "TEST-NET-1 is no address here"
        );
    }
}
