//! The policy engine: `[[rules]]` say, per destination, application and traffic class,
//! which paths a stream may use and how it is scheduled (MPFlex's policy layer, seed
//! 002: what each application may use is decided apart from the transport).
//!
//! Pure and clock-free: the driver gathers the facts of a new stream ([`Facts`]: its
//! destination, the TLS server name of its first bytes, the owner of the application's
//! socket, the listener and SOCKS user, its configured class) and asks [`Policy::decide`];
//! the answer ([`Decision`]) names the rule and its actions. Rules are tried in order and
//! the first whose every matcher matches wins; a stream no rule matches gets the
//! configuration's defaults. docs/policy.md has the syntax.

pub mod cap;
pub mod check;
pub mod sni;

use mpflex_engine::{SchedulerKind, TrafficClass};
use serde::Deserialize;

use crate::classes::{ClassRuleError, DestMatcher, Destination, PortSpec};
use crate::config::Tier;

/// One `[[rules]]` entry as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// A name for status and logs; `rules[i]` by default.
    #[serde(default)]
    pub name: Option<String>,
    // ----- matchers: every one set must match, any element of a list may -----
    /// Destination ports and ranges (`443`, `"5000-5100"`).
    #[serde(default)]
    pub ports: Vec<PortSpec>,
    /// Destination networks.
    #[serde(default)]
    pub cidrs: Vec<String>,
    /// Destination name suffixes: the name a SOCKS5 client asked for, or the server name
    /// (SNI) of a TLS ClientHello in the stream's first bytes.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// (transparent ingress) The uid, gid or cgroup (a path prefix, e.g.
    /// `"/user.slice/user-1000.slice"`) of the process owning the application's socket.
    #[serde(default)]
    pub uids: Vec<u32>,
    #[serde(default)]
    pub gids: Vec<u32>,
    #[serde(default)]
    pub cgroups: Vec<String>,
    /// The ingress the stream came in on: `socks`, `transparent` (`REDIRECT`) or `tproxy`
    /// (TCP by `TPROXY`).
    #[serde(default)]
    pub listeners: Vec<String>,
    /// (SOCKS5) The user name the application authenticated with (RFC 1929).
    #[serde(default)]
    pub users: Vec<String>,
    /// The stream's configured traffic class (from `[[classes]]`): `interactive`, `bulk`
    /// or `realtime`.
    #[serde(default)]
    pub traffic: Vec<String>,
    // ----- actions -----
    /// Path names the stream may use (with `tiers`: those paths and the paths of those
    /// tiers). Neither: every path.
    #[serde(default)]
    pub paths: Option<Vec<String>>,
    /// Tiers whose paths the stream may use (`primary`, `secondary`, `backup`).
    #[serde(default)]
    pub tiers: Option<Vec<String>>,
    /// Scheduler for the stream, both directions.
    #[serde(default)]
    pub scheduler: Option<String>,
    /// Pins the stream's traffic class.
    #[serde(default)]
    pub class: Option<String>,
    /// `true`: every byte on every allowed path (the `redundant` scheduler); `false`: a
    /// non-redundant scheduler even if the default is redundant.
    #[serde(default)]
    pub redundant: Option<bool>,
    /// `"aware"` or `"off"`: the stream's energy mode.
    #[serde(default)]
    pub energy: Option<String>,
}

/// A stream's energy mode, as its rule sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Energy {
    /// No rule said: the session's mode.
    #[default]
    Default,
    Aware,
    Off,
}

impl Energy {
    /// For the engine: `Some(true)` aware, `Some(false)` off, `None` the session's.
    pub fn aware(self) -> Option<bool> {
        match self {
            Energy::Default => None,
            Energy::Aware => Some(true),
            Energy::Off => Some(false),
        }
    }
}

/// What is known of a new stream when its rule is looked up.
#[derive(Debug, Clone, Copy, Default)]
pub struct Facts<'a> {
    pub dest: Destination<'a>,
    /// The server name of a TLS ClientHello in the stream's first bytes.
    pub sni: Option<&'a str>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub cgroup: Option<&'a str>,
    /// `socks`, `transparent` or `tproxy`.
    pub listener: Option<&'a str>,
    pub user: Option<&'a str>,
    /// The class `[[classes]]` gives the destination, if any.
    pub class: Option<TrafficClass>,
}

/// What a stream gets.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    /// The rule that matched (its name), `None` if none did.
    pub rule: Option<String>,
    /// Paths allowed by name and by tier; both `None`: every path.
    pub paths: Option<Vec<String>>,
    pub tiers: Option<Vec<Tier>>,
    /// Scheduler for the stream; `None`: the session's.
    pub scheduler: Option<SchedulerKind>,
    /// Class to pin; `None`: the `[[classes]]` class or the engine's behaviour-based one.
    pub class: Option<TrafficClass>,
    pub energy: Energy,
}

impl Decision {
    /// The engine's path mask for the stream, given the session's paths by index (name
    /// and tier); every path when the rule restricts none.
    pub fn mask(&self, paths: &[(String, Tier)]) -> u64 {
        if self.paths.is_none() && self.tiers.is_none() {
            return mpflex_engine::ALL_PATHS;
        }
        let by_name = |n: &String| self.paths.as_ref().is_some_and(|ps| ps.contains(n));
        let by_tier = |t: &Tier| self.tiers.as_ref().is_some_and(|ts| ts.contains(t));
        paths
            .iter()
            .enumerate()
            .filter(|(i, (n, t))| *i < 64 && (by_name(n) || by_tier(t)))
            .fold(0, |m, (i, _)| m | 1u64 << i)
    }

    /// The allowed paths in words, for status and `policy check`.
    pub fn paths_text(&self) -> String {
        let mut parts = Vec::new();
        if let Some(ps) = &self.paths {
            parts.extend(ps.iter().cloned());
        }
        if let Some(ts) = &self.tiers {
            parts.extend(ts.iter().map(|t| format!("tier:{}", t.name())));
        }
        if parts.is_empty() {
            "all".into()
        } else {
            parts.join(",")
        }
    }
}

#[derive(Debug, Clone)]
struct Rule {
    name: String,
    dest: DestMatcher,
    uids: Vec<u32>,
    gids: Vec<u32>,
    /// Without a trailing slash.
    cgroups: Vec<String>,
    listeners: Vec<String>,
    users: Vec<String>,
    traffic: Vec<TrafficClass>,
    action: Decision,
}

/// Ingress names a `listeners` matcher knows.
pub const LISTENERS: &[&str] = &["socks", "transparent", "tproxy", "tun"];

/// The compiled `[[rules]]`.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    rules: Vec<Rule>,
}

fn err(index: usize, key: &'static str, problem: impl Into<String>) -> ClassRuleError {
    ClassRuleError {
        section: "rules",
        index,
        key,
        problem: problem.into(),
    }
}

/// `a` (a list matcher of a later rule) is within `b` (an earlier one's): every value
/// `a` accepts, `b` accepts too.
fn list_within<T: PartialEq>(a: &[T], b: &[T]) -> bool {
    b.is_empty() || (!a.is_empty() && a.iter().all(|x| b.contains(x)))
}

fn cgroup_within(cg: &str, prefix: &str) -> bool {
    cg == prefix || prefix == "/" || (cg.starts_with(prefix) && cg.as_bytes().get(prefix.len()) == Some(&b'/'))
}

impl Rule {
    fn matches(&self, f: &Facts<'_>) -> bool {
        let list = |l: &[u32], v: Option<u32>| l.is_empty() || v.is_some_and(|v| l.contains(&v));
        let names = |l: &[String], v: Option<&str>| l.is_empty() || v.is_some_and(|v| l.iter().any(|x| x == v));
        self.dest.matches_with(&f.dest, f.sni)
            && list(&self.uids, f.uid)
            && list(&self.gids, f.gid)
            && (self.cgroups.is_empty()
                || f.cgroup
                    .is_some_and(|c| self.cgroups.iter().any(|p| cgroup_within(c, p))))
            && names(&self.listeners, f.listener)
            && names(&self.users, f.user)
            && (self.traffic.is_empty() || f.class.is_some_and(|c| self.traffic.contains(&c)))
    }

    /// Whether every stream this rule matches, `earlier` matches too.
    fn shadowed_by(&self, earlier: &Rule) -> bool {
        self.dest.within(&earlier.dest)
            && list_within(&self.uids, &earlier.uids)
            && list_within(&self.gids, &earlier.gids)
            && (earlier.cgroups.is_empty()
                || (!self.cgroups.is_empty()
                    && self
                        .cgroups
                        .iter()
                        .all(|c| earlier.cgroups.iter().any(|p| cgroup_within(c, p)))))
            && list_within(&self.listeners, &earlier.listeners)
            && list_within(&self.users, &earlier.users)
            && list_within(&self.traffic, &earlier.traffic)
    }
}

impl Policy {
    /// Compiles the rules. `path_names`: the configured path names a `paths` action may
    /// name (`None`: not checked, for paths named after interfaces found at run time).
    /// A rule that can never match because an earlier one matches everything it would is
    /// refused: it is a mistake whose effect (the earlier rule's actions) would be silent.
    pub fn new(entries: &[RuleConfig], path_names: Option<&[String]>) -> Result<Policy, ClassRuleError> {
        let mut rules: Vec<Rule> = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            let rule = compile(i, e, path_names)?;
            if let Some((j, r)) = rules.iter().enumerate().find(|(_, r)| rule.shadowed_by(r)) {
                return Err(err(
                    i,
                    "name",
                    format!(
                        "{:?} can never match: rules[{j}] ({:?}) matches every stream it would (first match wins); \
                         move it above rules[{j}] or narrow rules[{j}]",
                        rule.name, r.name
                    ),
                ));
            }
            rules.push(rule);
        }
        Ok(Policy { rules })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether a rule looks at host names (a TLS server name is then worth parsing).
    pub fn uses_hosts(&self) -> bool {
        self.rules.iter().any(|r| !r.dest.hosts.is_empty())
    }

    /// Whether a rule looks at the owner of the application's socket.
    pub fn uses_owner(&self) -> bool {
        self.rules
            .iter()
            .any(|r| !r.uids.is_empty() || !r.gids.is_empty() || !r.cgroups.is_empty())
    }

    /// The first rule matching `f`, and what it gives; no rule: the defaults.
    pub fn decide(&self, f: &Facts<'_>) -> Decision {
        self.rules
            .iter()
            .find(|r| r.matches(f))
            .map(|r| r.action.clone())
            .unwrap_or_default()
    }
}

fn compile(i: usize, e: &RuleConfig, path_names: Option<&[String]>) -> Result<Rule, ClassRuleError> {
    let dest = DestMatcher::new(i, &e.ports, &e.cidrs, &e.hosts).map_err(|mut x| {
        x.section = "rules";
        x
    })?;
    let name = e.name.clone().unwrap_or_else(|| format!("rules[{i}]"));
    let cgroups = e
        .cgroups
        .iter()
        .map(|c| {
            if !c.starts_with('/') {
                return Err(err(
                    i,
                    "cgroups",
                    format!("{c:?} is not a cgroup path (it starts with '/', as in /proc/PID/cgroup)"),
                ));
            }
            let t = c.trim_end_matches('/');
            Ok(if t.is_empty() { "/".to_string() } else { t.to_string() })
        })
        .collect::<Result<_, _>>()?;
    for l in &e.listeners {
        if !LISTENERS.contains(&l.as_str()) {
            return Err(err(
                i,
                "listeners",
                format!("unknown listener {l:?} (socks, transparent, tproxy or tun)"),
            ));
        }
    }
    let traffic = e
        .traffic
        .iter()
        .map(|t| t.parse::<TrafficClass>().map_err(|u| err(i, "traffic", u.to_string())))
        .collect::<Result<_, _>>()?;
    if let (Some(ps), Some(known)) = (&e.paths, path_names) {
        if let Some(p) = ps.iter().find(|p| !known.contains(p)) {
            return Err(err(
                i,
                "paths",
                format!("no path is named {p:?} (paths: {})", known.join(", ")),
            ));
        }
    }
    if e.paths.as_ref().is_some_and(|p| p.is_empty()) && e.tiers.as_ref().is_none_or(|t| t.is_empty()) {
        return Err(err(i, "paths", "an empty list would leave the stream no path"));
    }
    let tiers = e
        .tiers
        .as_ref()
        .map(|ts| {
            ts.iter()
                .map(|t| {
                    crate::config::configured_tier(t)
                        .ok_or_else(|| err(i, "tiers", format!("unknown tier {t:?} (primary, secondary or backup)")))
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    let named = e
        .scheduler
        .as_deref()
        .map(|s| {
            s.parse::<SchedulerKind>()
                .map_err(|u| err(i, "scheduler", u.to_string()))
        })
        .transpose()?;
    let scheduler = match (e.redundant, named) {
        (Some(true), Some(s)) if s != SchedulerKind::Redundant => {
            return Err(err(
                i,
                "redundant",
                format!("contradicts scheduler = {s:?}; set one of them", s = s.name()),
            ))
        }
        (Some(false), Some(SchedulerKind::Redundant)) => {
            return Err(err(i, "redundant", "contradicts scheduler = \"redundant\""))
        }
        (Some(true), _) => Some(SchedulerKind::Redundant),
        (Some(false), None) => Some(SchedulerKind::MinRtt),
        (_, s) => s,
    };
    let class = e
        .class
        .as_ref()
        .map(|c| c.parse::<TrafficClass>().map_err(|u| err(i, "class", u.to_string())))
        .transpose()?;
    let energy = match e.energy.as_deref() {
        None => Energy::Default,
        Some("aware") => Energy::Aware,
        Some("off") => Energy::Off,
        Some(x) => return Err(err(i, "energy", format!("unknown {x:?} (aware or off)"))),
    };
    Ok(Rule {
        dest,
        uids: e.uids.clone(),
        gids: e.gids.clone(),
        cgroups,
        listeners: e.listeners.clone(),
        users: e.users.clone(),
        traffic,
        action: Decision {
            rule: Some(name.clone()),
            paths: e.paths.clone(),
            tiers,
            scheduler,
            class,
            energy,
        },
        name,
    })
}

#[cfg(test)]
mod tests;
