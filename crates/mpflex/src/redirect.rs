//! Transparent mode: TCP redirected to the client by iptables/nftables `REDIRECT` (or
//! `DNAT` to a local address) keeps its original destination in conntrack, read back with
//! `SO_ORIGINAL_DST`.
//!
//! Example, for everything a local user `app` sends to port 443:
//! `iptables -t nat -A OUTPUT -p tcp --dport 443 -m owner --uid-owner app -j REDIRECT --to-ports 1081`
//! (and the same with `ip6tables` for IPv6). Never redirect mpflex's own path connections.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, RawFd};

/// `SO_ORIGINAL_DST` (linux/netfilter_ipv4.h) and `IP6T_SO_ORIGINAL_DST`
/// (linux/netfilter_ipv6/ip6_tables.h) share the value 80.
const SO_ORIGINAL_DST: libc::c_int = 80;

/// The destination the application asked for before the redirect.
///
/// Works for listeners on IPv4, IPv6 and dual-stack (`[::]`) addresses; an IPv4
/// connection accepted on a dual-stack listener is answered with an IPv4 address.
///
/// Errors: `NotFound` (ENOENT) when conntrack has no entry for the connection (no NAT
/// rule, conntrack not loaded) and `InvalidInput` when the connection was not redirected
/// at all (the application connected to the listener directly), so that a stray
/// connection to the transparent port cannot loop back into it.
pub fn original_dst(stream: &tokio::net::TcpStream) -> io::Result<SocketAddr> {
    let local = stream.local_addr()?;
    let dst = query(stream.as_raw_fd(), &local)?;
    if canonical(dst) == canonical(local) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("connection to {local} was not redirected (its destination is the listener itself)"),
        ));
    }
    Ok(dst)
}

fn canonical(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), v6.port()),
            None => a,
        },
        v4 => v4,
    }
}

fn query(fd: RawFd, local: &SocketAddr) -> io::Result<SocketAddr> {
    // An IPv4 connection on a dual-stack socket has an IPv4-mapped local address and an
    // IPv4 conntrack entry: the IPv4 query answers it, the IPv6 one says ENOENT.
    let ipv4 = match local {
        SocketAddr::V4(_) => true,
        SocketAddr::V6(a) => a.ip().to_ipv4_mapped().is_some(),
    };
    if ipv4 {
        // SAFETY: an all-zero sockaddr_in is valid.
        let mut a: libc::sockaddr_in = unsafe { zeroed() };
        getsockopt(fd, libc::SOL_IP, &mut a)?;
        if libc::c_int::from(a.sin_family) != libc::AF_INET {
            return Err(unexpected_family(a.sin_family));
        }
        Ok(SocketAddr::V4(SocketAddrV4::new(
            Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
            u16::from_be(a.sin_port),
        )))
    } else {
        // SAFETY: an all-zero sockaddr_in6 is valid.
        let mut a: libc::sockaddr_in6 = unsafe { zeroed() };
        getsockopt(fd, libc::SOL_IPV6, &mut a)?;
        if libc::c_int::from(a.sin6_family) != libc::AF_INET6 {
            return Err(unexpected_family(a.sin6_family));
        }
        Ok(SocketAddr::V6(SocketAddrV6::new(
            Ipv6Addr::from(a.sin6_addr.s6_addr),
            u16::from_be(a.sin6_port),
            a.sin6_flowinfo,
            a.sin6_scope_id,
        )))
    }
}

/// `getsockopt(fd, level, SO_ORIGINAL_DST)` into `out` (a sockaddr_in or sockaddr_in6).
fn getsockopt<T>(fd: RawFd, level: libc::c_int, out: &mut T) -> io::Result<()> {
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `out`, which is exactly that big.
    let rc = unsafe { libc::getsockopt(fd, level, SO_ORIGINAL_DST, out as *mut T as *mut libc::c_void, &mut len) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn unexpected_family(f: libc::sa_family_t) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("SO_ORIGINAL_DST returned address family {f}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use tokio::net::{TcpListener, TcpSocket, TcpStream};

    #[tokio::test]
    async fn unredirected_connection_is_an_error() {
        for bind in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(l) = TcpListener::bind(bind).await else {
                mpflex_netns::skip(
                    &format!("unredirected_connection_is_an_error ({bind})"),
                    "cannot listen there",
                );
                continue;
            };
            let addr = l.local_addr().unwrap();
            let _c = TcpStream::connect(addr).await.unwrap();
            let (s, _) = l.accept().await.unwrap();
            // Without a NAT rule conntrack either has no entry (ENOENT), is not loaded, or
            // reports the listener itself; all of them are errors, never a made-up address.
            let r = original_dst(&s);
            assert!(r.is_err(), "{bind}: {r:?}");
        }
    }

    /// Set by [`redirect_in_network_namespace`] for the copy of this binary it runs inside
    /// the namespace: "4" or "46" (IPv4 only, or also IPv6).
    const HELPER_ENV: &str = "MPFLEX_TEST_REDIRECT_NETNS";
    const HELPER_TEST: &str = "redirect::tests::netns_helper";
    const HELPER_OK: &str = "netns-helper: all cases passed";

    /// Inside a throw-away namespace: `lo` carries 192.0.2.1/24 and 2001:db8::1/64 (so
    /// those networks are routable), and NAT rules redirect
    ///   IPv4 port 1234 → 4321 (IPv4 listener), IPv4 port 1235 → 4322 (dual-stack listener),
    ///   IPv6 port 1234 → 4322 (dual-stack listener).
    /// A copy of this test binary runs [`netns_helper`] in there.
    #[test]
    fn redirect_in_network_namespace() {
        let test = "redirect_in_network_namespace";
        if !mpflex_netns::require_root(test) || !mpflex_netns::require_tools(test, &["ip", "iptables"]) {
            return;
        }
        let ns = match mpflex_netns::Netns::create("rd") {
            Ok(ns) => ns,
            Err(e) => {
                mpflex_netns::skip(test, &format!("cannot create a namespace: {e:#}"));
                return;
            }
        };
        // Each command as one line, split at spaces.
        let run = |cmds: &[&str]| {
            cmds.iter()
                .try_for_each(|c| ns.exec(&c.split(' ').collect::<Vec<_>>()).map(drop))
        };
        let v4 = [
            "ip addr add 192.0.2.1/24 dev lo",
            "iptables -t nat -A OUTPUT -p tcp --dport 1234 -j REDIRECT --to-ports 4321",
            "iptables -t nat -A OUTPUT -p tcp --dport 1235 -j REDIRECT --to-ports 4322",
        ];
        // `lo` is up already.
        if let Err(e) = run(&v4) {
            mpflex_netns::skip(test, &format!("setup failed: {e:#}"));
            return;
        }
        let v6 = [
            "ip -6 addr add 2001:db8::1/64 dev lo nodad",
            "ip6tables -t nat -A OUTPUT -p tcp --dport 1234 -j REDIRECT --to-ports 4322",
        ];
        // A kernel without IPv6 (or its NAT) skips only the IPv6 case.
        let families = match run(&v6) {
            Ok(()) => "46",
            Err(e) => {
                mpflex_netns::skip(&format!("{test} (IPv6 case)"), &format!("{e:#}"));
                "4"
            }
        };

        let exe = std::env::current_exe().unwrap();
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns.name()])
            .arg(exe)
            .args([HELPER_TEST, "--exact", "--nocapture", "--test-threads=1"])
            .env(HELPER_ENV, families)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The helper bounds each step itself; this is the last line of defence.
        let deadline = Instant::now() + Duration::from_secs(60);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.contains(HELPER_OK),
            "helper in {} failed ({}):\n{stdout}\n{stderr}",
            ns.name(),
            out.status
        );
        drop(ns);
    }

    /// Runs only when started by [`redirect_in_network_namespace`], inside its namespace.
    #[test]
    fn netns_helper() {
        let Ok(families) = std::env::var(HELPER_ENV) else {
            return;
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let v4_listener = TcpListener::bind("0.0.0.0:4321").await.unwrap();
            let dual = TcpSocket::new_v6().unwrap();
            socket2::SockRef::from(&dual).set_only_v6(false).unwrap();
            dual.set_reuseaddr(true).unwrap();
            dual.bind("[::]:4322".parse().unwrap()).unwrap();
            let dual_listener = dual.listen(16).unwrap();

            let mut cases = vec![
                ("IPv4 listener", &v4_listener, "192.0.2.77:1234"),
                ("dual-stack listener, IPv4 client", &dual_listener, "192.0.2.78:1235"),
            ];
            if families.contains('6') {
                cases.push((
                    "dual-stack listener, IPv6 client",
                    &dual_listener,
                    "[2001:db8::77]:1234",
                ));
            }
            let step = Duration::from_secs(5);
            for (what, l, dst) in cases {
                let dst: SocketAddr = dst.parse().unwrap();
                let client = tokio::time::timeout(step, TcpStream::connect(dst)).await;
                let _client = client.unwrap_or_else(|_| panic!("{what}: connect timed out")).unwrap();
                let (s, _) = tokio::time::timeout(step, l.accept()).await.unwrap().unwrap();
                let local = s.local_addr().unwrap();
                assert_ne!(canonical(local), dst, "{what}: not redirected at all");
                assert_eq!(original_dst(&s).unwrap(), dst, "{what} (accepted on {local})");
                println!("netns-helper: {what}: {dst} redirected to {local}, recovered");
            }

            // A direct connection to the transparent port: conntrack knows it, but it has
            // no other destination; reported as an error instead of the listener itself.
            let _c = TcpStream::connect("127.0.0.1:4321").await.unwrap();
            let (s, _) = tokio::time::timeout(step, v4_listener.accept()).await.unwrap().unwrap();
            let e = original_dst(&s).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
            println!("{HELPER_OK}");
        });
    }
}
