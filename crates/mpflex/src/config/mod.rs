//! Configuration files (TOML) and their command-line overrides.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use mpflex_engine::SchedulerKind;
use serde::Deserialize;

use crate::acl::AclConfig;
use crate::classes::{ClassRuleConfig, ClassRules};
use crate::crypto::decode_key;
use crate::links::pattern::IfPattern;
use crate::links::plan::Selector;
use crate::policy::cap::{AtCap, Cap};
use crate::policy::{Policy, RuleConfig};

mod limits;
mod tuning;
mod wifi;
pub use limits::Limits;
pub use tuning::Tuning;
pub use wifi::WifiConfig;

/// A path's server addresses (`host:port` each), in the order they are tried: one string
/// or a list of them in the configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerList(pub Vec<String>);

impl<'de> Deserialize<'de> for ServerList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum OneOrMany {
            One(String),
            Many(Vec<String>),
        }
        Ok(match OneOrMany::deserialize(d)? {
            OneOrMany::One(s) => ServerList(vec![s]),
            OneOrMany::Many(v) => ServerList(v),
        })
    }
}

impl std::fmt::Display for ServerList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.join(", "))
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathConfig {
    /// A name for logs and status; by default the device, `auto`, or `path<i>`.
    #[serde(default)]
    pub name: Option<String>,
    /// Server address for this path (`host:port`), or several (`["a:7000", "b:7000"]`)
    /// tried in order; a name with several addresses counts as several.
    pub server: ServerList,
    /// Local address to bind (selects the link by source address).
    #[serde(default)]
    pub source: Option<IpAddr>,
    /// Interface to bind with SO_BINDTODEVICE: a name (`wlan0`) or a pattern (`wlan*`,
    /// one path per matching interface).
    #[serde(default)]
    pub device: Option<String>,
    /// One path per interface with a usable route (hardware and real uplinks; loopback
    /// and virtual interfaces are left out).
    #[serde(default)]
    pub auto: bool,
    /// Interface patterns a `device` pattern or `auto` leaves alone.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// "primary" (default), "secondary" or "backup" ([`Tier`]).
    #[serde(default)]
    pub priority: Option<String>,
    /// Deprecated: `priority = "backup"`.
    #[serde(default)]
    pub backup: bool,
    /// "wifi", "cellular" or "wired", for the energy model and the energy-aware mode;
    /// by default guessed from the interface's name ([`crate::energy::guess_kind`]).
    #[serde(default)]
    pub kind: Option<String>,
    /// The link costs by the byte (cellular): shown in status; a `cap` needs it.
    #[serde(default)]
    pub metered: bool,
    /// Data cap of a metered path, e.g. `"2 GiB/month"` or `"500 MB/day"`
    /// (docs/policy.md says what it counts).
    #[serde(default)]
    pub cap: Option<String>,
    /// Day of the month (1–28) a monthly cap's period starts; 1 by default.
    #[serde(default)]
    pub cap_reset_day: Option<u8>,
    /// At the cap the path becomes `"backup"` (the default: data only while no other
    /// path can carry it) or `"off"` (no data until the period ends).
    #[serde(default)]
    pub at_cap: Option<String>,
}

pub use mpflex_engine::Tier;

/// The tier a path's `priority` or a policy rule's `tiers` names: one of
/// [`Tier::CONFIGURED`] (the others are the engine's energy standby and a data cap's off).
pub fn configured_tier(name: &str) -> Option<Tier> {
    name.parse::<Tier>().ok().filter(|t| t.is_configured())
}

impl PathConfig {
    /// The entry's name (`i`: its index among the `[[paths]]`).
    pub fn display_name(&self, i: usize) -> String {
        match (&self.name, &self.device) {
            (Some(n), _) => n.clone(),
            (None, Some(d)) => d.clone(),
            (None, None) if self.auto => "auto".into(),
            (None, None) => format!("path{i}"),
        }
    }

    /// The kind of link the entry's path `device` is; the error names the key.
    pub fn kind(&self, i: usize, device: Option<&str>) -> Result<mpflex_engine::energy::LinkKind> {
        match &self.kind {
            Some(k) => crate::energy::parse_kind(k, &format!("paths[{i}].kind")),
            None => Ok(device.map_or(mpflex_engine::energy::LinkKind::Wired, crate::energy::guess_kind)),
        }
    }

    /// The entry's tier; the error names the key.
    pub fn tier(&self, i: usize) -> Result<Tier> {
        let named = match self.priority.as_deref() {
            None => None,
            Some(p) => Some(configured_tier(p).ok_or_else(|| {
                anyhow::anyhow!("paths[{i}].priority: unknown tier {p:?} (expected primary, secondary or backup)")
            })?),
        };
        match (named, self.backup) {
            (Some(t), true) if t != Tier::Backup => bail!(
                "paths[{i}].backup: contradicts priority = {:?}; remove backup (priority replaces it)",
                t.name()
            ),
            (Some(t), _) => Ok(t),
            (None, true) => Ok(Tier::Backup),
            (None, false) => Ok(Tier::Primary),
        }
    }

    /// How the entry picks its interfaces; the error names the key.
    pub fn selector(&self, i: usize) -> Result<Selector> {
        let dynamic = self.auto || self.device.as_deref().is_some_and(|d| !is_literal(d));
        if self.auto && self.device.is_some() {
            bail!("paths[{i}].auto: set either device or auto = true, not both");
        }
        if dynamic && self.source.is_some() {
            bail!(
                "paths[{i}].source: a device pattern or auto = true binds each interface's own address; remove source"
            );
        }
        if !dynamic && !self.exclude.is_empty() {
            bail!("paths[{i}].exclude: only with a device pattern (\"wlan*\") or auto = true");
        }
        for (j, x) in self.exclude.iter().enumerate() {
            IfPattern::parse(x).map_err(|e| anyhow::anyhow!("paths[{i}].exclude[{j}]: {e}"))?;
        }
        if self.auto {
            return Ok(Selector::Auto);
        }
        let Some(dev) = &self.device else {
            return Ok(Selector::Fixed);
        };
        let p = IfPattern::parse(dev).map_err(|e| anyhow::anyhow!("paths[{i}].device: {e}"))?;
        Ok(if p.is_literal() {
            Selector::Device(dev.clone())
        } else {
            Selector::Pattern(p)
        })
    }

    /// The entry's data cap and what happens at it; the error names the key.
    pub fn cap(&self, i: usize) -> Result<Option<(Cap, AtCap)>> {
        let at_cap = self
            .at_cap
            .as_deref()
            .map(AtCap::parse)
            .transpose()
            .map_err(|e| anyhow::anyhow!("paths[{i}].at_cap: {e}"))?;
        let Some(c) = &self.cap else {
            if self.cap_reset_day.is_some() || at_cap.is_some() {
                bail!("paths[{i}].cap: cap_reset_day and at_cap need a cap");
            }
            return Ok(None);
        };
        if !self.metered {
            bail!("paths[{i}].cap: only a metered path has a cap; add metered = true");
        }
        let cap = Cap::parse(c, self.cap_reset_day).map_err(|e| anyhow::anyhow!("paths[{i}].cap: {e}"))?;
        Ok(Some((cap, at_cap.unwrap_or_default())))
    }

    /// The entry's exclude patterns (valid once [`PathConfig::selector`] passed).
    pub fn exclude_patterns(&self) -> Vec<IfPattern> {
        self.exclude.iter().filter_map(|x| IfPattern::parse(x).ok()).collect()
    }
}

/// Whether a `device` value names one interface rather than a pattern.
fn is_literal(d: &str) -> bool {
    !d.contains(['*', '?', '['])
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientConfig {
    #[serde(default)]
    pub private_key: Option<String>,
    #[serde(default)]
    pub private_key_file: Option<PathBuf>,
    pub server_public_key: String,
    #[serde(default = "default_scheduler")]
    pub scheduler: String,
    #[serde(default = "default_socks")]
    pub socks_listen: Option<SocketAddr>,
    #[serde(default)]
    pub transparent_listen: Option<SocketAddr>,
    /// Transparent UDP: where `TPROXY` rules divert datagrams (docs/udp.md).
    #[serde(default)]
    pub transparent_udp_listen: Option<SocketAddr>,
    /// Transparent TCP by `TPROXY` (the router case): where the rules divert connections
    /// (docs/transparent.md). May share its port with `transparent_udp_listen`.
    #[serde(default)]
    pub transparent_tproxy_listen: Option<SocketAddr>,
    #[serde(default)]
    pub status_listen: Option<SocketAddr>,
    /// Names a status request's `Host` may carry besides the listener's own address,
    /// loopback addresses and `localhost` (a reverse proxy's or monitoring's name).
    #[serde(default)]
    pub status_hosts: Vec<String>,
    /// A bearer token every status request must carry (`Authorization: Bearer …`;
    /// `mpflex status` sends `$MPFLEX_STATUS_TOKEN`).
    #[serde(default)]
    pub status_token: Option<String>,
    /// The same, read from a file (readable only by the user mpflex runs as).
    #[serde(default)]
    pub status_token_file: Option<PathBuf>,
    pub paths: Vec<PathConfig>,
    /// Class overrides for streams by destination (`[[classes]]`, first match wins).
    #[serde(default)]
    pub classes: Vec<ClassRuleConfig>,
    /// "aware" holds cellular paths back while WiFi suffices (eMPTCP; docs/energy.md);
    /// "off" (default).
    #[serde(default)]
    pub energy_mode: Option<String>,
    /// The device model energy is priced with: a built-in name or a TOML file
    /// (docs/energy.md); by default the thesis' Galaxy S3 with LTE.
    #[serde(default)]
    pub energy_profile: Option<String>,
    /// Policy rules (`[[rules]]`, first match wins; docs/policy.md).
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
    /// Where the data-cap ledger lives (an embedded database file); needed by `cap`.
    #[serde(default = "default_state_file")]
    pub state_file: PathBuf,
    /// How often the ledger is written to disk, ms: a crash loses at most this much of
    /// the count.
    #[serde(default = "default_flush_ms")]
    pub cap_flush_ms: u64,
    #[serde(default)]
    pub tuning: Tuning,
    /// The WiFi signal as a leading indicator (`[wifi]`).
    #[serde(default)]
    pub wifi: WifiConfig,
    /// The TUN ingress (`[tun]`, docs/tun.md); off without the table.
    #[serde(default)]
    pub tun: Option<crate::tun::TunConfig>,
}

fn default_state_file() -> PathBuf {
    PathBuf::from("/var/lib/mpflex/ledger.db")
}

fn default_flush_ms() -> u64 {
    1000
}

fn default_scheduler() -> String {
    "minrtt".into()
}

fn default_socks() -> Option<SocketAddr> {
    Some(SocketAddr::from(([127, 0, 0, 1], 1080)))
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientEntry {
    pub name: String,
    pub public_key: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    pub listen: Vec<SocketAddr>,
    #[serde(default)]
    pub private_key: Option<String>,
    #[serde(default)]
    pub private_key_file: Option<PathBuf>,
    #[serde(default)]
    pub status_listen: Option<SocketAddr>,
    /// `status_hosts`, `status_token`, `status_token_file`: as the client's
    /// ([`ClientConfig::status_hosts`] and below; docs/security.md).
    #[serde(default)]
    pub status_hosts: Vec<String>,
    #[serde(default)]
    pub status_token: Option<String>,
    #[serde(default)]
    pub status_token_file: Option<PathBuf>,
    /// Scheduler for downloads of streams whose client asks for none.
    #[serde(default = "default_scheduler")]
    pub scheduler: String,
    /// Schedulers a client may ask for (its `scheduler` and its rules'); a request
    /// outside the list gets `scheduler`. Unset: every scheduler.
    #[serde(default)]
    pub allowed_schedulers: Option<Vec<String>>,
    pub clients: Vec<ClientEntry>,
    #[serde(default)]
    pub acl: AclConfig,
    /// Seconds a session with no path is kept for its client to come back.
    #[serde(default = "default_linger")]
    pub session_linger_secs: u64,
    /// This server's id in a pool behind a balancer (1..=65535), which the routing
    /// preamble of a session's later paths names (docs/balancer.md); 0: not in a pool.
    #[serde(default)]
    pub server_id: u16,
    /// Where a session's later paths may reach this server directly instead of through
    /// the balancer (told to the client in the join answer); only with `server_id`.
    #[serde(default)]
    pub join_addr: Option<SocketAddr>,
    /// On SIGTERM, seconds the server keeps serving the streams that are open (it accepts
    /// no new path) before it closes every session.
    #[serde(default)]
    pub drain_grace_secs: u64,
    /// Class overrides for streams by destination (`[[classes]]`, first match wins).
    #[serde(default)]
    pub classes: Vec<ClassRuleConfig>,
    #[serde(default)]
    pub tuning: Tuning,
    /// Datagram flows (`[udp]`).
    #[serde(default)]
    pub udp: UdpConfig,
    /// What one peer may hold (`[limits]`).
    #[serde(default)]
    pub limits: Limits,
}

/// The status listener's rules from `status_hosts`, `status_token` and
/// `status_token_file`; the error names the key.
fn status_access(hosts: &[String], inline: &Option<String>, file: &Option<PathBuf>) -> Result<crate::status::Access> {
    let token = match (inline, file) {
        (Some(_), Some(_)) => bail!("status_token and status_token_file: set only one"),
        (Some(t), None) => Some(t.trim().to_string()),
        (None, Some(f)) => {
            check_secret_file(f, "status_token_file")?;
            let t = std::fs::read_to_string(f)
                .map_err(|e| anyhow::anyhow!("status_token_file: cannot read {}: {e}", f.display()))?;
            Some(t.trim().to_string())
        }
        (None, None) => None,
    };
    if token
        .as_deref()
        .is_some_and(|t| t.is_empty() || t.contains(char::is_whitespace))
    {
        bail!("status_token: empty or containing spaces");
    }
    Ok(crate::status::Access {
        hosts: hosts.to_vec(),
        token,
    })
}

/// Refuse (rather than warn about) secret files that others can read: `--strict-perms`.
pub static STRICT_PERMS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Warns once about a secret file (`key` names its setting) that users other than the
/// one mpflex runs as can read: others may (o+r), or a group other than the process's
/// may (g+r; the packaged layout, root:mpflex 0640, is fine). With `--strict-perms`
/// ([`STRICT_PERMS`]), refuses it.
pub fn check_secret_file(f: &Path, key: &str) -> Result<()> {
    static WARNED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let Some(problem) = secret_file_problem(f) else {
        return Ok(());
    };
    if STRICT_PERMS.load(std::sync::atomic::Ordering::Relaxed) {
        bail!("{key}: {problem}");
    }
    let mut warned = WARNED.lock().unwrap();
    if !warned.iter().any(|p| p == f) {
        tracing::warn!("{key}: {problem}; --strict-perms refuses such files");
        warned.push(f.to_path_buf());
    }
    Ok(())
}

/// What is wrong with a secret file's permissions, with the fix; `None` if nothing (or
/// if it cannot be read: the read that follows says why).
pub(crate) fn secret_file_problem(f: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(f).ok()?;
    // SAFETY: getegid has no preconditions and cannot fail.
    let egid = unsafe { libc::getegid() };
    let mode = m.mode();
    let why = if mode & 0o004 != 0 {
        "every user can read it"
    } else if mode & 0o040 != 0 && m.gid() != egid {
        "members of its group, which mpflex does not run as, can read it"
    } else {
        return None;
    };
    Some(format!(
        "{f} is mode {:o}: {why}; chmod o-r,g-r {f} (or give it the group mpflex runs as)",
        mode & 0o777,
        f = f.display()
    ))
}

/// The server's `[udp]` table: how long a datagram flow's socket lives without traffic.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UdpConfig {
    /// Seconds a flow's socket is kept with no datagram either way. 60 s outlasts the
    /// keepalive interval of the usual UDP applications (QUIC's default idle timeout is
    /// 30 s, RFC 9000 §10.1; RFC 4787 REQ-5 asks NATs for at least 2 minutes, but a
    /// flow here costs a socket and its task, so the default is shorter).
    pub idle_timeout_secs: u64,
    /// The same for flows to port 53: a DNS exchange is one query and its answer, so its
    /// socket goes soon (as a NAT's DNS mapping does).
    pub dns_idle_timeout_secs: u64,
}

impl Default for UdpConfig {
    fn default() -> Self {
        UdpConfig {
            idle_timeout_secs: 60,
            dns_idle_timeout_secs: 10,
        }
    }
}

impl UdpConfig {
    /// The idle timeout of a flow to `port`.
    pub fn idle_timeout(&self, port: u16) -> std::time::Duration {
        std::time::Duration::from_secs(if port == 53 {
            self.dns_idle_timeout_secs
        } else {
            self.idle_timeout_secs
        })
    }
}

fn default_linger() -> u64 {
    60
}

/// Reads a TOML file, applies `key=value` overrides (dotted keys; values in TOML syntax,
/// bare words taken as strings), and deserializes.
pub fn load<T: for<'de> Deserialize<'de>>(path: Option<&Path>, overrides: &[String]) -> Result<T> {
    let mut root: toml::Table = match path {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("cannot read config {}", p.display()))?;
            text.parse()
                .with_context(|| format!("config {} is not valid TOML", p.display()))?
        }
        None => toml::Table::new(),
    };
    for o in overrides {
        let (key, value) = o
            .split_once('=')
            .with_context(|| format!("--set {o:?}: expected KEY=VALUE"))?;
        let value: toml::Value = match format!("v = {value}").parse::<toml::Table>() {
            Ok(mut t) => t.remove("v").expect("parsed"),
            Err(_) => toml::Value::String(value.to_string()),
        };
        set_dotted(&mut root, key.trim(), value).with_context(|| format!("--set {o:?}"))?;
    }
    let what = path.map_or("command line".to_string(), |p| p.display().to_string());
    T::deserialize(toml::Value::Table(root)).map_err(|e| anyhow::anyhow!("config {what}: {e}"))
}

fn set_dotted(root: &mut toml::Table, key: &str, value: toml::Value) -> Result<()> {
    let mut parts: Vec<&str> = key.split('.').collect();
    let last = parts.pop().filter(|s| !s.is_empty()).context("empty key")?;
    let mut t = root;
    for p in parts {
        let entry = t
            .entry(p.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        t = entry.as_table_mut().with_context(|| format!("{p} is not a table"))?;
    }
    t.insert(last.to_string(), value);
    Ok(())
}

fn private_key(inline: &Option<String>, file: &Option<PathBuf>) -> Result<[u8; 32]> {
    match (inline, file) {
        (Some(k), None) => decode_key(k, "private_key"),
        (None, Some(f)) => {
            check_secret_file(f, "private_key_file")?;
            let text = zeroize::Zeroizing::new(std::fs::read_to_string(f).map_err(|e| {
                anyhow::anyhow!(
                    "private_key_file: cannot read {f}: {e}; create it with `mpflex keygen > {f}`, readable by \
                     the user mpflex runs as",
                    f = f.display()
                )
            })?);
            // Accept both a bare key and the `keygen` output.
            let key = text
                .lines()
                .find_map(|l| {
                    l.trim()
                        .strip_prefix("private_key")
                        .map(|r| r.trim_start_matches([' ', '=']).trim_matches('"'))
                })
                .unwrap_or(text.trim());
            decode_key(key, "private_key_file")
        }
        (Some(_), Some(_)) => bail!("private_key and private_key_file: set only one"),
        (None, None) => bail!("private_key: missing (or set private_key_file)"),
    }
}

impl ClientConfig {
    pub fn validate(&self) -> Result<()> {
        if self.paths.is_empty() {
            bail!("paths: at least one [[paths]] entry is needed");
        }
        if self.paths.len() > mpflex_engine::MAX_PATHS {
            bail!("paths: at most {} paths", mpflex_engine::MAX_PATHS);
        }
        for (i, p) in self.paths.iter().enumerate() {
            if p.server.0.is_empty() {
                bail!("paths[{i}].server: no address");
            }
            for a in &p.server.0 {
                if a.rsplit_once(':')
                    .and_then(|(_, port)| port.parse::<u16>().ok())
                    .is_none()
                {
                    bail!("paths[{i}].server: {a:?} is not host:port");
                }
            }
            let name = p.display_name(i);
            if self.paths[..i]
                .iter()
                .enumerate()
                .any(|(j, q)| q.display_name(j) == name)
            {
                bail!("paths[{i}].name: {name:?} is used twice");
            }
            p.selector(i)?;
            p.tier(i)?;
            p.kind(i, None)?;
            p.cap(i)?;
        }
        if self.cap_flush_ms == 0 {
            bail!("cap_flush_ms: must be > 0");
        }
        self.energy_mode()?;
        self.energy_profile()?;
        self.scheduler_kind()?;
        if self.socks_listen.is_none()
            && self.transparent_listen.is_none()
            && self.transparent_udp_listen.is_none()
            && self.transparent_tproxy_listen.is_none()
            && self.tun.is_none()
        {
            bail!(
                "socks_listen / transparent_listen / transparent_udp_listen / transparent_tproxy_listen / [tun]: at least one ingress is needed"
            );
        }
        if let (Some(r), Some(t)) = (self.transparent_listen, self.transparent_tproxy_listen) {
            if r.port() == t.port() {
                bail!(
                    "transparent_tproxy_listen: port {} is transparent_listen's too; REDIRECT and TPROXY need a listener each",
                    t.port()
                );
            }
        }
        if let Some(t) = &self.tun {
            t.validate()?;
        }
        self.private_key()?;
        self.status_access()?;
        decode_key(&self.server_public_key, "server_public_key")?;
        self.class_rules()?;
        self.policy()?;
        self.wifi.validate()?;
        self.tuning.validate()
    }

    pub fn private_key(&self) -> Result<[u8; 32]> {
        private_key(&self.private_key, &self.private_key_file)
    }

    /// Who may read the status listener.
    pub fn status_access(&self) -> Result<crate::status::Access> {
        status_access(&self.status_hosts, &self.status_token, &self.status_token_file)
    }

    /// The energy-aware mode's κ and τ (`[tuning]`).
    pub fn energy_aware_config(&self) -> mpflex_engine::emptcp::EnergyAwareConfig {
        mpflex_engine::emptcp::EnergyAwareConfig {
            kappa: self.tuning.energy_kappa_bytes,
            tau_us: self.tuning.energy_tau_ms * 1000,
            ..Default::default()
        }
    }

    /// The session's scheduler (`scheduler`, an alias parsed to the scheduler it names).
    pub fn scheduler_kind(&self) -> Result<SchedulerKind> {
        scheduler_kind(&self.scheduler, "scheduler")
    }

    pub fn energy_mode(&self) -> Result<mpflex_engine::EnergyMode> {
        self.energy_mode
            .as_deref()
            .map_or(Ok(mpflex_engine::EnergyMode::Off), crate::energy::parse_mode)
    }

    pub fn energy_profile(&self) -> Result<mpflex_engine::energy::EnergyProfile> {
        self.energy_profile
            .as_deref()
            .map_or(Ok(Default::default()), crate::energy::load_profile)
    }

    /// The compiled `[[classes]]`.
    pub fn class_rules(&self) -> Result<ClassRules> {
        Ok(ClassRules::new(&self.classes)?)
    }

    /// The compiled `[[rules]]`. Path names are checked against the `[[paths]]` names
    /// unless an entry finds its interfaces at run time (a pattern or `auto`).
    pub fn policy(&self) -> Result<Policy> {
        let dynamic = self
            .paths
            .iter()
            .enumerate()
            .any(|(i, p)| !matches!(p.selector(i), Ok(Selector::Fixed | Selector::Device(_))));
        let names: Vec<String> = self.paths.iter().enumerate().map(|(i, p)| p.display_name(i)).collect();
        Ok(Policy::new(&self.rules, (!dynamic).then_some(names.as_slice()))?)
    }

    /// What is accepted but should change, one sentence each (the client logs them).
    pub fn warnings(&self) -> Vec<String> {
        self.paths
            .iter()
            .enumerate()
            .filter(|(_, p)| p.backup)
            .map(|(i, _)| format!("paths[{i}].backup is deprecated: write priority = \"backup\""))
            .collect()
    }
}

impl ServerConfig {
    pub fn validate(&self) -> Result<()> {
        if self.listen.is_empty() {
            bail!("listen: at least one address is needed");
        }
        if self.join_addr.is_some() && self.server_id == 0 {
            bail!("join_addr: needs a server_id (1..=65535): the client routes later paths by it");
        }
        if self.clients.is_empty() {
            bail!("clients: no [[clients]] entry; the server would serve nobody");
        }
        for (i, c) in self.clients.iter().enumerate() {
            decode_key(&c.public_key, &format!("clients[{i}].public_key"))?;
        }
        self.scheduler_kind()?;
        self.allowed_scheduler_kinds()?;
        crate::acl::Acl::new(&self.acl)?;
        self.private_key()?;
        self.status_access()?;
        self.class_rules()?;
        self.limits.validate()?;
        self.tuning.validate()
    }

    pub fn private_key(&self) -> Result<[u8; 32]> {
        private_key(&self.private_key, &self.private_key_file)
    }

    /// Who may read the status listener.
    pub fn status_access(&self) -> Result<crate::status::Access> {
        status_access(&self.status_hosts, &self.status_token, &self.status_token_file)
    }

    /// The compiled `[[classes]]`.
    pub fn class_rules(&self) -> Result<ClassRules> {
        Ok(ClassRules::new(&self.classes)?)
    }

    /// The default scheduler (`scheduler`, an alias parsed to the scheduler it names).
    pub fn scheduler_kind(&self) -> Result<SchedulerKind> {
        scheduler_kind(&self.scheduler, "scheduler")
    }

    /// The schedulers a client may ask for (`allowed_schedulers`); `None`: any.
    pub fn allowed_scheduler_kinds(&self) -> Result<Option<Vec<SchedulerKind>>> {
        self.allowed_schedulers
            .as_ref()
            .map(|names| {
                names
                    .iter()
                    .enumerate()
                    .map(|(i, n)| scheduler_kind(n, &format!("allowed_schedulers[{i}]")))
                    .collect()
            })
            .transpose()
    }
}

/// The scheduler `name` (a name or an alias) names; the error names the key.
fn scheduler_kind(name: &str, key: &str) -> Result<SchedulerKind> {
    name.parse::<SchedulerKind>().map_err(|e| anyhow::anyhow!("{key}: {e}"))
}

#[cfg(test)]
mod tests;
