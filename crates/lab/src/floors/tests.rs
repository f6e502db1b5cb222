use super::*;

fn rec(system: &str, profile: &str, rep: usize, ms: f64, j: f64) -> Record {
    serde_json::from_str(&format!(
        r#"{{"system":"{system}","profile":"{profile}","workload":"chunk","mode":"fresh","cc":"cubic","size":{},"rep":{rep},"completion_ms":{ms},"energy_j":{j},"commit":"abc"}}"#,
        16 << 20
    ))
    .unwrap()
}

fn floor(id: &str) -> &'static Floor {
    FLOORS.iter().find(|f| f.id == id).unwrap()
}

#[test]
fn the_floors_are_the_stated_ones() {
    let bounds = |id: &str| {
        floor(id)
            .bounds
            .iter()
            .map(|b| (b.measure, b.reference, b.max))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        bounds("wifi-good"),
        [(Measure::Energy, "mptcp", 0.35), (Measure::Time, "tcp-wifi", 1.05)]
    );
    assert_eq!(
        bounds("wifi-good-lte-bad"),
        [(Measure::Energy, "mptcp", 0.6), (Measure::Time, "mptcp", 1.25)]
    );
    assert_eq!(bounds("wifi-bad"), [(Measure::Time, "mptcp", 1.05)]);
    for f in FLOORS {
        assert_eq!(f.size, 16 << 20, "{}", f.id);
        let runs: Vec<&Run> = RUNS
            .iter()
            .filter(|r| r.profiles.1.split(',').any(|p| p == f.profile))
            .collect();
        assert_eq!(runs.len(), 1, "{} runs once", f.id);
        let runs_system = |s: &str| runs[0].systems.split(',').any(|x| x == s);
        for b in f.bounds {
            assert!(runs_system(b.reference), "{} runs on {}", b.reference, f.profile);
        }
        assert!(runs_system(f.system));
    }
}

#[test]
fn the_run_is_a_valid_configuration() {
    let exe = std::env::current_exe().unwrap();
    for quick in [true, false] {
        let mut n = 0;
        for run in RUNS {
            let (cfg, profiles) = reproduce::config_of(run, quick, Path::new("x.jsonl"), &exe).unwrap();
            n += profiles.len();
            assert_eq!(cfg.sizes, [16 << 20]);
            assert_eq!(cfg.reps, if quick { 3 } else { 10 });
        }
        assert_eq!(n, FLOORS.len(), "one profile per floor");
    }
}

#[test]
fn a_floor_is_met_when_every_bound_holds() {
    let mut recs = Vec::new();
    for rep in 0..3 {
        let d = rep as f64;
        recs.push(rec("mpflex:emptcp", "wifi-good", rep, 7000.0 + d, 7.0 + d));
        recs.push(rec("mptcp", "wifi-good", rep, 5000.0 + d, 23.0 + d));
        recs.push(rec("tcp-wifi", "wifi-good", rep, 6900.0 + d, 7.0));
    }
    let m = judge(floor("wifi-good"), &recs);
    let energy = m[0].clone().unwrap();
    assert_eq!((energy.ours, energy.reference, energy.reps), (8.0, 24.0, 3));
    assert!((energy.ratio - 1.0 / 3.0).abs() < 1e-9);
    let time = m[1].clone().unwrap();
    assert!((time.ratio - 7001.0 / 6901.0).abs() < 1e-9);
    // Another profile's records and another size count for nothing.
    assert_eq!(judge(floor("wifi-bad"), &recs), [None]);
    let t = table(&recs);
    assert!(
        t.contains(
            "| `wifi-good` 16 MB, mpflex:emptcp | energy ≤ 0.35 × mptcp's | 8.00 J vs 24.00 J: 0.33 × (3 reps) | met |"
        ),
        "{t}"
    );
    assert!(
        t.contains("| time ≤ 1.05 × tcp-wifi's | 7.00 s vs 6.90 s: 1.01 × (3 reps) | met |"),
        "{t}"
    );
    assert!(t.contains("| `wifi-bad` 16 MB, mpflex:emptcp | time ≤ 1.05 × mptcp's | – | not measured |"));
    // 1.08 × MPTCP's time on wifi-bad is not met.
    recs.push(rec("mpflex:emptcp", "wifi-bad", 0, 17_190.0, 42.0));
    recs.push(rec("mptcp", "wifi-bad", 0, 15_880.0, 40.0));
    assert!(table(&recs).contains("17.19 s vs 15.88 s: 1.08 × (1 reps) | **not met** |"));
}

#[test]
fn the_section_goes_between_the_markers() {
    let dir = std::env::temp_dir().join(format!("mpflex-floors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let doc = dir.join("energy.md");
    std::fs::write(&doc, format!("# E\n\nbefore\n{BEGIN}\nold\n{END}\nafter\n")).unwrap();
    write_section(&doc, "new\n").unwrap();
    assert_eq!(
        std::fs::read_to_string(&doc).unwrap(),
        format!("# E\n\nbefore\n{BEGIN}\nnew\n{END}\nafter\n")
    );
    std::fs::write(&doc, "no markers\n").unwrap();
    assert!(write_section(&doc, "new\n").is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}
