//! Records of what tests and benches measured, for the docs' figures.

use std::io::Write;

/// With `MPFLEX_RECORD=1`, appends `fields` as one JSON record to `lab-results/<file>`,
/// with the bench's name, the commit of the source tree (`git describe --always --dirty`),
/// the machine's cores and load: the docs' figures of tests and benches come from these
/// records (crates/lab/tests/citations.rs checks that every record names its commit).
pub fn record(file: &str, bench: &str, fields: serde_json::Value) {
    if std::env::var("MPFLEX_RECORD").as_deref() != Ok("1") {
        return;
    }
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let commit = std::process::Command::new("git")
        .args(["-C", root, "describe", "--always", "--dirty", "--abbrev=12"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let load: Vec<f64> = std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .filter_map(|x| x.parse().ok())
        .collect();
    let mut rec = serde_json::json!({
        "bench": bench,
        "commit": commit,
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "loadavg": load,
    });
    if let (Some(r), serde_json::Value::Object(f)) = (rec.as_object_mut(), fields) {
        r.extend(f);
    }
    let path = format!("{root}/lab-results/{file}");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    writeln!(f, "{rec}").unwrap();
    eprintln!("record appended to lab-results/{file}");
}
