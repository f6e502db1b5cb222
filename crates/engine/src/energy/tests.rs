use super::*;

/// Table 3.2 at 1, 2, 5, 10 and 20 Mbit/s, µJ/B (lim_ch1_4 §3.4's test vectors).
#[test]
fn per_byte_energy_matches_table_3_2() {
    let rates = [1.0, 2.0, 5.0, 10.0, 20.0];
    let s3 = EnergyProfile::galaxy_s3();
    let n5 = EnergyProfile::nexus5();
    let hsdpa = EnergyProfile::galaxy_s3_hsdpa();
    let cases: [(&EnergyProfile, LinkKind, Dir, [f64; 5]); 6] = [
        (&s3, LinkKind::Cellular, Dir::Down, [10.043, 5.416, 2.394, 1.291, 0.696]),
        (&s3, LinkKind::Wifi, Dir::Down, [4.675, 2.652, 1.253, 0.711, 0.403]),
        (&s3, LinkKind::Cellular, Dir::Up, [13.344, 7.475, 3.475, 1.947, 1.090]),
        (
            &hsdpa,
            LinkKind::Cellular,
            Dir::Down,
            [9.344, 4.908, 2.095, 1.100, 0.578],
        ),
        (&n5, LinkKind::Cellular, Dir::Up, [7.683, 4.690, 2.443, 1.491, 0.910]),
        (&n5, LinkKind::Wifi, Dir::Down, [1.789, 1.229, 0.748, 0.514, 0.353]),
    ];
    for (p, kind, dir, want) in cases {
        for (b, w) in rates.iter().zip(want) {
            let got = p.per_byte(kind, dir, *b);
            assert!(
                (got - w).abs() < 0.0006,
                "{} {kind:?} {dir:?} at {b}: {got} vs {w}",
                p.name
            );
        }
    }
    assert_eq!(s3.per_byte(LinkKind::Wired, Dir::Down, 5.0), 0.0);
}

/// Table 4.1 (the Galaxy S3's EIB) from the model with γ = 0.8586: both thresholds
/// within 0.035 Mbit/s at LTE 0.5, 1, 1.5 and 2 Mbit/s.
#[test]
fn eib_reproduces_table_4_1() {
    let s3 = EnergyProfile::galaxy_s3();
    for (lte, cell_only, wifi_only) in [
        (0.5, 0.043, 0.234),
        (1.0, 0.134, 0.502),
        (1.5, 0.209, 0.803),
        (2.0, 0.304, 1.070),
    ] {
        let (c, w) = s3.eib_row(Dir::Down, lte);
        assert!(
            (c - cell_only).abs() < 0.035,
            "LTE {lte}: cellular-only below {c} (table {cell_only})"
        );
        assert!(
            (w - wifi_only).abs() < 0.035,
            "LTE {lte}: WiFi-only from {w} (table {wifi_only})"
        );
    }
    // The worked example of §4.1.2 at LTE 1 Mbit/s.
    assert_eq!(s3.cheapest(Dir::Down, 0.1, 1.0), Usage::CellularOnly);
    assert_eq!(s3.cheapest(Dir::Down, 0.3, 1.0), Usage::Both);
    assert_eq!(s3.cheapest(Dir::Down, 0.6, 1.0), Usage::WifiOnly);
}

/// With γ = 1 (Nexus 5) using both is a weighted mean of the two, never below the
/// cheaper one: the "both" region of the EIB vanishes.
#[test]
fn without_shared_components_both_never_wins() {
    let n5 = EnergyProfile::nexus5();
    for w in [0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0] {
        for c in [0.5, 1.0, 2.0, 5.0, 9.0, 20.0] {
            assert_ne!(n5.cheapest(Dir::Down, w, c), Usage::Both, "WiFi {w}, LTE {c}");
        }
    }
}

/// The multipath model (§3.4): E_M = (P_W·S_W + P_C·S_C)(1 − θ + γθ) + C_W + C_C.
#[test]
fn transfer_energy_follows_the_multipath_model() {
    let s3 = EnergyProfile::galaxy_s3();
    // 16 MB over WiFi alone at 20 Mbit/s: 0.403 µJ/B, no fixed cost.
    let wifi = s3.transfer_j(Dir::Down, 16_000_000, 20.0, 0, 9.0);
    assert!((wifi - 16e6 * 0.4034e-6).abs() < 0.01, "{wifi}");
    // Both at 20 and 9 Mbit/s, bytes in proportion: full overlap (θ = 1), so γ applies
    // to all of it, and LTE's promotion and tail are paid once.
    let (sw, sc) = (16_000_000 * 20 / 29, 16_000_000 * 9 / 29);
    let both = s3.transfer_j(Dir::Down, sw, 20.0, sc, 9.0);
    let e_t = (s3.per_byte(LinkKind::Wifi, Dir::Down, 20.0) * sw as f64
        + s3.per_byte(LinkKind::Cellular, Dir::Down, 9.0) * sc as f64)
        * 1e-6
        * 0.8586;
    assert!((both - e_t - s3.cellular.fixed_j()).abs() < 1e-3, "{both}");
    // LTE's fixed cost: 0.31 J promotion + 12.27 J tail.
    assert!((s3.cellular.fixed_j() - 12.585).abs() < 0.01);
    // Half the time overlapping (θ = 0.5): the saving is half as large.
    let half = s3.transfer_j(Dir::Down, 1_000_000, 10.0, 1_000_000, 20.0);
    let sum = (s3.per_byte(LinkKind::Wifi, Dir::Down, 10.0) + s3.per_byte(LinkKind::Cellular, Dir::Down, 20.0)) * 1.0;
    assert!((half - s3.cellular.fixed_j() - sum * (0.5 + 0.5 * 0.8586)).abs() < 1e-3);
}

/// Feeds `bytes` to the meter as 1448-byte packets at `mbit` from `t0_us`.
fn feed(m: &mut Meter, path: usize, t0_us: u64, bytes: u64, mbit: f64) -> u64 {
    let per_pkt_us = 1448.0 * 8.0 / mbit;
    let n = bytes.div_ceil(1448);
    for i in 0..n {
        m.record(path, Dir::Down, t0_us + (i as f64 * per_pkt_us) as u64, 1448);
    }
    t0_us + (n as f64 * per_pkt_us) as u64
}

#[test]
fn meter_prices_a_single_transfer_like_the_model() {
    let s3 = EnergyProfile::galaxy_s3();
    let mut m = Meter::new(s3.clone());
    m.set_kind(0, LinkKind::Wifi);
    m.set_kind(1, LinkKind::Cellular);
    let end = feed(&mut m, 0, 0, 16_000_000, 20.0);
    let r = m.report(end);
    let model = s3.transfer_j(Dir::Down, 16_000_000, 20.0, 0, 1.0);
    assert!((r[0].total_j() - model).abs() / model < 0.02, "{:?} vs {model}", r[0]);
    assert_eq!(r[1], PathEnergy::default());
    // 256 KB over LTE: almost all of it is the promotion and the tail.
    let mut m = Meter::new(s3.clone());
    m.set_kind(0, LinkKind::Cellular);
    let end = feed(&mut m, 0, 0, 262_144, 9.0);
    let r = m.report(end);
    assert_eq!(r[0].promotions, 1);
    assert!((r[0].fixed_j - s3.cellular.fixed_j()).abs() < 1e-9);
    assert!(r[0].transfer_j > 0.3 && r[0].transfer_j < 0.5, "{:?}", r[0]);
}

#[test]
fn meter_charges_tails_between_uses_and_gamma_on_overlap() {
    let s3 = EnergyProfile::galaxy_s3();
    let c = s3.cellular;
    // Two uses 5 s apart: one promotion, 5 s of tail between, a full tail after.
    let mut m = Meter::new(s3.clone());
    m.set_kind(0, LinkKind::Cellular);
    let end = feed(&mut m, 0, 0, 100_000, 9.0);
    let end = feed(&mut m, 0, end + 5_000_000, 100_000, 9.0);
    let r = m.report(end);
    assert_eq!(r[0].promotions, 1);
    let want = c.promotion_j + c.tail_w * (5.0 + c.tail_s);
    assert!(
        (r[0].fixed_j - want).abs() < c.tail_w * 0.3,
        "{} vs {want}",
        r[0].fixed_j
    );
    // 20 s apart: the radio went idle in between; two promotions, two full tails.
    let mut m = Meter::new(s3.clone());
    m.set_kind(0, LinkKind::Cellular);
    let end = feed(&mut m, 0, 0, 100_000, 9.0);
    let end = feed(&mut m, 0, end + 20_000_000, 100_000, 9.0);
    let r = m.report(end);
    assert_eq!(r[0].promotions, 2);
    assert!((r[0].fixed_j - 2.0 * c.fixed_j()).abs() < 1e-9);
    // WiFi and LTE at once: each slot's transfer energy times γ.
    let mut alone = Meter::new(s3.clone());
    alone.set_kind(0, LinkKind::Wifi);
    let end = feed(&mut alone, 0, 0, 2_000_000, 20.0);
    let wifi_alone = alone.report(end)[0].transfer_j;
    let mut both = Meter::new(s3.clone());
    both.set_kind(0, LinkKind::Wifi);
    both.set_kind(1, LinkKind::Cellular);
    let per_w = 1448.0 * 8.0 / 20.0;
    let per_c = 1448.0 * 8.0 / 9.0;
    let n = 2_000_000u64.div_ceil(1448);
    let mut tc = 0.0;
    for i in 0..n {
        let tw = i as f64 * per_w;
        while tc <= tw {
            both.record(1, Dir::Down, tc as u64, 1448);
            tc += per_c;
        }
        both.record(0, Dir::Down, tw as u64, 1448);
    }
    let r = both.report((n as f64 * per_w) as u64);
    assert!((r[0].transfer_j - wifi_alone * s3.gamma).abs() / wifi_alone < 0.02);
    assert_eq!(j_per_mb(2.0, 4_000_000), 0.5);
}

/// An acknowledgement stream up (a few % of the bytes down) costs nothing of its own:
/// the download's law includes it (§3.3); a real upload beside it is priced.
#[test]
fn acknowledgements_fold_into_the_data_direction() {
    let s3 = EnergyProfile::galaxy_s3();
    let mut plain = Meter::new(s3.clone());
    plain.set_kind(0, LinkKind::Wifi);
    let end = feed(&mut plain, 0, 0, 4_000_000, 20.0);
    let (mut a, mut b) = (Meter::new(s3.clone()), Meter::new(s3.clone()));
    a.set_kind(0, LinkKind::Wifi);
    b.set_kind(0, LinkKind::Wifi);
    let per_pkt_us = 1448.0 * 8.0 / 20.0;
    for i in 0..4_000_000u64.div_ceil(1448) {
        let t = (i as f64 * per_pkt_us) as u64;
        for m in [&mut a, &mut b] {
            m.record(0, Dir::Down, t, 1448);
        }
        if i % 10 == 0 {
            a.record(0, Dir::Up, t, 40);
        }
        b.record(0, Dir::Up, t, 500);
    }
    let (acked, bulk_up) = (a, b);
    let base = plain.report(end)[0].transfer_j;
    assert!((acked.report(end)[0].transfer_j - base).abs() < 1e-9);
    assert!(bulk_up.report(end)[0].transfer_j > base * 1.1);
}
