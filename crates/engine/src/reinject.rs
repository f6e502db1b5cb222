//! Reinjection: which frames another path already carries should go again on this one.
//!
//! Two triggers. A scheduler that re-sends (DEMS's adaptive reinjection, Guo et al.,
//! "Accelerating Multipath Transport Through Balanced Subflow Completion", MobiCom 2017;
//! ECF's idle fast path) asks with [`Decision::Reinject`]: frames the peer has not
//! reported, within an age limit, and with `sooner_only` only those a copy here would bring
//! sooner than the path holding them (by the one-way-delay estimates, beyond both paths'
//! deviations), or that are overdue there. And the peer's `Stall`: its reorder buffer fills
//! behind one missing frame, which then goes on the fastest path that does not hold it.
//!
//! [`Decision::Reinject`]: mpflex_sched::Decision::Reinject

use std::time::{Duration, Instant};

use mpflex_sched::End;

use crate::paths::Paths;
use crate::send::{Outgoing, SendQueue};

/// A scheduler's request for copies on `path`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request {
    pub path: usize,
    pub end: End,
    /// Skip frames last sent longer ago than this.
    pub max_age: Option<Duration>,
    pub sooner_only: bool,
    /// Bytes already in the record being built.
    pub used: usize,
    /// The most the record may hold in total, and the decision's limit on it (the first
    /// copy may exceed the limit, never the maximum).
    pub max: usize,
    pub limit: usize,
}

/// What [`pick`] chose.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Picked {
    pub seqs: Vec<u64>,
    /// When a frame skipped as not sooner becomes overdue: ask again then.
    pub next_due: Option<Instant>,
}

/// How long a copy may go unreported on each path before it counts as overdue: that
/// path's srtt + 4·rttvar (a retransmission timeout) plus the largest srtt, the longest
/// the peer's report may take to come back.
fn overdue_after(paths: &Paths) -> Vec<Duration> {
    let report = paths.iter().map(|p| p.snap.srtt).max().unwrap_or_default();
    paths.iter().map(|p| p.snap.srtt + 4 * p.snap.rttvar + report).collect()
}

fn holders(o: &Outgoing, n: usize) -> impl Iterator<Item = usize> + '_ {
    (0..n).filter(move |&i| o.on_paths & (1 << i) != 0)
}

/// Frames to copy onto `req.path` at `now` (`now_us` on the session clock).
pub(crate) fn pick(send: &SendQueue, paths: &Paths, req: Request, now: Instant, now_us: i64) -> Picked {
    let bit = 1u64 << req.path;
    let oldest = req.max_age.and_then(|a| now.checked_sub(a));
    let here = paths.get(req.path).expect("the asking path exists");
    let overdue = overdue_after(paths);
    let dev: Vec<i64> = paths.iter().map(|p| p.owd.deviation() as i64).collect();
    // When a frame becomes overdue: on the first path holding it to run late.
    let due = |o: &Outgoing| {
        let sent = o.last_sent?;
        holders(o, overdue.len()).map(|i| sent + overdue[i]).min()
    };
    // Whether a copy here, behind `extra` more bytes of this record, arrives sooner.
    let sooner = |o: &Outgoing, extra: usize| -> bool {
        let (Some(eta), Some(owd)) = (o.eta_us, here.owd.estimate(here.bif(extra))) else {
            return true;
        };
        let margin = here.owd.deviation() as i64 + holders(o, dev.len()).map(|i| dev[i]).max().unwrap_or(0);
        due(o).is_some_and(|d| now > d) || now_us + owd + margin < eta
    };
    // Unacknowledged frames another path carries and the peer has not reported.
    let wanted = |o: &Outgoing| {
        o.sent
            && !o.received
            && o.on_paths != 0
            && o.on_paths & bit == 0
            && o.allowed & bit != 0
            && oldest.is_none_or(|t| o.last_sent.is_some_and(|s| s >= t))
    };
    let mut picked = Picked::default();
    let mut size = req.used;
    for (&seq, o) in send.iter_from(req.end).filter(|(_, o)| wanted(o)) {
        let len = o.frame.encoded_len();
        if size + len > req.max || (!picked.seqs.is_empty() && size + len > req.limit) {
            break;
        }
        if req.sooner_only && !sooner(o, size) {
            let d = due(o).map(|d| d + Duration::from_millis(1));
            picked.next_due = match (picked.next_due, d) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            continue;
        }
        size += len;
        picked.seqs.push(seq);
    }
    picked
}

/// The path to re-send the frame at the peer's stalled gap `cum` on: the fastest that
/// does not hold it. `None` if the frame needs no copy or no such path is up.
pub(crate) fn stall_target(send: &SendQueue, paths: &Paths, cum: u64) -> Option<usize> {
    let o = send.get(cum)?;
    if !o.sent || o.received {
        return None;
    }
    paths.fastest_except(o.on_paths | !o.allowed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    /// Two paths; frames 0..n of 1000 bytes each sent on path 0.
    fn setup(n: usize, now: Instant) -> (SendQueue, Paths) {
        let mut send = SendQueue::default();
        send.stage_data(1, 0, Bytes::from(vec![0u8; 1000 * n]), 1000, Instant::now());
        send.promote(u64::MAX);
        while let Some(seq) = send.unsent_end(End::Head) {
            send.take_unsent(End::Head);
            send.book(seq, 0, now, 0, None);
        }
        let mut paths = Paths::new(&crate::EngineConfig::new(crate::Role::Client));
        paths.up(0, now);
        paths.up(1, now);
        (send, paths)
    }

    fn req(sooner_only: bool, limit: usize) -> Request {
        Request {
            path: 1,
            end: End::Head,
            max_age: None,
            sooner_only,
            used: 0,
            max: 64 * 1024,
            limit,
        }
    }

    #[test]
    fn copies_what_others_hold_up_to_the_limit_and_skips_reported_frames() {
        let now = Instant::now();
        let (mut send, paths) = setup(5, now);
        send.on_report(0, Instant::now());
        let p = pick(&send, &paths, req(false, 2500), now, 0);
        assert_eq!(p.seqs, vec![1000, 2000], "frame 0 was reported; 2 frames fit");
        let tail = pick(
            &send,
            &paths,
            Request {
                end: End::Tail,
                ..req(false, 1)
            },
            now,
            0,
        );
        assert_eq!(tail.seqs, vec![4000], "the first copy may exceed the limit");
    }

    #[test]
    fn sooner_only_skips_frames_that_arrive_first_where_they_are() {
        let now = Instant::now();
        let (mut send, mut paths) = setup(1, now);
        // Path 1 is 50 ms slower one way than the frame's expected arrival on path 0.
        send.book(0, 0, now, 0, Some(10_000));
        paths.entry(1).owd.sample(0, 60_000);
        paths.entry(0).snap.srtt = Duration::from_millis(20);
        let p = pick(&send, &paths, req(true, 64 * 1024), now, 0);
        assert!(p.seqs.is_empty());
        assert_eq!(
            p.next_due,
            Some(now + Duration::from_millis(20 + 20 + 1)),
            "ask again when overdue"
        );
        let later = pick(
            &send,
            &paths,
            req(true, 64 * 1024),
            now + Duration::from_millis(41),
            41_000,
        );
        assert_eq!(later.seqs, vec![0], "overdue frames go whatever the estimates say");
    }

    #[test]
    fn a_stall_goes_to_the_fastest_path_not_holding_the_frame() {
        let now = Instant::now();
        let (send, mut paths) = setup(1, now);
        paths.up(2, now);
        paths.entry(1).snap.srtt = Duration::from_millis(30);
        paths.entry(2).snap.srtt = Duration::from_millis(10);
        assert_eq!(stall_target(&send, &paths, 0), Some(2));
        assert_eq!(stall_target(&send, &paths, 7), None, "no such frame");
    }
}
