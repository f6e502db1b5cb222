//! What nl80211 says about the access point a WiFi interface is associated with: the
//! `NL80211_CMD_GET_STATION` dump's station info, reduced to what the judge reads.

use wl_nl80211::{Nl80211Attr, Nl80211Message, Nl80211StationInfo};

/// One station (for an interface in station mode: its access point).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Station {
    /// Signal of the last frame received, dBm.
    pub signal: Option<i8>,
    /// The kernel's running average of the signal, dBm.
    pub signal_avg: Option<i8>,
    /// Average signal of the AP's beacons, dBm.
    pub beacon_signal_avg: Option<i8>,
    /// Frames retried and failed since association (cumulative).
    pub tx_retries: Option<u32>,
    pub tx_failed: Option<u32>,
    pub tx_packets: Option<u32>,
    /// What the rate control expects the link to carry, kbit/s.
    pub expected_throughput: Option<u32>,
    /// Beacon-loss events since association (cumulative).
    pub beacon_loss: Option<u32>,
}

impl Station {
    /// The signal the judge reads, dBm: the average (the last frame's signal swings by
    /// several dB frame to frame), else the beacons' average, else the last frame's. A
    /// driver that reports 0 has no reading.
    pub fn level(&self) -> Option<i32> {
        [self.signal_avg, self.beacon_signal_avg, self.signal]
            .into_iter()
            .flatten()
            .find(|&d| d != 0)
            .map(i32::from)
    }

    /// The station's info from one reply of the dump (`None`: the reply carries none).
    pub fn from_message(m: &Nl80211Message) -> Option<Station> {
        let info = m.attributes.iter().find_map(|a| match a {
            Nl80211Attr::StationInfo(info) => Some(info),
            _ => None,
        })?;
        let mut s = Station::default();
        for i in info {
            match *i {
                Nl80211StationInfo::Signal(d) => s.signal = Some(d),
                Nl80211StationInfo::SignalAvg(d) => s.signal_avg = Some(d),
                Nl80211StationInfo::BeaconSignalAvg(d) => s.beacon_signal_avg = Some(d),
                Nl80211StationInfo::TxRetries(n) => s.tx_retries = Some(n),
                Nl80211StationInfo::TxFailed(n) => s.tx_failed = Some(n),
                Nl80211StationInfo::TxPackets(n) => s.tx_packets = Some(n),
                Nl80211StationInfo::ExpectedThroughput(n) => s.expected_throughput = Some(n),
                Nl80211StationInfo::BeaconLoss(n) => s.beacon_loss = Some(n),
                _ => {}
            }
        }
        Some(s)
    }
}

/// The station of a dump: in station mode the dump has one entry, the access point; of
/// several (an interface in AP or mesh mode) the one with the strongest signal, which is
/// no leading indicator of anything and only keeps the reading defined.
pub fn pick(stations: Vec<Station>) -> Option<Station> {
    stations.into_iter().max_by_key(|s| s.level().unwrap_or(i32::MIN))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wl_nl80211::packet_core::{Emitable, ParseableParametrized};
    use wl_nl80211::packet_generic::GenlHeader;
    use wl_nl80211::Nl80211Command;

    /// A GET_STATION reply as the kernel sends it, encoded and parsed by the crate.
    fn reply(info: Vec<Nl80211StationInfo>) -> Nl80211Message {
        let m = Nl80211Message {
            cmd: Nl80211Command::NewStation,
            attributes: vec![
                Nl80211Attr::IfIndex(3),
                Nl80211Attr::Mac([0x02, 0, 0, 0, 0, 1]),
                Nl80211Attr::StationInfo(info),
            ],
        };
        let mut buf = vec![0; m.buffer_len()];
        m.emit(&mut buf);
        let header = GenlHeader {
            cmd: Nl80211Command::NewStation.into(),
            version: 1,
        };
        Nl80211Message::parse_with_param(&buf[..], header).unwrap()
    }

    #[test]
    fn the_reply_gives_signal_counters_and_expected_throughput() {
        let m = reply(vec![
            Nl80211StationInfo::InactiveTime(40),
            Nl80211StationInfo::Signal(-71),
            Nl80211StationInfo::SignalAvg(-68),
            Nl80211StationInfo::TxRetries(120),
            Nl80211StationInfo::TxFailed(3),
            Nl80211StationInfo::TxPackets(9000),
            Nl80211StationInfo::ExpectedThroughput(54_000),
            Nl80211StationInfo::BeaconLoss(1),
            Nl80211StationInfo::BeaconSignalAvg(-69),
        ]);
        let s = Station::from_message(&m).unwrap();
        assert_eq!(
            s,
            Station {
                signal: Some(-71),
                signal_avg: Some(-68),
                beacon_signal_avg: Some(-69),
                tx_retries: Some(120),
                tx_failed: Some(3),
                tx_packets: Some(9000),
                expected_throughput: Some(54_000),
                beacon_loss: Some(1),
            }
        );
        assert_eq!(s.level(), Some(-68), "the average first");
    }

    #[test]
    fn the_level_falls_back_and_a_zero_is_no_reading() {
        let only_last = Station::from_message(&reply(vec![Nl80211StationInfo::Signal(-80)])).unwrap();
        assert_eq!(only_last.level(), Some(-80));
        let zero_avg = Station {
            signal_avg: Some(0),
            signal: Some(-77),
            ..Station::default()
        };
        assert_eq!(zero_avg.level(), Some(-77));
        assert_eq!(Station::default().level(), None);
        let none = Nl80211Message {
            cmd: Nl80211Command::NewStation,
            attributes: vec![Nl80211Attr::IfIndex(3)],
        };
        assert_eq!(Station::from_message(&none), None);
    }

    #[test]
    fn of_several_stations_the_strongest_is_read() {
        let a = Station {
            signal_avg: Some(-80),
            ..Station::default()
        };
        let b = Station {
            signal_avg: Some(-60),
            ..Station::default()
        };
        assert_eq!(pick(vec![a, b.clone()]), Some(b));
        assert_eq!(pick(vec![]), None);
    }
}
