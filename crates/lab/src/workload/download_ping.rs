//! `download-ping`: `upload-ping` with the bulk going down (server to client); the
//! exchanges are still the client's requests and the server's 1 KB responses, which now
//! queue behind the download.

use anyhow::Result;

use super::upload_ping::{self, Direction, HEADING, IDLE_PINGS};
use super::{ClientRun, Fields, Spec};
use crate::summary::{capacity, median_text, Summary};

pub struct DownloadPing;

impl Spec for DownloadPing {
    fn name(&self) -> &'static str {
        "download-ping"
    }

    fn has_capacity(&self) -> bool {
        true
    }

    fn client(&self, run: &ClientRun) -> Result<Fields> {
        upload_ping::run(run.server, &run.via, run.secs, Direction::Down, IDLE_PINGS)
    }

    fn summary(&self) -> Summary {
        upload_ping::summary(
            |all| {
                let cap = median_text(all, capacity, |c| format!(", download capacity {c:.1} Mbit/s"));
                format!("{cap} — {}", HEADING.replace("upload", "download"))
            },
            "ping latency, idle and during the download",
        )
    }
}
