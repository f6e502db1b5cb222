//! Class overrides: configuration rules that pin a stream's traffic class by its
//! destination, where the engine would otherwise classify it by behaviour
//! ([`mpflex_engine::TrafficClass`]).
//!
//! `[[classes]]` entries are tried in order and the first that matches wins. An entry sets
//! `class` and at least one matcher; every matcher it sets must match (ports AND networks
//! AND names), any element of a list may:
//! - `ports`: destination ports and inclusive ranges (`443`, `"5000-5100"`);
//! - `cidrs`: destination networks or single addresses, IPv4 and IPv6. They match
//!   addresses: an IP target, a name written as an address, or (server side) the address a
//!   name resolved to;
//! - `hosts`: name suffixes, matched against the name an application asked for (SOCKS5
//!   with remote resolution, e.g. `curl --socks5-hostname`): `"example.com"` matches
//!   `example.com` and `x.example.com`, not `badexample.com`. Case and a trailing dot do
//!   not matter.
//!
//! The client applies its rules when an application's stream opens, the server its own
//! when the stream arrives (and again, if none matched the name, with the address the name
//! resolved to). A stream no rule matches keeps the engine's behaviour-based class.

use std::net::IpAddr;
use std::ops::RangeInclusive;

use ipnet::IpNet;
use mpflex_engine::TrafficClass;
use mpflex_wire::TargetAddr;
use serde::Deserialize;

use crate::acl::{canonical, contains, parse_net};

/// One `[[classes]]` entry as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassRuleConfig {
    /// `interactive`, `bulk` or `realtime`.
    pub class: String,
    /// Destination ports: numbers or `"low-high"` strings.
    #[serde(default)]
    pub ports: Vec<PortSpec>,
    /// Destination networks (CIDRs or bare addresses).
    #[serde(default)]
    pub cidrs: Vec<String>,
    /// Destination name suffixes.
    #[serde(default)]
    pub hosts: Vec<String>,
}

/// A `ports` element: `443` or `"5000-5100"` (or `"443"`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum PortSpec {
    Number(i64),
    Text(String),
}

/// A bad `[[classes]]` (or `[[rules]]`) entry, e.g. `classes[2].ports: bad port range
/// "90-80"`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{section}[{index}].{key}: {problem}")]
pub struct ClassRuleError {
    /// `classes` or `rules`.
    pub section: &'static str,
    pub index: usize,
    /// `class`, `ports`, `cidrs`, `hosts`, or the entry itself (`matchers`).
    pub key: &'static str,
    pub problem: String,
}

#[derive(Debug, Clone)]
struct Rule {
    class: TrafficClass,
    dest: DestMatcher,
}

/// The destination matchers of a `[[classes]]` or `[[rules]]` entry: every one set must
/// match, any element of a list may; an empty matcher matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DestMatcher {
    pub ports: Vec<RangeInclusive<u16>>,
    pub nets: Vec<IpNet>,
    /// Lower case, no leading or trailing dot.
    pub hosts: Vec<String>,
}

/// The compiled `[[classes]]` list.
#[derive(Debug, Clone, Default)]
pub struct ClassRules {
    rules: Vec<Rule>,
}

/// What is known of a stream's destination when a rule is looked up.
#[derive(Debug, Clone, Copy, Default)]
pub struct Destination<'a> {
    /// The name the application asked for, if it gave one.
    pub host: Option<&'a str>,
    /// Its address, if known (given, written as a name, or resolved).
    pub ip: Option<IpAddr>,
    pub port: u16,
}

impl<'a> Destination<'a> {
    /// What a stream's target says (a name written as an address counts as the address).
    pub fn of(target: &'a TargetAddr) -> Destination<'a> {
        match target {
            TargetAddr::Ip(a) => Destination {
                host: None,
                ip: Some(a.ip()),
                port: a.port(),
            },
            TargetAddr::Domain(d, port) => Destination {
                host: Some(d),
                ip: d.parse().ok(),
                port: *port,
            },
        }
    }
}

fn err(index: usize, key: &'static str, problem: impl Into<String>) -> ClassRuleError {
    ClassRuleError {
        section: "classes",
        index,
        key,
        problem: problem.into(),
    }
}

fn parse_port(index: usize, p: &PortSpec) -> Result<RangeInclusive<u16>, ClassRuleError> {
    let bad_port = |v: &str| err(index, "ports", format!("bad port {v:?} (1-65535)"));
    let port = |v: &str| -> Result<u16, ClassRuleError> {
        match v.trim().parse::<u16>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(bad_port(v)),
        }
    };
    match p {
        PortSpec::Number(n) => match u16::try_from(*n) {
            Ok(n) if n > 0 => Ok(n..=n),
            _ => Err(bad_port(&n.to_string())),
        },
        PortSpec::Text(t) => match t.split_once('-') {
            Some((lo, hi)) => {
                let bad_range = || err(index, "ports", format!("bad port range {t:?}"));
                let (lo, hi) = (port(lo).map_err(|_| bad_range())?, port(hi).map_err(|_| bad_range())?);
                if lo > hi {
                    return Err(bad_range());
                }
                Ok(lo..=hi)
            }
            None => port(t).map(|n| n..=n),
        },
    }
}

fn normalize_host(h: &str) -> String {
    h.trim().trim_end_matches('.').to_ascii_lowercase()
}

fn parse_host(index: usize, raw: &str) -> Result<String, ClassRuleError> {
    let h = normalize_host(raw);
    let h = h.strip_prefix("*.").or_else(|| h.strip_prefix('.')).unwrap_or(&h);
    let ok = !h.is_empty()
        && h.len() <= 253
        && h.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    if ok {
        Ok(h.to_string())
    } else {
        Err(err(index, "hosts", format!("bad host name {raw:?}")))
    }
}

impl ClassRules {
    pub fn new(entries: &[ClassRuleConfig]) -> Result<ClassRules, ClassRuleError> {
        let rules = entries
            .iter()
            .enumerate()
            .map(|(index, e)| {
                let class = e
                    .class
                    .parse::<TrafficClass>()
                    .map_err(|u| err(index, "class", u.to_string()))?;
                if e.ports.is_empty() && e.cidrs.is_empty() && e.hosts.is_empty() {
                    return Err(err(
                        index,
                        "ports",
                        "the entry has no matcher (set ports, cidrs or hosts)",
                    ));
                }
                let dest = DestMatcher::new(index, &e.ports, &e.cidrs, &e.hosts)?;
                Ok(Rule { class, dest })
            })
            .collect::<Result<_, _>>()?;
        Ok(ClassRules { rules })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The class of the first rule matching `d`, if any.
    pub fn class_for(&self, d: &Destination<'_>) -> Option<TrafficClass> {
        self.rules.iter().find(|r| r.matches(d)).map(|r| r.class)
    }

    /// [`ClassRules::class_for`] a stream's target.
    pub fn class_of(&self, target: &TargetAddr) -> Option<TrafficClass> {
        if self.rules.is_empty() {
            return None;
        }
        self.class_for(&Destination::of(target))
    }

    /// The datagram class a rule gives a UDP flow to `target`: `realtime` copies it on a
    /// second path, `bulk` splits it by rate; `interactive` (or no rule) leaves it to the
    /// flow's sizes and rate (docs/udp.md).
    pub fn datagram_class_of(&self, target: &TargetAddr) -> Option<mpflex_engine::DatagramClass> {
        match self.class_of(target)? {
            TrafficClass::Realtime => Some(mpflex_engine::DatagramClass::Realtime),
            TrafficClass::Bulk => Some(mpflex_engine::DatagramClass::Bulk),
            TrafficClass::Interactive => None,
        }
    }
}

impl DestMatcher {
    /// Compiles an entry's `ports`, `cidrs` and `hosts` (errors name `classes[index]`;
    /// set [`ClassRuleError::section`] for another table).
    pub fn new(index: usize, ports: &[PortSpec], cidrs: &[String], hosts: &[String]) -> Result<Self, ClassRuleError> {
        let ports = ports.iter().map(|p| parse_port(index, p)).collect::<Result<_, _>>()?;
        let nets = cidrs
            .iter()
            .map(|c| parse_net(c).ok_or_else(|| err(index, "cidrs", format!("bad CIDR {c:?}"))))
            .collect::<Result<_, _>>()?;
        let hosts = hosts.iter().map(|h| parse_host(index, h)).collect::<Result<_, _>>()?;
        Ok(DestMatcher { ports, nets, hosts })
    }

    pub fn is_empty(&self) -> bool {
        self.ports.is_empty() && self.nets.is_empty() && self.hosts.is_empty()
    }

    /// Whether every destination this matcher matches, `other` matches too (so a rule
    /// with `other` before one with `self` shadows it, as far as destinations go).
    pub fn within(&self, other: &DestMatcher) -> bool {
        let ports = other.ports.is_empty()
            || (!self.ports.is_empty()
                && self
                    .ports
                    .iter()
                    .all(|p| other.ports.iter().any(|o| o.start() <= p.start() && p.end() <= o.end())));
        let nets = other.nets.is_empty()
            || (!self.nets.is_empty() && self.nets.iter().all(|n| other.nets.iter().any(|o| o.contains(n))));
        let hosts = other.hosts.is_empty()
            || (!self.hosts.is_empty()
                && self
                    .hosts
                    .iter()
                    .all(|h| other.hosts.iter().any(|o| host_matches(h, o))));
        ports && nets && hosts
    }

    /// Whether `d` matches; `sni` is a further name for the `hosts` matcher (a TLS
    /// ClientHello's server name).
    pub fn matches_with(&self, d: &Destination<'_>, sni: Option<&str>) -> bool {
        let port_ok = self.ports.is_empty() || self.ports.iter().any(|r| r.contains(&d.port));
        let net_ok = self.nets.is_empty()
            || d.ip
                .map(canonical)
                .is_some_and(|ip| self.nets.iter().any(|n| contains(n, ip)));
        let host_ok = self.hosts.is_empty()
            || [d.host, sni].into_iter().flatten().any(|name| {
                let name = normalize_host(name);
                self.hosts.iter().any(|h| host_matches(&name, h))
            });
        port_ok && net_ok && host_ok
    }
}

/// Whether `name` (normalized) is `suffix` or a subdomain of it.
fn host_matches(name: &str, suffix: &str) -> bool {
    name == suffix
        || (name.len() > suffix.len()
            && name.ends_with(suffix)
            && name.as_bytes()[name.len() - suffix.len() - 1] == b'.')
}

impl Rule {
    fn matches(&self, d: &Destination<'_>) -> bool {
        self.dest.matches_with(d, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(class: &str, f: impl FnOnce(&mut ClassRuleConfig)) -> ClassRuleConfig {
        let mut r = ClassRuleConfig {
            class: class.into(),
            ports: vec![],
            cidrs: vec![],
            hosts: vec![],
        };
        f(&mut r);
        r
    }

    fn name(host: &str, port: u16) -> TargetAddr {
        TargetAddr::Domain(host.into(), port)
    }

    fn ip(s: &str) -> TargetAddr {
        TargetAddr::Ip(s.parse().unwrap())
    }

    #[test]
    fn first_match_wins_and_every_matcher_of_a_rule_must_match() {
        let rules = ClassRules::new(&[
            rule("interactive", |r| {
                r.ports = vec![PortSpec::Number(22)];
                r.cidrs = vec!["10.0.0.0/8".into()];
            }),
            rule("bulk", |r| {
                r.ports = vec![PortSpec::Number(22), PortSpec::Text("5000-5100".into())]
            }),
            rule("realtime", |r| {
                r.cidrs = vec!["2001:db8::/32".into(), "192.0.2.7".into()]
            }),
        ])
        .unwrap();
        assert_eq!(rules.class_of(&ip("10.1.2.3:22")), Some(TrafficClass::Interactive));
        assert_eq!(
            rules.class_of(&ip("11.1.2.3:22")),
            Some(TrafficClass::Bulk),
            "not in 10/8"
        );
        assert_eq!(rules.class_of(&ip("11.1.2.3:5100")), Some(TrafficClass::Bulk));
        assert_eq!(rules.class_of(&ip("11.1.2.3:5101")), None);
        assert_eq!(rules.class_of(&ip("[2001:db8::1]:443")), Some(TrafficClass::Realtime));
        assert_eq!(rules.class_of(&ip("192.0.2.7:443")), Some(TrafficClass::Realtime));
        assert_eq!(
            rules.class_of(&ip("[::ffff:192.0.2.7]:443")),
            Some(TrafficClass::Realtime)
        );
        assert_eq!(rules.class_of(&ip("192.0.2.8:443")), None);
        // A name written as an address is the address; a real name matches no network.
        assert_eq!(rules.class_of(&name("10.9.9.9", 22)), Some(TrafficClass::Interactive));
        assert_eq!(rules.class_of(&name("ten.example", 22)), Some(TrafficClass::Bulk));
        assert_eq!(rules.class_of(&name("2001:db8::5", 1)), Some(TrafficClass::Realtime));
    }

    /// A rule pins a UDP flow's datagram class: realtime and bulk as named, interactive
    /// leaves it to the flow's behaviour.
    #[test]
    fn rules_pin_datagram_classes() {
        let rules = ClassRules::new(&[
            rule("realtime", |r| r.ports = vec![PortSpec::Number(3478)]),
            rule("bulk", |r| r.ports = vec![PortSpec::Number(443)]),
            rule("interactive", |r| r.ports = vec![PortSpec::Number(53)]),
        ])
        .unwrap();
        let to = |port| TargetAddr::Ip(std::net::SocketAddr::from(([192, 0, 2, 1], port)));
        use mpflex_engine::DatagramClass::*;
        assert_eq!(rules.datagram_class_of(&to(3478)), Some(Realtime));
        assert_eq!(rules.datagram_class_of(&to(443)), Some(Bulk));
        assert_eq!(rules.datagram_class_of(&to(53)), None);
        assert_eq!(rules.datagram_class_of(&to(80)), None);
    }

    #[test]
    fn hosts_match_the_name_and_its_subdomains_only() {
        let rules = ClassRules::new(&[rule("bulk", |r| {
            r.hosts = vec!["Example.COM.".into(), "*.cdn.test".into()];
        })])
        .unwrap();
        for yes in [
            "example.com",
            "x.example.com",
            "a.b.EXAMPLE.com.",
            "cdn.test",
            "img.cdn.test",
        ] {
            assert_eq!(rules.class_of(&name(yes, 443)), Some(TrafficClass::Bulk), "{yes}");
        }
        for no in ["badexample.com", "example.com.evil", "xcdn.test", "com"] {
            assert_eq!(rules.class_of(&name(no, 443)), None, "{no}");
        }
        assert_eq!(rules.class_of(&ip("93.184.216.34:443")), None, "no name, no host match");
        let d = Destination {
            host: Some("x.example.com"),
            ip: Some("93.184.216.34".parse().unwrap()),
            port: 1,
        };
        assert_eq!(rules.class_for(&d), Some(TrafficClass::Bulk));
    }

    #[test]
    fn bad_entries_name_the_key_and_the_index() {
        let ok = |r: &mut ClassRuleConfig| r.ports = vec![PortSpec::Number(80)];
        let cases: Vec<(ClassRuleConfig, &str)> = vec![
            (rule("fast", ok), "classes[1].class: unknown traffic class \"fast\""),
            (rule("bulk", |_| {}), "classes[1].ports: the entry has no matcher"),
            (
                rule("bulk", |r| r.ports = vec![PortSpec::Text("90-80".into())]),
                "classes[1].ports: bad port range \"90-80\"",
            ),
            (
                rule("bulk", |r| r.ports = vec![PortSpec::Text("1-x".into())]),
                "classes[1].ports: bad port range \"1-x\"",
            ),
            (
                rule("bulk", |r| r.ports = vec![PortSpec::Number(70000)]),
                "classes[1].ports: bad port \"70000\"",
            ),
            (
                rule("bulk", |r| r.ports = vec![PortSpec::Number(0)]),
                "classes[1].ports: bad port \"0\"",
            ),
            (
                rule("bulk", |r| r.cidrs = vec!["10.0.0/8".into()]),
                "classes[1].cidrs: bad CIDR \"10.0.0/8\"",
            ),
            (
                rule("bulk", |r| r.hosts = vec!["bad host".into()]),
                "classes[1].hosts: bad host name \"bad host\"",
            ),
            (
                rule("bulk", |r| r.hosts = vec!["".into()]),
                "classes[1].hosts: bad host name",
            ),
        ];
        for (bad, want) in cases {
            let e = ClassRules::new(&[rule("interactive", ok), bad])
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(want), "{e:?} should start with {want:?}");
        }
    }

    #[test]
    fn no_rules_match_nothing() {
        let rules = ClassRules::new(&[]).unwrap();
        assert!(rules.is_empty());
        assert_eq!(rules.class_of(&ip("1.2.3.4:80")), None);
    }
}
