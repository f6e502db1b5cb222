//! The systems `run` compares, as named on the command line and in records, and the
//! mpflex builds they may run on.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use mpflex_engine::SchedulerKind;

use crate::profile::Profile;

#[derive(Debug, Clone, PartialEq)]
pub enum System {
    /// Single-path TCP over path i.
    Tcp(usize),
    Mptcp,
    /// Static split over two single-path connections, best fraction kept.
    Oracle,
    /// mpflex client and server: `sched` is `<scheduler>[+<tuning key>=<value>...]`, on the
    /// default binary or on the build of that name (`--builds`). The workload reaches the
    /// client through SOCKS5 (or, for a LAN host, TPROXY), or with `tun` through the
    /// client's TUN device, as an application that knows nothing of mpflex
    /// ([`super::mpflex::tun_destination`]).
    Mpflex {
        build: Option<String>,
        sched: String,
        tun: bool,
    },
}

impl System {
    /// `tcp-<path>`, `mptcp`, `oracle`, `mpflex`, `mpflex:<scheduler>[+<key>=<value>...]`
    /// or `mpflex@<build>:<scheduler>[+...]`; `mpflex-tun` in place of `mpflex` for the
    /// same through the TUN.
    pub fn parse(s: &str, profile: &Profile) -> Result<System> {
        if let Some(p) = s.strip_prefix("tcp-") {
            let i = profile
                .paths
                .iter()
                .position(|x| x.name == p)
                .or_else(|| p.parse().ok())
                .with_context(|| format!("tcp-{p}: no such path in profile {}", profile.name))?;
            return Ok(System::Tcp(i));
        }
        for (prefix, tun) in [("mpflex-tun", true), ("mpflex", false)] {
            let Some(rest) = s.strip_prefix(prefix) else { continue };
            if rest.is_empty() {
                return Ok(System::Mpflex {
                    build: None,
                    sched: "minrtt".into(),
                    tun,
                });
            }
            if let Some(sched) = rest.strip_prefix(':') {
                return Ok(System::Mpflex {
                    build: None,
                    sched: tuned_scheduler(s, sched)?,
                    tun,
                });
            }
            if let Some(rest) = rest.strip_prefix('@') {
                let Some((name, sched)) = rest.split_once(':').filter(|(n, _)| valid_name(n)) else {
                    bail!("{s:?}: {prefix}@<build>:<scheduler>[+<tuning key>=<value>...]");
                };
                return Ok(System::Mpflex {
                    build: Some(name.to_string()),
                    sched: tuned_scheduler(s, sched)?,
                    tun,
                });
            }
        }
        match s {
            "mptcp" => Ok(System::Mptcp),
            "oracle" => Ok(System::Oracle),
            _ => bail!(
                "unknown system {s:?} (tcp-<path>, mptcp, oracle, mpflex:<scheduler>, mpflex@<build>:<scheduler>, \
                 mpflex-tun:<scheduler>, mpflex-tun@<build>:<scheduler>)"
            ),
        }
    }

    /// The name in records and reports.
    pub fn label(&self, profile: &Profile) -> String {
        match self {
            System::Tcp(i) => format!("tcp-{}", profile.paths[*i].name),
            System::Mptcp => "mptcp".into(),
            System::Oracle => "oracle".into(),
            System::Mpflex { build, sched, tun } => {
                let name = if *tun { "mpflex-tun" } else { "mpflex" };
                match build {
                    None => format!("{name}:{sched}"),
                    Some(b) => format!("{name}@{b}:{sched}"),
                }
            }
        }
    }
}

/// `<scheduler>+<key>=<value>...` (of the system `s`): tuning settings for this system, so
/// that two settings can run side by side (e.g. `mpflex:dems-f+pacing=false`). The
/// scheduler is one mpflex accepts, written by its name (an alias such as `dems` becomes
/// `dems-f`), so records of one scheduler carry one label; or `emptcp`, the lab's name
/// for mpflex's energy-aware mode.
fn tuned_scheduler(s: &str, sched: &str) -> Result<String> {
    let mut parts = sched.split('+');
    let name = parts.next().unwrap_or_default();
    if name.is_empty() {
        bail!("{s:?}: mpflex:<scheduler>[+<tuning key>=<value>...]");
    }
    let mut out = if name == super::mpflex::EMPTCP {
        name.to_string()
    } else {
        let kind: SchedulerKind = name.parse().map_err(|e| anyhow!("{s:?}: {e}"))?;
        kind.name().to_string()
    };
    for kv in parts {
        let ok = kv.split_once('=').is_some_and(|(k, v)| {
            !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !v.is_empty()
        });
        if !ok {
            bail!("{s:?}: {kv:?} is not <tuning key>=<value> (e.g. fresh_ssthresh=false)");
        }
        out = out + "+" + kv;
    }
    Ok(out)
}

/// A build's name: letters, digits, `-`, `_` and `.`.
fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// `--builds NAME=PATH[,NAME=PATH...]`: mpflex binaries that systems `mpflex@NAME:…` run.
pub fn parse_builds(s: &str) -> Result<Vec<(String, PathBuf)>> {
    let mut builds: Vec<(String, PathBuf)> = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((name, path)) = part.split_once('=').filter(|(n, p)| valid_name(n) && !p.is_empty()) else {
            bail!("--builds: {part:?} is not NAME=PATH (NAME of letters, digits, -, _, .)");
        };
        if builds.iter().any(|(n, _)| n == name) {
            bail!("--builds: {name:?} given twice");
        }
        builds.push((name.to_string(), PathBuf::from(path)));
    }
    Ok(builds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mpflex(build: Option<&str>, sched: &str) -> System {
        System::Mpflex {
            build: build.map(String::from),
            sched: sched.into(),
            tun: false,
        }
    }

    #[test]
    fn systems_through_the_tun() {
        let p = crate::profile::seed_default(70);
        let tun = |build: Option<&str>, sched: &str| System::Mpflex {
            build: build.map(String::from),
            sched: sched.into(),
            tun: true,
        };
        assert_eq!(System::parse("mpflex-tun", &p).unwrap(), tun(None, "minrtt"));
        let s = System::parse("mpflex-tun:ecf+pacing=false", &p).unwrap();
        assert_eq!(s, tun(None, "ecf+pacing=false"));
        assert_eq!(s.label(&p), "mpflex-tun:ecf+pacing=false");
        let s = System::parse("mpflex-tun@old:dems", &p).unwrap();
        assert_eq!(s, tun(Some("old"), "dems-f"));
        assert_eq!(s.label(&p), "mpflex-tun@old:dems-f");
        for bad in ["mpflex-tun:", "mpflex-tun@old", "mpflex-tunnel:minrtt"] {
            assert!(System::parse(bad, &p).is_err(), "{bad}");
        }
    }

    #[test]
    fn systems_parse_with_and_without_tuning_settings() {
        let p = crate::profile::seed_default(70);
        assert_eq!(System::parse("mptcp", &p).unwrap(), System::Mptcp);
        assert_eq!(System::parse("tcp-lte", &p).unwrap(), System::Tcp(1));
        assert_eq!(System::parse("mpflex", &p).unwrap(), mpflex(None, "minrtt"));
        let s = System::parse("mpflex:dems-f+fresh_ssthresh=false+keepalive_ms=500", &p).unwrap();
        assert_eq!(s, mpflex(None, "dems-f+fresh_ssthresh=false+keepalive_ms=500"));
        assert_eq!(s.label(&p), "mpflex:dems-f+fresh_ssthresh=false+keepalive_ms=500");
        // An alias is recorded by the name of what it runs.
        let s = System::parse("mpflex:dems+pacing=false", &p).unwrap();
        assert_eq!(s.label(&p), "mpflex:dems-f+pacing=false");
        let e = System::parse("mpflex:fastest", &p).unwrap_err().to_string();
        assert!(e.contains("unknown scheduler \"fastest\" (one of minrtt,"), "{e}");
        for bad in [
            "mpflex:",
            "mpflex:+pacing=false",
            "mpflex:ecf+pacing",
            "mpflex:ecf+=1",
            "mpflex:ecf+a b=1",
            "mpflex:fastest",
            "tcp-x",
            "quic",
        ] {
            let e = System::parse(bad, &p).unwrap_err().to_string();
            assert!(
                e.contains(bad.split('+').next().unwrap()) || e.contains("tcp-x"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn systems_on_a_named_build() {
        let p = crate::profile::seed_default(70);
        let s = System::parse("mpflex@old:minrtt", &p).unwrap();
        assert_eq!(s, mpflex(Some("old"), "minrtt"));
        assert_eq!(s.label(&p), "mpflex@old:minrtt");
        let s = System::parse("mpflex@new-2.1:dems-f+pacing=false", &p).unwrap();
        assert_eq!(s, mpflex(Some("new-2.1"), "dems-f+pacing=false"));
        assert_eq!(s.label(&p), "mpflex@new-2.1:dems-f+pacing=false");
        for bad in [
            "mpflex@:minrtt",
            "mpflex@old",
            "mpflex@old:",
            "mpflex@o d:minrtt",
            "mpflex@old:ecf+pacing",
        ] {
            let e = System::parse(bad, &p).unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:?}")), "{bad}: {e}");
        }
    }

    #[test]
    fn builds_parse() {
        assert_eq!(
            parse_builds("old=/tmp/a/mpflex, new=target/release/mpflex").unwrap(),
            [
                ("old".to_string(), PathBuf::from("/tmp/a/mpflex")),
                ("new".to_string(), PathBuf::from("target/release/mpflex")),
            ]
        );
        assert!(parse_builds("").unwrap().is_empty());
        for bad in ["old", "old=", "=/x", "a b=/x", "old=/x,old=/y"] {
            assert!(parse_builds(bad).is_err(), "{bad}");
        }
    }
}
