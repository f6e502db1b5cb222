//! The mpflex lab: emulated multi-link networks in network namespaces, real systems over
//! them, and reports.

pub mod emulator;
pub mod link;
pub mod netns;
pub mod profile;
pub mod report;
pub mod runner;
pub mod trace;
pub mod workload;
