//! The records a repetition appends: its measurement, or why it could not measure.

use super::mpflex::PathsNotUp;
use super::{mpflex, Bench, Measured, Point, System};
use crate::record::{kernel_paces, Record};
use crate::workload::Fields;

/// Whether `e`, which ended a repetition, is the repetition's failure rather than the
/// run's: mpflex's paths never came up (a link dark from the start for longer than the
/// kernel retransmits its SYN), or the emulator stayed late ([`EmulatorLate`]). Such a
/// repetition is recorded as failed and the run goes on, as a real client would go on;
/// anything else (a namespace, a binary, a results file gone wrong) stops the run.
pub(super) fn failed_repetition(e: &anyhow::Error) -> bool {
    e.downcast_ref::<PathsNotUp>().is_some() || e.downcast_ref::<EmulatorLate>().is_some()
}

/// The most an emulated link may release a packet late, at its 99th percentile, for a
/// repetition to count: a tenth of the shortest one-way delay of the seeds' profiles
/// (seed-default's WiFi, 25 ms). The emulator runs in user space, so a machine too busy
/// to run it on time adds delay that no profile asked for; on an idle machine its p99
/// lateness is 1–2 ms (docs/lab.md, "Calibration").
pub(super) const LATE_LIMIT_MS: f64 = 5.0;

/// How many times a repetition is measured when the emulator ran late, before it is
/// recorded as failed.
pub(super) const LATE_ATTEMPTS: usize = 3;

/// The emulator was late: the largest p99 lateness over every link and direction of a
/// measurement's fields, when it exceeds [`LATE_LIMIT_MS`], with the field and the path.
pub(super) fn emulator_late(extra: &Fields) -> Option<(f64, String)> {
    let mut worst: Option<(f64, String)> = None;
    for (k, v) in extra {
        let Some(dir) = k.strip_prefix("link_").and_then(|k| k.strip_suffix("_late_p99_ms")) else {
            continue;
        };
        let per_path: Vec<Option<f64>> = match v {
            serde_json::Value::Array(a) => a.iter().map(serde_json::Value::as_f64).collect(),
            v => vec![v.as_f64()],
        };
        for (i, late) in per_path.into_iter().enumerate() {
            if let Some(late) = late.filter(|&l| l > LATE_LIMIT_MS) {
                if worst.as_ref().is_none_or(|(w, _)| late > *w) {
                    worst = Some((late, format!("path {i} {dir}")));
                }
            }
        }
    }
    worst
}

/// Why a repetition whose emulator stayed late is recorded as failed.
#[derive(Debug)]
pub(super) struct EmulatorLate {
    pub late_ms: f64,
    pub link: String,
    pub attempts: usize,
}

impl std::fmt::Display for EmulatorLate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the emulator ran late in {} attempts (last: {} released 1 % of its packets {:.0} ms or more late,              limit {LATE_LIMIT_MS} ms): the machine was too busy to emulate the profile",
            self.attempts, self.link, self.late_ms
        )
    }
}

impl std::error::Error for EmulatorLate {}

/// A failed repetition's record from what the repetition would have recorded (`base`):
/// no completion, no goodput, nothing measured; the error says why.
pub(super) fn as_failed(mut base: Record, e: &anyhow::Error) -> Record {
    base.completion_ms = None;
    base.goodput_mbit = None;
    base.p = None;
    base.bytes_per_path = None;
    base.dup_bytes = None;
    base.extra = Fields::new();
    base.error = Some(format!("{e:#}"));
    base
}

impl Bench<'_> {
    /// The record of one measurement.
    pub(super) fn record(&self, point: &Point, sys: &System, system: String, rep: usize, m: Measured) -> Record {
        let (spec, cfg, links) = (self.spec(), self.cfg, &self.links);
        let Measured {
            ms,
            share,
            mpflex,
            mut extra,
        } = m;
        let mbit = |bytes_per_sec: f64| bytes_per_sec * 8.0 / 1e6;
        let capacity = spec.has_capacity().then(|| {
            mbit(if spec.upload(point.variant) {
                links.up
            } else {
                links.down
            })
        });
        let goodput = match extra.remove("goodput_mbit").and_then(|v| v.as_f64()) {
            Some(g) => g,
            None if spec.chunks() => point.size as f64 * 8.0 / (ms / 1000.0) / 1e6,
            None => {
                let bytes = extra.get("bytes").or_else(|| extra.get("received_bytes"));
                bytes.and_then(|v| v.as_f64()).unwrap_or(0.0) * 8.0 / (ms / 1000.0) / 1e6
            }
        };
        extra.remove("completion_ms");
        let size = if spec.chunks() {
            point.size
        } else {
            extra.get("bytes").and_then(|v| v.as_u64()).unwrap_or(0)
        };
        let on_mpflex = match sys {
            System::Mpflex { build, sched, .. } => Some((self.builds.get(build).cloned(), mpflex::pacing(sched))),
            _ => None,
        };
        Record {
            system,
            profile: cfg.profile.name.clone(),
            workload: spec.name().into(),
            variant: point.variant.map(String::from),
            mode: point.mode.into(),
            cc: point.cc.into(),
            size,
            rep,
            completion_ms: Some(ms),
            goodput_mbit: Some(goodput),
            p: share,
            dup_bytes: mpflex.as_ref().map(|b| b.1),
            bytes_per_path: mpflex.map(|b| b.0),
            idle_restart: cfg.idle_restart,
            mpflex_per_run: on_mpflex.is_some().then_some(!cfg.keep_mpflex),
            build: on_mpflex.as_ref().and_then(|o| o.0.clone()),
            pacing: Some(on_mpflex.map_or(kernel_paces(point.cc), |o| o.1)),
            commit: Some(crate::COMMIT.into()),
            bound_ms: spec
                .chunks()
                .then(|| size as f64 / links.down * 1000.0 + links.min_rtt_ms),
            ideal_mbit: spec.ideal_mbit(mbit(links.down)),
            capacity_mbit: capacity,
            error: None,
            extra,
        }
    }

    /// The record of a repetition that failed with `e` ([`failed_repetition`]).
    pub(super) fn failed(&self, point: &Point, sys: &System, system: String, rep: usize, e: &anyhow::Error) -> Record {
        let nothing = Measured {
            ms: f64::NAN,
            share: None,
            mpflex: None,
            extra: Fields::new(),
        };
        as_failed(self.record(point, sys, system, rep, nothing), e)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn record() -> Record {
        serde_json::from_str(
            r#"{"system":"mpflex:minrtt","profile":"umts","workload":"bulk","variant":"up","mode":"fresh","cc":"cubic","size":0,"rep":1,"completion_ms":NaN,"goodput_mbit":NaN,"bytes_per_path":[0,0],"dup_bytes":0,"idle_restart":true,"mpflex_per_run":true,"pacing":true,"commit":"abc","capacity_mbit":4.0}"#.replace("NaN", "null").as_str(),
        )
        .unwrap()
    }

    #[test]
    fn a_measurement_whose_emulator_ran_late_is_found_by_its_worst_link() {
        let mut f = Fields::new();
        f.insert("link_down_late_p99_ms".into(), serde_json::json!([1.0, 2.0]));
        f.insert("link_up_late_p99_ms".into(), serde_json::json!([null, 5.0]));
        f.insert("link_down_sojourn_p99_ms".into(), serde_json::json!([90.0, 400.0]));
        assert!(emulator_late(&f).is_none(), "at the limit counts");
        f.insert("link_up_late_p99_ms".into(), serde_json::json!([7.0, 12.0]));
        f.insert("link_down_late_p99_ms".into(), serde_json::json!([9.0, null]));
        let (late, link) = emulator_late(&f).expect("late");
        assert_eq!((late, link.as_str()), (12.0, "path 1 up"));
    }

    #[test]
    fn a_repetition_whose_emulator_stayed_late_fails_alone_and_says_why() {
        let e = anyhow::Error::new(EmulatorLate {
            late_ms: 41.0,
            link: "path 0 down".into(),
            attempts: LATE_ATTEMPTS,
        });
        assert!(failed_repetition(&e));
        let r = as_failed(record(), &e);
        let why = r.error.expect("an error");
        assert!(
            why.contains("path 0 down") && why.contains("41 ms") && why.contains("too busy"),
            "{why}"
        );
    }

    #[test]
    fn paths_that_never_came_up_fail_the_repetition_not_the_run() {
        let e = anyhow::Error::new(PathsNotUp {
            within: Duration::from_secs(20),
            dir: "/tmp/x".into(),
        });
        assert!(failed_repetition(&e));
        // Whatever context a caller adds, it is still the repetition's failure.
        assert!(failed_repetition(&e.context("mpflex:minrtt")));
        assert!(!failed_repetition(&anyhow::anyhow!("cannot open the results file")));
    }

    #[test]
    fn a_failed_repetition_is_recorded_with_its_error_and_no_measure() {
        let e = anyhow::Error::new(PathsNotUp {
            within: Duration::from_secs(20),
            dir: "/tmp/x".into(),
        });
        let r = as_failed(record(), &e);
        assert_eq!(
            r.error.as_deref(),
            Some("mpflex paths did not come up within 20s; see /tmp/x")
        );
        assert_eq!(
            (r.completion_ms, r.goodput_mbit, r.bytes_per_path.as_ref()),
            (None, None, None)
        );
        // What identifies the repetition stays, so the report counts it where it belongs.
        assert_eq!(
            (r.system.as_str(), r.profile.as_str(), r.rep),
            ("mpflex:minrtt", "umts", 1)
        );
        assert_eq!((r.variant.as_deref(), r.commit.as_deref()), (Some("up"), Some("abc")));
        // The line written, read back.
        let line = serde_json::to_string(&r).unwrap();
        assert!(line.contains(r#""error":"mpflex paths did not come up"#), "{line}");
        let back: Record = serde_json::from_str(&line).unwrap();
        assert_eq!(back.error, r.error);
        assert_eq!(back.completion_ms, None);
    }
}
