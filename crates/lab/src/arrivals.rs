//! What the emulated links delivered, packet by packet: the TCP payload each link handed
//! to the far side and when (µs since the Unix epoch, the clock every namespace shares).
//!
//! Rule: a claim about arrivals (a path's last byte, the bytes a receiver could hold at
//! some time) is read here, at the links, not from the system under test. The reason: the
//! links see every system alike — kernel MPTCP's subflows and mpflex's paths — and
//! nothing can arrive that they did not deliver, so a figure derived from them cannot
//! exceed what the links carried.

/// One direction's log: (delivery time in µs since the Unix epoch, TCP payload bytes) of
/// every delivered packet that carried payload, in delivery order.
#[derive(Debug, Clone, Default)]
pub struct PayloadLog {
    pub entries: Vec<(u64, u32)>,
    /// Entries were dropped once [`PayloadLog::LIMIT`] was reached.
    pub full: bool,
}

impl PayloadLog {
    /// At most this many entries (16 B each, 16 MB) between two clears: a 20 s run at the
    /// lab's rates logs tens of thousands; an unlimited link at 1 Gbit/s fills it in about
    /// 12 s, and `emu`, which never clears, stops logging there.
    pub const LIMIT: usize = 1 << 20;

    pub fn push(&mut self, at_us: u64, payload: u32) {
        if self.entries.len() < Self::LIMIT {
            self.entries.push((at_us, payload));
        } else {
            self.full = true;
        }
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.full = false;
    }

    /// Payload bytes delivered at or before `t_us`.
    pub fn delivered_by(&self, t_us: u64) -> u64 {
        self.entries
            .iter()
            .take_while(|(t, _)| *t <= t_us)
            .map(|(_, n)| *n as u64)
            .sum()
    }

    /// Payload bytes delivered within `[from_us, to_us]`.
    pub fn delivered_between(&self, from_us: u64, to_us: u64) -> u64 {
        self.entries
            .iter()
            .skip_while(|(t, _)| *t < from_us)
            .take_while(|(t, _)| *t <= to_us)
            .map(|(_, n)| *n as u64)
            .sum()
    }

    /// When the last packet with at least `min_payload` bytes of payload was delivered
    /// within `[from_us, to_us]`.
    pub fn last_within(&self, from_us: u64, to_us: u64, min_payload: u32) -> Option<u64> {
        self.entries
            .iter()
            .rev()
            .find(|(t, n)| *t >= from_us && *t <= to_us && *n >= min_payload)
            .map(|(t, _)| *t)
    }
}

/// Whether an Ethernet frame carries IPv4/TCP.
pub fn is_tcp(frame: &[u8]) -> bool {
    frame.len() >= 14 + 20 && frame[12..14] == [0x08, 0x00] && frame[14 + 9] == 6
}

/// The TCP payload length of an Ethernet frame carrying IPv4 (0 for anything else): IP
/// total length minus the IP and TCP headers.
pub fn tcp_payload(frame: &[u8]) -> u32 {
    const ETH: usize = 14;
    if frame.len() < ETH + 20 || frame[12..14] != [0x08, 0x00] {
        return 0;
    }
    let ip = &frame[ETH..];
    let ihl = (ip[0] & 0x0f) as usize * 4;
    if ip[9] != 6 || ihl < 20 || ip.len() < ihl + 13 {
        return 0;
    }
    let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
    let doff = (ip[ihl + 12] >> 4) as usize * 4;
    total.saturating_sub(ihl + doff) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet frame with an IPv4/TCP header (20 + `doff` bytes) and `payload` bytes.
    fn frame(doff: usize, payload: usize) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + doff + payload];
        f[12] = 0x08;
        f[14] = 0x45;
        let total = (20 + doff + payload) as u16;
        f[16..18].copy_from_slice(&total.to_be_bytes());
        f[14 + 9] = 6;
        f[14 + 20 + 12] = ((doff / 4) as u8) << 4;
        f
    }

    #[test]
    fn payload_of_frames() {
        assert_eq!(tcp_payload(&frame(32, 1448)), 1448);
        assert_eq!(tcp_payload(&frame(20, 0)), 0);
        let mut udp = frame(20, 100);
        udp[14 + 9] = 17;
        assert_eq!(tcp_payload(&udp), 0);
        let mut arp = frame(20, 100);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(tcp_payload(&arp), 0);
        assert_eq!(tcp_payload(&[0u8; 20]), 0);
    }

    #[test]
    fn delivered_by_and_last_within() {
        let mut log = PayloadLog::default();
        for (t, n) in [(10, 1448), (20, 1448), (30, 60), (40, 1448)] {
            log.push(t, n);
        }
        assert_eq!(log.delivered_by(9), 0);
        assert_eq!(log.delivered_by(20), 2896);
        assert_eq!(log.delivered_by(100), 4404);
        assert_eq!(log.delivered_between(11, 100), 4404 - 1448);
        assert_eq!(log.delivered_between(0, 9), 0);
        assert_eq!(log.last_within(0, 35, 200), Some(20));
        assert_eq!(log.last_within(0, 35, 1), Some(30));
        assert_eq!(log.last_within(41, 100, 1), None);
        log.clear();
        assert_eq!(log.delivered_by(100), 0);
    }
}
