//! Workloads: what one measurement does over the emulated paths, and what it reports.
//!
//! Rule: each workload lives in its own file, with its client (run in the client
//! namespace as `mpflex-lab chunk-client` / `workload-client`), the fields it measures,
//! and everything the runner and the report need to know of it, as a [`Spec`]. Code
//! outside this module asks a [`Workload`]'s spec and never matches a workload's name:
//! names are parsed in one place, [`Workload::parse`]. The reason: a workload's
//! knowledge is in one file, and adding one is a new file and a line in `workloads!`.
//!
//! The server and its request protocol, which all of them share, are in `net`.

pub mod bulk;
pub mod chunk;
pub mod download_ping;
pub mod handover;
mod net;
pub mod outages;
pub mod quic;
pub mod shortflows;
pub mod udp_bulk;
pub mod upload_ping;
pub mod video;
pub mod voip;
pub mod web_under_upload;

use std::net::SocketAddr;

use anyhow::{bail, Result};

pub use net::*;

use crate::summary::Summary;

/// Declares the workloads: the enum and its spec per variant, in report order.
macro_rules! workloads {
    ($($variant:ident => $spec:path,)*) => {
        /// A workload `run` knows; the order is the report's.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Workload {
            $($variant,)*
        }

        impl Workload {
            /// Every workload, in order.
            pub const ALL: &'static [Workload] = &[$(Workload::$variant,)*];

            /// What there is to know about it.
            pub fn spec(self) -> &'static dyn Spec {
                match self {
                    $(Workload::$variant => &$spec,)*
                }
            }
        }
    };
}

workloads! {
    Chunk => chunk::Chunk,
    Bulk => bulk::Bulk,
    Shortflows => shortflows::Shortflows,
    Video => video::Video,
    UploadPing => upload_ping::UploadPing,
    DownloadPing => download_ping::DownloadPing,
    WebUnderUpload => web_under_upload::WebUnderUpload,
    Handover => handover::Handover,
    Outages => outages::Outages,
    Voip => voip::Voip,
    Quic => quic::Quic,
    UdpBulk => udp_bulk::UdpBulk,
}

impl Workload {
    /// The workload of that name.
    pub fn parse(name: &str) -> Option<Workload> {
        Workload::ALL.iter().copied().find(|w| w.spec().name() == name)
    }

    /// The names, for messages: "chunk, bulk, …".
    pub fn names() -> String {
        Workload::ALL
            .iter()
            .map(|w| w.spec().name())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The variants to run: those asked for (comma-separated), else the defaults.
    pub fn variants(self, asked: Option<&str>) -> Result<Vec<String>> {
        let spec = self.spec();
        let (allowed, default) = spec.variants();
        let variants: Vec<String> = match asked {
            Some(v) => v.split(',').map(|x| x.trim().to_string()).collect(),
            None => default.iter().map(|s| s.to_string()).collect(),
        };
        if let Some(v) = variants.iter().find(|v| !allowed.contains(&v.as_str())) {
            bail!("--variants: {v:?} is not one of {allowed:?} for {}", spec.name());
        }
        Ok(variants)
    }
}

/// What the runner does to a path during a run: at a third of it the path fails, at two
/// thirds it comes back (a workload's variant chooses how).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathEvent {
    /// The link silently stops carrying anything, both directions (the emulator drops
    /// every packet); the interfaces stay up, so only the transport can tell.
    Blackhole,
    /// The client's interface of the path loses carrier (`ip link set down` in the client
    /// namespace): visible to netlink, and its route goes with it.
    Carrier,
    /// Walking away from an access point: over the 5 s before the outage the link's rate
    /// falls to 7 % of its own, its loss rises to 10 % and its one-way delay grows by
    /// 50 ms, then it goes dark as in `Blackhole`; it comes back as it was.
    Degrade,
    /// A link joins mid-run (WiFi associating, a tether plugged in): the path's client
    /// interface has no address until a third of the run, then gets it. The record's
    /// `appear_ms` is how long after that the path carried data.
    Appear,
}

/// One measurement of a workload other than `chunk`, as `workload-client` runs it.
#[derive(Debug, Clone)]
pub struct ClientRun {
    pub server: SocketAddr,
    pub via: Via,
    pub variant: Option<String>,
    /// `warm` mode: connections established (and idle) before the clock starts.
    pub warm: bool,
    pub secs: f64,
    /// A stream's rate, kbit/s.
    pub rate_kbit: u64,
}

/// What the runner and the report know of a workload. The defaults suit a workload with
/// no variants, 20 s runs, no warm mode, no capacity and no path events.
pub trait Spec: Sync {
    /// The name on the command line and in records.
    fn name(&self) -> &'static str;

    /// The variants it has, and those run unless `--variants` says otherwise.
    fn variants(&self) -> (&'static [&'static str], &'static [&'static str]) {
        (&[], &[])
    }

    /// Seconds per run unless `--secs` says otherwise.
    fn default_secs(&self) -> f64 {
        20.0
    }

    /// Whether `warm` (connections established and idle first) means anything; if not,
    /// it runs `fresh` only.
    fn warm_mode(&self) -> bool {
        false
    }

    /// Whether a measurement downloads one chunk of each `--sizes` size through
    /// `chunk-client`: the oracle runs as a baseline, records carry the chunk's size and
    /// fluid bound, and goodput is the chunk's.
    fn chunks(&self) -> bool {
        false
    }

    /// Whether it sends UDP datagrams: kernel MPTCP and the oracle cannot carry it.
    fn datagrams(&self) -> bool {
        false
    }

    /// Whether the runner starts the HTTP/3 server (`quic`) in the server namespace.
    fn h3_server(&self) -> bool {
        false
    }

    /// A server the runner keeps running in the server namespace besides the chunk
    /// servers (its command line).
    fn server_command(&self) -> Option<&'static [&'static str]> {
        None
    }

    /// Whether mpflex carries it from a LAN host behind the client through its `TPROXY`
    /// ingresses (the router case; the runner's `lan`), instead of SOCKS5.
    fn transparent(&self) -> bool {
        false
    }

    /// Whether the client is offered the capacity (Σ path rates in the payload's
    /// direction) as its rate (`ClientRun::rate_kbit`).
    fn offers_capacity(&self) -> bool {
        false
    }

    /// Whether this variant's payload goes up (client to server).
    fn upload(&self, _variant: Option<&str>) -> bool {
        false
    }

    /// Whether records carry the capacity (Σ path rates in the payload's direction).
    fn has_capacity(&self) -> bool {
        false
    }

    /// The best result the capacity allows, recorded as `ideal_mbit`.
    fn ideal_mbit(&self, _capacity_mbit: f64) -> Option<f64> {
        None
    }

    /// What the runner does to a path during a run of `variant` (see [`PathEvent`]).
    fn path_event(&self, _variant: Option<&str>) -> Option<PathEvent> {
        None
    }

    /// The paths the runner takes dark and back during a run of `variant`, at set times
    /// after the client starts (the emulator drops everything, as [`PathEvent::Blackhole`]).
    fn outages(&self, _variant: Option<&str>) -> Vec<outages::Outage> {
        Vec::new()
    }

    /// Whether the runner acts on the links during a run of `variant`.
    fn acts_on_links(&self, variant: Option<&str>) -> bool {
        self.path_event(variant).is_some() || !self.outages(variant).is_empty()
    }

    /// Runs one measurement (the `workload-client` subcommand). Besides its own, fields
    /// the runner reads: `completion_ms` (else the run's length), `goodput_mbit` (else
    /// from `bytes`, or `received_bytes`, over the completion time) and `bytes` (the
    /// record's size).
    fn client(&self, run: &ClientRun) -> Result<Fields>;

    /// What the report shows.
    fn summary(&self) -> Summary;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_to_their_workload() {
        for &w in Workload::ALL {
            assert_eq!(Workload::parse(w.spec().name()), Some(w));
        }
        assert_eq!(Workload::parse("upload-ping"), Some(Workload::UploadPing));
        assert_eq!(Workload::parse("teleport"), None);
        assert_eq!(
            Workload::names(),
            "chunk, bulk, shortflows, video, upload-ping, download-ping, web-under-upload, handover, outages, voip, quic, udp-bulk"
        );
    }

    #[test]
    fn variants_default_and_checked() {
        assert_eq!(Workload::Bulk.variants(None).unwrap(), ["down", "up"]);
        assert_eq!(Workload::Video.variants(None).unwrap(), ["buffer"]);
        assert_eq!(Workload::Shortflows.variants(Some("par")).unwrap(), ["par"]);
        assert!(Workload::Chunk.variants(None).unwrap().is_empty());
        assert_eq!(Workload::Handover.variants(None).unwrap(), ["blackhole"]);
        let h = Workload::Handover.spec();
        assert_eq!(h.path_event(Some("carrier")), Some(PathEvent::Carrier));
        assert_eq!(h.path_event(Some("degrade")), Some(PathEvent::Degrade));
        assert_eq!(h.path_event(None), Some(PathEvent::Blackhole));
        assert_eq!(Workload::Bulk.spec().path_event(Some("down")), None);
        assert_eq!(h.path_event(Some("appear")), Some(PathEvent::Appear));
        assert!(Workload::Handover.variants(Some("vanish")).is_err());
        let e = Workload::Bulk.variants(Some("down,sideways")).unwrap_err().to_string();
        assert!(
            e.contains("\"sideways\" is not one of [\"down\", \"up\"] for bulk"),
            "{e}"
        );
    }

    /// Each operation against a real server on loopback.
    #[test]
    fn operations_on_loopback() {
        use std::time::Duration;

        // The listener is bound here and handed over (a port released and bound again
        // could be taken in between by another test's socket).
        let l = net::bind("127.0.0.1:0".parse().unwrap(), false, None).unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || net::serve_on(l, false));
        let via = Via::Tcp { bind: None };
        let f = bulk::down(addr, &via, 0.5).unwrap();
        assert!(f["bytes"].as_u64().unwrap() > 1 << 20, "{f:?}");
        let f = bulk::up(addr, &via, 0.6).unwrap();
        assert!(f["bytes"].as_u64().unwrap() > 1 << 20, "{f:?}");
        assert!(f["goodput_mbit"].as_f64().unwrap() > 10.0, "{f:?}");
        let f = shortflows::run(addr, &via, true, false).unwrap();
        assert_eq!(f["objects"], 10);
        assert_eq!(f["object_ms"].as_array().unwrap().len(), 10);
        let f = handover::run(addr, &via, 0.5, 8000).unwrap();
        assert_eq!(f["lost_bytes"], 0, "{f:?}");
        assert_eq!(f["received_bytes"], 500_000, "{f:?}");
        assert_eq!(f["out_of_order"], 0);
        let f = video::run(addr, &via, 10.0, video::Abr::Buffer).unwrap();
        assert_eq!(f["segments"], 2);
        assert_eq!(f["segment_ms"].as_array().unwrap().len(), 2);
        assert_eq!(f["stalls"], 0, "{f:?}");
        for dir in [upload_ping::Direction::Up, upload_ping::Direction::Down] {
            let f = upload_ping::run(addr, &via, 1.5, dir, 3).unwrap();
            assert_eq!(f["idle_pings"], 3, "{f:?}");
            assert!(f["idle_ping_p50_ms"].as_f64().unwrap() < f["idle_ping_p99_ms"].as_f64().unwrap() + 1e-9);
            assert!(f["pings"].as_u64().unwrap() >= 3, "{f:?}");
            let (up, all) = (
                f["ping_up_p50_ms"].as_f64().unwrap(),
                f["ping_p50_ms"].as_f64().unwrap(),
            );
            assert!(up > 0.0 && up < all, "the request is a part of the exchange: {f:?}");
            assert!(f["slow_pings"].is_array(), "{f:?}");
            assert!(f["average_mbit"].as_f64().unwrap() > 10.0, "{f:?}");
        }
        let f = voip::run(addr, &via, 1.0).unwrap();
        assert_eq!(f["packets"], 50, "{f:?}");
        assert_eq!(f["lost_pct"].as_f64(), Some(0.0), "{f:?}");
        assert_eq!(f["dup_pct"].as_f64(), Some(0.0), "{f:?}");
        assert!(f["owd_p99_ms"].as_f64().unwrap() < 100.0, "{f:?}");
        assert!(voip::run(addr, &Via::Mptcp, 1.0).is_err());
        let f = web_under_upload::run(addr, &via, 2, Duration::from_millis(200)).unwrap();
        assert_eq!(f["bundles_ms_idle"].as_array().unwrap().len(), 2, "{f:?}");
        assert_eq!(f["bundles_ms_loaded"].as_array().unwrap().len(), 2, "{f:?}");
        let (i, l) = (
            f["bundle_ms_idle"].as_f64().unwrap(),
            f["bundle_ms_loaded"].as_f64().unwrap(),
        );
        assert!((f["ratio"].as_f64().unwrap() - l / i).abs() < 1e-9, "{f:?}");
        assert!(f["upload_mbit"].as_f64().unwrap() > 10.0, "{f:?}");
    }
}
