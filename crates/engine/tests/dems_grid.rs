//! DEMS-F against MinRTT over the bandwidth grid of DEMS's Fig. 13 (Guo et al., MobiCom
//! 2017), on the harness's congestion-control model: fresh paths (initial windows, slow
//! start), WiFi RTT 50 ms behind a 50 ms buffer and LTE RTT 70 ms behind a 500 ms buffer,
//! both paced by the kernel as mpflex's path sockets are, as the lab's `bw-grid` profiles.

use std::time::Duration;

use mpflex_engine::harness::{Pair, PathSpec};

/// The grid's rates, kbit/s: 2.5–27.5 Mbit/s in 5 Mbit/s steps, per path.
const RATES: [usize; 6] = [2500, 7500, 12500, 17500, 22500, 27500];

fn grid(wifi_kbit: usize, lte_kbit: usize) -> [PathSpec; 2] {
    [
        PathSpec {
            buffer: Some(Duration::from_millis(50)),
            pacing: true,
            ..PathSpec::from((25, wifi_kbit / 8))
        },
        PathSpec {
            buffer: Some(Duration::from_millis(500)),
            pacing: true,
            ..PathSpec::from((35, lte_kbit / 8))
        },
    ]
}

/// A `size`-byte chunk from server to client on a new session under `sched` (engine
/// defaults): ms from the request to the last byte, and the payload each path carried.
fn chunk(sched: &str, specs: &[PathSpec], size: usize) -> (u64, Vec<u64>) {
    let mut pair = Pair::custom(|| mpflex_sched::by_name(sched).unwrap(), specs, |_| {});
    let ms = pair.request(size).as_millis() as u64;
    let per_path = (0..specs.len())
        .map(|p| pair.client.path_counters(p).unwrap().0.bytes_received)
        .collect();
    (ms, per_path)
}

/// Fresh 256 KB chunks over all 36 rate pairs: DEMS-F is nowhere more than 5 % slower than
/// MinRTT (the lab's "faster by > 5 %" margin) and faster on the grid as a whole. Before a
/// slower path in the head role was held to its window, the four cells with LTE at
/// 2.5 Mbit/s and WiFi at ≥ 12.5 took 1.10 × MinRTT's time here, and the lab measured
/// DEMS-F 6–15 % slower at 22 of 36 cells (docs/schedulers/dems.md).
#[test]
fn dems_f_is_no_slower_than_minrtt_over_the_bandwidth_grid() {
    let size = 256 * 1024;
    let mut worse = Vec::new();
    let mut log_sum = 0.0;
    for w in RATES {
        for l in RATES {
            let specs = grid(w, l);
            let (m, m_paths) = chunk("minrtt", &specs, size);
            let (d, d_paths) = chunk("dems-f", &specs, size);
            let ratio = d as f64 / m as f64;
            log_sum += ratio.ln();
            let line = format!("{w}x{l} kbit/s: minrtt {m} ms {m_paths:?}, dems-f {d} ms {d_paths:?}, {ratio:.2}");
            println!("{line}");
            if ratio > 1.05 {
                worse.push(line);
            }
        }
    }
    let geo = (log_sum / 36.0).exp();
    println!("geometric mean of DEMS-F / MinRTT: {geo:.3}");
    assert!(worse.is_empty(), "DEMS-F slower than MinRTT: {worse:#?}");
    assert!(geo < 1.0, "DEMS-F / MinRTT over the grid: {geo:.3}");
}
