//! What records say of the links: the profile's figures, and what the bottleneck queues
//! held during a run.

use crate::link::Rate;
use crate::profile::Profile;
use crate::workload::Fields;

/// The profile's figures records carry.
pub(super) struct Links {
    /// Σ of the path rates down and up, bytes/s (unlimited paths count nothing).
    pub down: f64,
    pub up: f64,
    /// The smallest round-trip delay.
    pub min_rtt_ms: f64,
    /// Whether a path replays a trace.
    pub traced: bool,
}

impl Links {
    pub fn of(profile: &Profile) -> Links {
        let paths = &profile.paths;
        Links {
            down: paths.iter().filter_map(|p| p.down.bytes_per_sec()).sum(),
            up: paths.iter().filter_map(|p| p.up.bytes_per_sec()).sum(),
            min_rtt_ms: paths
                .iter()
                .map(|p| (p.down.delay + p.up.delay).as_secs_f64() * 1000.0)
                .fold(f64::INFINITY, f64::min),
            traced: paths
                .iter()
                .any(|p| matches!(p.down.rate, Rate::Trace(_)) || matches!(p.up.rate, Rate::Trace(_))),
        }
    }
}

/// What the bottleneck queues held during a run, per path in profile order: each
/// direction's packet sojourn (queueing plus serialisation) p50/p99 and the emulator's
/// own lateness p99, in ms, the packets under 200 bytes, the IP bytes delivered and the
/// packets the queue dropped. A queue-control claim is
/// checked here, at the queue itself; lateness shows when the machine rather than the
/// model added delay; small packets are acknowledgements and slivers that cost the
/// link's rate.
pub(super) fn link_fields(stats: &[[crate::link::LinkStats; 2]]) -> Fields {
    let mut f = Fields::new();
    for (dir, i) in [("down", 0), ("up", 1)] {
        let q = |pick: &dyn Fn(&crate::link::LinkStats) -> Option<f64>| -> serde_json::Value {
            stats.iter().map(|p| pick(&p[i])).collect::<Vec<_>>().into()
        };
        f.insert(format!("link_{dir}_sojourn_p50_ms"), q(&|s| s.sojourn.quantile_ms(0.5)));
        f.insert(
            format!("link_{dir}_sojourn_p99_ms"),
            q(&|s| s.sojourn.quantile_ms(0.99)),
        );
        f.insert(format!("link_{dir}_late_p99_ms"), q(&|s| s.late.quantile_ms(0.99)));
        f.insert(format!("link_{dir}_small_packets"), q(&|s| Some(s.small as f64)));
        // What the link carried (IP bytes) and what its queue dropped: whether a
        // transport filled a link, and whether it overran the link's buffer doing so.
        f.insert(
            format!("link_{dir}_delivered_bytes"),
            q(&|s| Some(s.delivered_bytes as f64)),
        );
        f.insert(
            format!("link_{dir}_dropped_queue"),
            q(&|s| Some(s.dropped_queue as f64)),
        );
    }
    f
}
