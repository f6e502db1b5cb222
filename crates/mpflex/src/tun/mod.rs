//! The TUN ingress: a whole host's (or LAN's) traffic into the session, whatever the
//! protocol, without firewall rules: a layer-3 device whose packets a user-space TCP/IP
//! stack turns into the session's streams and datagram flows, beside SOCKS5, REDIRECT
//! and TPROXY. [`routes`] is the host routing that sends traffic into the device.
//!
//! The host (or a mobile VPN service, or a wrapper) routes traffic into the device; each
//! TCP connection read from it becomes a stream, each UDP 5-tuple a datagram flow, with
//! the same policy, classes and `listeners = ["tun"]` label as the other ingresses.
//! Everything else is dropped and counted ([`TunCounters`]). The TCP side is smoltcp,
//! driven directly ([`stack`]); UDP is parsed and answered here ([`udp`]), so a flow's
//! handling is the other ingresses' (docs/udp.md).

use std::net::Ipv4Addr;
use std::os::fd::RawFd;

use anyhow::{bail, Context, Result};
use ipnet::{Ipv4Net, Ipv6Net};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::driver::SessionHandle;

mod conn;
mod packet;
pub mod routes;
mod stack;
mod udp;

/// `[tun]` of the client's configuration (docs/tun.md).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TunConfig {
    /// The device's name when mpflex creates it.
    #[serde(default = "default_name")]
    pub name: String,
    /// The device's IPv4 address and prefix (the host's side of the TUN).
    #[serde(default = "default_ipv4")]
    pub ipv4: String,
    /// The device's IPv6 address and prefix; "" for none.
    #[serde(default = "default_ipv6")]
    pub ipv6: String,
    #[serde(default = "default_mtu")]
    pub mtu: u16,
    /// A TUN file descriptor already open and configured (`IFF_TUN | IFF_NO_PI`, no
    /// `IFF_VNET_HDR`), as a mobile VPN service or a wrapper hands it in: mpflex then
    /// creates no device and touches no address or route.
    #[serde(default)]
    pub fd: Option<RawFd>,
}

fn default_name() -> String {
    "mpflex0".into()
}

fn default_ipv4() -> String {
    "10.233.0.1/30".into()
}

fn default_ipv6() -> String {
    "fd00:6d70:666c::1/126".into()
}

fn default_mtu() -> u16 {
    1500
}

/// The smallest MTU IPv6 allows a link (RFC 8200 §5), and so ours.
const MIN_MTU: u16 = 1280;

impl TunConfig {
    pub fn validate(&self) -> Result<()> {
        if self.mtu < MIN_MTU {
            bail!("tun.mtu: {} is below {MIN_MTU}, the least IPv6 allows", self.mtu);
        }
        if self.fd.is_some_and(|fd| fd < 0) {
            bail!("tun.fd: not a file descriptor");
        }
        if self.name.is_empty() || self.name.len() > 15 {
            bail!(
                "tun.name: {:?} is not an interface name (1 to 15 characters)",
                self.name
            );
        }
        self.v4()?;
        self.v6()?;
        Ok(())
    }

    fn v4(&self) -> Result<Option<Ipv4Net>> {
        if self.ipv4.is_empty() {
            return Ok(None);
        }
        let n: Ipv4Net = self
            .ipv4
            .parse()
            .with_context(|| format!("tun.ipv4: {:?} is not an address/prefix", self.ipv4))?;
        Ok(Some(n))
    }

    fn v6(&self) -> Result<Option<Ipv6Net>> {
        if self.ipv6.is_empty() {
            return Ok(None);
        }
        let n: Ipv6Net = self
            .ipv6
            .parse()
            .with_context(|| format!("tun.ipv6: {:?} is not an address/prefix", self.ipv6))?;
        Ok(Some(n))
    }
}

/// What the TUN ingress dropped, and what it carried, since it started.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct TunCounters {
    pub packets_in: u64,
    pub packets_out: u64,
    /// TCP connections accepted from the device.
    pub tcp_accepted: u64,
    /// UDP datagrams read from the device and handed to a flow.
    pub udp_in: u64,
    /// ICMP and ICMPv6 echo requests read from the device and handed to a flow.
    pub echo_in: u64,
    /// Packets that are no IPv4 or IPv6 packet, or whose header is inconsistent.
    pub dropped_malformed: u64,
    /// IPv4 fragments (the host fragments nothing it sends into a TUN of its MTU).
    pub dropped_fragment: u64,
    /// Packets of a protocol the ingress does not carry (all but TCP, UDP and ICMP echo
    /// requests).
    pub dropped_protocol: u64,
    /// New TCP connections while the stack held its most.
    pub dropped_conn_limit: u64,
    /// Answers that would not fit the device's MTU.
    pub dropped_oversize: u64,
}

/// Opens the device (or takes the handed-in descriptor), then runs the ingress until
/// `stop` or the session ends.
pub fn start(cfg: &TunConfig, h: SessionHandle, stop: CancellationToken) -> Result<tokio::task::JoinHandle<()>> {
    let dev = open(cfg)?;
    let name = dev.name().unwrap_or_else(|_| cfg.name.clone());
    let mtu = match cfg.fd {
        Some(_) => dev.mtu().map_or(cfg.mtu, |m| m.max(MIN_MTU)),
        None => cfg.mtu,
    };
    info!(device = %name, mtu, "TUN ingress up");
    let stack = std::sync::Arc::new(stack::Stack::new(usize::from(mtu)));
    let s = stack.clone();
    h.with(|sh| sh.tun = Some(std::sync::Arc::new(move || s.counters())));
    Ok(tokio::spawn(async move {
        if let Err(e) = stack::run(h, dev, stack, stop).await {
            tracing::error!("TUN ingress stopped: {e:#}");
        }
    }))
}

fn open(cfg: &TunConfig) -> Result<tun_rs::AsyncDevice> {
    if let Some(fd) = cfg.fd {
        // SAFETY: the configuration hands this descriptor to mpflex (docs/tun.md): it is
        // an open TUN device without packet information or offload headers, and
        // nothing else in the process uses it.
        return unsafe { tun_rs::AsyncDevice::from_fd(fd) }
            .with_context(|| format!("tun.fd = {fd}: not a usable TUN descriptor"));
    }
    let mut b = tun_rs::DeviceBuilder::new().name(&cfg.name).mtu(cfg.mtu);
    if let Some(n) = cfg.v4()? {
        b = b.ipv4(n.addr(), n.prefix_len(), None::<Ipv4Addr>);
    }
    if let Some(n) = cfg.v6()? {
        b = b.ipv6(n.addr(), n.prefix_len());
    }
    b.build_async().with_context(|| {
        format!(
            "tun: cannot create device {:?} (creating a TUN needs CAP_NET_ADMIN)",
            cfg.name
        )
    })
}
