//! Transparent mode: TCP redirected to the client by iptables/nftables `REDIRECT` keeps
//! its original destination in conntrack, read back with `SO_ORIGINAL_DST`.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;

/// `SO_ORIGINAL_DST` (linux/netfilter_ipv4.h) and `IP6T_SO_ORIGINAL_DST` share the value 80.
const SO_ORIGINAL_DST: libc::c_int = 80;

/// The destination the application asked for before the redirect.
pub fn original_dst(stream: &tokio::net::TcpStream) -> io::Result<SocketAddr> {
    let fd = stream.as_raw_fd();
    if stream.local_addr()?.is_ipv4() {
        // SAFETY: getsockopt writes at most `len` bytes into a zeroed sockaddr_in.
        let mut a: libc::sockaddr_in = unsafe { zeroed() };
        let mut len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_IP,
                SO_ORIGINAL_DST,
                &mut a as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(SocketAddr::V4(SocketAddrV4::new(
            Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
            u16::from_be(a.sin_port),
        )))
    } else {
        // SAFETY: as above, with sockaddr_in6.
        let mut a: libc::sockaddr_in6 = unsafe { zeroed() };
        let mut len = size_of::<libc::sockaddr_in6>() as libc::socklen_t;
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_IPV6,
                SO_ORIGINAL_DST,
                &mut a as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(SocketAddr::V6(SocketAddrV6::new(
            Ipv6Addr::from(a.sin6_addr.s6_addr),
            u16::from_be(a.sin6_port),
            a.sin6_flowinfo,
            a.sin6_scope_id,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unredirected_connection_has_no_original_destination() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let _c = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (s, _) = l.accept().await.unwrap();
        // Without a NAT rule conntrack has no original tuple to report (or conntrack is
        // not loaded at all); either way it is an error, never a made-up address.
        match original_dst(&s) {
            Err(_) => {}
            Ok(a) => assert_eq!(a, addr, "only the real destination may be reported"),
        }
    }
}
