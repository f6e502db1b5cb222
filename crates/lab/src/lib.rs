//! The mpflex lab: emulated multi-link networks in network namespaces, real systems over
//! them, and reports.
//!
//! Layers, each using only those before it: `units`, `record`, `summary` and `workload`
//! (what a measurement is, what it writes, how it is summarised); `runner` (measures and
//! writes records); `report` (reads them). The runner and the report never import each
//! other: what both need is in the layers below. `reproduce` sits above both: it plans
//! runs of the seeds' experiments and judges their records; `floors` does the same for
//! the energy-aware mode's floors.

/// The commit `mpflex-lab` was built from (`git describe --always --dirty`), or
/// `unknown` (see `build.rs`).
pub const COMMIT: &str = env!("MPFLEX_LAB_COMMIT");

pub mod arrivals;
pub mod emulator;
pub mod energy;
pub mod floors;
pub mod link;
pub mod netns;
pub mod profile;
pub mod record;
pub mod report;
pub mod reproduce;
pub mod runner;
pub mod summary;
pub mod trace;
pub mod units;
pub mod workload;
