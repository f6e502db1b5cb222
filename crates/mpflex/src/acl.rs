//! The server's destination policy: the server is never an open proxy.
//!
//! A destination must be inside an `allow` CIDR, outside every `deny` CIDR, on a permitted
//! port, and — unless explicitly enabled — not loopback and not private/special-purpose
//! (RFC 1918, CGNAT, link-local, unique-local, unspecified, multicast, broadcast). Those
//! two switches are independent of `allow`: an `allow` entry covering 10.0.0.0/8 does not
//! open it while `allow_private` is false. IPv4-mapped IPv6 addresses are judged as IPv4.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use ipnet::IpNet;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AclConfig {
    /// Destination networks that may be reached.
    pub allow: Vec<String>,
    /// Destination networks that may not (wins over `allow`).
    pub deny: Vec<String>,
    /// Ports that may be reached; empty means any.
    pub allow_ports: Vec<u16>,
    pub deny_ports: Vec<u16>,
    /// Permit 127.0.0.0/8 and ::1.
    pub allow_loopback: bool,
    /// Permit private and special-purpose ranges.
    pub allow_private: bool,
}

impl Default for AclConfig {
    fn default() -> Self {
        AclConfig {
            allow: vec!["0.0.0.0/0".into(), "::/0".into()],
            deny: Vec::new(),
            allow_ports: Vec::new(),
            deny_ports: Vec::new(),
            allow_loopback: false,
            allow_private: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("acl.{list}[{index}]: invalid CIDR {value:?}")]
pub struct AclError {
    list: &'static str,
    index: usize,
    value: String,
}

/// Why a destination was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error("port {0} is not allowed")]
    Port(u16),
    #[error("{0} is in the deny list ({1})")]
    DenyList(IpAddr, IpNet),
    #[error("{0} is loopback (acl.allow_loopback is false)")]
    Loopback(IpAddr),
    #[error("{0} is a private or special-purpose address (acl.allow_private is false)")]
    Private(IpAddr),
    #[error("{0} is not in the allow list")]
    NotAllowed(IpAddr),
}

#[derive(Debug, Clone)]
pub struct Acl {
    allow: Vec<IpNet>,
    deny: Vec<IpNet>,
    allow_ports: Vec<u16>,
    deny_ports: Vec<u16>,
    allow_loopback: bool,
    allow_private: bool,
}

fn parse(list: &'static str, v: &[String]) -> Result<Vec<IpNet>, AclError> {
    v.iter()
        .enumerate()
        .map(|(index, s)| {
            let s = s.trim();
            // A bare address means a single host.
            s.parse::<IpNet>()
                .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| AclError {
                    list,
                    index,
                    value: s.to_string(),
                })
        })
        .collect()
}

impl Acl {
    pub fn new(c: &AclConfig) -> Result<Acl, AclError> {
        Ok(Acl {
            allow: parse("allow", &c.allow)?,
            deny: parse("deny", &c.deny)?,
            allow_ports: c.allow_ports.clone(),
            deny_ports: c.deny_ports.clone(),
            allow_loopback: c.allow_loopback,
            allow_private: c.allow_private,
        })
    }

    pub fn check(&self, addr: &SocketAddr) -> Result<(), Denied> {
        let port = addr.port();
        if self.deny_ports.contains(&port) || (!self.allow_ports.is_empty() && !self.allow_ports.contains(&port)) {
            return Err(Denied::Port(port));
        }
        let ip = canonical(addr.ip());
        if let Some(net) = self.deny.iter().find(|n| contains(n, ip)) {
            return Err(Denied::DenyList(ip, *net));
        }
        if is_loopback(ip) {
            if !self.allow_loopback {
                return Err(Denied::Loopback(ip));
            }
        } else if is_special(ip) && !self.allow_private {
            return Err(Denied::Private(ip));
        }
        if !self.allow.iter().any(|n| contains(n, ip)) {
            return Err(Denied::NotAllowed(ip));
        }
        Ok(())
    }
}

/// IPv4-mapped IPv6 becomes IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn contains(net: &IpNet, ip: IpAddr) -> bool {
    // A mapped entry in the list (::ffff:a.b.c.d/n) also matches the IPv4 form.
    net.contains(&ip)
        || match (net, ip) {
            (IpNet::V6(n), IpAddr::V4(v4)) => n.contains(&v4.to_ipv6_mapped()),
            _ => false,
        }
}

fn is_loopback(ip: IpAddr) -> bool {
    ip.is_loopback()
}

fn is_special(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => special_v4(a),
        IpAddr::V6(a) => special_v6(a),
    }
}

fn special_v4(a: Ipv4Addr) -> bool {
    let o = a.octets();
    a.is_private()
        || a.is_link_local()
        || a.is_unspecified()
        || a.is_multicast()
        || a.is_broadcast()
        || o[0] == 0 // 0.0.0.0/8 "this network"
        || (o[0] == 100 && (o[1] & 0xc0) == 64) // 100.64.0.0/10 CGNAT
        || o[0] >= 240 // reserved
}

fn special_v6(a: Ipv6Addr) -> bool {
    let s = a.segments();
    a.is_unspecified()
        || a.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00 // fc00::/7 unique local
        || (s[0] & 0xffc0) == 0xfe80 // fe80::/10 link local
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(f: impl FnOnce(&mut AclConfig)) -> Acl {
        let mut c = AclConfig::default();
        f(&mut c);
        Acl::new(&c).unwrap()
    }

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn default_allows_public_denies_local() {
        let a = acl(|_| {});
        assert_eq!(a.check(&sa("93.184.216.34:443")), Ok(()));
        assert_eq!(a.check(&sa("[2606:2800:220:1::1]:80")), Ok(()));
        for d in ["127.0.0.1:80", "[::1]:80", "[::ffff:127.0.0.1]:80"] {
            assert!(matches!(a.check(&sa(d)), Err(Denied::Loopback(_))), "{d}");
        }
        for d in [
            "10.1.2.3:80",
            "172.16.0.1:80",
            "192.168.1.1:80",
            "100.64.0.1:80",
            "169.254.169.254:80",
            "0.0.0.0:80",
            "224.0.0.1:80",
            "255.255.255.255:80",
            "[fd00::1]:80",
            "[fe80::1]:80",
            "[::]:80",
            "[ff02::1]:80",
            "[::ffff:10.0.0.1]:80",
        ] {
            assert!(matches!(a.check(&sa(d)), Err(Denied::Private(_))), "{d}");
        }
    }

    #[test]
    fn switches_open_local_ranges() {
        let a = acl(|c| {
            c.allow_loopback = true;
            c.allow_private = true;
        });
        assert_eq!(a.check(&sa("127.0.0.1:80")), Ok(()));
        assert_eq!(a.check(&sa("10.0.0.1:80")), Ok(()));
        // allow_private alone does not open loopback.
        let a = acl(|c| c.allow_private = true);
        assert!(matches!(a.check(&sa("127.0.0.1:80")), Err(Denied::Loopback(_))));
    }

    #[test]
    fn allow_entry_does_not_bypass_private_switch() {
        let a = acl(|c| c.allow = vec!["10.0.0.0/8".into()]);
        assert!(matches!(a.check(&sa("10.0.0.1:80")), Err(Denied::Private(_))));
        assert!(matches!(a.check(&sa("8.8.8.8:53")), Err(Denied::NotAllowed(_))));
    }

    #[test]
    fn deny_wins_and_ports() {
        let a = acl(|c| {
            c.deny = vec!["203.0.113.0/24".into(), "2001:db8::/32".into()];
            c.deny_ports = vec![25];
        });
        assert!(matches!(a.check(&sa("203.0.113.9:80")), Err(Denied::DenyList(..))));
        assert!(matches!(
            a.check(&sa("[::ffff:203.0.113.9]:80")),
            Err(Denied::DenyList(..))
        ));
        assert!(matches!(a.check(&sa("[2001:db8::5]:80")), Err(Denied::DenyList(..))));
        assert_eq!(a.check(&sa("198.51.100.1:25")), Err(Denied::Port(25)));
        let a = acl(|c| c.allow_ports = vec![80, 443]);
        assert_eq!(a.check(&sa("198.51.100.1:443")), Ok(()));
        assert_eq!(a.check(&sa("198.51.100.1:22")), Err(Denied::Port(22)));
    }

    #[test]
    fn bad_cidr_names_the_entry() {
        let mut c = AclConfig::default();
        c.allow.push("10.0.0/8".into());
        let e = Acl::new(&c).unwrap_err().to_string();
        assert_eq!(e, "acl.allow[2]: invalid CIDR \"10.0.0/8\"");
        c.allow.pop();
        c.deny.push("1.2.3.4".into());
        let a = Acl::new(&c).unwrap();
        assert!(matches!(a.check(&sa("1.2.3.4:1")), Err(Denied::DenyList(..))));
    }
}
