//! What an operator sees of a transfer through a real client and server over two paths:
//! `/metrics` parses with the Prometheus project's own Python parsers (the Prometheus text
//! format and OpenMetrics) and its byte counters move between two scrapes on both sides;
//! the live view in headless Chromium shows both paths up with non-zero throughput that
//! changes between two reads of the page, and the open streams with their class and path
//! split (a screenshot is kept under the target directory); `mpflex status --watch`
//! redraws the same in a terminal.

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use support::*;

const TEST: &str = "metrics_live_view_and_watch_follow_a_transfer";

/// Each download of the background traffic. At the paths' 2 × 20 Mbit/s one takes about
/// 1.7 s, so a stream is always open and none outlasts the test by much.
const CHUNK: u64 = 8 << 20;

/// A Python with `prometheus_client` (Debian's python3-prometheus-client installs it for
/// /usr/bin/python3, which need not be the first python3 on PATH).
fn prometheus_python() -> Option<&'static str> {
    ["python3", "/usr/bin/python3"].into_iter().find(|py| {
        Command::new(py)
            .args([
                "-c",
                "import prometheus_client.parser, prometheus_client.openmetrics.parser",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// Parses metrics texts with the Python parsers: `(file, "prometheus" | "openmetrics")`
/// → every sample as (name, labels, value).
const PARSE: &str = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families as prometheus
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
out = []
for path, fmt in zip(sys.argv[1::2], sys.argv[2::2]):
    parse = openmetrics if fmt == "openmetrics" else prometheus
    fams = list(parse(open(path).read()))
    out.append({
        "types": {f.name: f.type for f in fams},
        "samples": [[s.name, s.labels, s.value] for f in fams for s in f.samples],
    })
print(json.dumps(out))
"#;

/// One scrape, as the parser saw it.
struct Scrape {
    types: HashMap<String, String>,
    samples: Vec<(String, HashMap<String, String>, f64)>,
}

impl Scrape {
    /// The value of sample `name` whose labels include `labels`.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.samples
            .iter()
            .find(|(n, l, _)| n == name && labels.iter().all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v)))
            .map(|s| s.2)
    }
}

fn parse_all(python: &str, files: &[(&Path, &str)]) -> Vec<Scrape> {
    let mut cmd = Command::new(python);
    cmd.args(["-c", PARSE]);
    for (f, fmt) in files {
        cmd.arg(f).arg(fmt);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "the Prometheus parser rejected the metrics: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| Scrape {
            types: serde_json::from_value(s["types"].clone()).unwrap(),
            samples: s["samples"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| {
                    (
                        x[0].as_str().unwrap().to_string(),
                        serde_json::from_value(x[1].clone()).unwrap(),
                        x[2].as_f64().unwrap(),
                    )
                })
                .collect(),
        })
        .collect()
}

/// `GET path` on 127.0.0.1:`port` inside namespace `ns` into `file`.
fn scrape(ns: &str, port: u16, path: &str, openmetrics: bool, file: &Path) {
    let url = format!("http://127.0.0.1:{port}{path}");
    let mut args = vec![
        "ip",
        "netns",
        "exec",
        ns,
        "curl",
        "-sS",
        "--fail",
        "--max-time",
        "10",
        "-o",
    ];
    let file_s = file.to_str().unwrap();
    args.push(file_s);
    if openmetrics {
        args.extend(["-H", "Accept: application/openmetrics-text; version=1.0.0"]);
    }
    args.push(&url);
    sh(&args);
}

/// A path row of the live view: (name, state, bytes/s received, bytes/s sent).
#[derive(Debug, Clone, PartialEq)]
struct PathRow {
    name: String,
    state: String,
    rx: u64,
    tx: u64,
}

/// The value of attribute `name` in the start tag `tag`.
fn attr(tag: &str, name: &str) -> Option<String> {
    let key = format!(" {name}=\"");
    let start = tag.find(&key)? + key.len();
    let len = tag[start..].find('"')?;
    Some(tag[start..start + len].replace("&amp;", "&"))
}

/// Start tags of `<tr class="…">` rows, each with the row's text up to `</tr>`.
fn rows<'a>(dom: &'a str, class: &str) -> Vec<(&'a str, &'a str)> {
    let open = format!("<tr class=\"{class}\"");
    dom.match_indices(&open)
        .map(|(i, _)| {
            let rest = &dom[i..];
            let tag_end = rest.find('>').unwrap() + 1;
            let row_end = rest.find("</tr>").unwrap_or(rest.len());
            (&rest[..tag_end], &rest[tag_end..row_end])
        })
        .collect()
}

fn path_rows(dom: &str) -> Vec<PathRow> {
    rows(dom, "path")
        .into_iter()
        .map(|(tag, _)| PathRow {
            name: attr(tag, "data-path").unwrap(),
            state: attr(tag, "data-state").unwrap(),
            rx: attr(tag, "data-rx").unwrap().parse().unwrap(),
            tx: attr(tag, "data-tx").unwrap().parse().unwrap(),
        })
        .collect()
}

/// The page's DOM, in namespace `ns`, after it ran for a few seconds of its own (virtual)
/// time.
fn dump_dom(lab: &Lab, ns: &str, browser: (&str, &[&str]), url: &str) -> String {
    let out = chrome(lab, ns, browser, &["--dump-dom", url]);
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && dom.contains("data-updates"),
        "chromium failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    dom
}

/// Runs Chromium in namespace `ns` with `args`. The page's timers run on virtual
/// time (`--virtual-time-budget`), which waits for its requests: it polls a few times and
/// the browser exits at once.
fn chrome(lab: &Lab, ns: &str, (bin, extra): (&str, &[&str]), args: &[&str]) -> std::process::Output {
    let profile = lab.dir.join("chromium-profile");
    let profile_arg = format!("--user-data-dir={}", profile.display());
    Command::new("timeout")
        .args(["60", "ip", "netns", "exec", ns, bin])
        .args(extra)
        .args([
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            "--window-size=1280,1000",
            "--virtual-time-budget=3500",
            &profile_arg,
        ])
        .args(args)
        .output()
        .expect("chromium")
}

/// Sets the flag when dropped, a failed assertion included.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[test]
fn metrics_live_view_and_watch_follow_a_transfer() {
    if !ready(TEST) {
        return;
    }
    let python = prometheus_python();
    let browser = chromium();
    if !mpflex_netns::require(
        TEST,
        python.is_some(),
        "needs Python's prometheus_client (apt-get install python3-prometheus-client)",
    ) || !mpflex_netns::require(
        TEST,
        browser.is_some(),
        "needs chromium-headless-shell or chromium (apt-get install --no-install-recommends chromium-headless-shell)",
    ) {
        return;
    }
    let (python, browser) = (python.unwrap(), browser.unwrap());
    let lab = Lab::new(Options {
        rate_mbit: 20,
        ..Default::default()
    });
    let (cns, sns) = (lab.topo.client_ns.clone(), lab.topo.server_ns.clone());
    // Chromium fails a connection still opening when the namespace gains an address (the
    // links' IPv6 link-local ones, after duplicate address detection).
    wait_for_dad(&cns);
    let stop = AtomicBool::new(false);
    thread::scope(|scope| {
        // Whatever happens below, the traffic stops (the scope waits for it).
        let _stop = StopOnDrop(&stop);
        let traffic = scope.spawn(|| {
            let mut done = 0;
            while !stop.load(Ordering::Relaxed) {
                let (got, want) = lab.download(CHUNK);
                assert_eq!(got, want, "download {done} corrupted");
                done += 1;
            }
            done
        });
        // Two seconds of history for the sampler.
        thread::sleep(Duration::from_secs(2));

        // /metrics, twice, the watch view in between.
        let f = |name: &str| lab.dir.join(name);
        scrape(&cns, CLIENT_STATUS, "/metrics", false, &f("client1.prom"));
        scrape(&sns, SERVER_STATUS, "/metrics", false, &f("server1.prom"));
        let watch_out = std::fs::File::create(f("watch.txt")).unwrap();
        let mut watch = mpflex_netns::command(&cns, BIN)
            .args(["status", "--watch", "--addr", &format!("127.0.0.1:{CLIENT_STATUS}")])
            .stdout(watch_out)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        thread::sleep(Duration::from_millis(2500));
        let _ = watch.kill();
        let _ = watch.wait();
        scrape(&cns, CLIENT_STATUS, "/metrics", false, &f("client2.prom"));
        scrape(&sns, SERVER_STATUS, "/metrics", true, &f("server2.om"));

        // The live view, read twice two seconds apart, and a screenshot.
        let url = format!("http://127.0.0.1:{CLIENT_STATUS}/");
        let dom1 = dump_dom(&lab, &cns, browser, &url);
        thread::sleep(Duration::from_secs(2));
        let dom2 = dump_dom(&lab, &cns, browser, &url);
        let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("live-view.png");
        let _ = std::fs::remove_file(&shot);
        let out = chrome(
            &lab,
            &cns,
            browser,
            &[&format!("--screenshot={}", shot.display()), &url],
        );
        // The server's page: its session of the client, both paths sending.
        let server_dom = dump_dom(&lab, &sns, browser, &format!("http://127.0.0.1:{SERVER_STATUS}/"));
        stop.store(true, Ordering::Relaxed);
        let downloads = traffic.join().unwrap();
        assert!(downloads >= 1, "no download finished");

        // Metrics: both formats parse; the byte counters moved on every path.
        let s = parse_all(
            python,
            &[
                (&f("client1.prom"), "prometheus"),
                (&f("client2.prom"), "prometheus"),
                (&f("server1.prom"), "prometheus"),
                (&f("server2.om"), "openmetrics"),
            ],
        );
        let (c1, c2, s1, s2) = (&s[0], &s[1], &s[2], &s[3]);
        for scrape in [c1, c2, s1, s2] {
            assert!(
                scrape.types.values().any(|t| t == "histogram"),
                "class latency histograms: {:?}",
                scrape.types
            );
            assert_eq!(scrape.value("mpflex_sessions", &[]), Some(1.0));
        }
        for (path, name) in [("0", "p1"), ("1", "p2")] {
            let labels = [("role", "client"), ("path", path), ("name", name)];
            let rx1 = c1.value("mpflex_path_received_bytes_total", &labels).unwrap();
            let rx2 = c2.value("mpflex_path_received_bytes_total", &labels).unwrap();
            assert!(rx2 > rx1 && rx1 > 0.0, "client path {name}: received {rx1} then {rx2}");
            assert_eq!(
                c2.value("mpflex_path_state", &[("path", path), ("state", "active")]),
                Some(1.0)
            );
            assert!(c2.value("mpflex_path_srtt_seconds", &[("path", path)]).unwrap() > 0.0);
            let labels = [("role", "server"), ("client", "test"), ("path", path)];
            let tx1 = s1.value("mpflex_path_sent_bytes_total", &labels).unwrap();
            let tx2 = s2.value("mpflex_path_sent_bytes_total", &labels).unwrap();
            assert!(tx2 > tx1 && tx1 > 0.0, "server path {path}: sent {tx1} then {tx2}");
        }
        let decisions = |s: &Scrape| {
            s.value("mpflex_scheduler_decisions_total", &[("decision", "send")])
                .unwrap()
        };
        assert!(decisions(s2) > decisions(s1), "the server's scheduler decided nothing");

        // The live view: both paths active with throughput that is not zero and changes.
        let (p1, p2) = (path_rows(&dom1), path_rows(&dom2));
        let names: Vec<&str> = p1.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["p1", "p2"], "{dom1}");
        for (a, b) in p1.iter().zip(&p2) {
            assert_eq!((a.state.as_str(), b.state.as_str()), ("active", "active"));
            assert!(a.rx > 0 && b.rx > 0, "{} shows no throughput: {a:?} {b:?}", a.name);
        }
        assert_ne!(p1, p2, "the throughput did not change in two seconds");
        let sp = path_rows(&server_dom);
        assert_eq!(sp.len(), 2, "{server_dom}");
        assert!(sp.iter().all(|p| p.state == "active" && p.tx > 0), "{sp:?}");
        assert!(
            server_dom.contains(" of test"),
            "the server names the client: {server_dom}"
        );
        // The streams, with their class and how the paths split them.
        let streams: Vec<(String, &str)> = [&dom1, &dom2]
            .iter()
            .flat_map(|d| rows(d, "stream"))
            .map(|(tag, text)| (attr(tag, "data-class").unwrap(), text))
            .collect();
        assert!(!streams.is_empty(), "no stream listed: {dom2}");
        assert!(streams
            .iter()
            .all(|(class, _)| ["interactive", "bulk", "realtime"].contains(&class.as_str())));
        assert!(
            streams
                .iter()
                .any(|(_, t)| t.contains("p1 ") && t.contains("p2 ") && t.contains('%')),
            "no stream split over both paths: {streams:?}"
        );
        let png = std::fs::read(&shot).unwrap_or_default();
        assert!(
            out.status.success() && png.starts_with(b"\x89PNG") && png.len() > 10_000,
            "no screenshot ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        println!("live view screenshot: {}", shot.display());

        // The watch view: redrawn every second, both paths receiving.
        let watch = std::fs::read_to_string(f("watch.txt")).unwrap();
        let frames: Vec<&str> = watch.split("\n\n").filter(|f| f.contains("session")).collect();
        assert!(frames.len() >= 2, "watch drew {} frames:\n{watch}", frames.len());
        let last = frames.last().unwrap();
        for name in ["p1", "p2"] {
            let row: Vec<&str> = last
                .lines()
                .find(|l| l.split_whitespace().nth(1) == Some(name))
                .unwrap_or_else(|| panic!("no row for {name}:\n{last}"))
                .split_whitespace()
                .collect();
            assert_eq!(row[2], "active", "{last}");
            assert!(row[3].parse::<f64>().unwrap() > 0.0, "{name} receives nothing:\n{last}");
        }
    });
}
