use super::*;
use proptest::prelude::*;
use std::net::SocketAddr;

/// One of a typed identity's variants.
fn pick<T: Copy + std::fmt::Debug + 'static>(all: &'static [T]) -> impl Strategy<Value = T> {
    prop::sample::select(all)
}

fn arb_addr() -> impl Strategy<Value = TargetAddr> {
    prop_oneof![
        any::<SocketAddr>().prop_map(|a| TargetAddr::Ip(SocketAddr::new(a.ip(), a.port()))),
        ("[a-z0-9.-]{1,255}", any::<u16>()).prop_map(|(d, p)| TargetAddr::Domain(d, p)),
    ]
}

fn arb_data() -> impl Strategy<Value = Bytes> {
    prop::collection::vec(any::<u8>(), 0..2048).prop_map(Bytes::from)
}

fn arb_frame() -> impl Strategy<Value = Frame> {
    prop_oneof![
        (any::<u8>(), any::<[u8; 16]>(), any::<u8>()).prop_map(|(version, session, path)| Frame::Hello {
            version,
            session,
            path
        }),
        (
            any::<[u8; 16]>(),
            any::<bool>(),
            any::<u16>(),
            prop::option::of(any::<SocketAddr>().prop_map(|a| SocketAddr::new(a.ip(), a.port())))
        )
            .prop_map(|(session, fresh, server, join)| Frame::HelloAck {
                session,
                fresh,
                server,
                join
            }),
        (
            any::<u64>(),
            any::<u32>(),
            any::<u32>(),
            any::<(u64, u8, u8)>(),
            arb_addr(),
            arb_data()
        )
            .prop_map(|(seq, stream, ts, (paths, scheduler, energy), addr, data)| {
                Frame::Open {
                    seq,
                    stream,
                    ts,
                    paths,
                    scheduler,
                    energy,
                    addr,
                    data,
                }
            }),
        (any::<u64>(), any::<u32>(), 0..u64::MAX / 2, any::<u32>(), arb_data()).prop_map(
            |(seq, stream, offset, ts, data)| Frame::Data {
                seq,
                stream,
                offset,
                ts,
                data
            }
        ),
        (any::<u64>(), any::<u32>(), any::<u64>()).prop_map(|(seq, stream, offset)| Frame::Fin { seq, stream, offset }),
        (
            any::<u64>(),
            any::<u32>(),
            pick(ResetCode::ALL).prop_filter("sent", |c| c.on_wire())
        )
            .prop_map(|(seq, stream, code)| Frame::Reset { seq, stream, code }),
        any::<u64>().prop_map(|cum| Frame::Ack { cum }),
        (any::<u32>(), any::<u64>()).prop_map(|(stream, max)| Frame::Window { stream, max }),
        any::<u64>().prop_map(|max| Frame::MaxData { max }),
        any::<u64>().prop_map(|id| Frame::Ping { id }),
        any::<u64>().prop_map(|id| Frame::Pong { id }),
        pick(CloseCode::ALL).prop_map(|code| Frame::Close { code }),
        (any::<u8>(), any::<u64>(), any::<u32>(), any::<u32>()).prop_map(|(path, seq, ts, delay)| Frame::Owd {
            path,
            seq,
            ts,
            delay
        }),
        any::<u64>().prop_map(|cum| Frame::Stall { cum }),
        pick(Tier::ALL).prop_map(|tier| Frame::Tier { tier }),
        (any::<u32>(), any::<u16>(), any::<bool>(), arb_data()).prop_map(|(flow, seq, copied, data)| {
            Frame::Datagram {
                flow,
                seq,
                copied,
                data,
            }
        }),
        (
            any::<u32>(),
            any::<u16>(),
            any::<bool>(),
            prop::collection::vec(prop::collection::vec(any::<u8>(), 0..600).prop_map(Bytes::from), 1..6)
        )
            .prop_map(|(flow, seq, copied, data)| Frame::Datagrams {
                flow,
                seq,
                copied,
                data,
            }),
        (any::<u32>(), arb_addr()).prop_map(|(flow, addr)| Frame::FlowOpen { flow, addr }),
        (any::<u32>(), pick(FlowCloseCode::ALL)).prop_map(|(flow, code)| Frame::FlowClose { flow, code }),
        (any::<u8>(), any::<u32>()).prop_map(|(path, joins)| Frame::PathGone { path, joins }),
        any::<u64>().prop_map(|limit| Frame::Allowance { limit }),
    ]
}

proptest! {
    #[test]
    fn roundtrip(frames in prop::collection::vec(arb_frame(), 1..8)) {
        let mut buf = Vec::new();
        for f in &frames {
            f.encode(&mut buf);
        }
        let total: usize = frames.iter().map(Frame::encoded_len).sum();
        prop_assert_eq!(buf.len(), total);
        let back = decode_all(Bytes::from(buf)).unwrap();
        prop_assert_eq!(back, frames);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        let _ = decode_all(Bytes::from(bytes));
    }

    #[test]
    fn every_truncation_is_an_error(f in arb_frame(), cut in 1usize..64) {
        let mut buf = Vec::new();
        f.encode(&mut buf);
        let cut = cut.min(buf.len() - 1);
        buf.truncate(buf.len() - cut);
        prop_assert!(decode_all(Bytes::from(buf)).is_err());
    }
}

fn encoded(f: &Frame) -> Vec<u8> {
    let mut v = Vec::new();
    f.encode(&mut v);
    v
}

/// A datagram of the largest UDP payload fills a record exactly and comes back whole;
/// one byte more is refused, and so is a flag bit nobody defined.
#[test]
fn largest_datagram_fits_a_record_and_larger_is_refused() {
    let f = Frame::Datagram {
        flow: 7,
        seq: 65535,
        copied: true,
        data: Bytes::from(vec![0xab; crate::MAX_DATAGRAM]),
    };
    let buf = encoded(&f);
    assert_eq!(buf.len(), crate::MAX_RECORD);
    assert_eq!(decode_all(Bytes::from(buf.clone())).unwrap(), vec![f]);

    let mut big = buf.clone();
    big.push(0);
    let len = (big.len() - HEADER_LEN) as u32;
    big[1..5].copy_from_slice(&len.to_be_bytes());
    assert!(matches!(decode_all(Bytes::from(big)), Err(WireError::Oversized { .. })));

    let mut flags = encoded(&Frame::Datagram {
        flow: 1,
        seq: 2,
        copied: false,
        data: Bytes::from_static(b"x"),
    });
    flags[HEADER_LEN + 6] = 0x80;
    assert!(matches!(
        decode_all(Bytes::from(flags)),
        Err(WireError::Malformed {
            frame: "Datagram",
            what: "unknown flag bits"
        })
    ));
}

/// The byte layout of the flow frames: flow id, then the destination the SOCKS5 way,
/// or the close code; an empty datagram is legal (UDP allows it).
#[test]
fn flow_frames_layout() {
    let open = Frame::FlowOpen {
        flow: 0x0102_0304,
        addr: TargetAddr::Domain("dns.example".into(), 53),
    };
    let mut want = vec![17, 0, 0, 0, 4 + 1 + 1 + 11 + 2, 1, 2, 3, 4, 3, 11];
    want.extend_from_slice(b"dns.example");
    want.extend_from_slice(&[0, 53]);
    assert_eq!(encoded(&open), want);
    let close = Frame::FlowClose {
        flow: 9,
        code: FlowCloseCode::Refused,
    };
    assert_eq!(encoded(&close), vec![18, 0, 0, 0, 5, 0, 0, 0, 9, 2]);
    let empty = Frame::Datagram {
        flow: 1,
        seq: 0x0a0b,
        copied: false,
        data: Bytes::new(),
    };
    assert_eq!(encoded(&empty), vec![16, 0, 0, 0, 7, 0, 0, 0, 1, 0x0a, 0x0b, 0]);
    for f in [open, close, empty] {
        assert_eq!(decode_all(Bytes::from(encoded(&f))).unwrap(), vec![f]);
    }
}

/// Bytes after a FlowOpen's address are refused (the decoder must consume all of a
/// body, or decode and encode would disagree), and so is a short FlowClose.
#[test]
fn malformed_flow_frames() {
    let mut buf = encoded(&Frame::FlowOpen {
        flow: 1,
        addr: TargetAddr::Ip("10.0.0.1:53".parse().unwrap()),
    });
    buf.push(0);
    buf[4] += 1;
    assert!(matches!(
        decode_all(Bytes::from(buf)),
        Err(WireError::Malformed { frame: "FlowOpen", .. })
    ));
    let err = decode_all(Bytes::from_static(&[18, 0, 0, 0, 4, 0, 0, 0, 1])).unwrap_err();
    assert!(matches!(err, WireError::Malformed { frame: "FlowClose", .. }));
    let err = decode_all(Bytes::from_static(&[16, 0, 0, 0, 6, 0, 0, 0, 1, 0, 0])).unwrap_err();
    assert!(matches!(err, WireError::Malformed { frame: "Datagram", .. }));
}

/// A tier or reason code with a number no variant has is a protocol error (never the
/// nearest tier), and so is the reset code that stays local.
#[test]
fn rejects_unknown_identities() {
    let err = decode_all(Bytes::from_static(&[15, 0, 0, 0, 1, 5])).unwrap_err();
    assert_eq!(err, WireError::UnknownId { what: "tier", value: 5 });
    let err = decode_all(Bytes::from_static(&[18, 0, 0, 0, 5, 0, 0, 0, 1, 9])).unwrap_err();
    assert_eq!(
        err,
        WireError::UnknownId {
            what: "flow close code",
            value: 9
        }
    );
    let err = decode_all(Bytes::from_static(&[12, 0, 0, 0, 1, 4])).unwrap_err();
    assert_eq!(
        err,
        WireError::UnknownId {
            what: "close code",
            value: 4
        }
    );
    let mut reset = encoded(&Frame::Reset {
        seq: 1,
        stream: 2,
        code: ResetCode::App,
    });
    *reset.last_mut().unwrap() = ResetCode::PeerLostState.wire();
    let err = decode_all(Bytes::from(reset)).unwrap_err();
    assert!(matches!(err, WireError::Malformed { frame: "Reset", .. }), "{err}");
}

#[test]
fn rejects_unknown_type() {
    let err = Frame::decode(&mut Bytes::from_static(&[0xee, 0, 0, 0, 0])).unwrap_err();
    assert_eq!(err, WireError::UnknownType(0xee));
}

#[test]
fn rejects_oversized_before_reading_body() {
    let err = Frame::decode(&mut Bytes::from_static(&[4, 0x7f, 0xff, 0xff, 0xff])).unwrap_err();
    assert!(matches!(err, WireError::Oversized { .. }));
}

#[test]
fn rejects_wrong_fixed_length() {
    // An Ack with a 9-byte body.
    let err = Frame::decode(&mut Bytes::from_static(&[7, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0])).unwrap_err();
    assert!(matches!(err, WireError::Malformed { frame: "Ack", .. }));
}

#[test]
fn rejects_bad_address() {
    // Open with address type 9 (after seq, stream, ts, paths and scheduler).
    let mut body = vec![0u8; 16 + 10];
    body.push(9);
    let mut buf = vec![3, 0, 0, 0, body.len() as u8];
    buf.extend_from_slice(&body);
    let err = Frame::decode(&mut Bytes::from(buf)).unwrap_err();
    assert!(matches!(err, WireError::Malformed { frame: "address", .. }));
}

/// Datagrams of one flow in a row share a frame: the first goes alone, the second turns
/// it into a `Datagrams` frame, and each costs its length and payload from then on.
/// Another flow, the other class, a skipped number or a frame written in between starts
/// a frame of its own. Whatever was appended decodes to the same datagrams, numbered.
#[test]
fn a_flows_datagrams_in_a_row_share_a_frame() {
    let d = |n: u8, len: usize| vec![n; len];
    let mut out = Vec::new();
    let run = DatagramRun::push(None, &mut out, 5, 65535, false, &d(1, 1200));
    assert_eq!(out.len(), HEADER_LEN + DATAGRAM_HEADER + 1200);
    let run = DatagramRun::push(Some(run), &mut out, 5, 0, false, &d(2, 1200));
    let run = DatagramRun::push(Some(run), &mut out, 5, 1, false, &d(3, 0));
    assert_eq!(out.len(), HEADER_LEN + DATAGRAM_HEADER + 3 * RUN_LEN + 2400);
    // Another class, another flow, a gap: each a frame of its own.
    let run = DatagramRun::push(Some(run), &mut out, 5, 2, true, &d(4, 10));
    let run = DatagramRun::push(Some(run), &mut out, 6, 3, true, &d(5, 10));
    let run = DatagramRun::push(Some(run), &mut out, 6, 5, true, &d(6, 10));
    // A frame in between ends the run.
    Frame::Ping { id: 9 }.encode(&mut out);
    DatagramRun::push(Some(run), &mut out, 6, 6, true, &d(7, 10));
    let b = |n: u8, len: usize| Bytes::from(d(n, len));
    let dg = |flow, seq, copied, data| Frame::Datagram {
        flow,
        seq,
        copied,
        data,
    };
    assert_eq!(
        decode_all(Bytes::from(out)).unwrap(),
        vec![
            Frame::Datagrams {
                flow: 5,
                seq: 65535,
                copied: false,
                data: vec![b(1, 1200), b(2, 1200), b(3, 0)],
            },
            dg(5, 2, true, b(4, 10)),
            dg(6, 3, true, b(5, 10)),
            dg(6, 5, true, b(6, 10)),
            Frame::Ping { id: 9 },
            dg(6, 6, true, b(7, 10)),
        ]
    );
}

/// A `Datagrams` body must hold whole datagrams, at least one, none over a UDP
/// payload's size.
#[test]
fn malformed_datagram_runs_are_refused() {
    let frame = |body: &[u8]| {
        let mut v = vec![FrameType::Datagrams as u8];
        v.extend_from_slice(&(body.len() as u32).to_be_bytes());
        v.extend_from_slice(body);
        decode_all(Bytes::from(v))
    };
    let head = [0, 0, 0, 1, 0, 7, 0];
    let what = |r: Result<Vec<Frame>, WireError>| match r {
        Err(WireError::Malformed {
            frame: "Datagrams",
            what,
        }) => what,
        other => panic!("{other:?}"),
    };
    assert_eq!(what(frame(&head)), "no datagram");
    assert_eq!(
        what(frame(&[&head[..], &[0]].concat())),
        "a datagram's length cut short"
    );
    assert_eq!(
        what(frame(&[&head[..], &[0, 3, 1, 2]].concat())),
        "a datagram longer than the frame"
    );
    assert_eq!(
        what(frame(&[&head[..], &[0xff, 0xff]].concat())),
        "payload larger than a UDP datagram"
    );
    let ok = frame(&[&head[..], &[0, 1, 9, 0, 0]].concat()).unwrap();
    assert_eq!(
        ok,
        vec![Frame::Datagrams {
            flow: 1,
            seq: 7,
            copied: false,
            data: vec![Bytes::from_static(&[9]), Bytes::new()],
        }]
    );
}
