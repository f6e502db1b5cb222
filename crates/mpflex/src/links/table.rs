//! What the kernel says about the host's links, as far as paths care: each interface's
//! state and kind, its addresses, and the routes through it — and whether a path to a
//! server can use it now.
//!
//! The table is rebuilt from rtnetlink dumps ([`super::netlink`]); the conversions from the
//! kernel's messages live here too, so they are tested without a socket.

use std::collections::BTreeMap;
use std::net::IpAddr;

use netlink_packet_route::address::{AddressAttribute, AddressFlags, AddressMessage, AddressScope};
use netlink_packet_route::link::{InfoKind, LinkAttribute, LinkFlags, LinkInfo, LinkMessage};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage, RouteType};

/// One network interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub index: u32,
    pub name: String,
    /// The driver's kind (`IFLA_INFO_KIND`: "veth", "bridge", "wireguard" …); `None` for
    /// hardware, which reports none.
    pub kind: Option<String>,
    /// Administratively up (`IFF_UP`).
    pub up: bool,
    /// Operationally up (`IFF_RUNNING`: carrier, and for WiFi associated); a link whose
    /// cable is out or whose peer is gone reports up but not running.
    pub running: bool,
    pub loopback: bool,
}

/// Kinds of interface that `auto = true` takes, besides hardware (no kind): the ones that
/// stand for a real uplink. Everything else (bridges, veth, tun/tap, WireGuard and other
/// tunnels, dummy, macvlan …) is local plumbing or rides on another link, so using it as a
/// path would double up a link or loop through a tunnel.
const UPLINK_KINDS: &[&str] = &["vlan", "bond", "team", "ppp", "wwan", "rmnet"];

impl Link {
    /// Whether `auto = true` considers it (see [`UPLINK_KINDS`]).
    pub fn is_uplink(&self) -> bool {
        !self.loopback && self.kind.as_deref().is_none_or(|k| UPLINK_KINDS.contains(&k))
    }
}

/// One address of an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addr {
    pub index: u32,
    pub ip: IpAddr,
    /// Global scope (not link- or host-local): what a connection to a server can use.
    pub global: bool,
    /// Bindable now: not tentative (IPv6 duplicate address detection still running) and
    /// not failed.
    pub ready: bool,
    /// IPv6 preferred lifetime over: keep using it, but do not pick it for new connections.
    pub deprecated: bool,
    /// An IPv4 secondary address of its subnet.
    pub secondary: bool,
}

/// One unicast route, reduced to where it leads and through which interfaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub dst: IpAddr,
    pub prefix: u8,
    /// Output interfaces (several for a multipath route).
    pub oifs: Vec<u32>,
    pub pref_src: Option<IpAddr>,
}

impl Route {
    pub fn covers(&self, ip: IpAddr) -> bool {
        match (self.dst, ip) {
            (IpAddr::V4(d), IpAddr::V4(a)) => prefix_eq(&d.octets(), &a.octets(), self.prefix),
            (IpAddr::V6(d), IpAddr::V6(a)) => prefix_eq(&d.octets(), &a.octets(), self.prefix),
            _ => false,
        }
    }
}

fn prefix_eq(a: &[u8], b: &[u8], bits: u8) -> bool {
    let bits = (bits as usize).min(a.len() * 8);
    let (whole, rest) = (bits / 8, bits % 8);
    if a[..whole] != b[..whole] {
        return false;
    }
    rest == 0 || {
        let mask = 0xffu8 << (8 - rest);
        a[whole] & mask == b[whole] & mask
    }
}

/// Why an interface cannot carry a path now — shown in `mpflex status` as the path's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Unusable {
    /// No interface of that name (not plugged in yet, or removed).
    NoDevice,
    /// Down, or up without carrier.
    NoCarrier,
    /// No global address of the server's family (or not the configured `source`).
    NoAddress,
    /// An address, but no route through it towards the server.
    NoRoute,
}

impl Unusable {
    pub fn name(self) -> &'static str {
        match self {
            Unusable::NoDevice => "waiting for device",
            Unusable::NoCarrier => "no carrier",
            Unusable::NoAddress => "no address",
            Unusable::NoRoute => "no route",
        }
    }
}

/// What a path dials with: the interface to bind (`SO_BINDTODEVICE`) and the source
/// address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub device: Option<String>,
    pub source: Option<IpAddr>,
}

/// The server addresses a path's route is checked against: the configured address if it is
/// an IP, else what its name resolved to at start; empty when it did not resolve, and then
/// a default route of either family will do.
pub type ServerIps = [IpAddr];

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LinkTable {
    links: BTreeMap<u32, Link>,
    addrs: Vec<Addr>,
    routes: Vec<Route>,
}

impl LinkTable {
    pub fn new(links: Vec<Link>, addrs: Vec<Addr>, routes: Vec<Route>) -> LinkTable {
        LinkTable {
            links: links.into_iter().map(|l| (l.index, l)).collect(),
            addrs,
            routes,
        }
    }

    /// Interfaces in index order.
    pub fn links(&self) -> impl Iterator<Item = &Link> {
        self.links.values()
    }

    /// Every address of every interface.
    pub fn addrs(&self) -> impl Iterator<Item = &Addr> {
        self.addrs.iter()
    }

    pub fn by_name(&self, name: &str) -> Option<&Link> {
        self.links.values().find(|l| l.name == name)
    }

    /// Whether interface `name` can carry a path to `server` now, and with which source
    /// address. `source`: the configured one (the interface must hold it); `prefer`: the
    /// address the path uses now, kept while it stays usable so that an unrelated change
    /// (a second address appearing) does not re-dial it.
    pub fn check(
        &self,
        name: &str,
        server: &ServerIps,
        source: Option<IpAddr>,
        prefer: Option<IpAddr>,
    ) -> Result<Binding, Unusable> {
        let link = self.by_name(name).ok_or(Unusable::NoDevice)?;
        if !(link.up && link.running) {
            return Err(Unusable::NoCarrier);
        }
        let usable: Vec<&Addr> = self
            .addrs
            .iter()
            .filter(|a| a.index == link.index && a.global && a.ready && source.is_none_or(|s| s == a.ip))
            .collect();
        // Server addresses in the resolver's order; unresolved: a default route of each
        // family, IPv6 first as getaddrinfo would.
        let unspecified = [IpAddr::from([0u16; 8]), IpAddr::from([0u8; 4])];
        let targets: &[IpAddr] = if server.is_empty() { &unspecified } else { server };
        let mut worst = Unusable::NoAddress;
        for &dst in targets {
            let mut candidates: Vec<&Addr> = usable
                .iter()
                .copied()
                .filter(|a| a.ip.is_ipv4() == dst.is_ipv4())
                .collect();
            if candidates.is_empty() {
                continue;
            }
            let route = self
                .routes
                .iter()
                .filter(|r| r.oifs.contains(&link.index) && r.covers(dst))
                .filter(|r| !server.is_empty() || r.prefix == 0)
                .max_by_key(|r| r.prefix);
            let Some(route) = route else {
                worst = Unusable::NoRoute;
                continue;
            };
            // The address in use if it still is one; else the route's preferred source;
            // else a primary, non-deprecated one.
            candidates.sort_by_key(|a| {
                (
                    Some(a.ip) != prefer,
                    Some(a.ip) != route.pref_src,
                    a.deprecated,
                    a.secondary,
                )
            });
            return Ok(Binding {
                device: Some(name.to_string()),
                source: Some(candidates[0].ip),
            });
        }
        Err(worst)
    }
}

// ----- from the kernel's messages -----

/// An interface from `RTM_NEWLINK`.
pub fn link_from(m: &LinkMessage) -> Option<Link> {
    let mut name = None;
    let mut kind = None;
    for a in &m.attributes {
        match a {
            LinkAttribute::IfName(n) => name = Some(n.clone()),
            LinkAttribute::LinkInfo(infos) => {
                for i in infos {
                    if let LinkInfo::Kind(k) = i {
                        kind = Some(kind_name(k));
                    }
                }
            }
            _ => {}
        }
    }
    let f = m.header.flags;
    Some(Link {
        index: m.header.index,
        name: name?,
        kind,
        up: f.contains(LinkFlags::Up),
        running: f.contains(LinkFlags::Running),
        loopback: f.contains(LinkFlags::Loopback),
    })
}

fn kind_name(k: &InfoKind) -> String {
    match k {
        InfoKind::Other(s) => s.clone(),
        k => k.to_string(),
    }
}

/// An address from `RTM_NEWADDR`.
pub fn addr_from(m: &AddressMessage) -> Option<Addr> {
    let mut ip = None;
    let mut local = None;
    let mut flags = AddressFlags::from_bits_retain(m.header.flags.bits() as u32);
    for a in &m.attributes {
        match a {
            AddressAttribute::Address(a) => ip = Some(*a),
            AddressAttribute::Local(a) => local = Some(*a),
            AddressAttribute::Flags(f) => flags = *f,
            _ => {}
        }
    }
    // IFA_LOCAL is the interface's own address; IFA_ADDRESS is the peer's on a
    // point-to-point link (and the same as IFA_LOCAL elsewhere).
    let ip = local.or(ip)?;
    Some(Addr {
        index: m.header.index,
        ip,
        global: m.header.scope == AddressScope::Universe,
        ready: !flags.intersects(AddressFlags::Tentative | AddressFlags::Dadfailed),
        deprecated: flags.contains(AddressFlags::Deprecated),
        secondary: flags.contains(AddressFlags::Secondary),
    })
}

/// A unicast route from `RTM_NEWROUTE` (others — local, broadcast, blackhole … — carry no
/// path).
pub fn route_from(m: &RouteMessage) -> Option<Route> {
    if m.header.kind != RouteType::Unicast {
        return None;
    }
    let ip = |a: &RouteAddress| match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    };
    let mut dst = None;
    let mut pref_src = None;
    let mut oifs = Vec::new();
    for a in &m.attributes {
        match a {
            RouteAttribute::Destination(d) => dst = ip(d),
            RouteAttribute::PrefSource(s) => pref_src = ip(s),
            RouteAttribute::Oif(i) => oifs.push(*i),
            RouteAttribute::MultiPath(hops) => oifs.extend(hops.iter().map(|h| h.interface_index)),
            _ => {}
        }
    }
    let dst = match dst {
        Some(d) => d,
        // A default route carries no destination attribute.
        None if m.header.destination_prefix_length == 0 => match m.header.address_family {
            netlink_packet_route::AddressFamily::Inet => IpAddr::from([0u8; 4]),
            netlink_packet_route::AddressFamily::Inet6 => IpAddr::from([0u16; 8]),
            _ => return None,
        },
        None => return None,
    };
    Some(Route {
        dst,
        prefix: m.header.destination_prefix_length,
        oifs,
        pref_src,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn link(index: u32, name: &str, kind: Option<&str>) -> Link {
        Link {
            index,
            name: name.into(),
            kind: kind.map(String::from),
            up: true,
            running: true,
            loopback: name == "lo",
        }
    }

    pub fn addr(index: u32, ip: &str) -> Addr {
        Addr {
            index,
            ip: ip.parse().unwrap(),
            global: true,
            ready: true,
            deprecated: false,
            secondary: false,
        }
    }

    pub fn route(dst: &str, oif: u32) -> Route {
        let (d, p) = dst.split_once('/').unwrap();
        Route {
            dst: d.parse().unwrap(),
            prefix: p.parse().unwrap(),
            oifs: vec![oif],
            pref_src: None,
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn table() -> LinkTable {
        LinkTable::new(
            vec![link(1, "lo", None), link(2, "eth0", None), link(3, "wlan0", None)],
            vec![
                addr(2, "192.0.2.10"),
                addr(2, "2001:db8::10"),
                addr(3, "198.51.100.7"),
                Addr {
                    global: false,
                    ..addr(3, "fe80::1")
                },
            ],
            vec![route("0.0.0.0/0", 2), route("198.51.100.0/24", 3), route("::/0", 2)],
        )
    }

    #[test]
    fn an_interface_carries_a_path_with_carrier_address_and_a_route_to_the_server() {
        let t = table();
        let v4 = [ip("203.0.113.1")];
        let b = t.check("eth0", &v4, None, None).unwrap();
        assert_eq!((b.device.as_deref(), b.source), (Some("eth0"), Some(ip("192.0.2.10"))));
        assert_eq!(
            t.check("wlan0", &v4, None, None),
            Err(Unusable::NoRoute),
            "only its subnet"
        );
        assert_eq!(
            t.check("wlan0", &[ip("198.51.100.1")], None, None).unwrap().source,
            Some(ip("198.51.100.7"))
        );
        assert_eq!(t.check("wwan0", &v4, None, None), Err(Unusable::NoDevice));
        let v6 = [ip("2001:db8:1::1")];
        assert_eq!(
            t.check("eth0", &v6, None, None).unwrap().source,
            Some(ip("2001:db8::10"))
        );
        assert_eq!(
            t.check("wlan0", &v6, None, None),
            Err(Unusable::NoAddress),
            "link-local only"
        );
        // Unresolved server: a default route of either family; IPv6 first.
        assert_eq!(
            t.check("eth0", &[], None, None).unwrap().source,
            Some(ip("2001:db8::10"))
        );
        assert_eq!(t.check("wlan0", &[], None, None), Err(Unusable::NoRoute));
        // A configured source must be on the interface.
        assert_eq!(
            t.check("eth0", &v4, Some(ip("198.51.100.7")), None),
            Err(Unusable::NoAddress)
        );
    }

    #[test]
    fn no_carrier_tentative_addresses_and_the_sticky_source() {
        let mut t = table();
        t.links.get_mut(&2).unwrap().running = false;
        let v4 = [ip("203.0.113.1")];
        assert_eq!(t.check("eth0", &v4, None, None), Err(Unusable::NoCarrier));
        t.links.get_mut(&2).unwrap().running = true;
        t.links.get_mut(&2).unwrap().up = false;
        assert_eq!(t.check("eth0", &v4, None, None), Err(Unusable::NoCarrier));
        t.links.get_mut(&2).unwrap().up = true;

        let v6 = [ip("2001:db8:1::1")];
        t.addrs[1].ready = false;
        assert_eq!(
            t.check("eth0", &v6, None, None),
            Err(Unusable::NoAddress),
            "DAD running"
        );
        t.addrs[1].ready = true;

        // Two addresses: the one in use stays; else the non-deprecated one.
        t.addrs.push(addr(2, "2001:db8::20"));
        t.addrs[1].deprecated = true;
        assert_eq!(
            t.check("eth0", &v6, None, None).unwrap().source,
            Some(ip("2001:db8::20"))
        );
        assert_eq!(
            t.check("eth0", &v6, None, Some(ip("2001:db8::10"))).unwrap().source,
            Some(ip("2001:db8::10"))
        );
    }

    #[test]
    fn auto_takes_hardware_and_real_uplinks_only() {
        assert!(link(2, "eth0", None).is_uplink());
        assert!(link(2, "eth0.7", Some("vlan")).is_uplink());
        assert!(link(2, "ppp0", Some("ppp")).is_uplink());
        for (name, kind) in [
            ("lo", None),
            ("veth1", Some("veth")),
            ("docker0", Some("bridge")),
            ("tun0", Some("tun")),
            ("wg0", Some("wireguard")),
        ] {
            assert!(!link(9, name, kind).is_uplink(), "{name}");
        }
    }

    #[test]
    fn prefixes_cover_what_they_should() {
        assert!(route("10.1.0.0/16", 1).covers(ip("10.1.200.3")));
        assert!(!route("10.1.0.0/16", 1).covers(ip("10.2.0.1")));
        assert!(route("10.1.2.128/25", 1).covers(ip("10.1.2.200")));
        assert!(!route("10.1.2.128/25", 1).covers(ip("10.1.2.100")));
        assert!(route("0.0.0.0/0", 1).covers(ip("1.2.3.4")));
        assert!(!route("0.0.0.0/0", 1).covers(ip("::1")), "not across families");
        assert!(route("2001:db8::/32", 1).covers(ip("2001:db8:ffff::1")));
    }

    #[test]
    fn kernel_messages_become_records() {
        use netlink_packet_route::address::AddressHeaderFlags;
        use netlink_packet_route::link::LinkHeader;
        use netlink_packet_route::route::RouteHeader;
        use netlink_packet_route::AddressFamily;

        let mut m = LinkMessage::default();
        m.header = LinkHeader {
            index: 7,
            flags: LinkFlags::Up | LinkFlags::Running | LinkFlags::LowerUp,
            ..Default::default()
        };
        m.attributes = vec![
            LinkAttribute::IfName("c2".into()),
            LinkAttribute::LinkInfo(vec![LinkInfo::Kind(InfoKind::Veth)]),
        ];
        let l = link_from(&m).unwrap();
        assert_eq!((l.index, l.name.as_str(), l.kind.as_deref()), (7, "c2", Some("veth")));
        assert!(l.up && l.running && !l.loopback);

        let mut a = AddressMessage::default();
        a.header.index = 7;
        a.header.family = AddressFamily::Inet6;
        a.header.flags = AddressHeaderFlags::empty();
        a.attributes = vec![
            AddressAttribute::Address(ip("2001:db8::5")),
            AddressAttribute::Flags(AddressFlags::Tentative),
        ];
        let a = addr_from(&a).unwrap();
        assert_eq!(a.ip, ip("2001:db8::5"));
        assert!(a.global && !a.ready);

        let mut r = RouteMessage::default();
        r.header = RouteHeader {
            address_family: AddressFamily::Inet,
            kind: RouteType::Unicast,
            ..Default::default()
        };
        r.attributes = vec![RouteAttribute::Oif(7)];
        let r2 = route_from(&r).unwrap();
        assert_eq!(
            (r2.dst, r2.prefix, r2.oifs.clone()),
            (ip("0.0.0.0"), 0, vec![7]),
            "a default route"
        );
        r.header.kind = RouteType::Local;
        assert!(route_from(&r).is_none());
    }
}
