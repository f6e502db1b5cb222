//! Network profiles: the seeds' path setups, and custom ones from TOML.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::link::{Link, LinkParams, QueueLimit, Rate};
use crate::trace::Trace;

/// One path, both directions.
#[derive(Debug, Clone, PartialEq)]
pub struct PathSpec {
    pub name: String,
    pub down: LinkParams,
    pub up: LinkParams,
}

/// Which directions of a path an event applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Server → client.
    Down,
    /// Client → server.
    Up,
    #[default]
    Both,
}

impl Direction {
    /// Indices into `[down, up]` pairs.
    pub fn indices(self) -> &'static [usize] {
        match self {
            Direction::Down => &[0],
            Direction::Up => &[1],
            Direction::Both => &[0, 1],
        }
    }
}

/// What an event does to the selected directions of a path.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Everything queued or in flight is lost; arrivals are dropped until `Up`.
    Down,
    Up,
    /// New parameters from now on; `None` keeps the current value. A new rate replaces a
    /// trace with a constant rate.
    Change {
        rate_kbit: Option<u64>,
        /// One-way delay, like `delay_ms` of a path direction.
        delay: Option<Duration>,
        /// Probability in [0, 1].
        loss: Option<f64>,
    },
}

/// Something that happens to a path at a time after the emulator started.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub at: Duration,
    /// Index into `Profile::paths`.
    pub path: usize,
    pub direction: Direction,
    pub action: Action,
}

impl Event {
    /// Applies the event to one direction's model.
    pub fn apply<P>(&self, link: &mut Link<P>) {
        match &self.action {
            Action::Down => link.set_up(false),
            Action::Up => link.set_up(true),
            Action::Change { rate_kbit, delay, loss } => {
                let mut params = link.params().clone();
                if let Some(k) = rate_kbit {
                    params.rate = Rate::Constant(*k);
                }
                if let Some(d) = delay {
                    params.delay = *d;
                }
                if let Some(l) = loss {
                    params.loss = *l;
                }
                link.set_params(params);
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub name: String,
    pub paths: Vec<PathSpec>,
    pub events: Vec<Event>,
}

fn constant(kbit: u64, rtt_ms: u64, queue_ms: u64) -> LinkParams {
    LinkParams {
        delay: Duration::from_micros(rtt_ms * 500),
        jitter: Duration::ZERO,
        rate: Rate::Constant(kbit),
        loss: 0.0,
        queue: QueueLimit::Millis(queue_ms),
    }
}

/// WiFi 7040/2020 kbit/s, RTT 50 ms, 50 ms buffer; LTE 9185/2286 kbit/s, RTT `lte_rtt`,
/// 500 ms buffer (DEMS and MPFlex setups).
pub fn seed_default(lte_rtt: u64) -> Profile {
    Profile {
        name: if lte_rtt == 70 {
            "seed-default".into()
        } else {
            format!("seed-default-{lte_rtt}")
        },
        paths: vec![
            PathSpec {
                name: "wifi".into(),
                down: constant(7040, 50, 50),
                up: constant(2020, 50, 50),
            },
            PathSpec {
                name: "lte".into(),
                down: constant(9185, lte_rtt, 500),
                up: constant(2286, lte_rtt, 500),
            },
        ],
        events: Vec::new(),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DirToml {
    #[serde(default)]
    rate_kbit: Option<u64>,
    #[serde(default)]
    trace: Option<PathBuf>,
    delay_ms: f64,
    #[serde(default)]
    jitter_ms: f64,
    #[serde(default)]
    loss_pct: f64,
    #[serde(default)]
    queue_ms: Option<u64>,
    #[serde(default)]
    queue_bytes: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventToml {
    at_ms: u64,
    path: String,
    /// "down", "up" or "change".
    action: String,
    #[serde(default)]
    direction: Direction,
    #[serde(default)]
    rate_kbit: Option<u64>,
    #[serde(default)]
    delay_ms: Option<f64>,
    #[serde(default)]
    loss_pct: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PathToml {
    name: String,
    down: DirToml,
    up: DirToml,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileToml {
    name: Option<String>,
    paths: Vec<PathToml>,
    #[serde(default)]
    events: Vec<EventToml>,
}

fn dir_params(d: &DirToml, base: &Path, what: &str) -> Result<LinkParams> {
    let rate = match (&d.rate_kbit, &d.trace) {
        (Some(k), None) if *k > 0 => Rate::Constant(*k),
        (None, Some(t)) => Rate::Trace(Trace::load(&base.join(t)).with_context(|| format!("{what}.trace"))?),
        (Some(0), None) => bail!("{what}.rate_kbit: must be > 0"),
        (None, None) => Rate::Unlimited,
        _ => bail!("{what}: set rate_kbit or trace, not both"),
    };
    if !(0.0..100.0).contains(&d.loss_pct) {
        bail!("{what}.loss_pct: must be in [0, 100)");
    }
    // `contains` is false for NaN too, so `from_secs_f64` below cannot panic.
    if !(0.0..=60_000.0).contains(&d.delay_ms) || !(0.0..=60_000.0).contains(&d.jitter_ms) {
        bail!("{what}.delay_ms / jitter_ms: between 0 and 60000 ms");
    }
    if d.queue_bytes == Some(0) {
        bail!("{what}.queue_bytes: must be > 0");
    }
    let queue = match (d.queue_ms, d.queue_bytes) {
        (Some(ms), None) => QueueLimit::Millis(ms),
        (None, Some(b)) => QueueLimit::Bytes(b),
        (None, None) => QueueLimit::Millis(100),
        _ => bail!("{what}: set queue_ms or queue_bytes, not both"),
    };
    Ok(LinkParams {
        delay: Duration::from_secs_f64(d.delay_ms / 1000.0),
        jitter: Duration::from_secs_f64(d.jitter_ms / 1000.0),
        rate,
        loss: d.loss_pct / 100.0,
        queue,
    })
}

fn event(e: &EventToml, paths: &[PathSpec]) -> Result<Event> {
    let path = paths
        .iter()
        .position(|p| p.name == e.path)
        .with_context(|| format!("path: no path named {:?}", e.path))?;
    let action = match e.action.as_str() {
        "down" | "up" => {
            if e.rate_kbit.is_some() || e.delay_ms.is_some() || e.loss_pct.is_some() {
                bail!("rate_kbit, delay_ms and loss_pct go with action = \"change\" only");
            }
            if e.action == "down" {
                Action::Down
            } else {
                Action::Up
            }
        }
        "change" => {
            if e.rate_kbit.is_none() && e.delay_ms.is_none() && e.loss_pct.is_none() {
                bail!("a change needs rate_kbit, delay_ms and/or loss_pct");
            }
            if e.rate_kbit == Some(0) {
                bail!("rate_kbit: must be > 0 (take the link down instead)");
            }
            if let Some(d) = e.delay_ms {
                if !(0.0..=60_000.0).contains(&d) {
                    bail!("delay_ms: between 0 and 60000");
                }
            }
            if let Some(l) = e.loss_pct {
                if !(0.0..100.0).contains(&l) {
                    bail!("loss_pct: must be in [0, 100)");
                }
            }
            Action::Change {
                rate_kbit: e.rate_kbit,
                delay: e.delay_ms.map(|d| Duration::from_secs_f64(d / 1000.0)),
                loss: e.loss_pct.map(|l| l / 100.0),
            }
        }
        other => bail!("action: {other:?} is not one of down, up, change"),
    };
    Ok(Event {
        at: Duration::from_millis(e.at_ms),
        path,
        direction: e.direction,
        action,
    })
}

impl Profile {
    /// A built-in name (`seed-default`, `seed-default-270`, `seed-default-470`,
    /// `trace:<dir>` for the first `.down`/`.up` pair found there plus a WiFi path) or a
    /// TOML file.
    pub fn resolve(spec: &str) -> Result<Profile> {
        match spec {
            "seed-default" => return Ok(seed_default(70)),
            "seed-default-270" => return Ok(seed_default(270)),
            "seed-default-470" => return Ok(seed_default(470)),
            _ => {}
        }
        if let Some(prefix) = spec.strip_prefix("trace:") {
            // trace:<dir/name> uses <name>.down and <name>.up as the LTE path.
            let down = Trace::load(Path::new(&format!("{prefix}.down")))?;
            let up = Trace::load(Path::new(&format!("{prefix}.up")))?;
            let mut p = seed_default(70);
            p.name = format!(
                "trace:{}",
                Path::new(prefix)
                    .file_name()
                    .map_or(prefix.into(), |n| n.to_string_lossy())
            );
            p.paths[1].down.rate = Rate::Trace(down);
            p.paths[1].up.rate = Rate::Trace(up);
            return Ok(p);
        }
        let path = Path::new(spec);
        if !path.exists() {
            bail!("unknown profile {spec:?}: not a built-in (seed-default, seed-default-270, seed-default-470, trace:<path-prefix>) and no such file");
        }
        let text = std::fs::read_to_string(path)?;
        let t: ProfileToml = toml::from_str(&text).with_context(|| format!("profile {}", path.display()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        if t.paths.is_empty() || t.paths.len() > 8 {
            bail!("paths: between 1 and 8 paths");
        }
        let mut paths = Vec::new();
        for (i, p) in t.paths.iter().enumerate() {
            paths.push(PathSpec {
                name: p.name.clone(),
                down: dir_params(&p.down, base, &format!("paths[{i}].down"))?,
                up: dir_params(&p.up, base, &format!("paths[{i}].up"))?,
            });
        }
        let events = t
            .events
            .iter()
            .enumerate()
            .map(|(i, e)| event(e, &paths).with_context(|| format!("events[{i}]")))
            .collect::<Result<Vec<_>>>()?;
        Ok(Profile {
            name: t
                .name
                .unwrap_or_else(|| path.file_stem().unwrap_or_default().to_string_lossy().into()),
            paths,
            events,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins() {
        let p = Profile::resolve("seed-default-270").unwrap();
        assert_eq!(p.paths[1].down.delay, Duration::from_millis(135));
        assert_eq!(p.paths[0].down.queue_bytes(), 7040 * 1000 / 8 * 50 / 1000);
        assert!(Profile::resolve("nope").is_err());
    }

    #[test]
    fn toml_profile_and_errors() {
        let dir = std::env::temp_dir().join(format!("mpfl-prof-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("p.toml");
        std::fs::write(
            &f,
            "[[paths]]\nname = \"a\"\ndown = { rate_kbit = 1000, delay_ms = 10, loss_pct = 1 }\nup = { delay_ms = 10 }\n\
             [[events]]\nat_ms = 500\npath = \"a\"\naction = \"down\"\n",
        )
        .unwrap();
        let p = Profile::resolve(f.to_str().unwrap()).unwrap();
        assert_eq!(p.paths[0].down.loss, 0.01);
        assert_eq!(p.paths[0].up.rate, Rate::Unlimited);
        std::fs::write(
            &f,
            "[[paths]]\nname = \"a\"\ndown = { rate_kbit = 0, delay_ms = 1 }\nup = { delay_ms = 1 }\n",
        )
        .unwrap();
        assert!(Profile::resolve(f.to_str().unwrap())
            .unwrap_err()
            .to_string()
            .contains("rate_kbit"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn load(text: &str) -> Result<Profile> {
        let dir = std::env::temp_dir().join(format!("mpfl-prof-ev-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Unit tests run in parallel: one file per call.
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let f = dir.join(format!(
            "p{}.toml",
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::write(&f, text).unwrap();
        let p = Profile::resolve(f.to_str().unwrap());
        let _ = std::fs::remove_file(&f);
        p
    }

    const TWO_PATHS: &str = "[[paths]]\nname = \"a\"\ndown = { rate_kbit = 1000, delay_ms = 10 }\nup = { delay_ms = 10 }\n\
                             [[paths]]\nname = \"b\"\ndown = { rate_kbit = 2000, delay_ms = 20 }\nup = { delay_ms = 20 }\n";

    #[test]
    fn events_parse_typed() {
        let p = load(&format!(
            "{TWO_PATHS}[[events]]\nat_ms = 1500\npath = \"b\"\naction = \"change\"\ndirection = \"down\"\n\
             rate_kbit = 500\ndelay_ms = 2.5\nloss_pct = 1\n\
             [[events]]\nat_ms = 9\npath = \"a\"\naction = \"down\"\n"
        ))
        .unwrap();
        assert_eq!(
            p.events[0],
            Event {
                at: Duration::from_millis(1500),
                path: 1,
                direction: Direction::Down,
                action: Action::Change {
                    rate_kbit: Some(500),
                    delay: Some(Duration::from_micros(2500)),
                    loss: Some(0.01),
                },
            }
        );
        assert_eq!(p.events[1].direction, Direction::Both);
        assert_eq!(p.events[1].action, Action::Down);

        // Applying the change to the down direction's model.
        let mut l: Link<u8> = Link::new(p.paths[1].down.clone(), 1);
        p.events[0].apply(&mut l);
        assert_eq!(l.params().rate, Rate::Constant(500));
        assert_eq!(l.params().delay, Duration::from_micros(2500));
        assert_eq!(l.params().loss, 0.01);
    }

    #[test]
    fn bad_events_and_values_are_errors_not_panics() {
        let cases = [
            (
                "[[events]]\nat_ms = 1\npath = \"zz\"\naction = \"down\"\n",
                "no path named",
            ),
            (
                "[[events]]\nat_ms = 1\npath = \"a\"\naction = \"explode\"\n",
                "not one of",
            ),
            (
                "[[events]]\nat_ms = 1\npath = \"a\"\naction = \"change\"\n",
                "needs rate_kbit",
            ),
            (
                "[[events]]\nat_ms = 1\npath = \"a\"\naction = \"down\"\nrate_kbit = 5\n",
                "go with action",
            ),
            (
                "[[events]]\nat_ms = 1\npath = \"a\"\naction = \"change\"\ndelay_ms = nan\n",
                "delay_ms",
            ),
            (
                "[[events]]\nat_ms = 1\npath = \"a\"\naction = \"up\"\ndirection = \"sideways\"\n",
                "direction",
            ),
        ];
        for (ev, want) in cases {
            let e = format!("{:#}", load(&format!("{TWO_PATHS}{ev}")).unwrap_err());
            assert!(e.contains(want), "{ev:?}: {e}");
        }
        for (dir, want) in [
            ("{ delay_ms = nan }", "delay_ms"),
            ("{ delay_ms = inf }", "delay_ms"),
            ("{ delay_ms = -1 }", "delay_ms"),
            ("{ delay_ms = 1, jitter_ms = 1e300 }", "jitter_ms"),
            ("{ delay_ms = 1, queue_bytes = 0 }", "queue_bytes"),
            ("{ delay_ms = 1, loss_pct = 100 }", "loss_pct"),
            ("{ delay_ms = 1, rate_kbit = 5, trace = \"x\" }", "not both"),
            ("{ delay_ms = 1, speed = 5 }", "unknown field"),
        ] {
            let text = format!("[[paths]]\nname = \"a\"\ndown = {dir}\nup = {{ delay_ms = 1 }}\n");
            let e = format!("{:#}", load(&text).unwrap_err());
            assert!(e.contains(want), "{dir}: {e}");
        }
        assert!(format!("{:#}", load("paths = []\n").unwrap_err()).contains("between 1 and 8"));
    }
}
