//! One measurement as a JSON line: what `run` appends and `report` reads back.
//!
//! Rule: every field added later has a serde default, and fields the report does not know
//! are kept (`extra`), so that every results file ever written still parses. The reason:
//! reports compare new runs with old ones side by side.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a workload client measured, as JSON fields merged into the run's record.
pub type Fields = serde_json::Map<String, Value>;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    pub system: String,
    pub profile: String,
    /// The workload's name. Results written before there were other workloads have none:
    /// `chunk`.
    #[serde(default = "chunk")]
    pub workload: String,
    /// Sub-kind of the workload (`bulk` down/up, `shortflows` seq/par, `video` buffer/rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    pub mode: String,
    pub cc: String,
    #[serde(default)]
    pub size: u64,
    #[serde(default)]
    pub rep: usize,
    #[serde(default)]
    pub completion_ms: Option<f64>,
    #[serde(default)]
    pub goodput_mbit: Option<f64>,
    /// Oracle: the first path's share used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p: Option<f64>,
    /// mpflex: bytes the client received per path during this measurement (in `warm`
    /// mode including the warm-up transfer); sent, for workloads that upload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_path: Option<Vec<u64>>,
    /// mpflex: payload bytes the client received more than once (redundant copies), same
    /// span as `bytes_per_path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dup_bytes: Option<u64>,
    /// `net.ipv4.tcp_slow_start_after_idle` in the namespaces (the kernel default is on).
    #[serde(default = "yes")]
    pub idle_restart: bool,
    /// mpflex: whether this measurement ran on a client and server started for it (paths
    /// with no TCP history), or on a pair kept up for the whole block (`--keep-mpflex`;
    /// records without the field were made that way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpflex_per_run: Option<bool>,
    /// mpflex: the binary that ran (see [`Build`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<Build>,
    /// Whether the system's sender paced: mpflex, `[tuning] pacing` as the system ran it
    /// (its `+pacing=` setting, else mpflex's default); the kernel's TCP and MPTCP (and the
    /// oracle's connections), whether the congestion control asks the kernel to pace, as
    /// BBR does and CUBIC does not (no `fq` qdisc in the namespaces). Older records
    /// have it for mpflex only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing: Option<bool>,
    /// The commit `mpflex-lab` was built from (`git describe --always --dirty`, else the
    /// build's `MPFLEX_BUILD_COMMIT`, else `unknown`). Older records have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Chunk workloads: fluid lower bound for this size: S / Σ down rates + smallest RTT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_ms: Option<f64>,
    /// Σ of the path rates in the workload's direction, where the workload has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_mbit: Option<f64>,
    /// `video`: the highest ladder rate the aggregate capacity carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ideal_mbit: Option<f64>,
    /// Why the repetition measured nothing (mpflex's paths never came up): the report
    /// counts and shows it as failed, and takes no measure from it. Older records have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the workload client measured besides (see `workload`), and anything unknown.
    #[serde(flatten)]
    pub extra: Fields,
}

/// Which mpflex binary a record's system ran: the default one (`--mpflex`) or a named
/// build (`--builds NAME=PATH`, systems `mpflex@NAME:<scheduler>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Build {
    /// The `--builds` name; none for the default binary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub path: String,
    /// What `<path> --version` printed, if it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The binary's size in bytes and an FNV-1a hash of its contents (`<bytes>-<hex>`):
    /// tells apart two builds of one version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// Whether the kernel paces a TCP socket with congestion control `cc` in the lab: only
/// when the algorithm asks for it (BBR); CUBIC is paced only under the `fq` qdisc, which
/// the namespaces do not use.
pub fn kernel_paces(cc: &str) -> bool {
    cc == "bbr"
}

fn yes() -> bool {
    true
}

/// The only workload there was before the field.
fn chunk() -> String {
    "chunk".into()
}

impl Record {
    /// A finite number among the workload's fields (`null`, as NaN is written, is none).
    pub fn field(&self, key: &str) -> Option<f64> {
        self.extra.get(key).and_then(Value::as_f64).filter(|v| v.is_finite())
    }

    /// Whether the sender paced ([`Record::pacing`]); for a kernel baseline written before
    /// the field covered it, what its congestion control implies.
    pub fn paced(&self) -> Option<bool> {
        self.pacing
            .or_else(|| (!self.system.starts_with("mpflex")).then(|| kernel_paces(&self.cc)))
    }

    /// The mode, with the idle-restart setting when it is not the kernel default.
    pub fn mode_label(&self) -> String {
        if self.idle_restart {
            self.mode.clone()
        } else {
            format!("{}, no idle restart", self.mode)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_round_trip_and_old_records_have_none() {
        let line = r#"{"system":"mpflex@old:minrtt","profile":"p","workload":"chunk","mode":"fresh","cc":"cubic","size":1,"rep":2,"completion_ms":3.5,"goodput_mbit":1.0,"idle_restart":true,"mpflex_per_run":true,"build":{"name":"old","path":"/x/mpflex","version":"mpflex 0.1.0","id":"10-00ff"},"pacing":false,"bound_ms":1.0,"warmup_ms":7.0}"#;
        let r: Record = serde_json::from_str(line).unwrap();
        assert_eq!(r.build.as_ref().and_then(|b| b.name.as_deref()), Some("old"));
        assert_eq!((r.pacing, r.rep, r.field("warmup_ms")), (Some(false), 2, Some(7.0)));
        assert_eq!(serde_json::to_string(&r).unwrap(), line);
        let old: Record = serde_json::from_str(
            r#"{"system":"mptcp","profile":"p","mode":"warm","cc":"bbr","size":1,"rep":0,"completion_ms":1.0}"#,
        )
        .unwrap();
        assert_eq!((old.workload.as_str(), old.idle_restart), ("chunk", true));
        assert!(old.build.is_none() && old.pacing.is_none() && old.variant.is_none());
    }
}
