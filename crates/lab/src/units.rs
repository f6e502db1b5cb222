//! Sizes and names shared by the runner and the report.
//!
//! Rule: helpers both sides need live here, not in either of them, so that neither
//! imports the other (the report reads what the runner wrote, nothing more).

use anyhow::{Context, Result};

/// A byte count as the report and the progress bar show it: `4 MB`, `256 KB`, `1000 B`.
pub fn human(size: u64) -> String {
    if size >= 1 << 20 && size.is_multiple_of(1 << 20) {
        format!("{} MB", size >> 20)
    } else if size >= 1 << 10 && size.is_multiple_of(1 << 10) {
        format!("{} KB", size >> 10)
    } else {
        format!("{size} B")
    }
}

/// A size on the command line: a number of bytes, optionally with `K` or `M` (binary).
pub fn parse_size(s: &str) -> Result<u64> {
    let s = s.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix(['K', 'k']) {
        (n, 1u64 << 10)
    } else if let Some(n) = s.strip_suffix(['M', 'm']) {
        (n, 1 << 20)
    } else {
        (s, 1)
    };
    Ok(num.parse::<u64>().with_context(|| format!("size {s:?}"))? * mult)
}

/// A file name from a group key: letters, digits, `.` and `_` kept, runs of anything
/// else one `-`.
pub fn sanitize(parts: &[&str]) -> String {
    let mut s = String::new();
    for c in parts.join("-").chars() {
        if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
            s.push(c);
        } else if !s.ends_with('-') {
            s.push('-');
        }
    }
    s.trim_matches('-').to_string()
}

/// Microseconds since the Unix epoch: the clock the client, the server and the emulator
/// share (network namespaces do not have clocks of their own), so their times compare.
pub fn unix_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_trip() {
        assert_eq!(parse_size("256K").unwrap(), 256 << 10);
        assert_eq!(parse_size(" 4m ").unwrap(), 4 << 20);
        assert_eq!(parse_size("1000").unwrap(), 1000);
        assert!(parse_size("1G").is_err());
        assert_eq!(human(256 << 10), "256 KB");
        assert_eq!(human(4 << 20), "4 MB");
        assert_eq!(human(1000), "1000 B");
    }

    #[test]
    fn sanitized_names() {
        assert_eq!(
            sanitize(&["chunk", "seed-default-270", "cubic", "warm, no idle restart", "ratio"]),
            "chunk-seed-default-270-cubic-warm-no-idle-restart-ratio"
        );
        assert_eq!(
            sanitize(&["bulk", "p", "bbr", "", "fresh", "goodput"]),
            "bulk-p-bbr-fresh-goodput"
        );
    }
}
