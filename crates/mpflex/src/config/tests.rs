use super::*;
use std::time::Duration;

fn write(text: &str) -> tempfile_path::TempPath {
    tempfile_path::TempPath::new(text)
}

mod tempfile_path {
    pub struct TempPath(pub std::path::PathBuf);
    impl TempPath {
        pub fn new(text: &str) -> Self {
            let p = std::env::temp_dir().join(format!(
                "mpflex-cfg-{}-{}.toml",
                std::process::id(),
                rand::random::<u64>()
            ));
            std::fs::write(&p, text).unwrap();
            TempPath(p)
        }
    }
    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

const KEY: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";

fn client_text() -> String {
    format!(
        "private_key = \"{KEY}\"\nserver_public_key = \"{KEY}\"\n[[paths]]\nname = \"a\"\nserver = \"10.0.0.1:7000\"\n"
    )
}

#[test]
fn client_defaults_and_overrides() {
    let f = write(&client_text());
    let c: ClientConfig = load(
        Some(&f.0),
        &["scheduler=roundrobin".into(), "tuning.keepalive_ms=250".into()],
    )
    .unwrap();
    c.validate().unwrap();
    assert_eq!(c.scheduler, "roundrobin");
    assert_eq!(c.tuning.keepalive_ms, 250);
    assert_eq!(c.socks_listen, Some("127.0.0.1:1080".parse().unwrap()));
}

#[test]
fn errors_name_the_key() {
    let f = write(&(client_text() + "bogus = 1\n"));
    let e = load::<ClientConfig>(Some(&f.0), &[]).unwrap_err().to_string();
    assert!(e.contains("bogus"), "{e}");

    let f = write(&client_text());
    let c: ClientConfig = load(Some(&f.0), &["scheduler=fastest".into()]).unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.starts_with("scheduler:"), "{e}");

    let c: ClientConfig = load(Some(&f.0), &["tuning.path_timeout_ms=10".into()]).unwrap();
    assert!(c.validate().unwrap_err().to_string().contains("tuning.path_timeout_ms"));

    let c: ClientConfig = load(Some(&f.0), &["server_public_key=abc".into()]).unwrap();
    assert!(c.validate().unwrap_err().to_string().contains("server_public_key"));

    let e = load::<ClientConfig>(Some(&f.0), &["tuning.keepalive_ms=\"x\"".into()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("keepalive_ms"), "{e}");
}

fn with_paths(extra: &str) -> Result<ClientConfig> {
    let text = format!("private_key = \"{KEY}\"\nserver_public_key = \"{KEY}\"\n{extra}");
    let f = write(&text);
    let c: ClientConfig = load(Some(&f.0), &[])?;
    c.validate()?;
    Ok(c)
}

#[test]
fn paths_name_an_interface_a_pattern_or_auto_with_a_tier() {
    let c = with_paths(
        "[[paths]]\nserver = \"10.0.0.1:7000\"\ndevice = \"wlan0\"\n\
         [[paths]]\nname = \"tether\"\nserver = \"10.0.0.1:7000\"\ndevice = \"usb*\"\npriority = \"secondary\"\n\
         [[paths]]\nserver = \"10.0.0.1:7000\"\nauto = true\nexclude = [\"docker*\", \"wlan0\"]\npriority = \"backup\"\n\
         [[paths]]\nserver = \"10.0.0.1:7000\"\nbackup = true\n",
    )
    .unwrap();
    let names: Vec<String> = c.paths.iter().enumerate().map(|(i, p)| p.display_name(i)).collect();
    assert_eq!(names, ["wlan0", "tether", "auto", "path3"]);
    assert_eq!(c.paths[0].selector(0).unwrap(), Selector::Device("wlan0".into()));
    assert!(matches!(c.paths[1].selector(1).unwrap(), Selector::Pattern(_)));
    assert_eq!(c.paths[2].selector(2).unwrap(), Selector::Auto);
    assert_eq!(c.paths[3].selector(3).unwrap(), Selector::Fixed);
    let tiers: Vec<Tier> = c.paths.iter().enumerate().map(|(i, p)| p.tier(i).unwrap()).collect();
    assert_eq!(tiers, [Tier::Primary, Tier::Secondary, Tier::Backup, Tier::Backup]);
    assert_eq!(tiers.iter().map(|t| t.wire()).collect::<Vec<_>>(), [0, 1, 2, 2]);
    assert_eq!(
        c.warnings(),
        ["paths[3].backup is deprecated: write priority = \"backup\""],
        "the old key still works, with a warning"
    );
}

#[test]
fn a_bad_path_entry_names_its_key() {
    let server = "server = \"10.0.0.1:7000\"\n";
    let cases = [
        (
            "priority = \"bakup\"\n",
            "paths[1].priority: unknown tier \"bakup\" (expected primary, secondary or backup)",
        ),
        (
            "priority = \"primary\"\nbackup = true\n",
            "paths[1].backup: contradicts priority",
        ),
        (
            "device = \"wlan[0\"\n",
            "paths[1].device: \"wlan[0\": '[' without its ']'",
        ),
        (
            "device = \"wlan*\"\nexclude = [\"a b\"]\n",
            "paths[1].exclude[0]: \"a b\"",
        ),
        (
            "device = \"wlan0\"\nauto = true\n",
            "paths[1].auto: set either device or auto",
        ),
        (
            "auto = true\nsource = \"10.0.0.2\"\n",
            "paths[1].source: a device pattern or auto",
        ),
        (
            "device = \"wlan0\"\nexclude = [\"x\"]\n",
            "paths[1].exclude: only with a device pattern",
        ),
    ];
    for (extra, want) in cases {
        let text = format!("[[paths]]\nname = \"a\"\n{server}[[paths]]\nname = \"b\"\n{server}{extra}");
        let e = with_paths(&text).unwrap_err().to_string();
        assert!(e.starts_with(want), "{e:?} should start with {want:?}");
    }
    let e = with_paths(&format!(
        "[[paths]]\n{server}device = \"c0\"\n[[paths]]\n{server}device = \"c0\"\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("paths[1].name: \"c0\" is used twice"), "{e}");
}

const CLASSES: &str = "[[classes]]\nclass = \"bulk\"\nports = [22, \"5000-5100\"]\n\
                       [[classes]]\nclass = \"interactive\"\nhosts = [\"example.com\"]\n\
                       cidrs = [\"10.0.0.0/8\", \"2001:db8::/32\"]\n";

#[test]
fn class_overrides_load_in_client_and_server() {
    let f = write(&(client_text() + CLASSES));
    let c: ClientConfig = load(Some(&f.0), &[]).unwrap();
    c.validate().unwrap();
    assert_eq!(c.classes.len(), 2);
    let rules = c.class_rules().unwrap();
    let t = mpflex_wire::TargetAddr::Domain("x.example.com".into(), 5050);
    assert_eq!(
        rules.class_of(&t),
        Some(mpflex_engine::TrafficClass::Bulk),
        "first match wins"
    );

    let server = format!(
        "listen = [\"0.0.0.0:7000\"]\nprivate_key = \"{KEY}\"\n[[clients]]\nname = \"a\"\npublic_key = \"{KEY}\"\n{CLASSES}"
    );
    let f = write(&server);
    let s: ServerConfig = load(Some(&f.0), &[]).unwrap();
    s.validate().unwrap();
    assert_eq!(s.classes.len(), 2);
}

#[test]
fn a_bad_class_override_names_the_key_and_the_entry() {
    let cases = [
        (
            "[[classes]]\nclass = \"bulk\"\nports = [\"90-80\"]\n",
            "classes[2].ports: bad port range \"90-80\"",
        ),
        (
            "[[classes]]\nclass = \"fast\"\nports = [1]\n",
            "classes[2].class: unknown traffic class",
        ),
        (
            "[[classes]]\nclass = \"bulk\"\n",
            "classes[2].ports: the entry has no matcher",
        ),
        (
            "[[classes]]\nclass = \"bulk\"\ncidrs = [\"10.0.0.0/33\"]\n",
            "classes[2].cidrs: bad CIDR \"10.0.0.0/33\"",
        ),
    ];
    for (extra, want) in cases {
        let f = write(&(client_text() + CLASSES + extra));
        let c: ClientConfig = load(Some(&f.0), &[]).unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.starts_with(want), "{e:?} should start with {want:?}");
    }
    // A key that is not a matcher is refused by name.
    let f = write(&(client_text() + "[[classes]]\nclass = \"bulk\"\nport = [22]\n"));
    let e = load::<ClientConfig>(Some(&f.0), &[]).unwrap_err().to_string();
    assert!(e.contains("port"), "{e}");
}

#[test]
fn tproxy_tcp_is_an_ingress_of_its_own() {
    let paths = "[[paths]]\nname = \"a\"\nserver = \"10.0.0.1:7000\"\n";
    let only = format!("transparent_tproxy_listen = \"[::]:1083\"\n{paths}");
    let c = with_paths(&format!("socks_listen = \"127.0.0.1:1080\"\n{only}")).unwrap();
    assert_eq!(c.transparent_tproxy_listen, Some("[::]:1083".parse().unwrap()));
    // With SOCKS5 off it is still an ingress; sharing the UDP TPROXY port is fine.
    let f = write(&format!(
        "private_key = \"{KEY}\"\nserver_public_key = \"{KEY}\"\ntransparent_udp_listen = \"[::]:1083\"\n{only}"
    ));
    let mut c: ClientConfig = load(Some(&f.0), &[]).unwrap();
    c.socks_listen = None;
    c.validate().unwrap();
    c.transparent_tproxy_listen = None;
    c.transparent_udp_listen = None;
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("at least one ingress"), "{e}");
    // REDIRECT's port cannot be TPROXY's too.
    let e = with_paths(&format!("transparent_listen = \"[::]:1083\"\n{only}"))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("transparent_tproxy_listen: port 1083"), "{e}");
}

#[test]
fn wifi_defaults_overrides_and_bad_values() {
    let f = write(&client_text());
    let c: ClientConfig = load(Some(&f.0), &[]).unwrap();
    c.validate().unwrap();
    assert!(c.wifi.signal_hint);
    let t = c.wifi.thresholds();
    assert_eq!((t.weak_dbm, t.recover_dbm, t.fall_db), (-75, -70, 10));
    assert_eq!(c.wifi.hold(), Duration::from_secs(5));
    assert_eq!(c.wifi.poll(), Duration::from_secs(1));

    let f = write(&(client_text() + "[wifi]\nweak_dbm = -80\nrecover_dbm = -72\nsignal_hint = false\n"));
    let c: ClientConfig = load(Some(&f.0), &["wifi.hold_ms=8000".into()]).unwrap();
    c.validate().unwrap();
    assert!(!c.wifi.signal_hint);
    assert_eq!((c.wifi.weak_dbm, c.wifi.recover_dbm, c.wifi.hold_ms), (-80, -72, 8000));

    let f = write(&client_text());
    for (set, key) in [
        ("wifi.weak_dbm=-75", "wifi.recover_dbm"),
        ("wifi.recover_dbm=-76", "wifi.recover_dbm"),
        ("wifi.weak_dbm=75", "wifi.weak_dbm"),
        ("wifi.recover_dbm=-5", "wifi.recover_dbm"),
        ("wifi.fall_db=0", "wifi.fall_db"),
        ("wifi.poll_ms=10", "wifi.poll_ms"),
        ("wifi.hold_ms=500", "wifi.hold_ms"),
        ("wifi.fall_ms=200", "wifi.fall_ms"),
    ] {
        let mut sets = vec![set.to_string()];
        if set.starts_with("wifi.weak_dbm=-75") {
            sets.push("wifi.recover_dbm=-75".into());
        }
        let c: ClientConfig = load(Some(&f.0), &sets).unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.starts_with(key), "{set}: {e}");
    }
    let e = load::<ClientConfig>(Some(&f.0), &["wifi.weak=1".into()]).unwrap_err();
    assert!(format!("{e:#}").contains("weak"), "{e:#}");
}

/// `[tuning]`'s defaults are the engine's: a default `[tuning]` builds exactly
/// `EngineConfig::new`, for either role.
#[test]
fn default_tuning_builds_the_engines_default_configuration() {
    use mpflex_engine::{EngineConfig, Role};
    for role in [Role::Client, Role::Server] {
        assert_eq!(
            format!("{:?}", Tuning::default().engine(role)),
            format!("{:?}", EngineConfig::new(role))
        );
    }
}

/// A key file others can read is named, with the fix; one only its owner (or the
/// process's own group) reads is fine.
#[test]
fn secret_files_readable_by_others_are_named() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("mpflex-perms-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("server.key");
    std::fs::write(&f, "x").unwrap();
    let mode = |m: u32| std::fs::set_permissions(&f, std::fs::Permissions::from_mode(m)).unwrap();
    mode(0o644);
    let p = super::secret_file_problem(&f).expect("world-readable");
    assert!(
        p.contains("mode 644: every user can read it") && p.contains("chmod o-r,g-r"),
        "{p}"
    );
    mode(0o600);
    assert_eq!(super::secret_file_problem(&f), None);
    // Group-readable by the process's own group (root:mpflex 0640 for the mpflex user).
    mode(0o640);
    assert_eq!(super::secret_file_problem(&f), None);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tun_routes_and_lan_load_and_bad_values_name_the_fix() {
    use crate::tun::routes::Capture;
    let tun = |keys: &str| {
        with_paths(&format!(
            "[[paths]]\nname = \"a\"\nserver = \"10.0.0.1:7000\"\n[tun]\n{keys}"
        ))
    };
    let c = tun("").unwrap();
    assert_eq!(c.tun.unwrap().capture().unwrap(), None, "no routes unless asked");
    let c = tun("routes = \"default\"\nlan = [\"lan0\"]\n").unwrap();
    let t = c.tun.unwrap();
    assert_eq!(t.capture().unwrap(), Some(Capture::Default));
    assert_eq!(t.lan, ["lan0"]);
    let c = tun("routes = [\"203.0.113.7/24\", \"2001:db8::/32\"]\n").unwrap();
    assert_eq!(
        c.tun.unwrap().capture().unwrap(),
        Some(Capture::Prefixes(vec![
            "203.0.113.0/24".parse().unwrap(),
            "2001:db8::/32".parse().unwrap()
        ]))
    );
    for (keys, want) in [
        ("routes = \"all\"\n", "tun.routes: \"all\" is neither \"default\""),
        ("routes = []\n", "tun.routes: an empty list"),
        ("routes = [\"10.0.0.0\"]\n", "tun.routes: \"10.0.0.0\" is not a prefix"),
        ("fd = 5\nroutes = \"default\"\n", "tun.routes: not with tun.fd = 5"),
        ("lan = [\"lan0\"]\n", "tun.lan: a LAN goes into the TUN by its routes"),
        (
            "routes = \"default\"\nlan = [\"a-name-too-long-for-linux\"]\n",
            "tun.lan: \"a-name-too-long-for-linux\" is not an interface name",
        ),
    ] {
        let e = format!("{:#}", tun(keys).unwrap_err());
        assert!(e.starts_with(want), "{keys:?}: {e}");
    }
}
