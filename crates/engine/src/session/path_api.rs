//! The session's paths as the driver sees them: up and down, statistics, tiers, data-cap
//! allowances, and each stream's paths, scheduler and energy mode.

use super::*;
use crate::paths::{HintChange, LinkHint};
use crate::writer::{PathSocket, PathWriter};
use mpflex_wire::Tier;

impl Session {
    /// A path connection of a [`PathSocket::default`] socket is established
    /// ([`Session::path_up_with`]).
    pub fn path_up(&mut self, path: usize, now: Instant) {
        self.path_up_with(path, PathSocket::default(), now);
    }

    /// A path connection is established (first time or again) on a socket `socket`
    /// describes; it gets a new writer, configured by the session's [`EngineConfig`]. A
    /// connection replacing one still up (a probe that got through, a re-dial) takes over
    /// the path: what the old one held went with its socket and is sent again.
    pub fn path_up_with(&mut self, path: usize, socket: PathSocket, now: Instant) {
        if self.paths.get(path).is_some_and(|p| p.is_up()) {
            self.send.lost_on(path);
        }
        // A new connection has heard of no flow yet, and what the old one carried here
        // and did not deliver will not come.
        self.dgrams.path_gone(path);
        let mut ready = Vec::new();
        self.dgrams.path_down_rx(path, self.up_mask(), &mut ready);
        self.events
            .extend(ready.into_iter().map(|(flow, data)| Event::Datagram { flow, data }));
        self.paths.up(path, now);
        // A path that fell silent while it was the only one up kept what it held (there
        // was nowhere else to send it): this one is somewhere else.
        for j in 0..self.paths.len() {
            if j != path && self.paths.get(j).is_some_and(|p| p.is_up() && p.suspect()) {
                let n = self.send.lost_on(j);
                tracing::debug!(
                    path = j,
                    frames = n,
                    "re-sending what a silent path held on a path that came up"
                );
            }
        }
        self.paths.entry(path).writer = Some(PathWriter::for_path(&self.cfg, socket));
        self.announce_tier(path);
        // Control state may have been lost with an earlier connection; restate it.
        self.restate_control();
        self.wake();
    }

    /// (client) Tells the server the path's tier, on the path itself: downloads are the
    /// server's to schedule. A path the link layer hinted weak is announced as a backup
    /// while the hint holds: the server then gives it no new data while a better path
    /// carries (a backup's rule), as this side does by the hint — the server cannot read
    /// the client's WiFi signal (WearMan: leave the degrading link before it fails, in
    /// both directions).
    pub(super) fn announce_tier(&mut self, path: usize) {
        if self.cfg.role != Role::Client {
            return;
        }
        let p = self.paths.entry(path);
        if p.is_up() {
            let tier = if p.hinted_weak() {
                p.effective_tier().max(Tier::Backup)
            } else {
                p.effective_tier()
            };
            p.ctrl.retain(|f| !matches!(f, mpflex_wire::Frame::Tier { .. }));
            p.ctrl.push_back(mpflex_wire::Frame::Tier { tier });
            // A capped path's grant too: a new connection must not carry downloads
            // beyond it.
            if let Some(limit) = p.grant {
                p.ctrl.retain(|f| !matches!(f, mpflex_wire::Frame::Allowance { .. }));
                p.ctrl.push_back(mpflex_wire::Frame::Allowance { limit });
            }
        }
    }

    /// A path connection is gone. Everything only it held is sent again elsewhere.
    pub fn path_down(&mut self, path: usize) {
        if !self.paths.down(path) {
            return;
        }
        // Datagrams it took are not sent again (see `crate::datagram`), and those it
        // carried here that never came are not waited for.
        self.dgrams.path_gone(path);
        let mut ready = Vec::new();
        self.dgrams.path_down_rx(path, self.up_mask(), &mut ready);
        self.events
            .extend(ready.into_iter().map(|(flow, data)| Event::Datagram { flow, data }));
        self.tell_path_gone(path);
        self.send.lost_on(path);
        // Acks and window updates handed to the dead path may never arrive.
        self.restate_control();
        self.wake();
    }

    /// (client) Tells the server on every other path that `path`'s connection is gone, so
    /// that it re-sends what it had sent there now rather than after the path falls silent
    /// (the server cannot see the client's link go; MPTCP-MA acts on the link's signal).
    pub(super) fn tell_path_gone(&mut self, path: usize) {
        if self.cfg.role != Role::Client {
            return;
        }
        let (Ok(id), Some(joins)) = (u8::try_from(path), self.paths.get(path).map(|p| p.joins)) else {
            return;
        };
        for i in (0..self.paths.len()).filter(|&i| i != path) {
            let p = self.paths.entry(i);
            if p.is_up() {
                p.ctrl.push_back(mpflex_wire::Frame::PathGone { path: id, joins });
            }
        }
    }

    /// (server) The client's word that `path`'s connection of join count `joins` is gone:
    /// taken down as if it had timed out, unless a newer connection of the path joined.
    pub(super) fn on_path_gone(&mut self, path: usize, joins: u32) {
        let current = self.paths.get(path).filter(|p| p.is_up()).map(|p| p.joins);
        if current == Some(joins) {
            self.events.push_back(Event::PathGone(path));
            self.path_down(path);
        }
    }

    /// (server) The stream's destination is connected: its first `Window` goes to the
    /// client, which may have held the application's connection until now (a TUN's SYN
    /// is answered only then).
    pub fn stream_connected(&mut self, stream: StreamId) {
        if let Some(s) = self.streams.get_mut(&stream) {
            if !s.connected {
                s.connected = true;
                self.windows_needed.insert(stream);
                self.wake();
            }
        }
    }

    /// (client) Whether the server reported the stream's destination connected.
    pub fn stream_peer_connected(&self, stream: StreamId) -> bool {
        self.streams.get(&stream).is_some_and(|s| s.connected)
    }

    pub(super) fn restate_control(&mut self) {
        self.feedback.ack_now();
        self.flow.update_needed = true;
        let initial = self.cfg.stream_window;
        for (&id, s) in &self.streams {
            // A stream whose destination is still being dialled gets no Window: its first
            // one says the dial succeeded ([`Session::stream_connected`]). One whose
            // reader has opened its window beyond the initial one has sent a Window
            // already (an engine user that never calls `stream_connected`), and a lost
            // one would stall it.
            if !s.rx_fin && (s.connected || s.rx_max > initial) {
                self.windows_needed.insert(id);
            }
        }
    }

    /// Latest kernel statistics of a path, read at `now`. `alive` and `ready` are kept by
    /// the engine. The scheduler observes every update ([`Scheduler::observe`]).
    pub fn set_path_stats(&mut self, path: usize, snap: PathSnapshot, now: Instant) {
        let Some(p) = self.paths.get(path) else { return };
        let (alive, ready, backup) = (p.snap.alive, p.snap.ready, p.snap.backup);
        self.paths.entry(path).snap = PathSnapshot {
            id: path,
            alive,
            ready,
            backup,
            ..snap
        };
        self.last_now = self.last_now.max(now);
        let snaps = self.paths.raw_snapshots();
        self.scheduler.observe(now, &snaps);
        for (_, s) in &mut self.stream_schedulers {
            s.observe(now, &snaps);
        }
    }

    /// Whether the path's writer is idle and its socket has room. A path that stops being
    /// ready may be what other paths were waiting for, so they are woken to decide again.
    pub fn set_path_ready(&mut self, path: usize, ready: bool) {
        if self.paths.get(path).is_none() {
            return;
        }
        let p = self.paths.entry(path);
        let woke = p.snap.ready && !ready;
        p.snap.ready = ready;
        if woke {
            self.wake();
        }
    }

    /// Sets the path's tier ([`Tier`]). A tier carries new data only while no path
    /// of a better tier can (each is down, suspect or degraded); its paths meanwhile stand
    /// by, connected and kept warm with keepalives, so a takeover needs no handshake. The
    /// per-path counters (`payload_sent`, `payload_resent`) show what each carried.
    pub fn set_path_tier(&mut self, path: usize, tier: Tier, now: Instant) {
        self.set_clock(now);
        self.paths.set_tier(path, tier, now);
        self.announce_tier(path);
        self.wake();
    }

    /// A leading indicator from the link under `path` at `now` (a WiFi signal fading:
    /// [`LinkHint::Weak`]; `None`: the link is fine again). A path hinted weak is degraded
    /// as if its quality trends had demoted it: it takes no new data while a healthy path
    /// can carry, and the frames it holds are copied to the fastest one, make-before-break
    /// (WearMan, seed 000 ch. VI: hand over before the link fails, on a leading
    /// indicator). A hint that clears within [`EngineConfig::link_hint_hold`] of the last
    /// weak one is applied when the hold ends, so an alternating source cannot make the
    /// path ping-pong.
    pub fn set_link_hint(&mut self, path: usize, hint: Option<LinkHint>, now: Instant) {
        self.set_clock(now);
        match self.paths.set_hint(path, hint, self.cfg.link_hint_hold, now) {
            HintChange::Demoted => {
                let n = self.copy_elsewhere(path);
                tracing::info!(path, frames = n, "link hinted weak; new data goes elsewhere");
            }
            HintChange::Released => tracing::info!(path, "link hint cleared; the path takes new data again"),
            HintChange::Unchanged => return,
        }
        self.announce_tier(path);
        self.restate_control();
        self.wake();
    }

    /// Whether the link layer hinted `path` weak and the hint holds.
    pub fn path_hinted_weak(&self, path: usize) -> bool {
        self.paths.get(path).is_some_and(|p| p.hinted_weak())
    }

    /// Caps what `path` carries: it may be handed `bytes` more frame bytes (what
    /// [`PathCounters::bytes_sent`] counts, when handed to the path's socket). No record
    /// goes beyond the allowance (a record is cut to fit it), so what this side sends
    /// never passes it; with less than a frame left the path takes no data and the next
    /// tier carries, until a new allowance. `None` lifts it. Where the cap itself is
    /// reached is the caller's to decide ([`Session::set_path_tier`]).
    pub fn set_path_allowance(&mut self, path: usize, allowance: Option<u64>, now: Instant) {
        self.set_clock(now);
        self.paths.set_allowance(path, allowance, now);
        self.wake();
    }

    /// (client) Grants the server at most `limit` frame bytes on `path` in all (its
    /// `bytes_sent` count of the path; see [`mpflex_wire::Frame::Allowance`]);
    /// `u64::MAX` lifts the limit.
    pub fn grant_path_allowance(&mut self, path: usize, limit: u64) {
        if self.cfg.role != Role::Client {
            return;
        }
        self.paths.ensure(path, self.last_now);
        let p = self.paths.entry(path);
        p.grant = Some(limit);
        if p.is_up() {
            p.ctrl.retain(|f| !matches!(f, mpflex_wire::Frame::Allowance { .. }));
            p.ctrl.push_back(mpflex_wire::Frame::Allowance { limit });
            self.wake();
        }
    }

    /// What is left of the path's allowance, if it has one.
    pub fn path_allowance(&self, path: usize) -> Option<u64> {
        self.paths.get(path).and_then(|p| p.allowance)
    }

    /// Restricts `stream` to the paths of `mask` (a bit per path; [`crate::ALL_PATHS`]:
    /// every path), for both its frames not yet sequenced and those to come. Frames of
    /// the stream go on no other path, not even as copies or re-sends; while none of its
    /// paths is up its frames wait.
    pub fn set_stream_paths(&mut self, stream: StreamId, mask: u64) {
        if !self.streams.contains_key(&stream) {
            return;
        }
        self.send.set_allowed(stream, mask);
        self.wake();
    }

    /// Sets `stream`'s energy mode from its policy rule (`Some(true)`: energy-aware,
    /// `Some(false)`: off, `None`: the session's), for the energy-aware scheduling to read
    /// ([`Session::stream_energy`]).
    pub fn set_stream_energy(&mut self, stream: StreamId, aware: Option<bool>) {
        if let Some(s) = self.streams.get_mut(&stream) {
            s.energy_aware = aware;
            // The peer learns it with the stream's Open (if not sent yet).
            let code = match aware {
                None => 0,
                Some(true) => 1,
                Some(false) => 2,
            };
            self.send.set_energy(stream, code);
        }
    }

    /// `stream`'s energy mode ([`Session::set_stream_energy`]).
    pub fn stream_energy(&self, stream: StreamId) -> Option<bool> {
        self.streams.get(&stream).and_then(|s| s.energy_aware)
    }

    /// The paths `stream` may use.
    pub fn stream_allowed_paths(&self, stream: StreamId) -> u64 {
        self.send.allowed(stream)
    }

    /// Has `scheduler` (`None`: the session's) place `stream`'s frames on this side from
    /// now on; a client's stream also asks the server for it, for the stream's downloads
    /// (its Open carries the scheduler's wire number; `None` asks for the server's
    /// default). One call sets both, so what a client runs for a stream's uploads and
    /// what it asks the server to run for its downloads cannot differ.
    pub fn set_stream_scheduler(&mut self, stream: StreamId, scheduler: Option<SchedulerKind>) {
        let runs = scheduler.filter(|k| k.name() != self.scheduler.name());
        if let Some(k) = runs {
            if !self.stream_schedulers.iter().any(|(have, _)| *have == k) {
                self.stream_schedulers.push((k, k.build()));
            }
        }
        self.send.set_runs(stream, runs);
        if self.cfg.role == Role::Client && self.streams.contains_key(&stream) {
            self.send.set_scheduler_request(stream, scheduler);
        }
        self.wake();
    }

    /// The scheduler placing `stream`'s frames on this side.
    pub fn stream_scheduler(&self, stream: StreamId) -> &'static str {
        self.send
            .runs(stream)
            .map_or(self.scheduler.name(), SchedulerKind::name)
    }

    /// The path's tier (primary for a path never configured).
    pub fn path_tier(&self, path: usize) -> Tier {
        self.paths.get(path).map_or(Tier::Primary, |p| p.tier)
    }

    /// A backup path is the backup tier; a path that is not, primary. See
    /// [`Session::set_path_tier`].
    pub fn set_path_backup(&mut self, path: usize, backup: bool, now: Instant) {
        let tier = if backup { Tier::Backup } else { Tier::Primary };
        self.set_path_tier(path, tier, now);
    }

    pub fn path_status(&self, path: usize) -> PathStatus {
        self.paths.get(path).map_or(PathStatus::Down, |p| p.status)
    }

    /// The path's state in the supervisor's terms (see [`PathState`]).
    pub fn path_state(&self, path: usize) -> PathState {
        self.paths.get(path).map_or(PathState::Down, |p| p.state())
    }

    pub fn path_counters(&self, path: usize) -> Option<(&PathCounters, &PathSnapshot)> {
        self.paths.get(path).map(|p| (&p.counters, &p.snap))
    }

    /// Bytes of a record still incomplete arrived on `path` at `now`: the path is not
    /// silent. MPTCP-MA suspects a path that delivers nothing for a few RTTs; a record is
    /// handed in only whole, and on a slow link one takes longer than that (16 KiB at
    /// 0.8 Mbit/s: 164 ms, against the 150 ms floor of the threshold).
    pub fn path_receiving(&mut self, path: usize, now: Instant) {
        if self.paths.get(path).is_some_and(|p| p.is_up()) && self.paths.heard(path, now, 0) {
            self.wake();
        }
    }

    /// Whether the path is up but carries nothing new: silent while holding data (see
    /// [`crate::paths`]).
    pub fn path_suspect(&self, path: usize) -> bool {
        self.paths.get(path).is_some_and(|p| p.is_up() && p.suspect())
    }

    /// How often (and how long for) a suspect path is probed with a fresh connection.
    pub fn path_probe_every(&self, path: usize) -> std::time::Duration {
        let p = self.paths.get(path);
        let rtt = p.map_or_else(Default::default, |p| {
            if p.snap.min_rtt.is_zero() {
                p.snap.srtt
            } else {
                p.snap.min_rtt
            }
        });
        crate::supervisor::probe_every(rtt)
    }

    /// How long the path's frames wait in queues now, from the peer's arrival reports;
    /// `None` without recent reports (nothing sent lately).
    pub fn path_queue_delay(&self, path: usize, now: Instant) -> Option<std::time::Duration> {
        self.paths.queue_delay(path, now)
    }

    /// The session's decision and re-send counts.
    pub fn counters(&self) -> &SessionCounters {
        &self.counters
    }

    /// The path's one-way-delay estimate at its current bytes in flight and the deviation,
    /// microseconds (with the peer's clock offset), once the peer has reported arrivals.
    pub fn path_owd(&self, path: usize) -> Option<(i64, u64)> {
        let p = self.paths.get(path)?;
        let o = p.owd.estimate(bytes_in_flight(&p.snap))?;
        Some((o, p.owd.deviation()))
    }

    pub fn num_paths(&self) -> usize {
        self.paths.len()
    }
}
