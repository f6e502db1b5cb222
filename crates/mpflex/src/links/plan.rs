//! Which paths the client keeps, and what each one dials with, given the `[[paths]]`
//! entries and the current [`LinkTable`]. Pure: the netlink watcher feeds it tables, the
//! driver turns its answers into dials and path failures.
//!
//! Every entry with a fixed interface (`device = "wlan0"`) or none has one path from the
//! start, whose index never changes. A pattern (`device = "wlan*"`) or `auto = true` adds a
//! path for each interface it matches once that interface is usable, and keeps it (and its
//! counters) when the interface goes away, so the interface coming back reuses it. An
//! interface belongs to the first entry that took it: `auto` does not dial a second path
//! over an interface another entry names.

use std::net::IpAddr;

use super::pattern::IfPattern;
use super::table::{Binding, LinkTable, Unusable};

/// How a `[[paths]]` entry picks its interfaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// No interface: the kernel's routing decides (optionally from `source`).
    Fixed,
    /// One named interface.
    Device(String),
    /// Every interface whose name matches.
    Pattern(IfPattern),
    /// Every hardware or uplink interface (see [`super::table::Link::is_uplink`]).
    Auto,
}

impl Selector {
    pub fn is_dynamic(&self) -> bool {
        matches!(self, Selector::Pattern(_) | Selector::Auto)
    }
}

/// A `[[paths]]` entry as the planner needs it.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    pub selector: Selector,
    /// Interfaces a pattern or `auto` leaves alone.
    pub exclude: Vec<IfPattern>,
    /// The configured source address, if any.
    pub source: Option<IpAddr>,
    /// The server's addresses (see [`super::table::ServerIps`]).
    pub server: Vec<IpAddr>,
}

/// What a path should do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Dial(Binding),
    Wait(Unusable),
}

impl Target {
    pub fn source(&self) -> Option<IpAddr> {
        match self {
            Target::Dial(b) => b.source,
            Target::Wait(_) => None,
        }
    }
}

/// One path of the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// Index of the entry it comes from.
    pub rule: usize,
    pub device: Option<String>,
    pub name: String,
    pub target: Target,
}

/// A pattern or `auto` entry without any path yet, and what the closest candidate lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmatched {
    pub rule: usize,
    /// E.g. "no interface matches" or "wlan0: no address".
    pub state: String,
}

#[derive(Debug)]
pub struct Planner {
    rules: Vec<Rule>,
    slots: Vec<Slot>,
    max: usize,
}

impl Planner {
    /// The fixed paths, in entry order; at most `max` paths in all.
    pub fn new(rules: Vec<Rule>, max: usize) -> Planner {
        let slots = rules
            .iter()
            .enumerate()
            .filter_map(|(i, r)| match &r.selector {
                Selector::Fixed => Some(Slot {
                    rule: i,
                    device: None,
                    name: r.name.clone(),
                    target: Target::Dial(Binding {
                        device: None,
                        source: r.source,
                    }),
                }),
                Selector::Device(d) => Some(Slot {
                    rule: i,
                    device: Some(d.clone()),
                    name: r.name.clone(),
                    target: Target::Wait(Unusable::NoDevice),
                }),
                _ => None,
            })
            .collect();
        Planner { rules, slots, max }
    }

    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Whether any entry needs the interfaces watched.
    pub fn watches(&self) -> bool {
        self.rules.iter().any(|r| r.selector != Selector::Fixed)
    }

    /// Brings every path in line with `table`. Returns the paths that are new, were
    /// reassigned to another interface, or whose target changed; new ones have indices
    /// past the previous [`Planner::slots`].
    pub fn update(&mut self, table: &LinkTable) -> Vec<usize> {
        let mut changed = Vec::new();
        for (i, s) in self.slots.iter_mut().enumerate() {
            let Some(dev) = &s.device else { continue };
            let r = &self.rules[s.rule];
            let t = target(table.check(dev, &r.server, r.source, s.target.source()));
            if t != s.target {
                s.target = t;
                changed.push(i);
            }
        }
        for (ri, r) in self.rules.iter().enumerate() {
            if !r.selector.is_dynamic() {
                continue;
            }
            for link in table.links() {
                if !selects(r, &link.name, link.is_uplink())
                    || self.slots.iter().any(|s| s.device.as_deref() == Some(&link.name))
                {
                    continue;
                }
                let Ok(b) = table.check(&link.name, &r.server, r.source, None) else {
                    continue;
                };
                let slot = Slot {
                    rule: ri,
                    device: Some(link.name.clone()),
                    name: format!("{}:{}", r.name, link.name),
                    target: Target::Dial(b),
                };
                if self.slots.len() < self.max {
                    changed.push(self.slots.len());
                    self.slots.push(slot);
                } else if let Some(i) = self.slots.iter().position(|s| {
                    self.rules[s.rule].selector.is_dynamic() && s.target == Target::Wait(Unusable::NoDevice)
                }) {
                    // Out of path indices: the slot of an interface that is gone serves
                    // the new one.
                    self.slots[i] = slot;
                    changed.push(i);
                } else {
                    tracing::warn!(
                        interface = %link.name,
                        "paths[{ri}]: already {} paths, the most a session has; not using {}",
                        self.max,
                        link.name
                    );
                }
            }
        }
        changed.sort_unstable();
        changed.dedup();
        changed
    }

    /// The pattern and `auto` entries that have no path, and why.
    pub fn unmatched(&self, table: &LinkTable) -> Vec<Unmatched> {
        self.rules
            .iter()
            .enumerate()
            .filter(|(ri, r)| r.selector.is_dynamic() && !self.slots.iter().any(|s| s.rule == *ri))
            .map(|(ri, r)| {
                let closest = table
                    .links()
                    .filter(|l| selects(r, &l.name, l.is_uplink()))
                    .filter(|l| !self.slots.iter().any(|s| s.device.as_deref() == Some(&l.name)))
                    .filter_map(|l| {
                        table
                            .check(&l.name, &r.server, r.source, None)
                            .err()
                            .map(|u| (u, &l.name))
                    })
                    .max_by_key(|(u, _)| *u);
                let state = match closest {
                    Some((u, name)) => format!("{name}: {}", u.name()),
                    None => "no interface matches".to_string(),
                };
                Unmatched { rule: ri, state }
            })
            .collect()
    }
}

fn target(r: Result<Binding, Unusable>) -> Target {
    match r {
        Ok(b) => Target::Dial(b),
        Err(u) => Target::Wait(u),
    }
}

/// Whether a pattern or `auto` entry takes interface `name` (`uplink`: see
/// [`super::table::Link::is_uplink`]).
fn selects(r: &Rule, name: &str, uplink: bool) -> bool {
    let hit = match &r.selector {
        Selector::Pattern(p) => p.matches(name),
        Selector::Auto => uplink,
        _ => false,
    };
    hit && !r.exclude.iter().any(|x| x.matches(name))
}

#[cfg(test)]
mod tests {
    use super::super::table::tests::{addr, link, route};
    use super::super::table::{Addr, Link, Route};
    use super::*;

    fn rule(name: &str, selector: Selector) -> Rule {
        Rule {
            name: name.into(),
            selector,
            exclude: Vec::new(),
            source: None,
            server: vec!["203.0.113.1".parse().unwrap()],
        }
    }

    fn pat(s: &str) -> Selector {
        Selector::Pattern(IfPattern::parse(s).unwrap())
    }

    /// A host with `lo` and the given (index, name, kind, address) interfaces, each with a
    /// default route.
    fn host(ifs: &[(u32, &str, Option<&str>, &str)]) -> LinkTable {
        let mut links: Vec<Link> = vec![link(1, "lo", None)];
        let mut addrs: Vec<Addr> = vec![addr(1, "127.0.0.1")];
        let mut routes: Vec<Route> = Vec::new();
        for &(i, name, kind, ip) in ifs {
            links.push(link(i, name, kind));
            addrs.push(addr(i, ip));
            routes.push(route("0.0.0.0/0", i));
        }
        LinkTable::new(links, addrs, routes)
    }

    fn dial(p: &Planner, i: usize) -> Option<String> {
        match &p.slots()[i].target {
            Target::Dial(b) => b.source.map(|s| s.to_string()),
            Target::Wait(_) => None,
        }
    }

    #[test]
    fn a_named_interface_waits_until_usable_and_fails_when_it_goes() {
        let mut p = Planner::new(
            vec![
                rule("wifi", Selector::Device("wlan0".into())),
                rule("lan", Selector::Fixed),
            ],
            64,
        );
        assert_eq!(p.slots().len(), 2, "one path per fixed entry from the start");
        assert_eq!(p.slots()[0].target, Target::Wait(Unusable::NoDevice));
        assert_eq!(p.update(&host(&[])), Vec::<usize>::new(), "still no wlan0");
        assert_eq!(p.update(&host(&[(3, "wlan0", None, "192.0.2.5")])), vec![0]);
        assert_eq!(dial(&p, 0).as_deref(), Some("192.0.2.5"));
        assert_eq!(p.update(&host(&[(3, "wlan0", None, "192.0.2.5")])), Vec::<usize>::new());
        // The address changes: a new target (the driver re-dials).
        assert_eq!(p.update(&host(&[(3, "wlan0", None, "192.0.2.9")])), vec![0]);
        assert_eq!(dial(&p, 0).as_deref(), Some("192.0.2.9"));
        let mut t = host(&[(3, "wlan0", None, "192.0.2.9")]);
        t = LinkTable::new(
            t.links()
                .cloned()
                .map(|mut l| {
                    l.running = l.name != "wlan0";
                    l
                })
                .collect(),
            vec![addr(3, "192.0.2.9")],
            vec![route("0.0.0.0/0", 3)],
        );
        assert_eq!(p.update(&t), vec![0]);
        assert_eq!(p.slots()[0].target, Target::Wait(Unusable::NoCarrier));
        assert_eq!(p.update(&host(&[])), vec![0]);
        assert_eq!(p.slots()[0].target, Target::Wait(Unusable::NoDevice));
        assert_eq!(
            p.slots()[1].target,
            Target::Dial(Binding {
                device: None,
                source: None
            })
        );
    }

    #[test]
    fn a_pattern_adds_a_path_per_usable_interface_and_keeps_it_when_it_goes() {
        let mut p = Planner::new(vec![rule("lab", pat("c*"))], 64);
        assert!(p.slots().is_empty());
        let t = host(&[(2, "c0", Some("veth"), "10.0.1.1"), (3, "eth0", None, "192.0.2.1")]);
        assert_eq!(p.update(&t), vec![0]);
        assert_eq!(p.slots()[0].name, "lab:c0");
        let t = host(&[
            (2, "c0", Some("veth"), "10.0.1.1"),
            (3, "eth0", None, "192.0.2.1"),
            (4, "c2", Some("veth"), "10.0.3.1"),
        ]);
        assert_eq!(p.update(&t), vec![1], "the new interface, nothing else");
        assert_eq!(
            (p.slots()[1].name.as_str(), dial(&p, 1).as_deref()),
            ("lab:c2", Some("10.0.3.1"))
        );
        // c2 removed: its path waits; plugged again (new index): the same path.
        let t2 = host(&[(2, "c0", Some("veth"), "10.0.1.1")]);
        assert_eq!(p.update(&t2), vec![1]);
        assert_eq!(p.slots()[1].target, Target::Wait(Unusable::NoDevice));
        assert_eq!(
            p.update(&host(&[
                (2, "c0", Some("veth"), "10.0.1.1"),
                (9, "c2", None, "10.0.3.1")
            ])),
            vec![1]
        );
        assert_eq!(p.slots().len(), 2);
    }

    #[test]
    fn auto_skips_virtual_excluded_and_claimed_interfaces() {
        let mut r = rule("any", Selector::Auto);
        r.exclude = vec![IfPattern::parse("eth9").unwrap()];
        let mut p = Planner::new(vec![rule("wifi", Selector::Device("wlan0".into())), r], 64);
        let t = host(&[
            (2, "wlan0", None, "192.0.2.5"),
            (3, "eth0", None, "198.51.100.2"),
            (4, "docker0", Some("bridge"), "172.17.0.1"),
            (5, "veth12", Some("veth"), "172.17.0.2"),
            (6, "wg0", Some("wireguard"), "10.9.0.2"),
            (7, "eth9", None, "198.51.100.9"),
        ]);
        assert_eq!(p.update(&t), vec![0, 1]);
        let names: Vec<&str> = p.slots().iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            ["wifi", "any:eth0"],
            "wlan0 is the first entry's; lo, virtual and excluded skipped"
        );
    }

    #[test]
    fn an_entry_without_paths_says_what_its_best_candidate_lacks() {
        let p = Planner::new(vec![rule("w", pat("wlan*")), rule("a", Selector::Auto)], 64);
        let none = p.unmatched(&host(&[]));
        assert_eq!(
            none,
            vec![
                Unmatched {
                    rule: 0,
                    state: "no interface matches".into()
                },
                Unmatched {
                    rule: 1,
                    state: "no interface matches".into()
                },
            ]
        );
        let t = LinkTable::new(vec![link(2, "wlan0", None)], vec![], vec![]);
        assert_eq!(p.unmatched(&t)[0].state, "wlan0: no address");
    }

    #[test]
    fn past_the_most_paths_a_gone_interface_gives_its_place() {
        let mut p = Planner::new(vec![rule("x", pat("c*"))], 2);
        p.update(&host(&[(2, "c0", None, "10.0.1.1"), (3, "c1", None, "10.0.2.1")]));
        assert_eq!(p.slots().len(), 2);
        assert_eq!(
            p.update(&host(&[
                (2, "c0", None, "10.0.1.1"),
                (3, "c1", None, "10.0.2.1"),
                (4, "c2", None, "10.0.3.1")
            ])),
            Vec::<usize>::new(),
            "full"
        );
        assert_eq!(
            p.update(&host(&[(2, "c0", None, "10.0.1.1"), (4, "c2", None, "10.0.3.1")])),
            vec![1]
        );
        assert_eq!(p.slots()[1].name, "x:c2");
    }
}
