//! Unit tests of the path writer's late binding (queue control's are in `queue/tests.rs`).

use super::*;

pub(super) fn info(notsent: u32, rate: u64) -> TcpInfo {
    TcpInfo {
        state: TCP_ESTABLISHED,
        snd_cwnd: 40,
        snd_mss: 1448,
        notsent_bytes: notsent,
        delivery_rate: rate,
        snd_ssthresh: crate::kernel::INFINITE_SSTHRESH,
        ..TcpInfo::default()
    }
}

/// A backlogged path under queue control: it holds its limit (whole segments).
pub(super) fn hold_limit(w: &PathWriter, i: &mut TcpInfo) {
    i.unacked = w.queue_limit().unwrap().div_ceil(i.snd_mss as u64) as u32;
}

#[test]
fn late_binding_keeps_ten_ms_of_the_rate_unsent() {
    let mut w = PathWriter::new(1 << 20, true, true);
    assert_eq!(w.lowat(), INITIAL_LOWAT);
    w.observe(0, &info(0, 5_000_000), None);
    assert_eq!(w.lowat(), 50_000, "10 ms of 5 MB/s");
    w.observe(0, &info(0, 5_500_000), None);
    assert_eq!(w.lowat(), 50_000, "a change under a quarter is not applied");
    w.observe(0, &info(0, 500_000), None);
    assert_eq!(w.lowat(), MIN_LOWAT, "never below the minimum");
    w.observe(0, &info(0, 1_000_000_000), None);
    assert_eq!(w.lowat(), 1 << 20, "never above the configured maximum");
}

#[test]
fn late_binding_uses_a_quarter_window_before_a_rate_is_known() {
    let mut w = PathWriter::new(1 << 20, true, true);
    w.observe(0, &info(0, 0), None);
    assert_eq!(w.lowat(), 40 * 1448 / 4);
}

#[test]
fn notsent_at_the_mark_waits_and_below_it_fills_to_the_mark_plus_a_frame() {
    let mut w = PathWriter::new(1 << 20, true, true);
    assert_eq!(w.budget(&info(INITIAL_LOWAT, 0), 16_448, true), Err(WriterStep::Full));
    let b = w.budget(&info(INITIAL_LOWAT - 1000, 0), 16_448, true).unwrap();
    assert_eq!((b.total, b.bulk, b.retry), (1000 + 16_448, 1000 + 16_448, None));
}

#[test]
fn late_binding_ends_a_path_whose_connection_is_gone() {
    let mut w = PathWriter::new(1 << 20, true, true);
    let mut i = info(0, 0);
    i.state = 7; // TCP_CLOSE
    assert_eq!(w.budget(&i, 100, true), Err(WriterStep::Closed { state: 7 }));
    i.state = TCP_CLOSE_WAIT;
    assert!(
        w.budget(&i, 100, true).is_ok(),
        "the peer half-closed: we may still send"
    );
}

#[test]
fn late_binding_reads_an_application_limited_trickle_as_a_lower_bound() {
    let mut w = PathWriter::new(1 << 20, true, true);
    let busy = w.observe(0, &info(0, 2_000_000), None);
    assert_eq!(busy.delivery_rate, 2_000_000);
    let mut trickle = info(0, 40_000);
    trickle.flags = 1; // application-limited sample
    assert_eq!(w.observe(0, &trickle, Some(3_000_000)).delivery_rate, 2_000_000);
    assert_eq!(w.observe(0, &trickle, Some(3_000_000)).bandwidth, 3_000_000);
}

#[test]
fn late_binding_resets_a_low_threshold_only_where_the_window_restarts() {
    let mut i = info(0, 0);
    i.snd_ssthresh = 7;
    i.rto = 300_000;
    i.last_data_sent = 1000;
    assert!(PathWriter::new(1 << 20, true, true).reset_ssthresh_before_write(&i));
    assert!(
        !PathWriter::new(1 << 20, false, true).reset_ssthresh_before_write(&i),
        "no idle restart (BBR, or the sysctl off): the threshold stays"
    );
    assert!(
        !PathWriter::new(1 << 20, true, false).reset_ssthresh_before_write(&i),
        "off"
    );
    let mut w = PathWriter::new(1 << 20, true, true);
    w.disable_ssthresh_reset();
    assert!(!w.reset_ssthresh_before_write(&i));
}
