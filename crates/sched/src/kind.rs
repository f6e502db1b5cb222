//! Which scheduler: the one definition of each scheduler's configuration name, its
//! aliases and its number on the wire (the scheduler a client's `Open` asks the server to
//! run for the stream's downloads).

use std::fmt;
use std::str::FromStr;

use crate::{txdelay, Blest, Dems, DemsVariant, Ecf, MinRtt, Redundant, RoundRobin, Scheduler, TxDelay};

/// A scheduler mpflex can run.
///
/// The numbers are the wire's: a peer reads them, so each stays what it is. They are the
/// positions (from 1; 0 on the wire is "the peer's default") the schedulers had in the
/// list that numbered them before this type did, so peers of either build still agree.
/// A new scheduler takes the next free number; a number is never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum SchedulerKind {
    MinRtt = 1,
    RoundRobin = 2,
    Redundant = 3,
    Ecf = 4,
    Blest = 5,
    TxDelay = 6,
    TxDelaySrtt = 7,
    DemsB = 8,
    DemsS = 9,
    DemsF = 10,
}

/// Other names accepted for a scheduler: `dems` is DEMS in full (the paper's complete
/// design, DEMS-F).
const ALIASES: &[(&str, SchedulerKind)] = &[("dems", SchedulerKind::DemsF)];

impl SchedulerKind {
    /// Every scheduler, in wire-number order.
    pub const ALL: [SchedulerKind; 10] = [
        SchedulerKind::MinRtt,
        SchedulerKind::RoundRobin,
        SchedulerKind::Redundant,
        SchedulerKind::Ecf,
        SchedulerKind::Blest,
        SchedulerKind::TxDelay,
        SchedulerKind::TxDelaySrtt,
        SchedulerKind::DemsB,
        SchedulerKind::DemsS,
        SchedulerKind::DemsF,
    ];

    /// Its name in configuration, status and reports (an alias parses to the kind, and
    /// the kind always shows this name).
    pub fn name(self) -> &'static str {
        match self {
            SchedulerKind::MinRtt => "minrtt",
            SchedulerKind::RoundRobin => "roundrobin",
            SchedulerKind::Redundant => "redundant",
            SchedulerKind::Ecf => "ecf",
            SchedulerKind::Blest => "blest",
            SchedulerKind::TxDelay => "txdelay",
            SchedulerKind::TxDelaySrtt => "txdelay-srtt",
            SchedulerKind::DemsB => "dems-b",
            SchedulerKind::DemsS => "dems-s",
            SchedulerKind::DemsF => "dems-f",
        }
    }

    /// Its number on the wire (never 0).
    pub fn wire(self) -> u8 {
        self as u8
    }

    /// The scheduler of a wire number; `None` for 0 or a number no scheduler has.
    pub fn from_wire(n: u8) -> Option<SchedulerKind> {
        SchedulerKind::ALL.into_iter().find(|k| k.wire() == n)
    }

    /// A new scheduler of this kind, in its default configuration.
    pub fn build(self) -> Box<dyn Scheduler> {
        match self {
            SchedulerKind::MinRtt => Box::new(MinRtt),
            SchedulerKind::RoundRobin => Box::new(RoundRobin::default()),
            SchedulerKind::Redundant => Box::new(Redundant),
            SchedulerKind::Ecf => Box::new(Ecf::default()),
            SchedulerKind::Blest => Box::new(Blest::default()),
            SchedulerKind::TxDelay => Box::new(TxDelay::default()),
            SchedulerKind::TxDelaySrtt => Box::new(TxDelay::new(txdelay::Base::Srtt)),
            SchedulerKind::DemsB => Box::new(Dems::new(DemsVariant::Basic)),
            SchedulerKind::DemsS => Box::new(Dems::new(DemsVariant::Simple)),
            SchedulerKind::DemsF => Box::new(Dems::new(DemsVariant::Full)),
        }
    }

    /// Every name [`FromStr`] accepts: each scheduler's name, then the aliases.
    pub fn accepted_names() -> impl Iterator<Item = &'static str> {
        SchedulerKind::ALL
            .into_iter()
            .map(SchedulerKind::name)
            .chain(ALIASES.iter().map(|(n, _)| *n))
    }

    /// The scheduler names, comma-separated, for error messages.
    pub fn list() -> String {
        SchedulerKind::ALL.map(SchedulerKind::name).join(", ")
    }
}

impl fmt::Display for SchedulerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A scheduler name that is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownScheduler(pub String);

impl fmt::Display for UnknownScheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown scheduler {:?} (one of {})", self.0, SchedulerKind::list())
    }
}

impl std::error::Error for UnknownScheduler {}

impl FromStr for SchedulerKind {
    type Err = UnknownScheduler;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SchedulerKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .or_else(|| ALIASES.iter().find(|(n, _)| *n == s).map(|(_, k)| *k))
            .ok_or_else(|| UnknownScheduler(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wire numbers, pinned: each is what peers already running read it as (the
    /// scheduler's position, from 1, in the list that numbered them before).
    #[test]
    fn wire_numbers_are_pinned() {
        let pinned = [
            ("minrtt", 1),
            ("roundrobin", 2),
            ("redundant", 3),
            ("ecf", 4),
            ("blest", 5),
            ("txdelay", 6),
            ("txdelay-srtt", 7),
            ("dems-b", 8),
            ("dems-s", 9),
            ("dems-f", 10),
        ];
        assert_eq!(
            pinned.len(),
            SchedulerKind::ALL.len(),
            "a scheduler without a pinned number"
        );
        for (name, n) in pinned {
            let k: SchedulerKind = name.parse().unwrap();
            assert_eq!(k.wire(), n, "{name}");
            assert_eq!(SchedulerKind::from_wire(n), Some(k));
        }
        assert_eq!(SchedulerKind::from_wire(0), None, "0 is the peer's default");
        assert_eq!(SchedulerKind::from_wire(11), None);
        assert_eq!(SchedulerKind::from_wire(255), None);
    }

    /// Every accepted name, aliases included, builds the scheduler of the kind it parses
    /// to, which shows the kind's name.
    #[test]
    fn every_accepted_name_builds_what_its_kind_names() {
        for name in SchedulerKind::accepted_names() {
            let k: SchedulerKind = name.parse().unwrap();
            assert_eq!(k.build().name(), k.name(), "{name}");
            assert_eq!(crate::by_name(name).unwrap().name(), k.name(), "{name}");
        }
        assert_eq!("dems".parse(), Ok(SchedulerKind::DemsF));
        let e = "nope".parse::<SchedulerKind>().unwrap_err();
        assert!(
            e.to_string().starts_with("unknown scheduler \"nope\" (one of minrtt, "),
            "{e}"
        );
        assert!(crate::by_name("nope").is_none());
    }
}
