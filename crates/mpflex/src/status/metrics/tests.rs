use super::*;
use crate::status::snapshot::{SessionSnapshot, StreamView};
use std::time::Duration;

pub(crate) fn sample_session() -> SessionView {
    let mut lat = ClassLatency::default();
    lat.record(TrafficClass::Interactive, Duration::from_micros(1500));
    lat.record(TrafficClass::Interactive, Duration::from_millis(40));
    let counters = mpflex_engine::PathCounters {
        bytes_sent: 1000,
        bytes_received: 2000,
        tcp_retransmits: 3,
        ..Default::default()
    };
    let path = |id: usize, name: &str, state| PathView {
        id,
        name: name.into(),
        state,
        backup: false,
        tier: mpflex_engine::Tier::Primary,
        counters: Some(counters.clone()),
        snap: mpflex_sched::PathSnapshot {
            srtt: Duration::from_millis(25),
            cwnd: 10,
            mss: 1448,
            in_flight: 2,
            ..Default::default()
        },
        owd_us: None,
        queue_delay: (state == PathState::Active).then_some(Duration::from_millis(4)),
        device: None,
        link: None,
        dial: None,
        kind: "wifi",
        energy: mpflex_engine::energy::PathEnergy {
            bytes: 2_000_000,
            transfer_j: 1.5,
            ..Default::default()
        },
        energy_standby: false,
        held: false,
        cap: (id == 1).then(|| crate::status::snapshot::CapView {
            limit: 1000,
            used: 1000,
            period: "2026-11".into(),
            capped: true,
            at_cap: "backup",
        }),
        wifi_signal_dbm: (id == 0).then_some(-67),
        rekeys: (0, 0),
        link_weak: false,
    };
    SessionView {
        client: Some("lap\"top".into()),
        session: "0a0b0c0d".into(),
        snap: SessionSnapshot {
            scheduler: "minrtt",
            streams: 1,
            buffered_frames: 0,
            held: (10, 20),
            buffered: 190,
            ahead: 5,
            early_delivered: 0,
            reorder_frames: 0,
            counters: mpflex_engine::SessionCounters {
                decisions_send: 7,
                ..Default::default()
            },
            paths: vec![path(0, "wifi", PathState::Active), path(1, "lte", PathState::Suspect)],
            waiting: Vec::new(),
            stream_list: vec![StreamView {
                id: 1,
                target: Some("example.com:443".into()),
                class: TrafficClass::Bulk,
                pinned: false,
                paths: vec![10, 20],
                rule: Some("video".into()),
                allowed: Some("lte".into()),
                scheduler_up: "minrtt",
                scheduler_down: "ecf",
                mask: 2,
                listener: Some("tun"),
            }],
            rule_hits: [("video".to_string(), 1)].into_iter().collect(),
            streams_refused: 3,
            class_latency: lat,
            flows: 2,
            datagrams: mpflex_engine::DatagramCounters {
                sent: 11,
                duplicates: 3,
                ..Default::default()
            },
            udp: crate::driver::UdpDrops {
                dropped_frag: 4,
                ..Default::default()
            },
            tun: None,
            energy_mode: "aware",
            energy_profile: "galaxy-s3-lte".into(),
            energy_aware: None,
        },
    }
}

fn line<'a>(text: &'a str, start: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line {start}…:\n{text}"))
}

#[test]
fn names_carry_units_and_totals_and_labels_name_the_path() {
    let (ct, text) = render(
        "server",
        vec![sample_session()],
        vec![crate::status::Counter::new("paths_refused_misrouted", "h", 3)],
        false,
    );
    assert_eq!(ct, PROMETHEUS_TEXT);
    assert_eq!(
        line(&text, "mpflex_paths_refused_misrouted_total{"),
        r#"mpflex_paths_refused_misrouted_total{role="server"} 3"#
    );
    let l = r#"role="server",client="lap\"top",session="0a0b0c0d""#;
    assert!(
        line(&text, "# TYPE mpflex_path_sent_bytes_total ").ends_with(" counter"),
        "{text}"
    );
    assert_eq!(
        line(&text, "mpflex_path_sent_bytes_total{"),
        format!(r#"mpflex_path_sent_bytes_total{{{l},path="0"}} 1000"#)
    );
    assert_eq!(
        line(&text, "mpflex_path_retransmitted_segments_total{"),
        format!(r#"mpflex_path_retransmitted_segments_total{{{l},path="0"}} 3"#)
    );
    assert!(text.contains(&format!(r#"mpflex_path_state{{{l},path="1",state="suspect"}} 1"#)));
    assert!(text.contains(&format!(r#"mpflex_path_state{{{l},path="1",state="active"}} 0"#)));
    assert!(text.contains(&format!(r#"mpflex_path_srtt_seconds{{{l},path="0"}} 0.025"#)));
    // Queue delay only where known.
    assert_eq!(text.matches("mpflex_path_queue_delay_seconds{").count(), 1, "{text}");
    assert!(text.contains(&format!(r#"mpflex_scheduler_decisions_total{{{l},decision="send"}} 7"#)));
    assert!(text.contains(&format!(r#"mpflex_session_streams{{{l},class="bulk"}} 1"#)));
    // The class histogram: cumulative buckets in seconds, only for classes with samples.
    assert!(text.contains(&format!(
        r#"mpflex_class_latency_seconds_bucket{{{l},class="interactive",le="0.001"}} 0"#
    )));
    assert!(text.contains(&format!(
        r#"mpflex_class_latency_seconds_bucket{{{l},class="interactive",le="0.002"}} 1"#
    )));
    assert!(text.contains(&format!(
        r#"mpflex_class_latency_seconds_bucket{{{l},class="interactive",le="+Inf"}} 2"#
    )));
    assert!(text.contains(&format!(
        r#"mpflex_class_latency_seconds_count{{{l},class="interactive"}} 2"#
    )));
    assert!(!text
        .contains(r#"class_latency_seconds_count{role="server",client="lap\"top",session="0a0b0c0d",class="bulk"}"#));
    assert!(line(&text, "mpflex_build_info{").ends_with(" 1"));
    // Datagrams: counts by event, drops by reason, open flows.
    assert!(text.contains(&format!(r#"mpflex_session_datagrams_total{{{l},event="sent"}} 11"#)));
    assert!(text.contains(&format!(r#"mpflex_session_datagrams_total{{{l},event="duplicate"}} 3"#)));
    assert!(text.contains(&format!(
        r#"mpflex_session_datagrams_dropped_total{{{l},reason="frag"}} 4"#
    )));
    assert!(text.contains(&format!(r#"mpflex_session_flows{{{l}}} 2"#)), "{text}");
    assert!(
        text.contains(&format!(r#"mpflex_session_streams_refused_total{{{l}}} 3"#)),
        "{text}"
    );
    assert!(
        line(&text, "# TYPE mpflex_session_datagrams_dropped_total ").ends_with(" counter"),
        "{text}"
    );
}

#[test]
fn a_client_has_no_client_label_and_openmetrics_ends_with_eof() {
    let mut s = sample_session();
    s.client = None;
    let (ct, text) = render("client", vec![s], Vec::new(), true);
    assert_eq!(ct, OPENMETRICS_TEXT);
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert!(!text.contains("client=\""), "{text}");
    assert!(
        text.contains(r#"mpflex_path_sent_bytes_total{role="client",session="0a0b0c0d",path="0",name="wifi"} 1000"#)
    );
    // No sessions: the process's own series only.
    let (_, text) = render("server", Vec::new(), Vec::new(), false);
    assert!(text.contains("mpflex_sessions{role=\"server\"} 0"), "{text}");
    assert!(!text.contains("mpflex_path_"), "{text}");
}
