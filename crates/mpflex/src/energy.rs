//! The client's energy settings: which link each path is (`kind`), the device profile the
//! energy model prices with (`energy_profile`), and the energy-aware mode
//! (`energy_mode`). See docs/energy.md.

use std::path::Path;

use anyhow::{bail, Context, Result};
use mpflex_engine::energy::{EnergyProfile, LinkKind, PowerLaw, Radio};
use mpflex_engine::EnergyMode;
use serde::Deserialize;

/// `kind = "wifi" | "cellular" | "wired"`; the error names the key.
pub fn parse_kind(s: &str, what: &str) -> Result<LinkKind> {
    match s {
        "wifi" => Ok(LinkKind::Wifi),
        "cellular" => Ok(LinkKind::Cellular),
        "wired" => Ok(LinkKind::Wired),
        other => bail!("{what}: unknown kind {other:?} (expected wifi, cellular or wired)"),
    }
}

/// The kind an interface's name suggests: `wl*` WiFi; `wwan*`, `rmnet*`, `ccmni*`, `usb*`
/// (tethered phones) and `ppp*` cellular; anything else wired.
pub fn guess_kind(device: &str) -> LinkKind {
    const CELLULAR: [&str; 6] = ["wwan", "rmnet", "ccmni", "usb", "ppp", "wwp"];
    if device.starts_with("wl") {
        LinkKind::Wifi
    } else if CELLULAR.iter().any(|p| device.starts_with(p)) {
        LinkKind::Cellular
    } else {
        LinkKind::Wired
    }
}

/// `energy_mode = "aware" | "off"`.
pub fn parse_mode(s: &str) -> Result<EnergyMode> {
    match s {
        "aware" => Ok(EnergyMode::Aware),
        "off" => Ok(EnergyMode::Off),
        other => bail!("energy_mode: unknown mode {other:?} (expected aware or off)"),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LawToml {
    alpha: f64,
    beta: f64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RadioToml {
    down: Option<LawToml>,
    up: Option<LawToml>,
    promotion_j: Option<f64>,
    tail_s: Option<f64>,
    tail_w: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileToml {
    name: Option<String>,
    /// A built-in profile the others change.
    base: Option<String>,
    gamma: Option<f64>,
    wifi: Option<RadioToml>,
    cellular: Option<RadioToml>,
}

const BUILT_IN: &str = "galaxy-s3-lte, galaxy-s3-hsdpa, nexus5-lte";

/// `energy_profile`: a built-in profile's name, or a TOML file (docs/energy.md).
pub fn load_profile(spec: &str) -> Result<EnergyProfile> {
    if let Some(p) = EnergyProfile::named(spec) {
        return Ok(p);
    }
    let path = Path::new(spec);
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("energy_profile: {spec:?} is no built-in profile ({BUILT_IN}) and cannot be read"))?;
    parse_profile(&text, &path.display().to_string())
}

/// A profile from TOML text (`origin` names it in errors).
pub fn parse_profile(text: &str, origin: &str) -> Result<EnergyProfile> {
    let t: ProfileToml = toml::from_str(text).with_context(|| format!("energy_profile {origin}"))?;
    let mut p = match &t.base {
        None => EnergyProfile::default(),
        Some(b) => EnergyProfile::named(b)
            .with_context(|| format!("energy_profile {origin}: base: unknown profile {b:?} (one of {BUILT_IN})"))?,
    };
    p.name = t.name.unwrap_or_else(|| origin.to_string());
    if let Some(g) = t.gamma {
        if !(g > 0.0 && g <= 1.0) {
            bail!("energy_profile {origin}: gamma: {g} is not in (0, 1] (the shared fraction while both radios carry)");
        }
        p.gamma = g;
    }
    for (key, radio, r) in [("wifi", &mut p.wifi, t.wifi), ("cellular", &mut p.cellular, t.cellular)] {
        if let Some(r) = r {
            apply(radio, r).with_context(|| format!("energy_profile {origin}: {key}"))?;
        }
    }
    Ok(p)
}

fn apply(radio: &mut Radio, r: RadioToml) -> Result<()> {
    for (dir, law, given) in [("down", &mut radio.down, r.down), ("up", &mut radio.up, r.up)] {
        if let Some(l) = given {
            // Energy per second, α·B^(1+β), must grow with the rate and per-byte energy
            // must not: -1 < β ≤ 0.
            if !(l.alpha.is_finite() && l.alpha > 0.0) {
                bail!("{dir}.alpha: {} must be > 0 (µJ per byte at 1 Mbit/s)", l.alpha);
            }
            if !(l.beta > -1.0 && l.beta <= 0.0) {
                bail!("{dir}.beta: {} must be in (-1, 0]", l.beta);
            }
            *law = PowerLaw {
                alpha: l.alpha,
                beta: l.beta,
            };
        }
    }
    for (key, field, v) in [
        ("promotion_j", &mut radio.promotion_j, r.promotion_j),
        ("tail_s", &mut radio.tail_s, r.tail_s),
        ("tail_w", &mut radio.tail_w, r.tail_w),
    ] {
        if let Some(v) = v {
            if !(v.is_finite() && v >= 0.0) {
                bail!("{key}: {v} must be a number >= 0");
            }
            *field = v;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_from_toml_and_clear_errors() {
        let p = parse_profile(
            "name = \"phone\"\nbase = \"nexus5-lte\"\ngamma = 0.9\n[cellular]\ntail_s = 6.0\ndown = { alpha = 5.0, beta = -0.8 }\n",
            "x.toml",
        )
        .unwrap();
        assert_eq!((p.name.as_str(), p.gamma, p.cellular.tail_s), ("phone", 0.9, 6.0));
        assert_eq!(p.cellular.down, PowerLaw { alpha: 5.0, beta: -0.8 });
        assert_eq!(p.wifi, EnergyProfile::nexus5().wifi);
        let err = |t: &str| format!("{:#}", parse_profile(t, "x.toml").unwrap_err());
        assert!(err("gamma = 1.5").contains("gamma: 1.5 is not in (0, 1]"));
        assert!(err("[wifi]\nup = { alpha = 1.0, beta = 0.5 }").contains("wifi: up.beta: 0.5 must be in (-1, 0]"));
        assert!(err("[wifi]\ndown = { alpha = -1.0, beta = -0.5 }").contains("down.alpha"));
        assert!(err("[cellular]\ntail_w = -1.0").contains("cellular: tail_w"));
        assert!(err("base = \"nokia\"").contains("base: unknown profile \"nokia\""));
        assert!(err("gama = 0.5").contains("unknown field"));
        assert!(format!("{:#}", load_profile("/nonexistent/p.toml").unwrap_err()).contains("no built-in profile"));
        assert_eq!(load_profile("galaxy-s3-lte").unwrap(), EnergyProfile::galaxy_s3());
    }

    #[test]
    fn kinds_and_modes() {
        assert_eq!(guess_kind("wlan0"), LinkKind::Wifi);
        assert_eq!(guess_kind("wlp2s0"), LinkKind::Wifi);
        assert_eq!(guess_kind("wwan0"), LinkKind::Cellular);
        assert_eq!(guess_kind("rmnet_data0"), LinkKind::Cellular);
        assert_eq!(guess_kind("eth0"), LinkKind::Wired);
        assert_eq!(parse_kind("cellular", "k").unwrap(), LinkKind::Cellular);
        assert!(parse_kind("lte", "paths[1].kind")
            .unwrap_err()
            .to_string()
            .contains("paths[1].kind: unknown kind \"lte\""));
        assert_eq!(parse_mode("aware").unwrap(), EnergyMode::Aware);
        assert!(parse_mode("on").is_err());
    }
}
