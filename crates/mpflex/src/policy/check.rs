//! `mpflex policy check`: what a connection would get, from the client's configuration.

use anyhow::{Context, Result};
use mpflex_wire::TargetAddr;

use crate::classes::Destination;
use crate::config::ClientConfig;
use crate::policy::Facts;

/// The connection asked about.
#[derive(Debug, Clone, Default)]
pub struct Query {
    pub dest: String,
    pub sni: Option<String>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub cgroup: Option<String>,
    pub listener: String,
    pub user: Option<String>,
}

/// Parses `HOST:PORT`, `IP:PORT` or `[IPv6]:PORT`.
fn target(dest: &str) -> Result<TargetAddr> {
    if let Ok(a) = dest.parse() {
        return Ok(TargetAddr::Ip(a));
    }
    let (host, port) = dest
        .rsplit_once(':')
        .with_context(|| format!("--dest {dest:?}: expected HOST:PORT"))?;
    let port = port
        .parse()
        .with_context(|| format!("--dest {dest:?}: bad port {port:?}"))?;
    Ok(TargetAddr::Domain(host.to_string(), port))
}

/// The answer as JSON: the rule, the allowed paths, the scheduler of each direction, the
/// class, the energy mode, and the paths' data caps with their ledger counts.
pub fn answer(cfg: &ClientConfig, q: &Query) -> Result<serde_json::Value> {
    cfg.validate()?;
    let policy = cfg.policy()?;
    let classes = cfg.class_rules()?;
    let t = target(&q.dest)?;
    let configured = classes.class_of(&t);
    let d = policy.decide(&Facts {
        dest: Destination::of(&t),
        sni: q.sni.as_deref(),
        uid: q.uid,
        gid: q.gid,
        cgroup: q.cgroup.as_deref(),
        listener: Some(q.listener.as_str()),
        user: q.user.as_deref(),
        class: configured,
    });
    let paths: Vec<(String, crate::config::Tier)> = cfg
        .paths
        .iter()
        .enumerate()
        .map(|(i, p)| Ok((p.display_name(i), p.tier(i)?)))
        .collect::<Result<_>>()?;
    let mask = d.mask(&paths);
    let allowed: Vec<&str> = paths
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1u64 << i) != 0)
        .map(|(_, (n, _))| n.as_str())
        .collect();
    let scheduler = d.scheduler.map_or_else(|| cfg.scheduler_kind(), Ok)?.name();
    let counts = match crate::store::Store::peek(&cfg.state_file) {
        Ok(c) => serde_json::json!(c
            .into_iter()
            .map(|(p, period, bytes)| serde_json::json!({"path": p, "period": period, "bytes": bytes}))
            .collect::<Vec<_>>()),
        Err(e) => serde_json::json!(format!("{e:#}")),
    };
    let caps: Vec<serde_json::Value> = cfg
        .paths
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let (cap, at) = p.cap(i).ok()??;
            Some(
                serde_json::json!({"path": p.display_name(i), "cap": cap.bytes, "at_cap": at.name(),
                                    "period": cap.period_key(unix_now())}),
            )
        })
        .collect();
    Ok(serde_json::json!({
        "dest": t.to_string(),
        "rule": d.rule,
        "paths": allowed,
        "scheduler_up": scheduler,
        "scheduler_down": scheduler,
        "class": d.class.or(configured).map(|c| c.name()),
        "energy": d.energy,
        "caps": caps,
        "ledger": counts,
    }))
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The answer for a person.
pub fn render(v: &serde_json::Value) -> String {
    let mut out = format!(
        "{}: rule {}\n  paths: {}\n  scheduler: {} up, {} down (the server may refuse one outside its allowed_schedulers)\n  class: {}\n  energy: {}\n",
        v["dest"].as_str().unwrap_or("?"),
        v["rule"].as_str().unwrap_or("none (defaults)"),
        v["paths"]
            .as_array()
            .map(|a| a.iter().filter_map(|x| x.as_str()).collect::<Vec<_>>().join(", "))
            .unwrap_or_default(),
        v["scheduler_up"].as_str().unwrap_or("?"),
        v["scheduler_down"].as_str().unwrap_or("?"),
        v["class"].as_str().unwrap_or("by behaviour"),
        v["energy"].as_str().unwrap_or("default"),
    );
    for c in v["caps"].as_array().into_iter().flatten() {
        out += &format!(
            "  cap: {} {} bytes in {}, then {}\n",
            c["path"].as_str().unwrap_or("?"),
            c["cap"],
            c["period"].as_str().unwrap_or("?"),
            c["at_cap"].as_str().unwrap_or("?")
        );
    }
    match &v["ledger"] {
        serde_json::Value::Array(rows) => {
            for r in rows {
                out += &format!(
                    "  ledger: {} {} bytes in {}\n",
                    r["path"].as_str().unwrap_or("?"),
                    r["bytes"],
                    r["period"].as_str().unwrap_or("?")
                );
            }
        }
        serde_json::Value::String(e) => out += &format!("  ledger: {e}\n"),
        _ => {}
    }
    out
}
