use std::time::Instant;

use bytes::Bytes;
use mpflex_engine::{Role, SchedulerKind, Session};
use mpflex_wire::{decode_all, Frame, TargetAddr};

use crate::config::{ClientConfig, ServerConfig};
use crate::driver::{Opened, SessionHandle};
use tokio::sync::mpsc::UnboundedReceiver as Receiver;

const KEY: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";

/// A client configuration with `extra` (top-level keys, then tables) and one path.
fn client_config(extra: &str) -> ClientConfig {
    let text = format!(
        "private_key = \"{KEY}\"\nserver_public_key = \"{KEY}\"\n{extra}\n\
         [[paths]]\nname = \"a\"\nserver = \"10.0.0.1:7000\"\n"
    );
    let cfg: ClientConfig = toml::from_str(&text).unwrap();
    cfg.validate().unwrap();
    cfg
}

/// The client's session handle as `run` builds it from `cfg`: the session runs the
/// configured scheduler, streams no rule gives one ask for it, and the rules apply.
fn client_handle(cfg: &ClientConfig) -> SessionHandle {
    let scheduler = cfg.scheduler_kind().unwrap();
    let sess = Session::new(cfg.tuning.engine(Role::Client), scheduler.build(), Instant::now());
    let mut h = SessionHandle::new(sess, vec!["a".into()], None);
    h.default_scheduler = scheduler;
    *h.policy.write().unwrap() = std::sync::Arc::new(cfg.policy().unwrap());
    h
}

/// A server's session handle as the server builds it, its default scheduler `default`
/// (`extra`: more top-level keys), and the receiver of its opened streams (a stream
/// nobody takes is refused).
fn server_handle(default: SchedulerKind, extra: &str) -> (SessionHandle, Receiver<Opened>) {
    let text = format!(
        "listen = [\"127.0.0.1:7000\"]\nprivate_key = \"{KEY}\"\nscheduler = \"{}\"\n{extra}\n\
         [[clients]]\nname = \"c\"\npublic_key = \"{KEY}\"\n",
        default.name()
    );
    let cfg: ServerConfig = toml::from_str(&text).unwrap();
    cfg.validate().unwrap();
    let scheduler = cfg.scheduler_kind().unwrap().build();
    let sess = Session::new(cfg.tuning.engine(Role::Server), scheduler, Instant::now());
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let mut h = SessionHandle::new(sess, Vec::new(), Some(tx));
    h.allowed_schedulers = cfg.allowed_scheduler_kinds().unwrap().map(std::sync::Arc::new);
    (h, rx)
}

/// Opens a stream on `client` to `port`, hands its frames to `server`, and returns the
/// scheduler each end runs for it (the client's uploads, the server's downloads) and the
/// scheduler number the client's Open carried.
fn open_across(client: &SessionHandle, server: &SessionHandle, port: u16) -> (&'static str, &'static str, u8) {
    let now = Instant::now();
    client.with(|sh| sh.sess.path_up(0, now));
    server.with(|sh| sh.sess.path_up(0, now));
    let addr = TargetAddr::Domain("example.org".into(), port);
    let (id, _, _) = client.open_stream(addr, Bytes::from_static(b"hello"));
    let mut out = Vec::new();
    client.with(|sh| sh.sess.poll_transmit(0, now, &mut out, 64 * 1024));
    let frames = decode_all(Bytes::from(out)).unwrap();
    let asked = frames
        .iter()
        .find_map(|f| match f {
            Frame::Open { scheduler, .. } => Some(*scheduler),
            _ => None,
        })
        .expect("the stream's Open");
    server.with(|sh| {
        for f in frames {
            sh.sess.handle_frame(0, f, now).unwrap();
        }
    });
    let up = client.with(|sh| sh.sess.stream_scheduler(id));
    let down = server.with(|sh| sh.sess.stream_scheduler(id));
    (up, down, asked)
}

/// A server default other than `k`, so a stream that gets `k` there got it from the
/// client's request.
fn other_than(k: SchedulerKind) -> SchedulerKind {
    if k == SchedulerKind::MinRtt {
        SchedulerKind::RoundRobin
    } else {
        SchedulerKind::MinRtt
    }
}

/// Every name the configuration accepts, aliases included, runs the scheduler it names
/// on both ends: the client's uploads, the number its Open carries, and what the server
/// builds from that number for the downloads. Named as the session's `scheduler` (to a
/// server that allows it by the same name), and as a rule's. (`dems` once built DEMS-F on the client but asked the server for its
/// default, which ran MinRTT for the downloads without a word.)
#[tokio::test]
async fn every_accepted_scheduler_name_runs_on_both_ends() {
    for name in SchedulerKind::accepted_names() {
        let k: SchedulerKind = name.parse().unwrap();

        let client = client_handle(&client_config(&format!("scheduler = \"{name}\"")));
        let (server, _opens) = server_handle(other_than(k), &format!("allowed_schedulers = [\"{name}\"]"));
        let (up, down, asked) = open_across(&client, &server, 80);
        assert_eq!(
            (up, down, asked),
            (k.name(), k.name(), k.wire()),
            "scheduler = {name:?}"
        );

        let rule = format!("[[rules]]\nports = [443]\nscheduler = \"{name}\"\n");
        let default = other_than(k);
        let client = client_handle(&client_config(&format!("scheduler = \"{}\"\n{rule}", default.name())));
        let (server, _opens) = server_handle(default, "");
        let (up, down, asked) = open_across(&client, &server, 443);
        assert_eq!(
            (up, down, asked),
            (k.name(), k.name(), k.wire()),
            "a rule's scheduler = {name:?}"
        );
    }
}
