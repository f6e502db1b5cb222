//! `mpflex status` in a terminal: the status JSON as tables, and `--watch`'s live view.

/// Renders status JSON as a table.
pub fn render_table(v: &serde_json::Value) -> String {
    let mut out = String::new();
    let sessions: Vec<&serde_json::Value> = match v.get("sessions").and_then(|s| s.as_array()) {
        Some(list) => list.iter().collect(),
        None => vec![v],
    };
    for s in sessions {
        let held = match (s["held_bytes"]["send"].as_u64(), s["held_bytes"]["receive"].as_u64()) {
            (Some(tx), Some(rx)) => format!(", holding {} to send, {} unread", kib(tx), kib(rx)),
            _ => String::new(),
        };
        out += &format!(
            "{} session{}: scheduler {}, {} streams{held}\n",
            v["role"].as_str().unwrap_or("?"),
            s.get("client")
                .and_then(|c| c.as_str())
                .map(|c| format!(" of {c}"))
                .unwrap_or_default(),
            s["scheduler"].as_str().unwrap_or("?"),
            s["streams"]
        );
        out += &format!(
            "  {:<24} {:>4} {:>14} {:>14} {:>12} {:>9} {:>6} {:>8}\n",
            "path", "up", "sent", "received", "resent", "srtt_ms", "cwnd", "failures"
        );
        let mut notes = Vec::new();
        for p in s["paths"].as_array().into_iter().flatten() {
            let name = p["name"].as_str().unwrap_or("?");
            // The tier, where it is not the default.
            let name = match p["tier_name"].as_str() {
                Some(t) if t != "primary" => format!("{name} ({t})"),
                _ => name.to_string(),
            };
            let state = p["state"].as_str().unwrap_or("?");
            let cap = &p["cap"];
            if cap.is_object() {
                let mib = |v: &serde_json::Value| v.as_u64().unwrap_or(0) as f64 / (1u64 << 20) as f64;
                let at = if cap["capped"].as_bool() == Some(true) {
                    format!(" — cap reached, now {}", cap["at_cap"].as_str().unwrap_or("?"))
                } else {
                    String::new()
                };
                notes.push(format!(
                    "{}: metered, {:.1} of {:.1} MiB used in {}{at}",
                    p["name"].as_str().unwrap_or("?"),
                    mib(&cap["used"]),
                    mib(&cap["limit"]),
                    cap["period"].as_str().unwrap_or("?"),
                ));
            }
            if !["up", "suspect", "down", "?"].contains(&state) {
                let dev = p["device"].as_str().map(|d| format!(" ({d})")).unwrap_or_default();
                notes.push(format!("{}{dev}: {state}", p["name"].as_str().unwrap_or("?")));
            }
            out += &format!(
                "  {:<24} {:>4} {:>14} {:>14} {:>12} {:>9.1} {:>6} {:>8}\n",
                clip(&name, 24),
                if p["up"].as_bool() == Some(true) { "yes" } else { "no" },
                p["bytes_sent"].as_u64().unwrap_or(0),
                p["bytes_received"].as_u64().unwrap_or(0),
                p["payload_resent"].as_u64().unwrap_or(0),
                p["srtt_us"].as_u64().unwrap_or(0) as f64 / 1000.0,
                p["cwnd"].as_u64().unwrap_or(0),
                p["failures"].as_u64().unwrap_or(0),
            );
        }
        // Paths held back by their interface, and entries that match none yet.
        for w in s["waiting"].as_array().into_iter().flatten() {
            notes.push(format!(
                "{} ({}): {}",
                w["name"].as_str().unwrap_or("?"),
                w["matches"].as_str().unwrap_or("?"),
                w["state"].as_str().unwrap_or("?")
            ));
        }
        for n in notes {
            out += &format!("  {}\n", clip(&n, 96));
        }
        out += &streams_table(s);
        out += &latency_table(s);
        out += &datagram_line(s);
        out += &energy_line(s);
    }
    out
}

/// The modelled energy (docs/energy.md): the session's J and J/MB, each path's, and
/// which paths the energy-aware mode holds back.
fn energy_line(s: &serde_json::Value) -> String {
    let e = &s["energy"];
    let Some(j) = e["joules"].as_f64() else {
        return String::new();
    };
    let mut out = format!(
        "  energy ({} mode, {}): {j:.1} J, {:.2} J/MB",
        e["mode"].as_str().unwrap_or("?"),
        e["profile"].as_str().unwrap_or("?"),
        e["j_per_mb"].as_f64().unwrap_or(0.0)
    );
    for p in s["paths"].as_array().into_iter().flatten() {
        let Some(pj) = p["energy_j"].as_f64() else { continue };
        out += &format!(
            "; {} ({}) {pj:.1} J{}",
            p["name"].as_str().unwrap_or("?"),
            p["kind"].as_str().unwrap_or("?"),
            if p["energy_standby"].as_bool() == Some(true) {
                ", energy standby"
            } else {
                ""
            }
        );
    }
    out + "\n"
}

/// One line of datagram counts, once the session has carried any: flows, each way,
/// copies and duplicates, and the drops with their reasons (only those that happened).
fn datagram_line(s: &serde_json::Value) -> String {
    let d = &s["datagrams"];
    let n = |k: &str| d[k].as_u64().unwrap_or(0);
    if n("flows_opened") == 0 && n("received") == 0 {
        return String::new();
    }
    let drops: Vec<String> = d["dropped"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(why, v)| v.as_u64().filter(|&c| c > 0).map(|c| format!("{why} {c}")))
        .collect();
    format!(
        "  udp: {} flows ({} refused), {} datagrams sent ({} copies), {} received ({} duplicates dropped){}\n",
        n("flows"),
        n("flows_refused"),
        n("sent"),
        n("copies"),
        n("received"),
        n("duplicates"),
        if drops.is_empty() {
            String::new()
        } else {
            format!("; dropped: {}", drops.join(", "))
        }
    )
}

#[cfg(test)]
mod datagram_tests {
    /// The line appears once there were flows, and names only the drops that happened.
    #[test]
    fn datagram_line_shows_counts_and_drops() {
        let none = serde_json::json!({"datagrams": {"flows_opened": 0, "received": 0}});
        assert_eq!(super::datagram_line(&none), "");
        let s = serde_json::json!({"datagrams": {
            "flows": 2, "flows_opened": 3, "flows_refused": 1, "sent": 40, "copies": 20,
            "received": 18, "duplicates": 17,
            "dropped": {"frag": 1, "queue_full": 0, "malformed": 2}
        }});
        assert_eq!(
            super::datagram_line(&s),
            "  udp: 2 flows (1 refused), 40 datagrams sent (20 copies), 18 received (17 duplicates dropped); dropped: frag 1, malformed 2\n"
        );
    }
}

/// Most streams the table lists (the JSON lists all).
const TABLE_STREAMS: usize = 20;
/// Widest target shown; longer names keep their end (the port and the domain).
const TARGET_WIDTH: usize = 32;

/// Per stream: id, target, class (`*`: pinned by `[[classes]]`).
fn streams_table(s: &serde_json::Value) -> String {
    let Some(list) = s["stream_list"].as_array().filter(|l| !l.is_empty()) else {
        return String::new();
    };
    let mut out = format!(
        "  {:>6} {:<TARGET_WIDTH$} {:<12} {:<14} {:<12} sched up/down\n",
        "stream", "target", "class", "rule", "paths"
    );
    for st in list.iter().take(TABLE_STREAMS) {
        let pinned = if st["pinned"].as_bool() == Some(true) { "*" } else { "" };
        out += &format!(
            "  {:>6} {:<TARGET_WIDTH$} {:<12} {:<14} {:<12} {}/{}\n",
            st["id"].as_u64().map_or("?".to_string(), |i| i.to_string()),
            clip(st["target"].as_str().unwrap_or("-"), TARGET_WIDTH),
            format!("{}{pinned}", st["class"].as_str().unwrap_or("?")),
            clip(st["rule"].as_str().unwrap_or("-"), 14),
            clip(st["allowed"].as_str().unwrap_or("all"), 12),
            st["scheduler_up"].as_str().unwrap_or("?"),
            st["scheduler_down"].as_str().unwrap_or("?"),
        );
    }
    if list.len() > TABLE_STREAMS {
        out += &format!("  … {} more (--json lists all)\n", list.len() - TABLE_STREAMS);
    }
    if list.iter().any(|st| st["pinned"].as_bool() == Some(true)) {
        out += "  * pinned by [[classes]]\n";
    }
    out
}

/// Per class: how long its bytes took from the application to the peer.
fn latency_table(s: &serde_json::Value) -> String {
    let Some(list) = s["class_latency"].as_array().filter(|l| !l.is_empty()) else {
        return String::new();
    };
    let mut out = format!(
        "  {:<12} {:>10} {:>9} {:>9} {:>9}   (latency to the peer, ms)\n",
        "class", "count", "p50", "p99", "mean"
    );
    let ms = |v: &serde_json::Value| match v.as_f64() {
        Some(x) => format!("≤{x}"),
        None => ">16384".to_string(),
    };
    for c in list {
        out += &format!(
            "  {:<12} {:>10} {:>9} {:>9} {:>9.1}\n",
            c["class"].as_str().unwrap_or("?"),
            c["count"].as_u64().unwrap_or(0),
            ms(&c["p50_ms"]),
            ms(&c["p99_ms"]),
            c["mean_ms"].as_f64().unwrap_or(0.0),
        );
    }
    out
}

/// `s` in at most `width` characters, keeping its end.
/// Control characters become `?`: a destination name comes from an application, and an
/// escape sequence in it must not reach the operator's terminal.
fn clip(s: &str, width: usize) -> String {
    let s: String = s.chars().map(|c| if c.is_control() { '?' } else { c }).collect();
    let s = s.as_str();
    let n = s.chars().count();
    if n <= width {
        s.to_string()
    } else {
        let tail: String = s.chars().skip(n - width + 1).collect();
        format!("…{tail}")
    }
}

/// A byte count for people: whole KiB from 1 KiB on, MiB with one decimal from 10 MiB on.
fn kib(n: u64) -> String {
    if n >= 10 << 20 {
        format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
    } else if n >= 1024 {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} B")
    }
}

/// Sparkline levels, lowest to highest.
const SPARKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
/// Seconds of throughput the watch view's sparkline covers.
const SPARK_SECS: usize = 40;

/// `values` as a sparkline of at most `width` characters (the last ones), scaled to their
/// maximum; padded on the left so that the newest is always in the last column.
fn sparkline(values: &[f64], width: usize) -> String {
    let tail = &values[values.len().saturating_sub(width)..];
    let max = tail.iter().cloned().fold(0.0, f64::max);
    let mut s = " ".repeat(width - tail.len());
    for &v in tail {
        let level = if max > 0.0 {
            ((v / max) * (SPARKS.len() - 1) as f64).round() as usize
        } else {
            0
        };
        s.push(SPARKS[level.min(SPARKS.len() - 1)]);
    }
    s
}

/// A rate in bytes per second as Mbit/s, for people.
fn mbit(bytes_per_sec: f64) -> String {
    format!("{:.2}", bytes_per_sec * 8.0 / 1e6)
}

/// Each path's share of a stream's bytes by path index, e.g. `#0 62% #1 38%` (a server's
/// path names are long).
fn split(paths: &[serde_json::Value]) -> String {
    let bytes: Vec<u64> = paths.iter().map(|b| b.as_u64().unwrap_or(0)).collect();
    let total: u64 = bytes.iter().sum();
    if total == 0 {
        return "-".to_string();
    }
    bytes
        .iter()
        .enumerate()
        .filter(|(_, &b)| b > 0)
        .map(|(i, &b)| format!("#{i} {}%", (b * 100 + total / 2) / total))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Renders `/live.json` for `mpflex status --watch`: per session its paths (state,
/// throughput now, RTT, queue, a sparkline of the last seconds' throughput) and its
/// streams with their class and path split.
pub fn render_live(v: &serde_json::Value) -> String {
    let role = v["role"].as_str().unwrap_or("?");
    let sessions = v["sessions"].as_array().cloned().unwrap_or_default();
    if sessions.is_empty() {
        return format!("{role}: no session\n");
    }
    let mut out = String::new();
    for s in &sessions {
        let client = s["client"].as_str().map(|c| format!(" of {c}")).unwrap_or_default();
        out += &format!(
            "{role} session {}{client}: scheduler {}, {} streams, {} ahead of the paths\n",
            s["session"].as_str().unwrap_or("?"),
            s["scheduler"].as_str().unwrap_or("?"),
            s["streams"],
            kib(s["ahead_bytes"].as_u64().unwrap_or(0)),
        );
        out += &format!(
            "  {:>2} {:<16} {:<7} {:>9} {:>9} {:>8} {:>8} {:>10}  throughput, last {SPARK_SECS} s\n",
            "#", "path", "state", "rx Mbit/s", "tx Mbit/s", "srtt ms", "queue ms", "in flight",
        );
        let paths = s["paths"].as_array().cloned().unwrap_or_default();
        for p in &paths {
            let h = &p["history"];
            let series = |k: &str| -> Vec<f64> {
                h[k].as_array()
                    .map(|a| a.iter().map(|x| x.as_f64().unwrap_or(0.0)).collect())
                    .unwrap_or_default()
            };
            let total: Vec<f64> = series("tx").iter().zip(series("rx")).map(|(a, b)| a + b).collect();
            out += &format!(
                "  {:>2} {:<16} {:<7} {:>9} {:>9} {:>8.1} {:>8} {:>10}  {}\n",
                p["id"].as_u64().map_or("?".to_string(), |i| i.to_string()),
                clip(p["name"].as_str().unwrap_or("?"), 16),
                p["state"].as_str().unwrap_or("?"),
                mbit(p["rx_rate"].as_f64().unwrap_or(0.0)),
                mbit(p["tx_rate"].as_f64().unwrap_or(0.0)),
                p["srtt_ms"].as_f64().unwrap_or(0.0),
                p["queue_ms"].as_f64().map_or("-".to_string(), |q| format!("{q:.1}")),
                kib(p["in_flight_bytes"].as_u64().unwrap_or(0)),
                sparkline(&total, SPARK_SECS),
            );
        }
        let streams = s["stream_list"].as_array().cloned().unwrap_or_default();
        if !streams.is_empty() {
            out += &format!("  {:>8} {:<40} {:<12} {}\n", "stream", "target", "class", "path split");
            for st in streams.iter().take(TABLE_STREAMS) {
                let pinned = if st["pinned"].as_bool() == Some(true) { "*" } else { "" };
                out += &format!(
                    "  {:>8} {:<40} {:<12} {}\n",
                    st["id"].as_u64().map_or("?".to_string(), |i| i.to_string()),
                    clip(st["target"].as_str().unwrap_or("-"), 40),
                    format!("{}{pinned}", st["class"].as_str().unwrap_or("?")),
                    split(st["paths"].as_array().map_or(&[][..], |a| a.as_slice())),
                );
            }
            let more = s["streams"]
                .as_u64()
                .unwrap_or(0)
                .saturating_sub(TABLE_STREAMS.min(streams.len()) as u64);
            if more > 0 {
                out += &format!("  … {more} more\n");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_shows_sessions_paths_and_held_bytes() {
        let v = serde_json::json!({
            "role": "server",
            "sessions": [{
                "client": "laptop",
                "scheduler": "dems-f",
                "streams": 3,
                "held_bytes": {"send": 5 * 1024 * 1024, "receive": 300},
                "paths": [{"name": "wifi", "up": true, "bytes_sent": 1234, "bytes_received": 99,
                           "payload_resent": 0, "srtt_us": 51_500, "cwnd": 40, "failures": 1}],
            }],
        });
        let t = render_table(&v);
        assert!(
            t.starts_with(
                "server session of laptop: scheduler dems-f, 3 streams, holding 5120 KiB to send, 300 B unread\n"
            ),
            "{t}"
        );
        let row = t.lines().nth(2).unwrap();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols, ["wifi", "yes", "1234", "99", "0", "51.5", "40", "1"]);
        // Tiers other than primary, paths waiting for their interface and entries that
        // match none are named.
        let v = serde_json::json!({
            "role": "client", "scheduler": "minrtt", "streams": 0,
            "paths": [
                {"name": "lte", "up": true, "state": "up", "tier": 2, "tier_name": "backup", "bytes_sent": 1},
                {"name": "wifi", "up": false, "state": "waiting for device", "device": "wlan0", "tier": 0,
                 "tier_name": "primary"},
            ],
            "waiting": [{"name": "auto", "matches": "auto", "state": "no interface matches"}],
        });
        let t = render_table(&v);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[2].starts_with("  lte (backup) "), "{t}");
        assert_eq!(lines[4], "  wifi (wlan0): waiting for device", "{t}");
        assert_eq!(lines[5], "  auto (auto): no interface matches", "{t}");
        // An older peer's JSON without held_bytes still renders.
        let old = serde_json::json!({"role": "client", "scheduler": "minrtt", "streams": 0, "paths": []});
        assert_eq!(
            render_table(&old).lines().next(),
            Some("client session: scheduler minrtt, 0 streams")
        );
        assert_eq!(kib(20 << 20), "20.0 MiB");
        assert!(!t.contains("stream "), "no stream table without stream_list: {t}");
        // The modelled energy, and a path in energy standby.
        let v = serde_json::json!({
            "role": "client", "scheduler": "minrtt", "streams": 0,
            "paths": [
                {"name": "wifi", "up": true, "tier": 0, "tier_name": "primary", "kind": "wifi", "energy_j": 7.0},
                {"name": "lte", "up": true, "tier": 3, "tier_name": "energy standby", "kind": "cellular",
                 "energy_j": 0.0, "energy_standby": true},
            ],
            "energy": {"mode": "aware", "profile": "galaxy-s3-lte", "joules": 7.0, "j_per_mb": 0.42},
        });
        let t = render_table(&v);
        assert!(t.contains("  lte (energy standby) "), "{t}");
        assert!(
            t.contains("  energy (aware mode, galaxy-s3-lte): 7.0 J, 0.42 J/MB; wifi (wifi) 7.0 J; lte (cellular) 0.0 J, energy standby\n"),
            "{t}"
        );
    }

    #[test]
    fn table_shows_streams_classes_and_class_latency() {
        let long = format!("{}.example.com:443", "a".repeat(80));
        let mut list: Vec<serde_json::Value> = vec![
            serde_json::json!({"id": 1, "target": "example.com:443", "class": "interactive", "pinned": true}),
            serde_json::json!({"id": 3, "target": "10.0.0.2:8080", "class": "bulk", "pinned": false}),
            serde_json::json!({"id": 5, "target": long, "class": "realtime", "pinned": false}),
            serde_json::json!({"id": 7, "target": null, "class": "bulk", "pinned": false}),
        ];
        let v = serde_json::json!({
            "role": "client", "scheduler": "minrtt", "streams": 4, "paths": [],
            "stream_list": list.clone(),
            "class_latency": [
                {"class": "interactive", "count": 120, "mean_ms": 5.24, "p50_ms": 4.0, "p99_ms": 64.0},
                {"class": "bulk", "count": 9000, "mean_ms": 210.0, "p50_ms": 256.0, "p99_ms": null},
            ],
        });
        let t = render_table(&v);
        let rows: Vec<Vec<&str>> = t.lines().map(|l| l.split_whitespace().collect()).collect();
        assert!(t.lines().all(|l| l.chars().count() <= 100), "too wide:\n{t}");
        assert_eq!(
            rows[2],
            ["stream", "target", "class", "rule", "paths", "sched", "up/down"],
            "{t}"
        );
        assert_eq!(rows[3][..5], ["1", "example.com:443", "interactive*", "-", "all"]);
        assert_eq!(rows[4][..3], ["3", "10.0.0.2:8080", "bulk"]);
        assert_eq!(rows[5][2], "realtime");
        assert!(
            rows[5][1].starts_with('…') && rows[5][1].ends_with("a.example.com:443"),
            "{t}"
        );
        assert_eq!(rows[6][..3], ["7", "-", "bulk"], "target unknown");
        assert_eq!(clip("a\x1b[2Jb\n", 10), "a?[2Jb?");
        assert_eq!(t.lines().nth(7), Some("  * pinned by [[classes]]"));
        assert_eq!(rows[8][..5], ["class", "count", "p50", "p99", "mean"]);
        assert_eq!(rows[9], ["interactive", "120", "≤4", "≤64", "5.2"]);
        assert_eq!(rows[10], ["bulk", "9000", "≤256", ">16384", "210.0"]);

        // Many streams: the table lists the first ones and says how many it left out.
        for id in 8..40 {
            list.push(serde_json::json!({"id": id, "target": "h:1", "class": "bulk", "pinned": false}));
        }
        let v = serde_json::json!({"role": "server", "sessions": [{"scheduler": "minrtt", "streams": 36,
            "paths": [], "stream_list": list}]});
        let t = render_table(&v);
        assert_eq!(
            t.lines().filter(|l| l.contains(" bulk ")).count(),
            TABLE_STREAMS - 2,
            "{t}"
        );
        assert!(t.contains("  … 16 more (--json lists all)\n"), "{t}");
        assert!(!t.contains("latency"), "no latency table without samples: {t}");
    }

    #[test]
    fn watch_view_shows_rates_sparklines_and_the_path_split() {
        let v = serde_json::json!({
            "role": "client",
            "sessions": [{
                "client": null, "session": "0a0b0c0d", "scheduler": "minrtt", "streams": 1, "ahead_bytes": 2048,
                "paths": [
                    {"id": 0, "name": "wifi", "state": "up", "rx_rate": 1_250_000, "tx_rate": 0, "srtt_ms": 21.5,
                     "queue_ms": 3.25, "in_flight_bytes": 65536,
                     "history": {"tx": [0, 0, 0], "rx": [0, 625_000, 1_250_000]}},
                    {"id": 1, "name": "lte", "state": "down", "rx_rate": 0, "tx_rate": 0, "srtt_ms": 0.0,
                     "queue_ms": null, "in_flight_bytes": 0, "history": {"tx": [], "rx": []}},
                ],
                "stream_list": [{"id": 3, "target": "example.com:443", "class": "bulk", "pinned": true,
                                 "paths": [300, 100]}],
            }],
        });
        let t = render_live(&v);
        let rows: Vec<Vec<&str>> = t.lines().map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(
            t.lines().next(),
            Some("client session 0a0b0c0d: scheduler minrtt, 1 streams, 2 KiB ahead of the paths"),
            "{t}"
        );
        assert_eq!(
            rows[2][..8],
            ["0", "wifi", "up", "10.00", "0.00", "21.5", "3.2", "64"],
            "{t}"
        );
        assert!(t.lines().nth(2).unwrap().ends_with("▁▅█"), "{t}");
        assert_eq!(rows[3][..7], ["1", "lte", "down", "0.00", "0.00", "0.0", "-"], "{t}");
        assert_eq!(
            rows[5],
            ["3", "example.com:443", "bulk*", "#0", "75%", "#1", "25%"],
            "{t}"
        );
        assert!(t.lines().all(|l| l.chars().count() <= 120), "too wide:\n{t}");
        // Right-aligned ids end where their headers end.
        let end = |l: &str, w: &str| l.find(w).map(|i| i + w.len());
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(end(lines[1], "#"), end(lines[2], "0"), "{t}");
        assert_eq!(end(lines[4], "stream"), end(lines[5], "3"), "{t}");
        assert_eq!(
            render_live(&serde_json::json!({"role": "server", "sessions": []})),
            "server: no session\n"
        );
        assert_eq!(sparkline(&[0.0, 0.0], 4), "  ▁▁");
    }
}
