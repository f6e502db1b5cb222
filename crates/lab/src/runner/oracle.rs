//! The oracle: a chunk split statically over two single-path connections, at the share
//! of the first path that completes it soonest.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Result;

use super::Measured;
use crate::workload::Fields;

/// One repetition's sweep over shares of the first path. The completion time is the later
/// of two transfers, one growing and one shrinking with the share: a coarse sweep at twice
/// `step`, then the two neighbours of its best at one step. `first_best` (in steps) is
/// the first repetition's best, set by it; later repetitions measure it and its two
/// neighbours, so that every repetition measures the same shares and each share has a
/// median. `measure(share)` runs one transfer. Breaks (between transfers) on a stop. The
/// result carries the best transfer's `path_finish_ms` (when each path's last byte
/// arrived), as every other system's record does.
pub(super) fn sweep(
    step: f64,
    first_best: &mut Option<usize>,
    stop: &AtomicBool,
    mut measure: impl FnMut(f64) -> Result<(f64, Fields)>,
) -> Result<ControlFlow<(), Measured>> {
    let fine = (1.0 / step).round().max(1.0) as usize;
    let coarse = (fine / 2).max(1);
    let mut best: Option<(f64, f64)> = None;
    let mut best_finish: Option<serde_json::Value> = None;
    let mut shares: Vec<usize> = match *first_best {
        Some(b) => [b.checked_sub(1), Some(b), Some(b + 1)]
            .into_iter()
            .flatten()
            .filter(|&n| n <= fine)
            .collect(),
        None => (0..=coarse).map(|k| k * fine / coarse).collect(),
    };
    let refine = first_best.is_none();
    let mut samples: Vec<serde_json::Value> = Vec::new();
    let mut i = 0;
    while i < shares.len() {
        // A sweep is many transfers: stop between them.
        if stop.load(Ordering::SeqCst) {
            return Ok(ControlFlow::Break(()));
        }
        let k = shares[i];
        i += 1;
        let p = k as f64 / fine as f64;
        let (ms, f) = measure(p)?;
        // [share, chunk ms, warm-up ms (warm mode)].
        samples.push(match f.get("warmup_ms") {
            Some(w) => serde_json::json!([p, ms, w]),
            None => serde_json::json!([p, ms]),
        });
        if best.is_none_or(|(b, _)| ms < b) {
            best = Some((ms, p));
            best_finish = f.get("path_finish_ms").cloned();
        }
        if refine && i == coarse + 1 && fine > coarse {
            // Coarse sweep done: refine around its best.
            let b = (best.expect("measured").1 * fine as f64).round() as usize;
            for n in [b.checked_sub(1), Some(b + 1)].into_iter().flatten() {
                if n <= fine && !shares.contains(&n) {
                    shares.push(n);
                }
            }
        }
    }
    let (ms, p) = best.expect("at least one share");
    first_best.get_or_insert((p * fine as f64).round() as usize);
    // Every transfer, for the report's best static share.
    let mut extra = Fields::new();
    extra.insert("oracle_shares".into(), samples.into());
    if let Some(finish) = best_finish {
        extra.insert("path_finish_ms".into(), finish);
    }
    Ok(ControlFlow::Continue(Measured {
        ms,
        share: Some(p),
        mpflex: None,
        extra,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a sweep on a completion time V-shaped around `best_p`; returns the shares it
    /// measured and the result's share.
    fn run(step: f64, first: &mut Option<usize>, best_p: f64) -> (Vec<f64>, f64) {
        let mut seen = Vec::new();
        let stop = AtomicBool::new(false);
        let m = sweep(step, first, &stop, |p| {
            seen.push(p);
            let mut f = Fields::new();
            f.insert("path_finish_ms".into(), serde_json::json!([p, 1.0 - p]));
            Ok((100.0 + 1000.0 * (p - best_p).abs(), f))
        })
        .unwrap();
        let ControlFlow::Continue(m) = m else { panic!("stopped") };
        assert_eq!(m.extra["oracle_shares"].as_array().unwrap().len(), seen.len());
        let p = m.share.unwrap();
        assert_eq!(
            m.extra["path_finish_ms"],
            serde_json::json!([p, 1.0 - p]),
            "the best transfer's finish times"
        );
        (seen, m.share.unwrap())
    }

    #[test]
    fn coarse_then_fine_then_the_first_best_and_its_neighbours() {
        let mut first = None;
        let (seen, p) = run(0.25, &mut first, 0.7);
        // Coarse at 0.5, then 0.25 and 0.75 around the best (0.5).
        assert_eq!(seen, [0.0, 0.5, 1.0, 0.25, 0.75]);
        assert_eq!((p, first), (0.75, Some(3)));
        let (seen, p) = run(0.25, &mut first, 0.3);
        assert_eq!(seen, [0.5, 0.75, 1.0]);
        assert_eq!(p, 0.5);
    }

    #[test]
    fn a_stop_breaks_between_transfers() {
        let stop = AtomicBool::new(true);
        let r = sweep(0.1, &mut None, &stop, |_| unreachable!()).unwrap();
        assert!(r.is_break());
    }
}
