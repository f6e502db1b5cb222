//! The host routing that sends traffic into the TUN device (`tun.routes`, `tun.lan`)
//! while mpflex's own path connections keep leaving on their links.
//!
//! The rule set is WireGuard's `wg-quick` design (policy routing by firewall mark), for
//! IPv4 and IPv6 alike:
//!
//! ```text
//! PRIORITY      lookup main suppress_prefixlength 0   (only for "default": the host's
//!                                                       specific routes — its LANs — win)
//! PRIORITY + 1  not fwmark MARK lookup TABLE          (everything but the path sockets)
//! TABLE:        default dev <tun>   |   <prefix> dev <tun> …
//! ```
//!
//! Path sockets carry `SO_MARK = MARK` ([`path_mark`]), so they skip the second rule and
//! follow the host's own routing onto their links. Every rule and route added carries the
//! protocol tag [`PROTO`] and the routes live in their own table, so "what mpflex added"
//! is exactly "rules tagged [`PROTO`] and the table's routes": [`clear`] removes them, and
//! runs before every install, so a restart after a crash (`kill -9`) starts from the
//! host's own state. A crashed process's TUN device goes with it and the kernel drops the
//! routes through it; the rules left behind then point at an empty table and every lookup
//! falls through to `main` — no host is left without a route even before the restart.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{bail, Context, Result};
use futures_util::TryStreamExt;
use ipnet::IpNet;
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteProtocol, RouteScope, RouteType,
};
use netlink_packet_route::rule::{RuleAction, RuleAttribute, RuleFlags, RuleMessage};
use netlink_packet_route::AddressFamily;
use rtnetlink::{Handle, IpVersion};
use tracing::{info, warn};

/// The routing table that holds the TUN's routes ("mp" in ASCII).
pub const TABLE: u32 = 0x6d70;
/// The firewall mark of path sockets: their packets skip the TUN's table.
pub const MARK: u32 = 0x6d70;
/// The priority of the first rule. Below `main`'s 32766 so the TUN wins over the host's
/// default route; above 0 (`local`) so local addresses stay local. Rules an administrator
/// placed before it (smaller numbers) still come first.
pub const PRIORITY: u32 = 5270;
/// The protocol tag of every rule and route added here (`ip rule show proto 77`). Unused
/// by the kernel and the common routing daemons (iproute2's rt_protos).
pub const PROTO: u8 = 77;

/// What goes into the TUN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Capture {
    /// All of the host's traffic (both families), except what its more specific routes
    /// (connected networks, LANs) send elsewhere.
    Default,
    /// Only these destinations.
    Prefixes(Vec<IpNet>),
}

/// The routing to install.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The TUN device's name.
    pub dev: String,
    pub capture: Capture,
    /// LAN devices whose forwarded traffic goes in too: forwarding is switched on for
    /// them (and back to what it was on a clean exit).
    pub lan: Vec<String>,
}

/// The mark path sockets set, or 0 (none) while no routes are installed.
static PATH_MARK: AtomicU32 = AtomicU32::new(0);

/// The `SO_MARK` path sockets must carry so they keep leaving on their links while the
/// TUN takes the host's traffic; `None` when mpflex installed no routes.
pub fn path_mark() -> Option<u32> {
    match PATH_MARK.load(Ordering::Relaxed) {
        0 => None,
        m => Some(m),
    }
}

/// Marks path sockets opened from now on, before [`install`] (which marks them too): a
/// client that will install routes dials its paths marked, so none needs re-marking.
pub fn mark_path_sockets() {
    PATH_MARK.store(MARK, Ordering::Relaxed);
}

/// Routes and rules installed by [`install`]; [`Installed::remove`] takes them away.
pub struct Installed {
    handle: Handle,
    /// Forwarding settings changed for `tun.lan`: (sysctl path, value before).
    forwarding: Vec<(String, String)>,
}

fn connect() -> Result<Handle> {
    let (conn, handle, _) = rtnetlink::new_connection().context("cannot open a netlink socket to install routes")?;
    tokio::spawn(conn);
    Ok(handle)
}

/// Installs `plan` (after removing what an earlier run left). Path sockets opened from now
/// on carry [`MARK`]; open ones must be re-marked by the caller ([`path_mark`]).
pub async fn install(plan: &Plan) -> Result<Installed> {
    let handle = connect()?;
    let left = clear_with(&handle).await?;
    if left > 0 {
        warn!(
            rules_and_routes = left,
            "removed TUN routing an earlier mpflex left behind (it did not exit cleanly)"
        );
    }
    // Path sockets are marked before the rules that need the mark exist.
    PATH_MARK.store(MARK, Ordering::Relaxed);
    let mut installed = Installed {
        handle: handle.clone(),
        forwarding: Vec::new(),
    };
    if let Err(e) = add_all(&handle, plan, &mut installed).await {
        // Half a rule set is worse than none: take back what was added.
        if let Err(undo) = installed.remove().await {
            warn!("removing the partly installed TUN routing: {undo:#}");
        }
        return Err(e);
    }
    info!(dev = %plan.dev, capture = ?plan.capture, lan = ?plan.lan, "TUN routing installed");
    Ok(installed)
}

async fn add_all(handle: &Handle, plan: &Plan, installed: &mut Installed) -> Result<()> {
    let index = link_index(handle, &plan.dev).await?;
    let prefixes = match &plan.capture {
        Capture::Default => vec!["0.0.0.0/0".parse()?, "::/0".parse()?],
        Capture::Prefixes(p) => p.clone(),
    };
    for p in &prefixes {
        add_route(handle, *p, index)
            .await
            .with_context(|| format!("tun.routes: cannot route {p} into {}", plan.dev))?;
    }
    for v6 in [false, true] {
        if plan.capture == Capture::Default {
            add_rule(handle, v6, suppress_rule()).await?;
        }
        add_rule(handle, v6, capture_rule()).await?;
    }
    for dev in &plan.lan {
        for key in [
            format!("/proc/sys/net/ipv4/conf/{dev}/forwarding"),
            format!("/proc/sys/net/ipv6/conf/{dev}/forwarding"),
            "/proc/sys/net/ipv4/ip_forward".to_string(),
            // IPv6 forwards only with the global switch on.
            "/proc/sys/net/ipv6/conf/all/forwarding".to_string(),
        ] {
            let before = std::fs::read_to_string(&key)
                .with_context(|| format!("tun.lan: no device {dev} ({key} unreadable)"))?;
            if before.trim() != "1" {
                std::fs::write(&key, "1\n").with_context(|| format!("tun.lan: cannot switch on forwarding ({key})"))?;
                installed.forwarding.push((key, before));
            }
        }
    }
    Ok(())
}

impl Installed {
    /// Removes every rule and route mpflex added and restores the forwarding settings it
    /// changed. Path sockets opened afterwards are no longer marked.
    pub async fn remove(self) -> Result<()> {
        PATH_MARK.store(0, Ordering::Relaxed);
        for (key, before) in self.forwarding.iter().rev() {
            if let Err(e) = std::fs::write(key, before) {
                warn!("cannot restore {key}: {e}");
            }
        }
        clear_with(&self.handle).await?;
        info!("TUN routing removed");
        Ok(())
    }
}

/// Removes every rule tagged [`PROTO`] and every route of [`TABLE`] (both families):
/// what an earlier mpflex installed. Returns how many it removed.
pub async fn clear() -> Result<usize> {
    clear_with(&connect()?).await
}

async fn clear_with(handle: &Handle) -> Result<usize> {
    let mut n = 0;
    for v in [IpVersion::V4, IpVersion::V6] {
        let rules: Vec<RuleMessage> = handle
            .rule()
            .get(v.clone())
            .execute()
            .try_collect()
            .await
            .context("listing routing rules")?;
        for r in rules.into_iter().filter(|r| {
            r.attributes
                .contains(&RuleAttribute::Protocol(RouteProtocol::Other(PROTO)))
        }) {
            handle
                .rule()
                .del(r)
                .execute()
                .await
                .context("removing a routing rule")?;
            n += 1;
        }
        let family = match v {
            IpVersion::V4 => AddressFamily::Inet,
            IpVersion::V6 => AddressFamily::Inet6,
        };
        let mut m = RouteMessage::default();
        m.header.address_family = family;
        let routes: Vec<RouteMessage> = handle
            .route()
            .get(m)
            .execute()
            .try_collect()
            .await
            .context("listing routes")?;
        for r in routes.into_iter().filter(|r| table_of(r) == TABLE) {
            match handle.route().del(r).execute().await {
                Ok(()) => n += 1,
                // Gone meanwhile (its device went away).
                Err(rtnetlink::Error::NetlinkError(e)) if e.raw_code() == -libc::ESRCH => {}
                Err(e) => return Err(e).context("removing a route"),
            }
        }
    }
    Ok(n)
}

fn table_of(r: &RouteMessage) -> u32 {
    r.attributes
        .iter()
        .find_map(|a| match a {
            RouteAttribute::Table(t) => Some(*t),
            _ => None,
        })
        .unwrap_or(r.header.table as u32)
}

async fn link_index(handle: &Handle, dev: &str) -> Result<u32> {
    let link = handle
        .link()
        .get()
        .match_name(dev.to_string())
        .execute()
        .try_next()
        .await
        .with_context(|| format!("tun: no device {dev}"))?;
    match link {
        Some(l) => Ok(l.header.index),
        None => bail!("tun: no device {dev}"),
    }
}

async fn add_route(handle: &Handle, prefix: IpNet, index: u32) -> Result<()> {
    let mut m = RouteMessage::default();
    m.header.address_family = if prefix.addr().is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    m.header.destination_prefix_length = prefix.prefix_len();
    m.header.table = RouteHeader::RT_TABLE_UNSPEC;
    m.header.protocol = RouteProtocol::Other(PROTO);
    m.header.scope = RouteScope::Universe;
    m.header.kind = RouteType::Unicast;
    if prefix.prefix_len() > 0 {
        m.attributes.push(RouteAttribute::Destination(match prefix.network() {
            IpAddr::V4(a) => RouteAddress::Inet(a),
            IpAddr::V6(a) => RouteAddress::Inet6(a),
        }));
    }
    m.attributes.push(RouteAttribute::Table(TABLE));
    m.attributes.push(RouteAttribute::Oif(index));
    handle.route().add(m).execute().await?;
    Ok(())
}

/// `lookup main suppress_prefixlength 0`: the host's routes except its default ones.
fn suppress_rule() -> RuleMessage {
    let mut r = RuleMessage::default();
    r.header.table = RouteHeader::RT_TABLE_MAIN;
    r.header.action = RuleAction::ToTable;
    r.attributes.push(RuleAttribute::Priority(PRIORITY));
    r.attributes.push(RuleAttribute::SuppressPrefixLen(0));
    r
}

/// `not fwmark MARK lookup TABLE`: everything but the path sockets goes into the TUN.
fn capture_rule() -> RuleMessage {
    let mut r = RuleMessage::default();
    r.header.table = RouteHeader::RT_TABLE_UNSPEC;
    r.header.action = RuleAction::ToTable;
    r.header.flags = RuleFlags::Invert;
    r.attributes.push(RuleAttribute::Table(TABLE));
    r.attributes.push(RuleAttribute::Priority(PRIORITY + 1));
    r.attributes.push(RuleAttribute::FwMark(MARK));
    r.attributes.push(RuleAttribute::FwMask(u32::MAX));
    r
}

async fn add_rule(handle: &Handle, v6: bool, mut r: RuleMessage) -> Result<()> {
    r.header.family = if v6 { AddressFamily::Inet6 } else { AddressFamily::Inet };
    r.attributes.push(RuleAttribute::Protocol(RouteProtocol::Other(PROTO)));
    let mut req = handle.rule().add();
    *req.message_mut() = r;
    req.execute()
        .await
        .with_context(|| format!("cannot add a routing rule (IPv{})", if v6 { 6 } else { 4 }))
}
