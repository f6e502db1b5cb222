use super::*;

#[test]
fn builtins() {
    let p = Profile::resolve("seed-default-270").unwrap();
    assert_eq!(p.paths[1].down.delay, Duration::from_millis(135));
    assert_eq!(p.paths[0].down.queue_bytes(), 7040 * 1000 / 8 * 50 / 1000);
    let p = Profile::resolve("seed-default-wifi20").unwrap();
    assert_eq!(p.name, "seed-default-wifi20");
    assert_eq!(p.paths[0].down.delay, Duration::from_millis(10));
    assert_eq!(p.paths[1].up.delay, Duration::from_millis(35));
    assert_eq!(p.paths[0].down.rate, Rate::Constant(7040));
    let p = Profile::resolve("seed-default-lossy").unwrap();
    assert_eq!((p.paths[0].down.loss, p.paths[0].up.loss), (0.01, 0.01));
    assert_eq!((p.paths[1].down.loss, p.paths[1].up.loss), (0.0, 0.0));
    assert!(Profile::resolve("nope").is_err());
}

#[test]
fn toml_profile_and_errors() {
    let dir = std::env::temp_dir().join(format!("mpfl-prof-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("p.toml");
    std::fs::write(
        &f,
        "[[paths]]\nname = \"a\"\ndown = { rate_kbit = 1000, delay_ms = 10, loss_pct = 1 }\nup = { delay_ms = 10 }\n\
         [[events]]\nat_ms = 500\npath = \"a\"\naction = \"down\"\n",
    )
    .unwrap();
    let p = Profile::resolve(f.to_str().unwrap()).unwrap();
    assert_eq!(p.paths[0].down.loss, 0.01);
    assert_eq!(p.paths[0].up.rate, Rate::Unlimited);
    std::fs::write(
        &f,
        "[[paths]]\nname = \"a\"\ndown = { rate_kbit = 0, delay_ms = 1 }\nup = { delay_ms = 1 }\n",
    )
    .unwrap();
    assert!(Profile::resolve(f.to_str().unwrap())
        .unwrap_err()
        .to_string()
        .contains("rate_kbit"));
    let _ = std::fs::remove_dir_all(&dir);
}

fn load(text: &str) -> Result<Profile> {
    let dir = std::env::temp_dir().join(format!("mpfl-prof-ev-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Unit tests run in parallel: one file per call.
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let f = dir.join(format!(
        "p{}.toml",
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::write(&f, text).unwrap();
    let p = Profile::resolve(f.to_str().unwrap());
    let _ = std::fs::remove_file(&f);
    p
}

const TWO_PATHS: &str = "[[paths]]\nname = \"a\"\ndown = { rate_kbit = 1000, delay_ms = 10 }\nup = { delay_ms = 10 }\n\
                         [[paths]]\nname = \"b\"\ndown = { rate_kbit = 2000, delay_ms = 20 }\nup = { delay_ms = 20 }\n";

#[test]
fn events_parse_typed() {
    let p = load(&format!(
        "{TWO_PATHS}[[events]]\nat_ms = 1500\npath = \"b\"\naction = \"change\"\ndirection = \"down\"\n\
         rate_kbit = 500\ndelay_ms = 2.5\nloss_pct = 1\n\
         [[events]]\nat_ms = 9\npath = \"a\"\naction = \"down\"\n"
    ))
    .unwrap();
    assert_eq!(
        p.events[0],
        Event {
            at: Duration::from_millis(1500),
            path: 1,
            direction: Direction::Down,
            action: Action::Change {
                rate_kbit: Some(500),
                delay: Some(Duration::from_micros(2500)),
                loss: Some(0.01),
            },
        }
    );
    assert_eq!(p.events[1].direction, Direction::Both);
    assert_eq!(p.events[1].action, Action::Down);

    // Applying the change to the down direction's model.
    let mut l: Link<u8> = Link::new(p.paths[1].down.clone(), 1);
    p.events[0].apply(&mut l);
    assert_eq!(l.params().rate, Rate::Constant(500));
    assert_eq!(l.params().delay, Duration::from_micros(2500));
    assert_eq!(l.params().loss, 0.01);
}

#[test]
fn bad_events_and_values_are_errors_not_panics() {
    let cases = [
        (
            "[[events]]\nat_ms = 1\npath = \"zz\"\naction = \"down\"\n",
            "no path named",
        ),
        (
            "[[events]]\nat_ms = 1\npath = \"a\"\naction = \"explode\"\n",
            "not one of",
        ),
        (
            "[[events]]\nat_ms = 1\npath = \"a\"\naction = \"change\"\n",
            "needs rate_kbit",
        ),
        (
            "[[events]]\nat_ms = 1\npath = \"a\"\naction = \"down\"\nrate_kbit = 5\n",
            "go with action",
        ),
        (
            "[[events]]\nat_ms = 1\npath = \"a\"\naction = \"change\"\ndelay_ms = nan\n",
            "delay_ms",
        ),
        (
            "[[events]]\nat_ms = 1\npath = \"a\"\naction = \"up\"\ndirection = \"sideways\"\n",
            "direction",
        ),
    ];
    for (ev, want) in cases {
        let e = format!("{:#}", load(&format!("{TWO_PATHS}{ev}")).unwrap_err());
        assert!(e.contains(want), "{ev:?}: {e}");
    }
    for (dir, want) in [
        ("{ delay_ms = nan }", "delay_ms"),
        ("{ delay_ms = inf }", "delay_ms"),
        ("{ delay_ms = -1 }", "delay_ms"),
        ("{ delay_ms = 1, jitter_ms = 1e300 }", "jitter_ms"),
        ("{ delay_ms = 1, queue_bytes = 0 }", "queue_bytes"),
        ("{ delay_ms = 1, loss_pct = 100 }", "loss_pct"),
        ("{ delay_ms = 1, rate_kbit = 5, trace = \"x\" }", "not both"),
        ("{ delay_ms = 1, speed = 5 }", "unknown field"),
    ] {
        let text = format!("[[paths]]\nname = \"a\"\ndown = {dir}\nup = {{ delay_ms = 1 }}\n");
        let e = format!("{:#}", load(&text).unwrap_err());
        assert!(e.contains(want), "{dir}: {e}");
    }
    assert!(format!("{:#}", load("paths = []\n").unwrap_err()).contains("between 1 and 8"));
}

#[test]
fn bw_grid_parses_names_and_shapes() {
    let p = Profile::resolve("bw-grid:2.50x27.5").unwrap();
    assert_eq!(p.name, "bw-grid:2.5x27.5");
    assert_eq!(Profile::resolve("bw-grid:10x5").unwrap().name, "bw-grid:10x5");
    assert_eq!(Profile::resolve("bw-grid:10.0x0.3").unwrap().name, "bw-grid:10x0.3");
    assert_eq!(p.paths.len(), 2);
    let (wifi, lte) = (&p.paths[0], &p.paths[1]);
    assert_eq!((wifi.name.as_str(), lte.name.as_str()), ("wifi", "lte"));
    assert_eq!(wifi.down, constant(2500, 50, 50));
    assert_eq!(wifi.up, constant(2500, 50, 50));
    assert_eq!(lte.down, constant(27_500, 70, 500));
    assert_eq!(lte.up, constant(27_500, 70, 500));
    assert_eq!(wifi.down.delay + wifi.up.delay, Duration::from_millis(50));
    assert_eq!(lte.down.delay + lte.up.delay, Duration::from_millis(70));
    assert_eq!(wifi.down.queue, QueueLimit::Millis(50));
    assert_eq!(lte.up.queue, QueueLimit::Millis(500));
    assert!(p.events.is_empty());
    assert!((p.down_capacity_mbit() - 30.0).abs() < 1e-9);
    assert!((p.up_capacity_mbit() - 30.0).abs() < 1e-9);
    // The name resolves back to the same profile.
    assert_eq!(Profile::resolve(&p.name).unwrap(), p);
}

#[test]
fn bw_grid_family() {
    let all = expand("bw-grid").unwrap();
    assert_eq!(all.len(), 36);
    let names: std::collections::HashSet<_> = all.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names.len(), 36);
    assert_eq!(all[0].name, "bw-grid:2.5x2.5");
    assert_eq!(all[1].name, "bw-grid:2.5x7.5");
    assert_eq!(all[6].name, "bw-grid:7.5x2.5");
    assert_eq!(all[35].name, "bw-grid:27.5x27.5");
    for p in &all {
        assert_eq!(&Profile::resolve(&p.name).unwrap(), p);
    }
}

#[test]
fn ecf_asym_pairs() {
    let p = Profile::resolve("ecf-asym:0.3x8.6").unwrap();
    assert_eq!(p.name, "ecf-asym:0.3x8.6");
    assert_eq!(p.paths[0].down.rate, Rate::Constant(300));
    assert_eq!(p.paths[0].up.rate, Rate::Constant(300));
    assert_eq!(p.paths[1].down.rate, Rate::Constant(8600));
    assert_eq!(p.paths[1].up.rate, Rate::Constant(8600));
    assert_eq!(p.paths[0].down.queue, QueueLimit::Bytes(ECF_QUEUE_BYTES));
    assert_eq!(p.paths[1].up.queue, QueueLimit::Bytes(ECF_QUEUE_BYTES));
    assert_eq!(p.paths[0].up.delay, Duration::from_millis(10));
    assert_eq!(p.paths[1].down.delay, Duration::from_millis(35));
    assert!((p.down_capacity_mbit() - 8.9).abs() < 1e-9);

    let six = expand("ecf-asym").unwrap();
    let names: Vec<_> = six.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "ecf-asym:0.3x8.6",
            "ecf-asym:0.7x8.6",
            "ecf-asym:1.1x8.6",
            "ecf-asym:1.7x8.6",
            "ecf-asym:4.2x8.6",
            "ecf-asym:8.6x8.6"
        ]
    );
    let all = expand("ecf-asym-all").unwrap();
    assert_eq!(all.len(), 36);
    assert_eq!(all[1].name, "ecf-asym:0.3x0.7");
    assert_eq!(all[6].name, "ecf-asym:0.7x0.3");
}

#[test]
fn other_families_and_lists() {
    let names = |spec: &str| -> Vec<String> { expand(spec).unwrap().into_iter().map(|p| p.name).collect() };
    assert_eq!(
        names("seed-default-all"),
        ["seed-default", "seed-default-270", "seed-default-470"]
    );
    assert_eq!(names("seed-default-270"), ["seed-default-270"]);
    assert_eq!(
        names("seed-default, bw-grid:5x5,ecf-asym"),
        [
            "seed-default",
            "bw-grid:5x5",
            "ecf-asym:0.3x8.6",
            "ecf-asym:0.7x8.6",
            "ecf-asym:1.1x8.6",
            "ecf-asym:1.7x8.6",
            "ecf-asym:4.2x8.6",
            "ecf-asym:8.6x8.6"
        ]
    );
    assert!(format!("{:#}", expand("seed-default,,bw-grid").unwrap_err()).contains("empty element"));
    assert!(format!("{:#}", expand("seed-default,nope").unwrap_err()).contains("\"nope\""));
    // resolve points families to expand rather than calling them unknown.
    assert!(format!("{:#}", Profile::resolve("bw-grid").unwrap_err()).contains("family"));
    let e = format!("{:#}", Profile::resolve("nope").unwrap_err());
    assert!(e.contains("bw-grid:<wifi>x<lte>") && e.contains("ecf-asym"), "{e}");

    let p = seed_default(70);
    assert!((p.down_capacity_mbit() - 16.225).abs() < 1e-9);
    assert!((p.up_capacity_mbit() - 4.306).abs() < 1e-9);
}

#[test]
fn traces_family() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces");
    if !dir.is_dir() {
        crate::netns::skip("traces_family", &format!("{} is missing", dir.display()));
        return;
    }
    let all = expand(&format!("traces:{}", dir.display())).unwrap();
    let names: Vec<_> = all.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["trace:ATT-LTE-driving-2016", "trace:TMobile-LTE-short"]);
    for p in &all {
        assert!(matches!(p.paths[1].down.rate, Rate::Trace(_)));
        assert!(matches!(p.paths[1].up.rate, Rate::Trace(_)));
        // WiFi's 7.04 Mbit/s plus a trace's mean rate.
        assert!(
            p.down_capacity_mbit() > 7.04 + 0.1,
            "{}: {}",
            p.name,
            p.down_capacity_mbit()
        );
        assert!(
            p.up_capacity_mbit() > 2.02 + 0.1,
            "{}: {}",
            p.name,
            p.up_capacity_mbit()
        );
    }

    let empty = std::env::temp_dir().join(format!("mpfl-prof-traces-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(empty.join("lonely.down"), "1\n").unwrap();
    let e = format!("{:#}", expand(&format!("traces:{}", empty.display())).unwrap_err());
    assert!(e.contains("no <name>.down"), "{e}");
    let _ = std::fs::remove_dir_all(&empty);
    assert!(expand("traces:/nonexistent/mpfl").is_err());
}

#[test]
fn bad_pair_specs_name_the_spec() {
    for (spec, want) in [
        ("bw-grid:axb", "not a number"),
        ("bw-grid:5xb", "lte rate \"b\""),
        ("bw-grid:0x5", "must be > 0"),
        ("bw-grid:-1x5", "must be > 0"),
        ("bw-grid:5xnan", "not a number"),
        ("bw-grid:5xinf", "not a number"),
        ("bw-grid:5x1e9", "at most"),
        ("bw-grid:5x0.0001", "below 1 kbit/s"),
        ("bw-grid:5", "expected <wifi>x<lte>"),
        ("bw-grid:", "expected <wifi>x<lte>"),
        ("ecf-asym:5x", "not a number"),
    ] {
        let e = format!("{:#}", Profile::resolve(spec).unwrap_err());
        assert!(e.contains(&format!("{spec:?}")), "{spec}: {e}");
        assert!(e.contains(want), "{spec}: {e}");
        assert!(expand(spec).is_err());
    }
    assert!(bw_grid(0, 5).is_err());
}

#[test]
fn energy_profiles() {
    let g = Profile::resolve("wifi-good").unwrap();
    assert_eq!((g.paths[0].name.as_str(), g.paths[1].name.as_str()), ("wifi", "lte"));
    assert!((g.down_capacity_mbit() - 29.0).abs() < 1e-9);
    assert_eq!(g.paths[0].down.delay, Duration::from_micros(7500));
    assert_eq!(g.paths[1].down.delay, Duration::from_micros(32_500));
    let b = Profile::resolve("wifi-bad").unwrap();
    assert!((b.down_capacity_mbit() - 9.8).abs() < 1e-9);
    let gb = Profile::resolve("wifi-good-lte-bad").unwrap();
    assert_eq!(gb.name, "wifi-good-lte-bad");
    assert!((gb.down_capacity_mbit() - 25.0).abs() < 1e-9);
    assert_eq!(gb.paths[1].up, g.paths[1].up, "only LTE's downlink is worse");
    let o = Profile::resolve("wifi-onoff").unwrap();
    assert_eq!(o.name, "wifi-onoff");
    let Rate::Trace(t) = &o.paths[0].down.rate else {
        panic!("a trace")
    };
    // Starts slow: 0.8 Mbit/s is one opportunity per 15 ms.
    let first = t.opportunities_between(Duration::ZERO, Duration::from_millis(151));
    assert!((9..=10).contains(&first), "{first}");
    // Over 20 minutes of 40 s holding times the mean lies between the two rates.
    let per_s = t.opportunities_between(Duration::ZERO, Duration::from_secs(1200)) as f64 / 1200.0;
    let mbit = per_s * 1500.0 * 8.0 / 1e6;
    assert!(mbit > 3.0 && mbit < 18.0, "{mbit}");
    assert_eq!(Profile::resolve("wifi-onoff:4").unwrap().name, "wifi-onoff:4");
    assert!(Profile::resolve("wifi-onoff:0").is_err());
    assert!(Profile::resolve("wifi-onoff:x").is_err());
}

/// The N-path built-ins: three, four and five paths with distinct names (systems name
/// them, `tcp-<path>`), mixed rates and RTTs, each kind of link the energy model knows;
/// `five-router`'s cellular link replays the trace it is given.
#[test]
fn n_path_builtins() {
    use mpflex_engine::energy::LinkKind;
    let rtts = |p: &Profile| -> Vec<u64> {
        p.paths
            .iter()
            .map(|x| (x.down.delay + x.up.delay).as_millis() as u64)
            .collect()
    };
    let names = |p: &Profile| -> Vec<String> { p.paths.iter().map(|x| x.name.clone()).collect() };
    let three = Profile::resolve("three-wan").unwrap();
    assert_eq!(names(&three), ["wired", "wifi", "lte"]);
    assert_eq!(rtts(&three), [30, 50, 70]);
    assert!((three.down_capacity_mbit() - (10.0 + 7.04 + 9.185)).abs() < 1e-9);
    let four = Profile::resolve("four-mixed").unwrap();
    assert_eq!(names(&four), ["wired", "wifi", "lte", "lte2"]);
    assert_eq!(rtts(&four), [30, 50, 70, 120]);
    assert_eq!(four.paths[3].down.rate, Rate::Constant(4000));
    assert_eq!(four.paths[3].down.queue, QueueLimit::Millis(500));
    for p in [&three, &four] {
        let kinds: Vec<_> = p.paths.iter().map(|x| crate::energy::kind_of(&x.name)).collect();
        assert_eq!(kinds[..3], [LinkKind::Wired, LinkKind::Wifi, LinkKind::Cellular]);
    }
    let e = format!("{:#}", Profile::resolve("five-router:/no/such/trace").unwrap_err());
    assert!(e.contains("five-router") && e.contains("/no/such/trace.down"), "{e}");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces");
    if !dir.is_dir() {
        crate::netns::skip("n_path_builtins", &format!("{} is missing", dir.display()));
        return;
    }
    let prefix = dir.join("ATT-LTE-driving-2016");
    let five = Profile::resolve(&format!("five-router:{}", prefix.display())).unwrap();
    assert_eq!(five.name, "five-router:ATT-LTE-driving-2016");
    assert_eq!(names(&five), ["fiber", "dsl", "wifi", "lte", "lte-trace"]);
    assert_eq!(rtts(&five), [15, 40, 50, 70, 90]);
    assert!(matches!(five.paths[4].down.rate, Rate::Trace(_)));
    assert!(matches!(five.paths[4].up.rate, Rate::Trace(_)));
    // Four constant links and the trace's mean (4.56 Mbit/s).
    let constant = 20.0 + 6.0 + 7.04 + 9.185;
    assert!(
        (five.down_capacity_mbit() - constant - 4.56).abs() < 0.1,
        "{}",
        five.down_capacity_mbit()
    );
    assert_eq!(expand("three-wan,four-mixed").unwrap().len(), 2);
}
