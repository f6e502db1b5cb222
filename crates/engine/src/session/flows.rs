//! Datagram flows as the driver sees them: open, send, close (the engine's side is in
//! [`crate::datagram`]).

use super::*;

impl Session {
    /// (client) Opens a datagram flow towards `addr`. The peer hears of it with the flow's
    /// first datagram on each path. `None` while `max_flows` flows are open: the peer
    /// would refuse more, and each costs memory here until its association ends. Timed
    /// by the session clock, as [`Session::open_stream`].
    pub fn open_flow(&mut self, addr: TargetAddr) -> Option<FlowId> {
        if self.dgrams.len() >= self.cfg.max_flows {
            return None;
        }
        self.start_carrying(self.last_now);
        Some(self.dgrams.open(addr))
    }

    /// Queues a datagram of `flow` (at most [`mpflex_wire::MAX_DATAGRAM`] bytes). Returns
    /// its class, or `None` if the flow is unknown or the datagram too large (counted
    /// nowhere here: the caller knows why and counts it).
    pub fn send_datagram(&mut self, flow: FlowId, data: Bytes) -> Option<DatagramClass> {
        if data.len() > mpflex_wire::MAX_DATAGRAM {
            return None;
        }
        let class = self.dgrams.push(flow, data, self.last_now)?;
        if class == DatagramClass::Realtime {
            self.realtime_seen = Some(self.last_now);
        }
        self.wake();
        Some(class)
    }

    /// Closes `flow` for the reason `code` and drops its queued
    /// datagrams; the peer is told on every path that may know of it.
    pub fn close_flow(&mut self, flow: FlowId, code: mpflex_wire::FlowCloseCode) {
        let Some(announced) = self.dgrams.remove(flow) else {
            return;
        };
        self.settle_load();
        if code == mpflex_wire::FlowCloseCode::Refused {
            self.dgrams.counters.flows_refused += 1;
        }
        let on = match self.cfg.role {
            Role::Client => announced,
            Role::Server => self
                .paths
                .iter()
                .filter(|p| p.is_up())
                .fold(0u64, |m, p| m | (1 << p.snap.id)),
        };
        if on != 0 {
            self.dgrams.closes.push(PendingClose { flow, code, on });
            self.wake();
        }
    }

    /// Pins `flow`'s class (`None`: classified by what it sends).
    pub fn set_flow_class(&mut self, flow: FlowId, class: Option<DatagramClass>) {
        self.dgrams.pin(flow, class);
    }

    /// Where `flow` goes, if it is open.
    pub fn flow_addr(&self, flow: FlowId) -> Option<&TargetAddr> {
        self.dgrams.addr(flow)
    }

    pub fn num_flows(&self) -> usize {
        self.dgrams.len()
    }

    pub fn flow_ids(&self) -> Vec<FlowId> {
        self.dgrams.flow_ids()
    }

    pub fn datagram_counters(&self) -> &DatagramCounters {
        &self.dgrams.counters
    }

    /// Datagrams waiting for a path: (count, payload bytes).
    pub fn datagrams_queued(&self) -> (usize, usize) {
        self.dgrams.queued()
    }
}
