//! The server's destination policy: the server is never an open proxy.
//!
//! A destination is refused, in this order, if
//! 1. its port is in `deny_ports`, or `allow_ports` is non-empty and lacks it;
//! 2. its address is inside a `deny` network (deny wins over allow);
//! 3. it is loopback (127.0.0.0/8, ::1) or unspecified (0.0.0.0, ::, in any mapped
//!    form: a connection to it reaches this host's own services, as loopback does) and
//!    `allow_loopback` is false;
//! 4. it is link-local (169.254/16, fe80::/10: the cloud metadata service at
//!    169.254.169.254 lives there) and `allow_link_local` is false;
//! 5. it is private or special-purpose and `allow_private` is false: 0.0.0.0/8, 10/8,
//!    100.64/10 (CGNAT), 172.16/12, 192.0.0/24, 192.168/16, 198.18/15, 224/4
//!    (multicast), 240/4 (reserved, incl. broadcast); IPv4-compatible ::/96, fc00::/7,
//!    fec0::/10, ff00::/8, 64:ff9b:1::/48 (local NAT64);
//! 6. it is one of the server's own interface addresses (kept current from the kernel's
//!    address notifications) and no `allow_own` entry covers it: a service bound to
//!    0.0.0.0 on the server host (sshd, a database) is not the clients' to reach;
//! 7. it is inside no `allow` network.
//!
//! Switches 3 to 5 are independent of `allow`: an `allow` entry covering 10.0.0.0/8 does
//! NOT open it while `allow_private` is false, `allow_private` opens neither loopback nor
//! link-local, and `allow` never opens the server's own addresses (`allow_own` does).
//! To reach only some private networks, set `allow_private = true` and list exactly those
//! networks in `allow` (or the others in `deny`).
//!
//! IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) are judged as the IPv4 address, for every
//! rule. Addresses in the NAT64 well-known prefix (64:ff9b::a.b.c.d) are additionally
//! judged by the embedded IPv4 address for rules 3 and 4, so a NAT64 gateway cannot be used
//! to reach 10.0.0.1 as 64:ff9b::a00:1.
//!
//! Names are resolved by the caller; every resolved address must be checked.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, RwLock};

use ipnet::IpNet;
use serde::Deserialize;

/// The `[acl]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AclConfig {
    /// Destination networks that may be reached (CIDRs or bare addresses). Default:
    /// everything ("0.0.0.0/0", "::/0"), subject to the other rules. Does not override
    /// `allow_loopback` / `allow_private`.
    pub allow: Vec<String>,
    /// Destination networks that may not (wins over `allow`). Default: none.
    pub deny: Vec<String>,
    /// Ports that may be reached; empty (the default) means any.
    pub allow_ports: Vec<u16>,
    /// Ports that may not (wins over `allow_ports`).
    pub deny_ports: Vec<u16>,
    /// Permit 127.0.0.0/8 and ::1. Default false.
    pub allow_loopback: bool,
    /// Permit private and special-purpose ranges (see the module documentation). Default false.
    pub allow_private: bool,
    /// Permit 169.254.0.0/16 and fe80::/10 (where cloud metadata services answer).
    /// Default false.
    pub allow_link_local: bool,
    /// The server's own addresses that may be reached (CIDRs or bare addresses). Default
    /// none: the server's own addresses are refused.
    pub allow_own: Vec<String>,
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
            allow_link_local: false,
            allow_own: Vec::new(),
        }
    }
}

/// A list entry that is not a CIDR or address, e.g. `acl.allow[2]: invalid CIDR "10.0.0/8"`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("acl.{list}[{index}]: invalid CIDR {value:?}")]
pub struct AclError {
    /// "allow", "deny" or "allow_own".
    pub list: &'static str,
    pub index: usize,
    pub value: String,
}

/// Why a destination was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error("port {0} is not allowed (acl.allow_ports, acl.deny_ports)")]
    Port(u16),
    #[error("{0} is in the deny list ({1})")]
    DenyList(IpAddr, IpNet),
    #[error("{0} is loopback (acl.allow_loopback is false)")]
    Loopback(IpAddr),
    #[error("{0} is unspecified: it reaches the server host itself, like loopback (acl.allow_loopback is false)")]
    Unspecified(IpAddr),
    #[error("{0} is link-local (acl.allow_link_local is false)")]
    LinkLocal(IpAddr),
    #[error("{0} is an address of the server itself (not in acl.allow_own)")]
    Own(IpAddr),
    #[error("{0} is a private or special-purpose address (acl.allow_private is false)")]
    Private(IpAddr),
    #[error("{0} is not in the allow list")]
    NotAllowed(IpAddr),
}

/// A compiled [`AclConfig`].
#[derive(Debug, Clone)]
pub struct Acl {
    allow: Vec<IpNet>,
    deny: Vec<IpNet>,
    allow_ports: Vec<u16>,
    deny_ports: Vec<u16>,
    allow_loopback: bool,
    allow_private: bool,
    allow_link_local: bool,
    allow_own: Vec<IpNet>,
    /// The server's own interface addresses now ([`Acl::set_own`]), shared by every
    /// clone.
    own: Arc<RwLock<Vec<IpAddr>>>,
}

/// A CIDR (`10.0.0.0/8`, `2001:db8::/32`) or a bare address (a single host), with host
/// bits cleared; `None` if it is neither. Shared with the class overrides.
pub(crate) fn parse_net(raw: &str) -> Option<IpNet> {
    let s = raw.trim();
    s.parse::<IpNet>()
        .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
        .map(|n| n.trunc())
        .ok()
}

fn parse(list: &'static str, v: &[String]) -> Result<Vec<IpNet>, AclError> {
    v.iter()
        .enumerate()
        .map(|(index, raw)| {
            parse_net(raw).ok_or_else(|| AclError {
                list,
                index,
                value: raw.clone(),
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
            allow_link_local: c.allow_link_local,
            allow_own: parse("allow_own", &c.allow_own)?,
            own: Arc::default(),
        })
    }

    /// Replaces the server's own addresses (every address of every interface).
    pub fn set_own(&self, addrs: impl IntoIterator<Item = IpAddr>) {
        let mut v: Vec<IpAddr> = addrs.into_iter().map(canonical).collect();
        v.sort();
        v.dedup();
        *self.own.write().unwrap() = v;
    }

    fn is_own(&self, ip: IpAddr) -> bool {
        self.own.read().unwrap().binary_search(&ip).is_ok()
    }

    /// `Ok` if the server may connect to `addr`; otherwise the first rule that refuses it.
    pub fn check(&self, addr: &SocketAddr) -> Result<(), Denied> {
        let port = addr.port();
        if self.deny_ports.contains(&port) || (!self.allow_ports.is_empty() && !self.allow_ports.contains(&port)) {
            return Err(Denied::Port(port));
        }
        let ip = canonical(addr.ip());
        if let Some(net) = self.deny.iter().find(|n| contains(n, ip)) {
            return Err(Denied::DenyList(ip, *net));
        }
        // What a NAT64 gateway would connect to, if that is where this goes.
        let effective = match ip {
            IpAddr::V6(v6) => nat64_embedded(v6).map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let unspecified = ip.is_unspecified() || effective.is_unspecified();
        if unspecified || is_loopback(ip) || is_loopback(effective) {
            if !self.allow_loopback {
                return Err(if unspecified {
                    Denied::Unspecified(ip)
                } else {
                    Denied::Loopback(ip)
                });
            }
        } else {
            if is_link_local(ip) || is_link_local(effective) {
                if !self.allow_link_local {
                    return Err(Denied::LinkLocal(ip));
                }
            } else if (is_special(ip) || is_special(effective)) && !self.allow_private {
                return Err(Denied::Private(ip));
            }
            if self.is_own(ip) && !self.allow_own.iter().any(|n| contains(n, ip)) {
                return Err(Denied::Own(ip));
            }
        }
        if !self.allow.iter().any(|n| contains(n, ip)) {
            return Err(Denied::NotAllowed(ip));
        }
        Ok(())
    }
}

/// IPv4-mapped IPv6 becomes IPv4.
pub(crate) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The IPv4 address inside the NAT64 well-known prefix 64:ff9b::/96 (RFC 6052).
fn nat64_embedded(a: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = a.segments();
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let o = a.octets();
        Some(Ipv4Addr::new(o[12], o[13], o[14], o[15]))
    } else {
        None
    }
}

/// Whether `net` holds `ip` (already [`canonical`]), an IPv4-mapped entry matching the
/// IPv4 form too.
pub(crate) fn contains(net: &IpNet, ip: IpAddr) -> bool {
    // A mapped entry in the list (::ffff:a.b.c.d/n, n >= 96) also matches the IPv4 form;
    // wider IPv6 networks (::/0) do not cover IPv4, or `allow = ["::/0"]` would admit it.
    net.contains(&ip)
        || match (net, ip) {
            (IpNet::V6(n), IpAddr::V4(v4)) => {
                n.prefix_len() >= 96 && n.network().to_ipv4_mapped().is_some() && n.contains(&v4.to_ipv6_mapped())
            }
            _ => false,
        }
}

fn is_loopback(ip: IpAddr) -> bool {
    ip.is_loopback()
}

fn is_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => a.is_link_local(),
        IpAddr::V6(a) => (a.segments()[0] & 0xffc0) == 0xfe80,
    }
}

fn is_special(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => special_v4(a),
        IpAddr::V6(a) => special_v6(a),
    }
}

fn special_v4(a: Ipv4Addr) -> bool {
    let o = a.octets();
    a.is_private() // 10/8, 172.16/12, 192.168/16
        || a.is_link_local() // 169.254/16
        || a.is_unspecified()
        || a.is_multicast() // 224/4
        || a.is_broadcast()
        || o[0] == 0 // 0.0.0.0/8 "this network"
        || (o[0] == 100 && (o[1] & 0xc0) == 64) // 100.64.0.0/10 CGNAT
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // 192.0.0.0/24 IETF protocol assignments
        || (o[0] == 198 && (o[1] & 0xfe) == 18) // 198.18.0.0/15 benchmarking, often fake-IP DNS
        || o[0] >= 240 // 240/4 reserved
}

fn special_v6(a: Ipv6Addr) -> bool {
    let s = a.segments();
    a.is_unspecified()
        || a.is_multicast() // ff00::/8
        || s[..6] == [0; 6] // ::/96 IPv4-compatible (deprecated; ::1 is caught as loopback first)
        || (s[0] & 0xfe00) == 0xfc00 // fc00::/7 unique local
        || (s[0] & 0xffc0) == 0xfe80 // fe80::/10 link local
        || (s[0] & 0xffc0) == 0xfec0 // fec0::/10 site local (deprecated)
        || s[..3] == [0x64, 0xff9b, 1] // 64:ff9b:1::/48 local-use NAT64 (RFC 8215)
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

    const PUBLIC: &[&str] = &[
        "93.184.216.34:443",
        "1.1.1.1:53",
        "8.8.8.8:53",
        "[2606:2800:220:1::1]:80",
        "[2001:4860:4860::8888]:443",
        "[::ffff:93.184.216.34]:443",
        "[64:ff9b::808:808]:53", // NAT64 of 8.8.8.8
        // Just outside the private ranges.
        "9.255.255.255:80",
        "11.0.0.0:80",
        "172.15.255.255:80",
        "172.32.0.0:80",
        "192.167.255.255:80",
        "192.169.0.0:80",
        "100.63.255.255:80",
        "100.128.0.0:80",
        "169.253.255.255:80",
        "169.255.0.0:80",
        "198.17.255.255:80",
        "198.20.0.0:80",
        "192.0.1.1:80",
        "223.255.255.255:80",
        "1.0.0.0:80",
        "[fbff:ffff::1]:80",
        "[fe00::1]:80",
        "[2000::1]:80",
    ];

    const LOOPBACK: &[&str] = &[
        "127.0.0.1:80",
        "127.255.255.254:80",
        "127.1.2.3:22",
        "[::1]:80",
        "[::ffff:127.0.0.1]:80",
        "[::ffff:127.9.9.9]:80",
        "[64:ff9b::7f00:1]:80", // NAT64 of 127.0.0.1
    ];

    const PRIVATE: &[&str] = &[
        "10.0.0.0:80",
        "10.1.2.3:80",
        "10.255.255.255:80",
        "172.16.0.1:80",
        "172.31.255.255:80",
        "192.168.0.1:80",
        "192.168.255.255:80",
        "100.64.0.1:80",
        "100.127.255.255:80",
        "0.1.2.3:80",
        "192.0.0.8:80",
        "198.18.0.1:80",
        "198.19.255.255:80",
        "224.0.0.1:80",
        "239.255.255.250:1900",
        "240.0.0.1:80",
        "255.255.255.255:80",
        "[::10.0.0.1]:80",
        "[::8.8.8.8]:80",
        "[fc00::1]:80",
        "[fd00::1]:80",
        "[fdff:ffff::1]:80",
        "[fec0::1]:80",
        "[ff02::1]:80",
        "[ff0e::1]:80",
        "[::ffff:10.0.0.1]:80",
        "[64:ff9b::a00:1]:80", // NAT64 of 10.0.0.1
        "[64:ff9b:1::1]:80",
    ];

    const UNSPECIFIED: &[&str] = &["0.0.0.0:80", "[::]:80", "[::ffff:0.0.0.0]:22", "[64:ff9b::]:80"];

    const LINK_LOCAL: &[&str] = &[
        "169.254.169.254:80",
        "169.254.0.1:80",
        "[fe80::1]:80",
        "[febf::1]:80",
        "[::ffff:169.254.169.254]:80",
        "[64:ff9b::a9fe:a9fe]:80", // NAT64 of 169.254.169.254
    ];

    #[test]
    fn default_allows_public_denies_local() {
        let a = acl(|_| {});
        for d in PUBLIC {
            assert_eq!(a.check(&sa(d)), Ok(()), "{d}");
        }
        for d in LOOPBACK {
            assert!(
                matches!(a.check(&sa(d)), Err(Denied::Loopback(_))),
                "{d}: {:?}",
                a.check(&sa(d))
            );
        }
        for d in PRIVATE {
            assert!(
                matches!(a.check(&sa(d)), Err(Denied::Private(_))),
                "{d}: {:?}",
                a.check(&sa(d))
            );
        }
        for d in UNSPECIFIED {
            assert!(matches!(a.check(&sa(d)), Err(Denied::Unspecified(_))), "{d}");
        }
        for d in LINK_LOCAL {
            assert!(matches!(a.check(&sa(d)), Err(Denied::LinkLocal(_))), "{d}");
        }
    }

    #[test]
    fn switches_open_local_ranges_independently() {
        let both = acl(|c| {
            c.allow_loopback = true;
            c.allow_private = true;
        });
        let private_only = acl(|c| c.allow_private = true);
        let loopback_only = acl(|c| c.allow_loopback = true);
        for d in LOOPBACK {
            assert_eq!(both.check(&sa(d)), Ok(()), "{d}");
            assert_eq!(loopback_only.check(&sa(d)), Ok(()), "{d}");
            assert!(matches!(private_only.check(&sa(d)), Err(Denied::Loopback(_))), "{d}");
        }
        for d in PRIVATE {
            assert_eq!(both.check(&sa(d)), Ok(()), "{d}");
            assert_eq!(private_only.check(&sa(d)), Ok(()), "{d}");
            assert!(matches!(loopback_only.check(&sa(d)), Err(Denied::Private(_))), "{d}");
        }
        for d in PUBLIC {
            assert_eq!(both.check(&sa(d)), Ok(()), "{d}");
        }
        // Unspecified is loopback; link-local needs its own switch.
        for d in UNSPECIFIED {
            assert_eq!(loopback_only.check(&sa(d)), Ok(()), "{d}");
            assert!(matches!(private_only.check(&sa(d)), Err(Denied::Unspecified(_))), "{d}");
        }
        let link_local = acl(|c| c.allow_link_local = true);
        for d in LINK_LOCAL {
            assert!(matches!(both.check(&sa(d)), Err(Denied::LinkLocal(_))), "{d}");
            assert_eq!(link_local.check(&sa(d)), Ok(()), "{d}");
        }
    }

    #[test]
    fn own_addresses_are_refused_unless_listed() {
        let a = acl(|c| {
            c.allow_private = true;
            c.allow_loopback = true;
            c.allow_own = vec!["192.0.2.0/24".into()];
        });
        a.set_own(
            [
                "203.0.113.5",
                "10.1.1.2",
                "::ffff:198.51.100.9",
                "2001:db8::2",
                "127.0.0.1",
                "192.0.2.7",
            ]
            .map(|s| s.parse::<IpAddr>().unwrap()),
        );
        for d in [
            "203.0.113.5:22",
            "10.1.1.2:5432",
            "198.51.100.9:80",
            "[::ffff:203.0.113.5]:22",
            "[2001:db8::2]:22",
        ] {
            assert!(
                matches!(a.check(&sa(d)), Err(Denied::Own(_))),
                "{d}: {:?}",
                a.check(&sa(d))
            );
        }
        // Listed; loopback (its own switch); another host.
        for d in ["192.0.2.7:80", "127.0.0.1:80", "203.0.113.6:22", "[2001:db8::3]:22"] {
            assert_eq!(a.check(&sa(d)), Ok(()), "{d}");
        }
        // Kept current: a clone sees the new set.
        let b = a.clone();
        a.set_own(["203.0.113.6".parse::<IpAddr>().unwrap()]);
        assert_eq!(b.check(&sa("203.0.113.5:22")), Ok(()));
        assert!(matches!(b.check(&sa("203.0.113.6:22")), Err(Denied::Own(_))));
        assert_eq!(
            b.check(&sa("203.0.113.6:22")).unwrap_err().to_string(),
            "203.0.113.6 is an address of the server itself (not in acl.allow_own)"
        );
    }

    #[test]
    fn allow_entry_does_not_bypass_private_switch() {
        let a = acl(|c| c.allow = vec!["10.0.0.0/8".into(), "127.0.0.0/8".into(), "fd00::/8".into()]);
        assert!(matches!(a.check(&sa("10.0.0.1:80")), Err(Denied::Private(_))));
        assert!(matches!(a.check(&sa("[fd00::1]:80")), Err(Denied::Private(_))));
        assert!(matches!(a.check(&sa("127.0.0.1:80")), Err(Denied::Loopback(_))));
        assert_eq!(
            a.check(&sa("8.8.8.8:53")),
            Err(Denied::NotAllowed("8.8.8.8".parse().unwrap()))
        );
        // With the switch on, the allow list then narrows the private space.
        let a = acl(|c| {
            c.allow = vec!["10.1.0.0/16".into()];
            c.allow_private = true;
        });
        assert_eq!(a.check(&sa("10.1.2.3:80")), Ok(()));
        assert!(matches!(a.check(&sa("10.2.0.1:80")), Err(Denied::NotAllowed(_))));
        assert!(matches!(a.check(&sa("192.168.1.1:80")), Err(Denied::NotAllowed(_))));
        assert!(matches!(a.check(&sa("1.1.1.1:80")), Err(Denied::NotAllowed(_))));
    }

    #[test]
    fn empty_allow_list_refuses_everything() {
        let a = acl(|c| {
            c.allow.clear();
            c.allow_loopback = true;
            c.allow_private = true;
        });
        for d in PUBLIC.iter().chain(LOOPBACK).chain(PRIVATE).chain(UNSPECIFIED) {
            assert!(matches!(a.check(&sa(d)), Err(Denied::NotAllowed(_))), "{d}");
        }
    }

    #[test]
    fn ipv6_only_allow_list() {
        let a = acl(|c| c.allow = vec!["::/0".into()]);
        assert_eq!(a.check(&sa("[2606:2800:220:1::1]:80")), Ok(()));
        assert!(matches!(a.check(&sa("8.8.8.8:53")), Err(Denied::NotAllowed(_))));
        // A mapped address is IPv4, so ::/0 does not cover it.
        assert!(matches!(
            a.check(&sa("[::ffff:8.8.8.8]:53")),
            Err(Denied::NotAllowed(_))
        ));
    }

    #[test]
    fn deny_wins() {
        let a = acl(|c| {
            c.allow = vec!["203.0.113.0/24".into(), "2001:db8::/32".into()];
            c.deny = vec!["203.0.113.128/25".into(), "2001:db8:bad::/48".into()];
        });
        assert_eq!(a.check(&sa("203.0.113.9:80")), Ok(()));
        assert_eq!(
            a.check(&sa("203.0.113.200:80")),
            Err(Denied::DenyList(
                "203.0.113.200".parse().unwrap(),
                "203.0.113.128/25".parse().unwrap()
            ))
        );
        assert!(matches!(
            a.check(&sa("[::ffff:203.0.113.200]:80")),
            Err(Denied::DenyList(..))
        ));
        assert_eq!(a.check(&sa("[2001:db8::5]:80")), Ok(()));
        assert!(matches!(
            a.check(&sa("[2001:db8:bad::5]:80")),
            Err(Denied::DenyList(..))
        ));
        // The deny list is reported before the loopback/private switches.
        let a = acl(|c| {
            c.deny = vec!["10.0.0.0/8".into(), "127.0.0.1".into()];
            c.allow_private = true;
            c.allow_loopback = true;
        });
        assert!(matches!(a.check(&sa("10.0.0.1:80")), Err(Denied::DenyList(..))));
        assert!(matches!(a.check(&sa("127.0.0.1:80")), Err(Denied::DenyList(..))));
        assert_eq!(a.check(&sa("127.0.0.2:80")), Ok(()));
        // A mapped entry in the deny list matches the plain IPv4 form too.
        let a = acl(|c| c.deny = vec!["::ffff:198.51.100.0/120".into()]);
        assert!(matches!(a.check(&sa("198.51.100.7:80")), Err(Denied::DenyList(..))));
        assert_eq!(a.check(&sa("198.51.101.7:80")), Ok(()));
        // An IPv6 deny entry wider than the mapped range does not deny IPv4.
        let a = acl(|c| c.deny = vec!["::/0".into()]);
        assert!(matches!(a.check(&sa("[2001:db8::1]:80")), Err(Denied::DenyList(..))));
        assert_eq!(a.check(&sa("198.51.100.7:80")), Ok(()));
        assert_eq!(a.check(&sa("[::ffff:198.51.100.7]:80")), Ok(()));
    }

    #[test]
    fn ports() {
        let a = acl(|c| c.deny_ports = vec![25, 0]);
        assert_eq!(a.check(&sa("198.51.100.1:25")), Err(Denied::Port(25)));
        assert_eq!(a.check(&sa("198.51.100.1:0")), Err(Denied::Port(0)));
        assert_eq!(a.check(&sa("198.51.100.1:26")), Ok(()));
        let a = acl(|c| c.allow_ports = vec![80, 443]);
        assert_eq!(a.check(&sa("198.51.100.1:443")), Ok(()));
        assert_eq!(a.check(&sa("[2001:db8::1]:80")), Ok(()));
        assert_eq!(a.check(&sa("198.51.100.1:22")), Err(Denied::Port(22)));
        let a = acl(|c| {
            c.allow_ports = vec![80, 443];
            c.deny_ports = vec![443];
        });
        assert_eq!(a.check(&sa("198.51.100.1:443")), Err(Denied::Port(443)));
        // The port is checked first, even for addresses that are refused anyway.
        assert_eq!(a.check(&sa("10.0.0.1:22")), Err(Denied::Port(22)));
    }

    #[test]
    fn bad_cidr_names_the_entry() {
        let mut c = AclConfig::default();
        c.allow.push("10.0.0/8".into());
        let e = Acl::new(&c).unwrap_err();
        assert_eq!(e.to_string(), "acl.allow[2]: invalid CIDR \"10.0.0/8\"");
        c.allow.pop();
        for (i, bad) in ["1.2.3.4/33", "::/129", "example.com", "", "10.0.0.0/8,", "1.2.3.4/-1"]
            .iter()
            .enumerate()
        {
            c.deny = vec!["192.0.2.0/24".into(); i + 1];
            c.deny[i] = bad.to_string();
            let e = Acl::new(&c).unwrap_err();
            assert_eq!(e.list, "deny");
            assert_eq!(e.index, i);
            assert_eq!(e.to_string(), format!("acl.deny[{i}]: invalid CIDR {bad:?}"));
        }
    }

    #[test]
    fn bare_addresses_and_host_bits() {
        let a = acl(|c| c.deny = vec![" 1.2.3.4 ".into(), "2001:db8::1".into(), "198.51.100.77/24".into()]);
        assert!(matches!(a.check(&sa("1.2.3.4:1")), Err(Denied::DenyList(..))));
        assert_eq!(a.check(&sa("1.2.3.5:1")), Ok(()));
        assert!(matches!(a.check(&sa("[2001:db8::1]:1")), Err(Denied::DenyList(..))));
        assert_eq!(a.check(&sa("[2001:db8::2]:1")), Ok(()));
        // Host bits in a CIDR are ignored: the whole /24 is denied, reported as the network.
        assert_eq!(
            a.check(&sa("198.51.100.1:1")),
            Err(Denied::DenyList(
                "198.51.100.1".parse().unwrap(),
                "198.51.100.0/24".parse().unwrap()
            ))
        );
    }

    #[test]
    fn denial_messages_explain() {
        let a = acl(|c| c.deny_ports = vec![25]);
        let msg = |s: &str| a.check(&sa(s)).unwrap_err().to_string();
        assert_eq!(
            msg("1.1.1.1:25"),
            "port 25 is not allowed (acl.allow_ports, acl.deny_ports)"
        );
        assert_eq!(
            msg("127.0.0.1:80"),
            "127.0.0.1 is loopback (acl.allow_loopback is false)"
        );
        assert_eq!(
            msg("[::ffff:10.0.0.1]:80"),
            "10.0.0.1 is a private or special-purpose address (acl.allow_private is false)"
        );
    }

    #[test]
    fn config_from_toml() {
        let c: AclConfig = toml::from_str("").unwrap();
        assert_eq!(c, AclConfig::default());
        assert_eq!(c.allow, ["0.0.0.0/0", "::/0"]);
        let c: AclConfig = toml::from_str(
            "allow = [\"10.0.0.0/8\"]\ndeny = [\"10.9.0.0/16\"]\nallow_ports = [443]\ndeny_ports = [25]\n\
             allow_loopback = true\nallow_private = true\n",
        )
        .unwrap();
        let a = Acl::new(&c).unwrap();
        assert_eq!(a.check(&sa("10.1.1.1:443")), Ok(()));
        assert!(matches!(a.check(&sa("10.9.1.1:443")), Err(Denied::DenyList(..))));
        assert!(matches!(a.check(&sa("127.0.0.1:443")), Err(Denied::NotAllowed(_))));
        let e = toml::from_str::<AclConfig>("alow = []").unwrap_err().to_string();
        assert!(e.contains("unknown field"), "{e}");
        assert!(toml::from_str::<AclConfig>("allow_ports = [70000]").is_err());
    }
}
