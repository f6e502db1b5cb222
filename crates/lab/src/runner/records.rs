//! The records a repetition appends: its measurement, or why it could not measure.

use super::mpflex::PathsNotUp;
use super::{mpflex, Bench, Measured, Point, System};
use crate::record::{kernel_paces, Record};
use crate::workload::Fields;

/// Whether `e`, which ended a repetition, is the repetition's failure rather than the
/// run's: mpflex's paths never came up (a link dark from the start for longer than the
/// kernel retransmits its SYN). Such a repetition is recorded as failed and the run goes
/// on, as a real client would go on; anything else (a namespace, a binary, a results file
/// gone wrong) stops the run.
pub(super) fn failed_repetition(e: &anyhow::Error) -> bool {
    e.downcast_ref::<PathsNotUp>().is_some()
}

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
