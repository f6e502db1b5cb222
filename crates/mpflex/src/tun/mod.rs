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

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::RawFd;

use anyhow::{bail, Context, Result};
use ipnet::{Ipv4Net, Ipv6Net};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::driver::SessionHandle;

#[doc(hidden)]
pub mod bench;
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
    /// What mpflex routes into the device: `"default"` (all of the host's traffic), a
    /// list of prefixes, or nothing (absent: the user routes, as without this key).
    #[serde(default)]
    pub routes: Option<RoutesConfig>,
    /// LAN devices whose forwarded traffic goes into the device too (needs `routes`).
    #[serde(default)]
    pub lan: Vec<String>,
    /// A resolver (address, port 53 unless given) that DNS queries read from the device
    /// go to instead of where the application sent them, with `dns_via = "server"`.
    #[serde(default)]
    pub dns: Option<String>,
    /// `"app"` (queries go where the application sent them) or `"server"` (to `dns`, sent
    /// by the server: names resolve near the origins).
    #[serde(default)]
    pub dns_via: Option<String>,
}

/// `tun.routes`: the word `"default"` or a list of prefixes.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum RoutesConfig {
    Word(String),
    Prefixes(Vec<String>),
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

/// The largest an IP packet can be (RFC 791, RFC 8200 without jumbograms). The device's
/// MTU bounds only what the host hands it in one packet: a TCP connection ends in the
/// ingress's stack, so the links' MTU never applies to it, and a host that sends
/// 64 KiB segments into the device makes one system call and one pass of the stack where
/// 1,500-byte ones make 45. Datagram flows carry up to `MAX_DATAGRAM` bytes whatever the
/// links' MTU.
fn default_mtu() -> u16 {
    u16::MAX
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
        self.capture()?;
        for dev in &self.lan {
            if dev.is_empty() || dev.len() > 15 || dev.contains('/') {
                bail!("tun.lan: {dev:?} is not an interface name (1 to 15 characters)");
            }
        }
        self.dns_resolver()?;
        if !self.lan.is_empty() && self.routes.is_none() {
            bail!("tun.lan: a LAN goes into the TUN by its routes; set tun.routes too (\"default\" or prefixes)");
        }
        Ok(())
    }

    /// What `tun.routes` sends into the device; `None` when mpflex routes nothing.
    pub fn capture(&self) -> Result<Option<routes::Capture>> {
        let Some(r) = &self.routes else { return Ok(None) };
        if let Some(fd) = self.fd {
            bail!("tun.routes: not with tun.fd = {fd}; a handed-in descriptor's routes belong to whoever opened it");
        }
        match r {
            RoutesConfig::Word(w) if w == "default" => Ok(Some(routes::Capture::Default)),
            RoutesConfig::Word(w) => {
                bail!("tun.routes: {w:?} is neither \"default\" nor a list of prefixes ([\"203.0.113.0/24\", ...])")
            }
            RoutesConfig::Prefixes(list) if list.is_empty() => {
                bail!("tun.routes: an empty list routes nothing; leave tun.routes out for that")
            }
            RoutesConfig::Prefixes(list) => {
                let mut out = Vec::with_capacity(list.len());
                for p in list {
                    let n: ipnet::IpNet = p
                        .parse()
                        .with_context(|| format!("tun.routes: {p:?} is not a prefix (address/length)"))?;
                    out.push(n.trunc());
                }
                Ok(Some(routes::Capture::Prefixes(out)))
            }
        }
    }

    /// Where DNS queries read from the device go when not where the application sent
    /// them (`dns_via = "server"`).
    pub fn dns_resolver(&self) -> Result<Option<SocketAddr>> {
        let dns = match &self.dns {
            None => None,
            Some(d) => Some(
                d.parse::<SocketAddr>()
                    .or_else(|_| d.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, 53)))
                    .map_err(|_| anyhow::anyhow!("tun.dns: {d:?} is not an address (or address:port)"))?,
            ),
        };
        match (self.dns_via.as_deref(), dns) {
            (None | Some("app"), _) => Ok(None),
            (Some("server"), Some(d)) => Ok(Some(d)),
            (Some("server"), None) => bail!("tun.dns_via = \"server\": name the resolver in tun.dns"),
            (Some(v), _) => bail!("tun.dns_via: {v:?} is neither \"app\" nor \"server\""),
        }
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
    /// TCP connections whose SYN got an RST: the server refused or could not reach the
    /// destination.
    pub tcp_refused: u64,
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

/// The running ingress: its task and the routing it installed.
pub struct Tun {
    task: tokio::task::JoinHandle<()>,
    routes: Option<routes::Installed>,
}

impl Tun {
    /// Stops the ingress and removes the routing it installed (the device goes with the
    /// task).
    pub async fn stop(self) {
        self.task.abort();
        let _ = self.task.await;
        if let Some(r) = self.routes {
            if let Err(e) = r.remove().await {
                tracing::error!("TUN routing not fully removed (the next start removes it): {e:#}");
            }
        }
    }
}

/// Opens the device (or takes the handed-in descriptor), installs `tun.routes` once it
/// is up, then runs the ingress until `stop` or the session ends ([`Tun::stop`] undoes
/// the routing).
pub async fn start(cfg: &TunConfig, h: SessionHandle, stop: CancellationToken) -> Result<Tun> {
    let capture = cfg.capture()?;
    let dev = open(cfg)?;
    let name = dev.name().unwrap_or_else(|_| cfg.name.clone());
    let mtu = match cfg.fd {
        Some(_) => dev.mtu().map_or(cfg.mtu, |m| m.max(MIN_MTU)),
        None => cfg.mtu,
    };
    info!(device = %name, mtu, "TUN ingress up");
    let dns = cfg.dns_resolver()?;
    if let Some(d) = dns {
        info!(resolver = %d, "TUN: DNS queries go to this resolver, sent by the server");
    }
    let stack = std::sync::Arc::new(stack::Stack::new(usize::from(mtu)));
    let s = stack.clone();
    h.with(|sh| sh.tun = Some(std::sync::Arc::new(move || s.counters())));
    let task = tokio::spawn(async move {
        if let Err(e) = stack::run(h, dev, stack, dns, stop).await {
            tracing::error!("TUN ingress stopped: {e:#}");
        }
    });
    let routes = match capture {
        None => None,
        Some(capture) => {
            let plan = routes::Plan {
                dev: name,
                capture,
                lan: cfg.lan.clone(),
            };
            match routes::install(&plan).await {
                Ok(r) => Some(r),
                Err(e) => {
                    task.abort();
                    return Err(e);
                }
            }
        }
    };
    Ok(Tun { task, routes })
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

#[cfg(test)]
mod tests {
    use super::TunConfig;

    fn tun(toml_text: &str) -> TunConfig {
        toml::from_str(toml_text).expect("a [tun] table")
    }

    #[test]
    fn dns_goes_to_the_named_resolver_only_with_dns_via_server() {
        let at = |t: &str| tun(t).dns_resolver().unwrap().map(|a| a.to_string());
        assert_eq!(
            at("dns = \"192.0.2.53\"\ndns_via = \"server\""),
            Some("192.0.2.53:53".into())
        );
        assert_eq!(
            at("dns = \"[2001:db8::53]:5353\"\ndns_via = \"server\""),
            Some("[2001:db8::53]:5353".into())
        );
        assert_eq!(
            at("dns = \"2001:db8::53\"\ndns_via = \"server\""),
            Some("[2001:db8::53]:53".into())
        );
        // Without dns_via, or with "app", queries go where the application sent them.
        assert_eq!(at("dns = \"192.0.2.53\""), None);
        assert_eq!(at("dns = \"192.0.2.53\"\ndns_via = \"app\""), None);
        assert_eq!(at(""), None);
    }

    #[test]
    fn bad_dns_settings_are_refused_with_the_setting_named() {
        let err = |t: &str| format!("{:#}", tun(t).dns_resolver().unwrap_err());
        assert!(err("dns_via = \"server\"").contains("name the resolver in tun.dns"));
        assert!(err("dns = \"resolver.example\"\ndns_via = \"server\"").contains("is not an address"));
        assert!(err("dns = \"192.0.2.53\"\ndns_via = \"nearby\"").contains("neither \"app\" nor \"server\""));
    }
}
