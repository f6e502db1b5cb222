//! `mpflex-lab run` end to end on emulated links. Warm mode: single-path TCP and the
//! oracle's static-split sweep over real namespaces, each result's warm-up time recorded
//! (the oracle's per share), and `report` printing the warm-up / warm-up + chunk table.
//! Trace profiles: every transfer starts at the beginning of the trace. Needs root;
//! skipped (with a message) otherwise, a failure under CI=true.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_mpflex-lab");

/// `mpflex-lab run <args> --out <out>`, which must succeed; returns the records written.
fn run_lab(args: &[&std::ffi::OsStr], out: &std::path::Path) -> Vec<serde_json::Value> {
    let status = Command::new(BIN)
        .arg("run")
        .args(args)
        .arg("--out")
        .arg(out)
        .status()
        .unwrap();
    assert!(status.success(), "mpflex-lab run: {status}");
    let text = std::fs::read_to_string(out).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Words of a command line, for [`run_lab`].
fn words(s: &str) -> Vec<&std::ffi::OsStr> {
    s.split_whitespace().map(std::ffi::OsStr::new).collect()
}

/// A fresh scratch directory for `test`, or None (a skip, see `require_root`) without root.
fn root_scratch(test: &str) -> Option<std::path::PathBuf> {
    if !mpflex_lab::netns::require_root(test) {
        return None;
    }
    let dir = std::env::temp_dir().join(format!("mpflex-lab-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Some(dir)
}

#[test]
fn warm_chunks_record_their_warm_up() {
    let Some(dir) = root_scratch("warm_chunks_record_their_warm_up") else {
        return;
    };
    let out = dir.join("warm.jsonl");
    let recs = run_lab(
        &words(
            "--profile seed-default --systems tcp-wifi,oracle --sizes 64K --modes warm --cc cubic \
             --reps 1 --oracle-step 0.5",
        ),
        &out,
    );
    assert_eq!(recs.len(), 2, "{recs:?}");
    // 1 MB over WiFi (7.04 Mbit/s, RTT 50 ms) takes at least 1.2 s; a 64 KB chunk on the
    // warm connection far less.
    let tcp = &recs[0];
    assert_eq!(tcp["system"], "tcp-wifi");
    let w = tcp["warmup_ms"].as_f64().expect("tcp-wifi warm-up recorded");
    assert!((1150.0..5000.0).contains(&w), "warm-up {w} ms");
    assert!(tcp["completion_ms"].as_f64().unwrap() < w, "{tcp}");
    // The links' view of the transfer, warm-up included: WiFi carried the 1 MB warm-up and
    // the chunk (IP bytes, so a little more), LTE only the other path's keepalives if any.
    let delivered = |i: usize| {
        tcp["link_down_delivered_bytes"][i]
            .as_f64()
            .unwrap_or_else(|| panic!("{tcp}"))
    };
    assert!(delivered(0) > (1 << 20) as f64 + 65536.0, "{tcp}");
    assert!(delivered(1) < 65536.0, "{tcp}");
    assert_eq!(
        tcp["link_down_dropped_queue"].as_array().map(Vec::len),
        Some(2),
        "{tcp}"
    );
    assert!(tcp["link_down_sojourn_p50_ms"][0].as_f64().is_some(), "{tcp}");
    // The oracle's sweep: shares 0 and 1, then 0.5; every one with its warm-up, which the
    // split (side by side, like the paths of one connection) shortens at 0.5.
    let oracle = &recs[1];
    let shares = oracle["oracle_shares"].as_array().unwrap();
    assert_eq!(shares.len(), 3, "{oracle}");
    let warm_up = |p: f64| {
        shares
            .iter()
            .find(|s| s[0].as_f64() == Some(p))
            .and_then(|s| s[2].as_f64())
            .unwrap_or_else(|| panic!("no warm-up at share {p}: {oracle}"))
    };
    assert!(warm_up(0.5) < warm_up(1.0), "{oracle}");
    let md = Command::new(BIN).arg("report").arg(&out).output().unwrap();
    assert!(md.status.success());
    let md = String::from_utf8(md.stdout).unwrap();
    assert!(
        md.contains("#### seed-default, cubic, warm — the 1 MB warm-up / warm-up + chunk, ms: median"),
        "{md}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn trace_profiles_replay_their_trace_from_the_start_for_every_transfer() {
    let Some(dir) = root_scratch("trace_profiles_replay_their_trace_from_the_start_for_every_transfer") else {
        return;
    };
    // One 1500-byte opportunity per ms (12 Mbit/s), both directions.
    let trace: String = (1..=1000).map(|ms| format!("{ms}\n")).collect();
    std::fs::write(dir.join("flat.down"), &trace).unwrap();
    std::fs::write(dir.join("flat.up"), &trace).unwrap();
    let profile = dir.join("flat.toml");
    std::fs::write(
        &profile,
        r#"name = "flat-trace"
[[paths]]
name = "wifi"
down = { rate_kbit = 10000, delay_ms = 10 }
up = { rate_kbit = 10000, delay_ms = 10 }
[[paths]]
name = "lte"
down = { trace = "flat.down", delay_ms = 20 }
up = { trace = "flat.up", delay_ms = 20 }
"#,
    )
    .unwrap();
    let out = dir.join("trace.jsonl");
    let mut args = words("--profile");
    args.push(profile.as_os_str());
    args.extend(words(
        "--systems tcp-wifi,tcp-lte --sizes 64K --modes fresh --cc cubic --reps 1",
    ));
    let recs = run_lab(&args, &out);
    assert_eq!(recs.len(), 2, "{recs:?}");
    for r in &recs {
        assert_eq!(r["trace_rewound"], true, "{r}");
    }
    // Constant-rate profiles have nothing to rewind.
    let out2 = dir.join("constant.jsonl");
    let recs = run_lab(
        &words("--profile bw-grid:12.5x12.5 --systems tcp-wifi --sizes 64K --modes fresh --cc cubic --reps 1"),
        &out2,
    );
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert!(recs[0].get("trace_rewound").is_none(), "{recs:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Energy is priced over the same window for every system: its set-up and the transfer
/// (crates/lab/src/runner/priced.rs). Kernel MPTCP opens its LTE subflow inside the
/// transfer; an mpflex pair started for the measurement opens its LTE path (handshake and
/// first exchanges) before it. Both must pay the LTE wake that set-up costs: a window
/// that opened after mpflex's set-up would price mpflex's LTE at 0 J. The energy-aware
/// client does not dial LTE for a 256 KB download at all (docs/energy.md), so it pays
/// nothing there.
#[test]
fn every_systems_set_up_is_inside_the_energy_window() {
    let test = "every_systems_set_up_is_inside_the_energy_window";
    let Some(dir) = root_scratch(test) else {
        return;
    };
    let mpflex = std::path::Path::new(BIN).with_file_name("mpflex");
    if !mpflex_lab::netns::require(
        test,
        mpflex.exists(),
        "needs the mpflex binary (cargo build --release -p mpflex)",
    ) {
        return;
    }
    let out = dir.join("energy.jsonl");
    let recs = run_lab(
        &words(
            "--profile wifi-good --systems mptcp,mpflex:minrtt,mpflex:emptcp --sizes 256K --modes fresh --cc cubic --reps 1",
        ),
        &out,
    );
    assert_eq!(recs.len(), 3, "{recs:?}");
    let lte_wake = mpflex_engine::energy::EnergyProfile::default().cellular.fixed_j();
    for r in &recs {
        let lte = r["energy_path_j"][1].as_f64().unwrap_or_else(|| panic!("{r}"));
        match r["system"].as_str().unwrap_or_default() {
            "mptcp" => assert_eq!(r["energy_window"], "transfer", "{r}"),
            _ => assert_eq!(r["energy_window"], "setup", "{r}"),
        }
        if r["system"] == "mpflex:emptcp" {
            assert_eq!(lte, 0.0, "the energy-aware client dialled LTE: {r}");
        } else {
            assert!(lte >= 0.99 * lte_wake, "LTE {lte} J < one wake {lte_wake} J: {r}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
