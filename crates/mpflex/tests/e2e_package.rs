//! The Debian package, installed for real: scripts/build-deb.sh packages the binary this
//! test run built, `dpkg -i` installs it (the package is purged at the end), and server
//! and client start from the installed units' ExecStart lines, as the units' User= with
//! only their capabilities (setpriv stands in for systemd, which does not run here), in
//! the namespaces of the end-to-end harness. A download goes through SOCKS5, then through
//! the transparent-mode rules of docs/transparent.md as written there: the host rules
//! (iptables, then nftables) for the client's own namespace, the router rules for a LAN
//! namespace behind it.

mod support;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use support::*;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const UNITS: &str = "/usr/lib/systemd/system";
/// A "remote" service: an address of the server namespace routed nowhere else.
const REMOTE: &str = "198.51.100.9";

#[test]
fn version_man_pages_and_completions() {
    let run = |args: &[&str]| {
        let out = Command::new(BIN).args(args).output().unwrap();
        assert!(out.status.success(), "mpflex {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(
        run(&["--version"]).trim(),
        format!(
            "mpflex {} (wire protocol {})",
            env!("CARGO_PKG_VERSION"),
            mpflex_wire::VERSION
        )
    );
    let page = run(&["man"]);
    assert!(
        page.starts_with(".ie") && page.contains(".SH NAME") && page.contains("mpflex\\-server(1)"),
        "{page}"
    );
    let dir = std::env::temp_dir().join(format!("mpflex-man-{}", std::process::id()));
    run(&["man", "--dir", dir.to_str().unwrap()]);
    let mut pages: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    pages.sort();
    let _ = std::fs::remove_dir_all(&dir);
    for want in [
        "mpflex.1",
        "mpflex-client.1",
        "mpflex-server.1",
        "mpflex-status.1",
        "mpflex-keygen.1",
    ] {
        assert!(pages.iter().any(|p| p == want), "{want} missing: {pages:?}");
    }
    assert!(run(&["completions", "bash"]).contains("complete -F _mpflex"));
    assert!(run(&["completions", "zsh"]).starts_with("#compdef mpflex"));
    assert!(run(&["completions", "fish"]).contains("complete -c mpflex"));
}

/// Purges the package when dropped, also when the test fails.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        let out = Command::new("dpkg").args(["-P", "mpflex"]).output();
        if !matches!(&out, Ok(o) if o.status.success()) {
            eprintln!("dpkg -P mpflex failed: {out:?}");
        }
    }
}

/// A unit file's `[Service]` settings (the last value of each key).
fn unit(path: &str) -> HashMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .map(str::trim)
        .skip_while(|l| *l != "[Service]")
        .take_while(|l| !l.starts_with('[') || *l == "[Service]")
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The command systemd would run for `unit` with `config` for its configuration file:
/// ExecStart as its User= and Group=, with its ambient and bounding capabilities and
/// NoNewPrivileges=.
fn unit_command(unit: &HashMap<String, String>, config: &str) -> Vec<String> {
    let caps = |key: &str| {
        let list: Vec<String> = unit[key]
            .split_whitespace()
            .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
            .collect();
        format!("-all,{}", list.join(","))
    };
    let mut cmd: Vec<String> = [
        "setpriv",
        "--reuid",
        &unit["User"],
        "--regid",
        &unit["Group"],
        "--init-groups",
        "--inh-caps",
        &caps("AmbientCapabilities"),
        "--ambient-caps",
        &caps("AmbientCapabilities"),
        "--bounding-set",
        &caps("CapabilityBoundingSet"),
    ]
    .map(String::from)
    .to_vec();
    if unit.get("NoNewPrivileges").map(String::as_str) == Some("yes") {
        cmd.push("--no-new-privs".into());
    }
    cmd.push("--".into());
    let exec = &unit["ExecStart"];
    let words: Vec<&str> = exec.split_whitespace().collect();
    let i = words
        .iter()
        .position(|w| *w == "--config")
        .expect("ExecStart has --config");
    assert!(words[i + 1].starts_with("/etc/mpflex/"), "{exec}");
    cmd.extend(
        words
            .iter()
            .enumerate()
            .map(|(j, w)| if j == i + 1 { config } else { w })
            .map(String::from),
    );
    cmd
}

/// The capability names of a `/proc/<pid>/status` mask (CAP_NET_ADMIN is 12, CAP_NET_RAW
/// 13, CAP_NET_BIND_SERVICE 10).
fn cap_names(hex: &str) -> Vec<&'static str> {
    let mask = u64::from_str_radix(hex.trim(), 16).unwrap();
    let known = [(10, "CAP_NET_BIND_SERVICE"), (12, "CAP_NET_ADMIN"), (13, "CAP_NET_RAW")];
    assert_eq!(
        mask & !known.iter().map(|(b, _)| 1u64 << b).sum::<u64>(),
        0,
        "more capabilities than expected: {hex}"
    );
    known
        .iter()
        .filter(|(b, _)| mask & (1 << b) != 0)
        .map(|(_, n)| *n)
        .collect()
}

/// (uid, effective capabilities) of a running process.
fn identity(pid: u32) -> (u32, Vec<&'static str>) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |k: &str| s.lines().find_map(|l| l.strip_prefix(k)).unwrap().trim().to_string();
    let uid = field("Uid:").split_whitespace().nth(1).unwrap().parse().unwrap();
    (uid, cap_names(&field("CapEff:")))
}

/// The shell block of docs/transparent.md whose first line is `# <title>`.
fn doc_block(title: &str) -> String {
    let doc = std::fs::read_to_string(Path::new(ROOT).join("docs/transparent.md")).unwrap();
    let start = doc
        .find(&format!("```sh\n# {title}\n"))
        .unwrap_or_else(|| panic!("docs/transparent.md has no block `# {title}`"));
    let body = &doc[start + "```sh\n".len()..];
    body[..body.find("\n```").unwrap()].to_string()
}

/// Runs a block of shell commands as root in namespace `ns`.
fn sh_in(ns: &str, script: &str) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "bash", "-euo", "pipefail", "-c", script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "in {ns}:\n{script}\nfailed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// sha256 of `n` bytes fetched from REMOTE with plain curl (no proxy) in namespace `ns`.
fn fetch_direct(ns: &str, n: u64) -> String {
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "set -o pipefail; ip netns exec {ns} curl -sS --max-time 60 http://{REMOTE}:{ORIGIN_PORT}/bytes/{n} | sha256sum"
        ))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    match text.get(..64) {
        Some(sha) if out.status.success() => sha.to_string(),
        _ => format!("curl failed: {}", String::from_utf8_lossy(&out.stderr).trim()),
    }
}

/// Bytes the client received over all paths.
fn carried(lab: &Lab) -> u64 {
    lab.client_path_bytes().iter().sum()
}

/// A congestion control the kernel has but lets only CAP_NET_ADMIN choose: the client
/// uses it when there is one, which proves the unit's capability reaches the process.
fn privileged_congestion() -> Option<String> {
    let read = |k: &str| std::fs::read_to_string(format!("/proc/sys/net/ipv4/{k}")).unwrap_or_default();
    let allowed = read("tcp_allowed_congestion_control");
    read("tcp_available_congestion_control")
        .split_whitespace()
        .find(|cc| !allowed.split_whitespace().any(|a| a == *cc))
        .map(String::from)
}

#[test]
fn deb_installs_and_its_units_carry_transfers() {
    let test = "deb_installs_and_its_units_carry_transfers";
    let tools = [
        "dpkg",
        "cargo-deb",
        "setpriv",
        "adduser",
        "iptables",
        "nft",
        "systemd-analyze",
    ];
    if !ready(test) || !mpflex_netns::require_tools(test, &tools) {
        return;
    }
    let installed = Command::new("dpkg-query")
        .args(["-W", "-f", "${Status}", "mpflex"])
        .output()
        .unwrap();
    if String::from_utf8_lossy(&installed.stdout).contains("installed") {
        mpflex_netns::skip(
            test,
            "the mpflex package is installed here and this test would replace it: dpkg -P mpflex first",
        );
        return;
    }

    // Build and install.
    let t = std::time::Instant::now();
    let out = Command::new(Path::new(ROOT).join("scripts/build-deb.sh"))
        .arg("--no-build")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "build-deb.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deb = PathBuf::from(String::from_utf8_lossy(&out.stdout).lines().last().unwrap().trim());
    let built = t.elapsed();
    let out = Command::new("dpkg").arg("-i").arg(&deb).output().unwrap();
    let _installed = Installed;
    assert!(out.status.success(), "dpkg -i {}: {out:?}", deb.display());
    eprintln!("built {} in {built:?}, installed", deb.display());

    // What the package holds.
    for f in [
        "/usr/bin/mpflex",
        "/usr/share/man/man1/mpflex.1.gz",
        "/usr/share/man/man1/mpflex-client.1.gz",
        "/usr/share/bash-completion/completions/mpflex",
        "/usr/share/zsh/vendor-completions/_mpflex",
        "/usr/share/fish/vendor_completions.d/mpflex.fish",
        "/usr/share/doc/mpflex/copyright",
        "/usr/share/doc/mpflex/transparent.md",
    ] {
        assert!(Path::new(f).is_file(), "{f} not installed");
    }
    let conffiles = sh(&["dpkg-query", "-W", "-f", "${Conffiles}", "mpflex"]);
    for f in ["/etc/mpflex/client.toml", "/etc/mpflex/server.toml"] {
        assert!(conffiles.contains(f), "{f} is not a conffile: {conffiles}");
    }
    let version = sh(&["/usr/bin/mpflex", "--version"]);
    assert_eq!(version, sh(&[BIN, "--version"]), "the package holds another binary");
    sh(&[
        "systemd-analyze",
        "verify",
        &format!("{UNITS}/mpflex-client.service"),
        &format!("{UNITS}/mpflex-server.service"),
    ]);
    // The example configuration, started as shipped, says what to do first.
    let out = Command::new("/usr/bin/mpflex")
        .args(["client", "--config", "/etc/mpflex/client.toml"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("/etc/mpflex/client.key") && err.contains("mpflex keygen"),
        "{err}"
    );

    // Server and client as the units start them.
    let server_unit = unit(&format!("{UNITS}/mpflex-server.service"));
    let client_unit = unit(&format!("{UNITS}/mpflex-client.service"));
    for u in [&server_unit, &client_unit] {
        assert_eq!(u["User"], "mpflex");
        assert_eq!(u.get("NoNewPrivileges").map(String::as_str), Some("yes"));
    }
    let cc = privileged_congestion();
    let lab = Lab::new(Options {
        launch: Some(Box::new(move |role: &str, cfg: &str| match role {
            "server" => unit_command(&server_unit, cfg),
            _ => unit_command(&client_unit, cfg),
        })),
        bind_device: true,
        transparent_listen: "[::]:1081",
        client_toml: cc
            .as_ref()
            .map(|cc| format!("congestion = \"{cc}\"\n"))
            .unwrap_or_default(),
        ..Default::default()
    });
    eprintln!("client paths use congestion control {cc:?}");
    let mpflex_uid: u32 = sh(&["id", "-u", "mpflex"]).trim().parse().unwrap();
    let (uid, caps) = identity(lab.client.as_ref().unwrap().id());
    assert_eq!(
        (uid, caps),
        (mpflex_uid, vec!["CAP_NET_ADMIN", "CAP_NET_RAW"]),
        "client"
    );
    let (uid, caps) = identity(lab.server.as_ref().unwrap().id());
    assert_eq!(
        (uid, caps),
        (mpflex_uid, vec!["CAP_NET_BIND_SERVICE", "CAP_NET_ADMIN"]),
        "server"
    );
    let (got, want) = lab.download(20 << 20);
    assert_eq!(got, want, "SOCKS5 download through the installed units");

    // Transparent mode on the host: the documented rules, then the client's paths torn
    // down so that they reconnect under them (mpflex's own connections must pass).
    let cns = lab.topo.client_ns.clone();
    lab.add_remote(REMOTE);
    let n = 5 << 20;
    let want = lab.expected_sha256(n);
    for rules in ["host: iptables", "host: nftables"] {
        // The lab's server sits in 10.0.0.0/8, which the rules leave alone as a local
        // network; a real server is remote. Without that exception only the user
        // exclusion keeps the paths out of the redirect, as on a real host.
        let block = doc_block(rules);
        let remote_server = block.replace("10.0.0.0/8, ", "").replace("10.0.0.0/8 ", "");
        assert_ne!(block, remote_server, "{rules}: no 10.0.0.0/8 exception to take out");
        sh_in(&cns, &remote_server);
        for p in 0..2 {
            lab.kill_socket(p);
        }
        std::thread::sleep(Duration::from_millis(300));
        lab.wait_paths_up(2, Duration::from_secs(15));
        let before = carried(&lab);
        assert_eq!(fetch_direct(&cns, n), want, "{rules}: redirected download");
        assert!(
            carried(&lab) > before + n,
            "{rules}: the download did not go through mpflex"
        );
        sh_in(&cns, &doc_block(&format!("{rules}, undo")));
    }

    // Transparent mode on a router: a LAN namespace behind the client's, its default
    // route through the client's lan0.
    let lan = mpflex_netns::Netns::create("lan").unwrap();
    sh(&[
        "ip",
        "link",
        "add",
        "lan0",
        "netns",
        &cns,
        "type",
        "veth",
        "peer",
        "name",
        "eth0",
        "netns",
        lan.name(),
    ]);
    sh(&["ip", "-n", &cns, "addr", "add", "192.168.77.1/24", "dev", "lan0"]);
    sh(&["ip", "-n", &cns, "link", "set", "lan0", "up"]);
    sh(&["ip", "-n", lan.name(), "addr", "add", "192.168.77.2/24", "dev", "eth0"]);
    sh(&["ip", "-n", lan.name(), "link", "set", "eth0", "up"]);
    sh(&["ip", "-n", lan.name(), "route", "add", "default", "via", "192.168.77.1"]);
    for rules in ["router: iptables", "router: nftables"] {
        sh_in(&cns, &doc_block(rules));
        let before = carried(&lab);
        assert_eq!(fetch_direct(lan.name(), n), want, "{rules}: download from the LAN");
        assert!(
            carried(&lab) > before + n,
            "{rules}: the download did not go through mpflex"
        );
        sh_in(&cns, &doc_block(&format!("{rules}, undo")));
    }
    drop(lan);
    drop(lab);
}
