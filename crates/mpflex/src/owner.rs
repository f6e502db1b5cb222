//! Who owns an application's TCP socket (transparent ingress): its uid from
//! `/proc/net/tcp{,6}`, and, where a policy rule asks for them, the gid and cgroup of a
//! process holding the socket (found by its inode among `/proc/*/fd`).
//!
//! The redirected connection's peer address is the application socket's local address,
//! which names its line in `/proc/net/tcp` (the application runs in this network
//! namespace: `REDIRECT` in the OUTPUT chain).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// What is known of a socket's owner.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owner {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub cgroup: Option<String>,
}

/// The owner of the TCP socket bound to `local` in this namespace; `process`: also look
/// for the process (gid and cgroup), which reads every process's descriptors.
pub fn lookup(local: SocketAddr, process: bool) -> Owner {
    let file = if local.is_ipv4() {
        "/proc/net/tcp"
    } else {
        "/proc/net/tcp6"
    };
    let Ok(text) = std::fs::read_to_string(file) else {
        return Owner::default();
    };
    let Some((uid, inode)) = find(&text, local) else {
        return Owner::default();
    };
    let mut o = Owner {
        uid: Some(uid),
        ..Default::default()
    };
    if process && inode != 0 {
        if let Some(pid) = pid_of(inode) {
            o.gid = std::fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find_map(|l| l.strip_prefix("Gid:"))
                        .and_then(|g| g.split_whitespace().next()?.parse().ok())
                });
            o.cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
                .ok()
                .and_then(|s| cgroup_path(&s));
        }
    }
    o
}

/// The (uid, inode) of the line whose local address is `local`.
fn find(text: &str, local: SocketAddr) -> Option<(u32, u64)> {
    text.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 10 || parse_addr(f[1])? != local {
            return None;
        }
        Some((f[7].parse().ok()?, f[9].parse().ok()?))
    })
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6): each 32-bit word in the
/// kernel's byte order (little endian here), the port big.
fn parse_addr(s: &str) -> Option<SocketAddr> {
    let (a, p) = s.split_once(':')?;
    let port = u16::from_str_radix(p, 16).ok()?;
    let words: Vec<u32> = (0..a.len() / 8)
        .map(|i| u32::from_str_radix(a.get(i * 8..i * 8 + 8)?, 16).ok())
        .collect::<Option<_>>()?;
    let ip = match words.as_slice() {
        [w] => IpAddr::V4(Ipv4Addr::from(w.swap_bytes())),
        [a, b, c, d] => {
            let mut bytes = [0u8; 16];
            for (i, w) in [a, b, c, d].iter().enumerate() {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// A process holding socket `inode`.
fn pid_of(inode: u64) -> Option<u32> {
    let want = format!("socket:[{inode}]");
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == want.as_str()) {
                return Some(pid);
            }
        }
    }
    None
}

/// The cgroup v2 path (`0::/user.slice/…`) of a `/proc/PID/cgroup`.
fn cgroup_path(text: &str) -> Option<String> {
    text.lines().find_map(|l| l.strip_prefix("0::")).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_net_tcp_lines() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 12345 1 0 100 0 0 10 0\n";
        assert_eq!(find(text, "127.0.0.1:8080".parse().unwrap()), Some((1000, 12345)));
        assert_eq!(find(text, "127.0.0.1:8081".parse().unwrap()), None);
        assert_eq!(
            parse_addr("00000000000000000000000001000000:0016"),
            Some("[::1]:22".parse().unwrap())
        );
        assert_eq!(
            cgroup_path("0::/user.slice/user-1000.slice\n").as_deref(),
            Some("/user.slice/user-1000.slice")
        );
    }

    #[test]
    fn finds_the_owner_of_a_socket_of_this_process() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let o = lookup(l.local_addr().unwrap(), true);
        let uid = unsafe { libc::getuid() };
        assert_eq!(o.uid, Some(uid));
        assert_eq!(o.gid, Some(unsafe { libc::getgid() }));
        assert!(o.cgroup.is_some_and(|c| c.starts_with('/')));
    }
}
