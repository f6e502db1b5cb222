//! Network profiles: the seeds' path setups, and custom ones from TOML.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::link::{LinkParams, QueueLimit, Rate};
use crate::trace::Trace;

/// One path, both directions.
#[derive(Debug, Clone, PartialEq)]
pub struct PathSpec {
    pub name: String,
    pub down: LinkParams,
    pub up: LinkParams,
}

/// Something that happens to a path at a time.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    pub at_ms: u64,
    pub path: String,
    /// "down", "up", or "change".
    pub action: String,
    #[serde(default)]
    pub rate_kbit: Option<u64>,
    #[serde(default)]
    pub delay_ms: Option<u64>,
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
    events: Vec<Event>,
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
    if d.delay_ms < 0.0 || d.jitter_ms < 0.0 {
        bail!("{what}.delay_ms / jitter_ms: must not be negative");
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
        for (i, e) in t.events.iter().enumerate() {
            if !paths.iter().any(|p| p.name == e.path) {
                bail!("events[{i}].path: no path named {:?}", e.path);
            }
            if !["down", "up", "change"].contains(&e.action.as_str()) {
                bail!("events[{i}].action: one of down, up, change");
            }
        }
        Ok(Profile {
            name: t
                .name
                .unwrap_or_else(|| path.file_stem().unwrap_or_default().to_string_lossy().into()),
            paths,
            events: t.events,
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
}
