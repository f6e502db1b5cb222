//! Data caps: `cap = "2 GiB/month"` parsed, and the accounting period a moment falls in.
//!
//! Pure: the time is an argument (seconds since the Unix epoch, UTC).

/// A path's data cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cap {
    /// Bytes per period.
    pub bytes: u64,
    pub period: Period,
    /// Day of the month a monthly period starts (1–28, so every month has it).
    pub reset_day: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    Day,
    Month,
}

/// What a path does at its cap (`at_cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AtCap {
    /// Carries data only while no other path can (the backup tier).
    #[default]
    Backup,
    /// Carries no data at all until the period ends.
    Off,
}

impl AtCap {
    pub fn parse(s: &str) -> Result<AtCap, String> {
        match s {
            "backup" => Ok(AtCap::Backup),
            "off" => Ok(AtCap::Off),
            _ => Err(format!("unknown {s:?} (expected \"backup\" or \"off\")")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            AtCap::Backup => "backup",
            AtCap::Off => "off",
        }
    }

    /// The engine's tier for it.
    pub fn tier(self) -> mpflex_engine::Tier {
        match self {
            AtCap::Backup => mpflex_engine::Tier::Backup,
            AtCap::Off => mpflex_engine::Tier::Off,
        }
    }
}

impl Cap {
    /// Parses `"<number> <unit>/<period>"`: units B, kB/KB, MB, GB, TB (powers of 1000)
    /// and KiB, MiB, GiB, TiB (powers of 1024); periods `day` and `month`. The number may
    /// have a fraction (`"1.5 GB/day"`).
    pub fn parse(s: &str, reset_day: Option<u8>) -> Result<Cap, String> {
        let bad = || format!("bad cap {s:?} (expected e.g. \"2 GiB/month\" or \"500 MB/day\")");
        let (amount, period) = s.split_once('/').ok_or_else(bad)?;
        let period = match period.trim().to_ascii_lowercase().as_str() {
            "day" => Period::Day,
            "month" => Period::Month,
            p => return Err(format!("bad cap {s:?}: unknown period {p:?} (expected day or month)")),
        };
        let amount = amount.trim();
        let split = amount
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let (num, unit) = amount.split_at(split);
        let num: f64 = num.parse().map_err(|_| bad())?;
        let mult: u64 = match unit.trim() {
            "B" => 1,
            "kB" | "KB" => 1000,
            "MB" => 1000_u64.pow(2),
            "GB" => 1000_u64.pow(3),
            "TB" => 1000_u64.pow(4),
            "KiB" => 1 << 10,
            "MiB" => 1 << 20,
            "GiB" => 1 << 30,
            "TiB" => 1 << 40,
            u => {
                return Err(format!(
                    "bad cap {s:?}: unknown unit {u:?} (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"
                ))
            }
        };
        let bytes = num * mult as f64;
        if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 / 2.0 {
            return Err(format!("bad cap {s:?}: the amount must be positive"));
        }
        let reset_day = match (period, reset_day) {
            (_, None) => 1,
            (Period::Month, Some(d)) if (1..=28).contains(&d) => d,
            (Period::Month, Some(d)) => return Err(format!("cap_reset_day: {d} is not a day 1-28")),
            (Period::Day, Some(_)) => return Err("cap_reset_day: only for a monthly cap".into()),
        };
        Ok(Cap {
            bytes: bytes as u64,
            period,
            reset_day,
        })
    }

    /// The accounting period `unix_secs` (UTC) falls in, as a key that changes exactly
    /// when the period does: `YYYY-MM-DD` for a daily cap, `YYYY-MM` for a monthly one
    /// (the month its period started in: with reset day 15, the 10th of a month is in
    /// the previous month's period).
    pub fn period_key(&self, unix_secs: u64) -> String {
        let days = (unix_secs / 86_400) as i64;
        let (y, m, d) = civil_from_days(days);
        match self.period {
            Period::Day => format!("{y:04}-{m:02}-{d:02}"),
            Period::Month => {
                let (y, m) = if d >= self.reset_day as u32 {
                    (y, m)
                } else if m == 1 {
                    (y - 1, 12)
                } else {
                    (y, m - 1)
                };
                format!("{y:04}-{m:02}")
            }
        }
    }
}

/// (year, month, day) of a day count since 1970-01-01 (the proleptic Gregorian calendar;
/// H. Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_parse_with_decimal_and_binary_units() {
        let c = Cap::parse("2 GiB/month", None).unwrap();
        assert_eq!((c.bytes, c.period, c.reset_day), (2 << 30, Period::Month, 1));
        assert_eq!(Cap::parse("500MB/day", None).unwrap().bytes, 500_000_000);
        assert_eq!(Cap::parse("1.5 GB / day", None).unwrap().bytes, 1_500_000_000);
        assert_eq!(Cap::parse("64 MiB/month", Some(15)).unwrap().reset_day, 15);
    }

    #[test]
    fn bad_caps_say_what_is_wrong() {
        for (s, day, want) in [
            ("2 GiB", None, "bad cap \"2 GiB\""),
            ("2 GiB/week", None, "unknown period \"week\""),
            ("2 Gb/month", None, "unknown unit \"Gb\""),
            ("2 gigs/month", None, "unknown unit \"gigs\""),
            ("GiB/month", None, "bad cap"),
            ("0 GiB/month", None, "must be positive"),
            ("1 GiB/month", Some(31), "cap_reset_day: 31"),
            ("1 GiB/day", Some(3), "cap_reset_day: only for a monthly cap"),
        ] {
            let e = Cap::parse(s, day).unwrap_err();
            assert!(e.contains(want), "{s}: {e}");
        }
    }

    #[test]
    fn periods_change_at_midnight_and_on_the_reset_day() {
        // 04:00 UTC on the 26th of November (unix time).
        let t = 1_795_665_600;
        let day = Cap::parse("1 GB/day", None).unwrap();
        assert_eq!(day.period_key(t), "2026-11-26");
        assert_eq!(day.period_key(t + 20 * 3600), "2026-11-27");
        let month = Cap::parse("1 GB/month", None).unwrap();
        assert_eq!(month.period_key(t), "2026-11");
        let mid = Cap::parse("1 GB/month", Some(27)).unwrap();
        assert_eq!(mid.period_key(t), "2026-10", "before the 27th: October's period");
        assert_eq!(mid.period_key(t + 86_400), "2026-11");
        // January before its reset day belongs to December of the year before.
        let jan = 1_767_225_600 + 86_400; // the 2nd of January, 00:00 UTC
        assert_eq!(mid.period_key(jan), "2025-12");
        assert_eq!(civil_from_days(0), (1970, 1, 1));
    }
}
