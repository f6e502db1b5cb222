//! A path writer's late-binding step, the session's side of it: the socket's state in
//! (`TCP_INFO`), the path's statistics and supervision updated, queue control steered,
//! and records filled up to the writer's budget.

use std::ops::Range;
use std::time::Instant;

use mpflex_sched::PathSnapshot;
use mpflex_wire::{record, MAX_RECORD, RECORD_OVERHEAD};

use super::record::Limits;
use super::{PollTransmit, Session};
use crate::kernel::TcpInfo;
use crate::supervisor::Verdict;
use crate::writer::{Budget, PathSocket, PathWriter, SocketWants, WriterStep};

/// How stale a socket's `TCP_INFO` may get while it has bytes unacknowledged: an idle
/// writer looks again this soon, so a silent path's kernel view is fresh when its
/// suspicion threshold (150 ms at least) comes.
const KERNEL_READ: std::time::Duration = std::time::Duration::from_millis(50);

impl Session {
    /// Runs `path`'s writer's late-binding step on the socket state `info` (from
    /// `TCP_INFO`; `bandwidth` from the congestion control, if it keeps one): records its
    /// statistics, and if the socket has room appends records for it to `out` (their
    /// ranges in `records`, to be sealed), up to the writer's budget. The socket options
    /// the writer wants then are [`Session::socket_wants`].
    pub fn drive_writer(
        &mut self,
        path: usize,
        info: &TcpInfo,
        bandwidth: Option<u64>,
        now: Instant,
        out: &mut Vec<u8>,
        records: &mut Vec<Range<usize>>,
    ) -> WriterStep {
        let snap = self.writer_mut(path, now).observe(path, info, bandwidth);
        self.read_kernel(path, info, now);
        let protecting = self.protecting(now);
        let engaged = protecting || self.engaged_by_backlog(now);
        let queue = engaged.then(|| self.paths.queue_delay(path, now));
        let slack = self.writer_mut(path, now).base_slack();
        let base_kept = self.paths.base_kept_until(path, slack);
        let max_frame = self.max_frame_len();
        let writer = self.writer_mut(path, now);
        writer.set_protecting(protecting);
        writer.set_base_kept_until(base_kept);
        if let Some(queue) = queue {
            writer.steer(queue, info, now);
        }
        let budget = match writer.budget(info, max_frame, engaged) {
            Ok(budget) => budget,
            Err(step) => {
                if matches!(step, WriterStep::Full) {
                    // While it waits, the schedulers read the kernel's own latest rate.
                    let kernel = PathSnapshot {
                        delivery_rate: info.delivery_rate,
                        ..snap
                    };
                    self.set_path_stats(path, kernel, now);
                    self.set_path_ready(path, false);
                }
                return step;
            }
        };
        self.set_path_stats(path, snap, now);
        // Held back by queue control, the path takes no bulk bytes: not ready for them.
        self.set_path_ready(path, budget.bulk > 0);
        let until = self.fill(path, now, budget, out, records);
        if records.is_empty() {
            return match budget.retry {
                Some(retry) => WriterStep::Throttled { retry },
                None if info.unacked > 0 => WriterStep::Idle {
                    until: Some(until.map_or(now + KERNEL_READ, |u| u.min(now + KERNEL_READ))),
                },
                None => WriterStep::Idle { until },
            };
        }
        // Busy writing until the kernel has taken these bytes: other paths must not wait
        // for this one as if it were free, on statistics from before the write.
        self.set_path_ready(path, false);
        WriterStep::Write {
            reset_ssthresh: self.writer_mut(path, now).reset_ssthresh_before_write(info),
        }
    }

    /// `path`'s writer, made for a socket of [`PathSocket::default`] if the path never
    /// came up with one.
    fn writer_mut(&mut self, path: usize, now: Instant) -> &mut PathWriter {
        self.paths.ensure(path, now);
        let cfg = &self.cfg;
        self.paths
            .entry(path)
            .writer
            .get_or_insert_with(|| PathWriter::for_path(cfg, PathSocket::default()))
    }

    /// `path`'s writer (queue control's state, for tests and statistics); `None` before
    /// the path first came up.
    pub fn path_writer(&self, path: usize) -> Option<&PathWriter> {
        self.paths.get(path)?.writer.as_ref()
    }

    /// The socket options `path`'s writer wants now (the driver applies them after
    /// [`Session::drive_writer`]).
    pub fn socket_wants(&self, path: usize) -> SocketWants {
        match self.path_writer(path) {
            Some(w) => w.socket_wants(),
            None => PathWriter::for_path(&self.cfg, PathSocket::default()).socket_wants(),
        }
    }

    /// The driver could not reset `path`'s slow-start threshold (it could not switch its
    /// congestion control): its writer stops asking.
    pub fn ssthresh_reset_failed(&mut self, path: usize) {
        if let Some(w) = self.paths.get_mut(path).and_then(|p| p.writer.as_mut()) {
            w.disable_ssthresh_reset();
        }
    }

    /// A `TCP_INFO` reading of `path`'s socket: a suspect path that was acknowledged
    /// something is released; the quality monitor may demote or promote it (see
    /// [`crate::supervisor`]). A demoted path's unacknowledged frames are copied to the
    /// fastest path that carries, make-before-break: it keeps delivering what it holds,
    /// and whichever copy arrives first counts.
    fn read_kernel(&mut self, path: usize, info: &TcpInfo, now: Instant) {
        let r = self.paths.read_kernel(path, info, now, self.cfg.proactive);
        if r.verdict == Verdict::Demoted {
            let n = self.copy_elsewhere(path);
            let why = self.paths.get(path).map_or("", |p| p.quality.why());
            tracing::info!(path, frames = n, why, "path degrading; new data goes elsewhere");
        } else if r.verdict == Verdict::Promoted {
            if self.paths.get(path).is_some_and(|p| p.hinted_weak()) {
                tracing::info!(path, "path trends healthy again; its link is still hinted weak");
            } else {
                tracing::info!(path, "path healthy again");
            }
        }
        if r.released || r.verdict != Verdict::Unchanged {
            self.restate_control();
            self.wake();
        }
    }

    /// Queues copies of the frames `path` holds and the peer has not reported on the
    /// fastest path that carries, or while none other does, on the one that would carry
    /// without `path` (`Paths::copy_target`; none if there is none). Returns how many.
    pub(super) fn copy_elsewhere(&mut self, path: usize) -> usize {
        let Some(to) = self.paths.copy_target(path) else {
            return 0;
        };
        let mut seqs = self.send.unreported_on(path);
        seqs.retain(|seq| self.send.get(*seq).is_some_and(|o| o.allowed_on(to)));
        let n = seqs.len();
        self.paths.entry(to).dup.extend(seqs);
        n
    }

    /// Appends records for `path` to `out` until they hold `budget.total` bytes (of which
    /// at most `budget.bulk` for bulk frames) or nothing is left to send now; returns when
    /// to look again in the latter case.
    fn fill(
        &mut self,
        path: usize,
        now: Instant,
        budget: Budget,
        out: &mut Vec<u8>,
        records: &mut Vec<Range<usize>>,
    ) -> Option<Instant> {
        let base = out.len();
        let frame = self.max_frame_len();
        // A record is opened only once all of it arrived, so one larger than the window a
        // write now gets holds its first frames back by a round trip or more: a path
        // restarting after an idle spell with 10 segments, given 32 KB of frames a
        // silent path held, delivered the first of them 85 ms late. Records stay within
        // that window; only a record's first frame may exceed it (progress). The window
        // is no floor for the record's other frames: ten segments (CUBIC's restart
        // window) hold less than one largest frame, and a record filled to that size
        // with small frames sent its tail an LTE round trip after the rest. A large
        // window changes nothing.
        let window = self
            .paths
            .get(path)
            .map(|p| p.snap.send_cwnd() as usize * p.snap.mss as usize)
            .filter(|&w| w > 0)
            .unwrap_or(MAX_RECORD);
        while out.len() - base < budget.total {
            let start = record::begin(out);
            let room = budget.total.saturating_sub(start - base).max(frame).min(MAX_RECORD);
            let within = window.saturating_sub(RECORD_OVERHEAD).min(room);
            let bulk = if budget.bulk_limited() {
                budget.bulk.saturating_sub(start - base)
            } else {
                room
            };
            let limits = Limits {
                max: room,
                window: within,
                bulk,
                bulk_exact: budget.bulk_limited(),
            };
            match self.poll_record(path, now, out, limits) {
                PollTransmit::Sent(_) => records.push(start..record::end(out, start)),
                PollTransmit::Wait { until } => {
                    out.truncate(start);
                    return until;
                }
            }
        }
        None
    }
}
