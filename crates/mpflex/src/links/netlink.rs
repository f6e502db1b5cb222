//! The kernel's view of the links over rtnetlink: one socket subscribed to link, address
//! and route changes, which also carries the dumps.
//!
//! Every notification is taken as "something changed": the watcher drains what is queued
//! and dumps links, addresses and routes afresh, rather than patching a copy message by
//! message. A dump costs a millisecond or two on a host with a few interfaces, changes are
//! rare, and a table rebuilt whole cannot drift from the kernel's — a notification lost to
//! a full socket buffer (ENOBUFS) or a deletion that does not match what was kept would
//! otherwise leave a path dialling over a link that is gone.

use std::net::IpAddr;
use std::time::Duration;

use anyhow::{Context, Result};
use futures_util::{FutureExt, StreamExt, TryStreamExt};
use netlink_packet_route::route::RouteMessage;
use netlink_packet_route::AddressFamily;
use rtnetlink::{Handle, MulticastGroup};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::table::{addr_from, link_from, route_from, LinkTable};

const GROUPS: &[MulticastGroup] = &[
    MulticastGroup::Link,
    MulticastGroup::Ipv4Ifaddr,
    MulticastGroup::Ipv6Ifaddr,
    MulticastGroup::Ipv4Route,
    MulticastGroup::Ipv6Route,
];

type Messages = futures_util::stream::BoxStream<'static, ()>;

fn connect() -> Result<(Handle, Messages)> {
    let (conn, handle, messages) =
        rtnetlink::new_multicast_connection(GROUPS).context("cannot open a netlink socket to watch the interfaces")?;
    tokio::spawn(conn);
    Ok((handle, messages.map(|_| ()).boxed()))
}

/// The links, addresses and routes now.
pub async fn dump(handle: &Handle) -> Result<LinkTable> {
    let links: Vec<_> = handle
        .link()
        .get()
        .execute()
        .try_collect()
        .await
        .context("dumping links")?;
    let addrs: Vec<_> = handle
        .address()
        .get()
        .execute()
        .try_collect()
        .await
        .context("dumping addresses")?;
    let mut routes = Vec::new();
    for family in [AddressFamily::Inet, AddressFamily::Inet6] {
        let mut m = RouteMessage::default();
        m.header.address_family = family;
        // No table named: a dump lists every table's routes, policy routing's too.
        let got: Vec<_> = handle
            .route()
            .get(m)
            .execute()
            .try_collect()
            .await
            .context("dumping routes")?;
        routes.extend(got.iter().filter_map(route_from));
    }
    Ok(LinkTable::new(
        links.iter().filter_map(link_from).collect(),
        addrs.iter().filter_map(addr_from).collect(),
        routes,
    ))
}

/// Starts watching: the table now, and a receiver that sees every change after.
pub async fn watch(shutdown: CancellationToken) -> Result<watch::Receiver<LinkTable>> {
    let (handle, messages) = connect()?;
    let first = dump(&handle).await?;
    let (tx, rx) = watch::channel(first);
    tokio::spawn(run(handle, messages, tx, shutdown));
    Ok(rx)
}

async fn run(mut handle: Handle, mut messages: Messages, tx: watch::Sender<LinkTable>, shutdown: CancellationToken) {
    loop {
        let more = tokio::select! {
            m = messages.next() => m.is_some(),
            _ = shutdown.cancelled() => return,
            _ = tx.closed() => return,
        };
        if !more {
            // The socket failed (the connection task ended): open another, and dump so
            // that nothing missed meanwhile stays missed.
            warn!("netlink watch ended; reopening it");
            tokio::time::sleep(Duration::from_secs(1)).await;
            match connect() {
                Ok((h, m)) => (handle, messages) = (h, m),
                Err(e) => {
                    warn!("{e:#}");
                    continue;
                }
            }
        }
        // A change rarely comes alone (a link going down takes its routes and IPv6
        // addresses with it): take every queued notification, then dump once.
        while let Some(Some(())) = messages.next().now_or_never() {}
        match dump(&handle).await {
            Ok(t) => {
                tx.send_if_modified(|cur| {
                    let changed = *cur != t;
                    if changed {
                        *cur = t;
                    }
                    changed
                });
            }
            Err(e) => debug!("netlink dump failed: {e:#}"),
        }
    }
}

/// The server's addresses for the route check: the address itself if `server` is an IP,
/// else what the name resolves to now (empty if it does not).
pub async fn server_ips(server: &str) -> Vec<IpAddr> {
    if let Ok(sa) = server.parse::<std::net::SocketAddr>() {
        return vec![sa.ip()];
    }
    match tokio::time::timeout(Duration::from_secs(3), tokio::net::lookup_host(server)).await {
        Ok(Ok(addrs)) => addrs.map(|a| a.ip()).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads this host's tables (nothing is sent anywhere): every namespace has `lo`.
    #[tokio::test]
    async fn a_dump_lists_this_hosts_loopback() {
        let (handle, _messages) = connect().unwrap();
        let t = dump(&handle).await.unwrap();
        let lo = t.by_name("lo").expect("lo");
        assert!(lo.loopback && !lo.is_uplink());
    }

    #[tokio::test]
    async fn a_server_given_as_an_address_needs_no_resolver() {
        assert_eq!(
            server_ips("[2001:db8::1]:7000").await,
            vec!["2001:db8::1".parse::<IpAddr>().unwrap()]
        );
        assert_eq!(
            server_ips("192.0.2.1:7000").await,
            vec!["192.0.2.1".parse::<IpAddr>().unwrap()]
        );
    }
}
