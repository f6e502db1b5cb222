//! Judging a claim on its run's records: the per-point medians of the claimed system and
//! its baseline, the change between them, and the verdict by the claim's [`Rule`].

use super::{Claim, Finding, Rule, Strictness, Verdict, NOISE, STRICT};
use crate::record::Record;
use crate::summary::quantile;
use crate::units::human;

/// A point of a run: (profile, variant, mode, size).
type PointKey = (String, Option<String>, String, u64);

/// Medians of `measure` per point for `system`.
fn medians(
    recs: &[Record],
    system: &str,
    measure: impl Fn(&Record) -> Option<f64>,
) -> std::collections::BTreeMap<PointKey, f64> {
    per_point(recs, system, measure, Stat::Median)
}

/// How a point's repetitions are summed up: the table's medians, or the means a paper
/// reported.
#[derive(Clone, Copy)]
enum Stat {
    Median,
    Mean,
}

/// `stat` of `measure` per point for `system`.
fn per_point(
    recs: &[Record],
    system: &str,
    measure: impl Fn(&Record) -> Option<f64>,
    stat: Stat,
) -> std::collections::BTreeMap<PointKey, f64> {
    let mut by: std::collections::BTreeMap<PointKey, Vec<f64>> = Default::default();
    for r in recs.iter().filter(|r| r.system == system) {
        if let Some(v) = measure(r) {
            by.entry((r.profile.clone(), r.variant.clone(), r.mode_label(), r.size))
                .or_default()
                .push(v);
        }
    }
    by.into_iter()
        .map(|(k, v)| {
            let x = match stat {
                Stat::Median => quantile(&v, 0.5),
                Stat::Mean => v.iter().sum::<f64>() / v.len() as f64,
            };
            (k, x)
        })
        .collect()
}

/// A point's label: the parts that vary in `keys`.
fn labeller(keys: &[PointKey]) -> impl Fn(&PointKey) -> String {
    let varies =
        |f: &dyn Fn(&PointKey) -> String| keys.iter().map(f).collect::<std::collections::BTreeSet<_>>().len() > 1;
    let (p, v, m, s) = (
        varies(&|k| k.0.clone()),
        varies(&|k| format!("{:?}", k.1)),
        varies(&|k| k.2.clone()),
        varies(&|k| k.3.to_string()),
    );
    move |k: &PointKey| {
        let mut parts = Vec::new();
        if p {
            parts.push(k.0.clone());
        }
        if v {
            parts.extend(k.1.clone());
        }
        if m {
            parts.push(k.2.clone());
        }
        if s && k.3 > 0 {
            parts.push(human(k.3));
        }
        parts.join(" ")
    }
}

/// (point, ours, baseline's, change %) for every point both have; change < 0 is less
/// time (or, for `higher_better`, more of the measure).
fn compare(
    recs: &[Record],
    system: &str,
    baseline: &str,
    measure: impl Fn(&Record) -> Option<f64> + Copy,
) -> Vec<(PointKey, f64, f64, f64)> {
    compare_by(recs, system, baseline, measure, Stat::Median)
}

/// [`compare`] of `stat` per point.
fn compare_by(
    recs: &[Record],
    system: &str,
    baseline: &str,
    measure: impl Fn(&Record) -> Option<f64> + Copy,
    stat: Stat,
) -> Vec<(PointKey, f64, f64, f64)> {
    let ours = per_point(recs, system, measure, stat);
    let base = per_point(recs, baseline, measure, stat);
    ours.into_iter()
        .filter_map(|(k, o)| {
            let b = *base.get(&k)?;
            (b > 0.0).then(|| (k, o, b, (o / b - 1.0) * 100.0))
        })
        .collect()
}

fn pct(x: f64) -> String {
    format!("{}{:.0} %", if x < 0.0 { "−" } else { "+" }, x.abs())
}

/// "256 KB −29 %, 1 MB −6 %"; a summary when there are many points.
fn changes_text(c: &[(PointKey, f64, f64, f64)]) -> String {
    if c.is_empty() {
        return "–".into();
    }
    let keys: Vec<PointKey> = c.iter().map(|x| x.0.clone()).collect();
    let label = labeller(&keys);
    if c.len() <= 9 {
        return c
            .iter()
            .map(|(k, _, _, d)| {
                let l = label(k);
                if l.is_empty() {
                    pct(*d)
                } else {
                    format!("{l} {}", pct(*d))
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
    }
    let d: Vec<f64> = c.iter().map(|x| x.3).collect();
    let best = c.iter().min_by(|a, b| a.3.total_cmp(&b.3)).expect("some");
    let faster = d.iter().filter(|x| **x < -NOISE).count();
    format!(
        "median {} over {} points, best {} ({}), {} of {} faster by > {NOISE:.0} %",
        pct(quantile(&d, 0.5)),
        d.len(),
        pct(best.3),
        label(&best.0),
        faster,
        d.len()
    )
}

/// The points where ours is worse than the baseline by more than [`NOISE`] %, e.g.
/// "worse by more than 5 % at 2 of 10 points", the worst three named. Worse is a
/// positive change, or a negative one where `higher_better` (a bit rate).
pub(super) fn regressions_text(c: &[(PointKey, f64, f64, f64)], higher_better: bool) -> String {
    let worse_by = |d: f64| if higher_better { -d } else { d };
    let mut worse: Vec<&(PointKey, f64, f64, f64)> = c.iter().filter(|x| worse_by(x.3) > NOISE).collect();
    worse.sort_by(|a, b| worse_by(b.3).total_cmp(&worse_by(a.3)));
    let mut text = format!("worse by > {NOISE:.0} % at {} of {} points", worse.len(), c.len());
    if !worse.is_empty() {
        let label = labeller(&c.iter().map(|x| x.0.clone()).collect::<Vec<_>>());
        let named: Vec<String> = worse
            .iter()
            .take(3)
            .map(|(k, _, _, d)| format!("{} {}", label(k), pct(*d)).trim().to_string())
            .collect();
        text += &format!(" ({})", named.join(", "));
    }
    text
}

/// *partly*: under the strict rules when the median reduction `med` over the points is
/// beyond the noise; under the lenient ones when any point's was (`any`).
fn partly(rules: Strictness, med: f64, any: bool) -> bool {
    if rules.partly_on_any_point {
        any
    } else {
        med > NOISE
    }
}

fn completion(r: &Record) -> Option<f64> {
    r.completion_ms
}

fn bitrate(r: &Record) -> Option<f64> {
    r.field("bitrate_mbit")
}

/// The finish gap of a chunk record, ms.
fn gap(r: &Record) -> Option<f64> {
    let f: Vec<Option<f64>> = serde_json::from_value(r.extra.get("path_finish_ms")?.clone()).ok()?;
    crate::workload::chunk::finish_gap_ms(&f)
}

/// The longest gap between arrivals in a `handover` stream, ms: WearMan's interruption.
fn max_gap(r: &Record) -> Option<f64> {
    r.field("max_gap_ms")
}

/// The modelled energy of a transfer, J (every path's radio, priced by the lab's links).
fn energy(r: &Record) -> Option<f64> {
    r.field("energy_j")
}

/// An upload's rate at the receiver, first to last byte, Mbit/s.
fn upload_rate(r: &Record) -> Option<f64> {
    r.field("average_mbit")
}

/// How much longer the pings beside the upload took than the idle pings, median, ms.
fn ping_over_idle(r: &Record) -> Option<f64> {
    Some(r.field("ping_p50_ms")? - r.field("idle_ping_p50_ms")?)
}

/// The median packet sojourn at path `i`'s upload bottleneck, ms.
fn sojourn(r: &Record, i: usize) -> Option<f64> {
    let v: Vec<Option<f64>> = serde_json::from_value(r.extra.get("link_up_sojourn_p50_ms")?.clone()).ok()?;
    v.get(i).copied().flatten()
}

/// The path whose upload bottleneck holds `system`'s packets longest (median over its
/// records): the standing queue QCUT is about.
fn deepest_path(recs: &[Record], system: &str) -> Option<usize> {
    let paths = recs
        .iter()
        .filter(|r| r.system == system)
        .filter_map(|r| r.extra.get("link_up_sojourn_p50_ms")?.as_array().map(Vec::len))
        .max()?;
    (0..paths)
        .filter_map(|i| overall(recs, system, move |r| sojourn(r, i)).map(|q| (i, q)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i)
}

/// The median over the points of `system`'s per-point medians of `measure`.
fn overall(recs: &[Record], system: &str, measure: impl Fn(&Record) -> Option<f64>) -> Option<f64> {
    let v: Vec<f64> = medians(recs, system, measure).into_values().collect();
    (!v.is_empty()).then(|| quantile(&v, 0.5))
}

/// Joules with two significant decimals below 10 J (a 256 KB download over WiFi costs
/// about 0.1 J), one above.
fn joules(x: f64) -> String {
    if x < 10.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.1}")
    }
}

fn ms(x: Option<f64>) -> String {
    x.map_or("–".into(), |x| format!("{x:.0} ms"))
}

/// Judges `claim` on the records of its run by the table's ([`STRICT`]) rules.
pub fn judge(claim: &Claim, recs: &[Record]) -> Finding {
    judge_by(claim, recs, STRICT)
}

/// Judges `claim` on the records of its run by `rules`.
pub fn judge_by(claim: &Claim, recs: &[Record], rules: Strictness) -> Finding {
    let recs: Vec<Record> = recs
        .iter()
        .filter(|r| claim.profiles.is_empty() || claim.profiles.contains(&r.profile.as_str()))
        .cloned()
        .collect();
    let measure = match claim.rule {
        Rule::Video => bitrate,
        Rule::Interruption { .. } => max_gap,
        Rule::Energy { .. } => energy,
        Rule::Queue { .. } => ping_over_idle,
        Rule::Range { .. } | Rule::UpTo(_) | Rule::FinishTogether => completion,
    };
    let vs_base = compare(&recs, claim.system, claim.baseline_system, measure);
    let vs_mptcp = if claim.baseline_system == "mptcp" {
        Vec::new()
    } else {
        compare(&recs, claim.system, "mptcp", measure)
    };
    let mptcp_text = if claim.baseline_system == "mptcp" {
        "(the baseline)".to_string()
    } else {
        changes_text(&vs_mptcp)
    };
    let mut f = Finding {
        vs_baseline: changes_text(&vs_base),
        vs_mptcp: mptcp_text,
        verdict: Verdict::NotMeasured,
        why: String::new(),
        cost: format!(
            "{}: {}; {}: {}",
            claim.system,
            dup_text(&recs, claim.system),
            claim.baseline_system,
            dup_text(&recs, claim.baseline_system)
        ),
    };
    if vs_base.is_empty() {
        f.why = format!(
            "no records of {} and {} in this run",
            claim.system, claim.baseline_system
        );
        return f;
    }
    let reductions: Vec<f64> = vs_base.iter().map(|x| -x.3).collect();
    let beyond_noise = reductions.iter().any(|r| *r > NOISE);
    let unpaced = format!("{}+pacing=false", claim.baseline_system);
    let vs_unpaced = compare(&recs, claim.system, &unpaced, measure);
    let unpaced_text = if vs_unpaced.is_empty() {
        String::new()
    } else {
        format!(
            "; against {unpaced} ({}): {}",
            unpaced_label(claim),
            changes_text(&vs_unpaced)
        )
    };
    match claim.rule {
        Rule::Range { lo, hi } => {
            let med = quantile(&reductions, 0.5);
            f.verdict = range_verdict(med, lo, beyond_noise, rules);
            f.why = format!(
                "median change over {} points {} (paper −{lo:.0}…−{hi:.0} %); best {}{unpaced_text}",
                reductions.len(),
                pct(-med),
                pct(-reductions.iter().copied().fold(f64::MIN, f64::max))
            );
        }
        Rule::Interruption { lo, hi } => {
            let med = quantile(&reductions, 0.5);
            f.verdict = range_verdict(med, lo, beyond_noise, rules);
            let label = labeller(&vs_base.iter().map(|x| x.0.clone()).collect::<Vec<_>>());
            let text = |c: &[(PointKey, f64, f64, f64)]| {
                c.iter()
                    .map(|(k, o, b, d)| {
                        format!("{} gap {o:.0} vs {b:.0} ms ({})", label(k), pct(*d))
                            .trim()
                            .to_string()
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            f.vs_baseline = text(&vs_base);
            if !vs_mptcp.is_empty() {
                f.vs_mptcp = text(&vs_mptcp);
            }
            f.why = format!(
                "longest gap in the stream (median per point) {} against {}: median change over {} points {} \
                 (paper −{lo:.0}…−{hi:.0} %); best {}",
                claim.system,
                claim.baseline_system,
                reductions.len(),
                pct(-med),
                pct(-reductions.iter().copied().fold(f64::MIN, f64::max))
            );
        }
        Rule::Energy { lo, hi, time } => {
            let times = compare(&recs, claim.system, claim.baseline_system, completion);
            let label = labeller(&vs_base.iter().map(|x| x.0.clone()).collect::<Vec<_>>());
            f.vs_baseline = vs_base
                .iter()
                .map(|(k, o, b, d)| {
                    let t = times.iter().find(|x| x.0 == *k);
                    format!(
                        "{} energy {} vs {} J ({}), time {}",
                        label(k),
                        joules(*o),
                        joules(*b),
                        pct(*d),
                        t.map_or("–".into(), |(_, o, b, d)| format!(
                            "{:.2} vs {:.2} s ({})",
                            o / 1000.0,
                            b / 1000.0,
                            pct(*d)
                        ))
                    )
                    .trim()
                    .to_string()
                })
                .collect::<Vec<_>>()
                .join("; ");
            let med = quantile(&reductions, 0.5);
            let t: Vec<f64> = times.iter().map(|x| x.3).collect();
            let med_t = if t.is_empty() { f64::NAN } else { quantile(&t, 0.5) };
            // "About the same time" (time 0) is read as at most NOISE % longer under
            // every rule; a stated time cost is the limit itself, plus the slack.
            let time_limit = if time == 0.0 { NOISE } else { time + rules.slack };
            let met = med >= lo - rules.slack && med_t <= time_limit;
            f.verdict = verdict(met, med, beyond_noise, rules);
            f.why = format!(
                "median energy change over {} points {} (paper −{lo:.0}…−{hi:.0} %), median time change {} \
                 ({})",
                reductions.len(),
                pct(-med),
                if med_t.is_nan() { "–".into() } else { pct(med_t) },
                if time > 0.0 {
                    format!("paper +{time:.0} %, taken as the limit")
                } else {
                    format!("paper about the same, taken as at most +{NOISE:.0} %")
                }
            );
        }
        Rule::Queue { lo, loss } => {
            let (sys, base) = (claim.system, claim.baseline_system);
            let Some(i) = deepest_path(&recs, base) else {
                f.why = format!("no bottleneck sojourn recorded for {base}");
                return f;
            };
            let q = |s: &str| overall(&recs, s, move |r| sojourn(r, i));
            let rate = |s: &str| overall(&recs, s, upload_rate);
            let ping = |s: &str| overall(&recs, s, ping_over_idle);
            let change = |o: Option<f64>, b: Option<f64>| match (o, b) {
                (Some(o), Some(b)) if b > 0.0 => Some((o / b - 1.0) * 100.0),
                _ => None,
            };
            let q_change = change(q(sys), q(base));
            let r_change = change(rate(sys), rate(base));
            let mbit = |x: Option<f64>| x.map_or("–".into(), |x| format!("{x:.2} Mbit/s"));
            let over = |x: Option<f64>| x.map_or("–".into(), |x| format!("+{x:.0} ms"));
            let p = |x: Option<f64>| x.map_or("–".into(), pct);
            f.vs_baseline = format!(
                "queue {} vs {} ({}); pings {} vs {} over idle; upload {} vs {} ({})",
                ms(q(sys)),
                ms(q(base)),
                p(q_change),
                over(ping(sys)),
                over(ping(base)),
                mbit(rate(sys)),
                mbit(rate(base)),
                p(r_change)
            );
            f.vs_mptcp = if q("mptcp").is_some() {
                format!(
                    "mptcp: queue {} (ours {} against it), pings {} over idle, upload {}",
                    ms(q("mptcp")),
                    p(change(q(sys), q("mptcp"))),
                    over(ping("mptcp")),
                    mbit(rate("mptcp"))
                )
            } else {
                "–".into()
            };
            f.verdict = match (q_change, r_change) {
                (Some(qc), Some(rc)) if -qc >= lo - rules.slack && -rc <= loss => Verdict::Reproduced,
                (Some(qc), _) if -qc > NOISE => Verdict::Partly,
                (Some(_), _) => Verdict::Refuted,
                _ => Verdict::NotMeasured,
            };
            f.why = format!(
                "median packet sojourn at path {i}'s upload bottleneck (the baseline's deepest) {} vs {} (paper: more \
                 than −{lo:.0} %); upload rate {} (at most −{loss:.0} % taken as little loss); the 1 KB pings' median \
                 over the idle ping {} vs {}",
                ms(q(sys)),
                ms(q(base)),
                p(r_change),
                over(ping(sys)),
                over(ping(base))
            );
        }
        Rule::UpTo(figures) => {
            let mut all_met = true;
            let mut parts = Vec::new();
            for &(size, paper) in figures {
                // A figure for a size covers the sizes from it up to the next figure's.
                let next = figures
                    .iter()
                    .map(|x| x.0)
                    .filter(|&s| s > size)
                    .min()
                    .unwrap_or(u64::MAX);
                let best = vs_base
                    .iter()
                    .filter(|x| x.0 .3 >= size && x.0 .3 < next)
                    .map(|x| -x.3)
                    .fold(f64::NAN, f64::max);
                if best.is_nan() || best < paper - rules.slack {
                    all_met = false;
                }
                let at = if next == u64::MAX {
                    format!("≥ {}", human(size))
                } else {
                    human(size)
                };
                parts.push(format!("{at}: best {} (paper up to −{paper:.0} %)", pct(-best)));
            }
            // An "up to" figure is a best case; under the strict rules the median over
            // the points must also improve, or one good point hides regressions elsewhere.
            let med = quantile(&reductions, 0.5);
            let met = all_met && (rules.partly_on_any_point || med > NOISE);
            f.verdict = verdict(met, med, beyond_noise, rules);
            f.why = format!(
                "{}; median change over {} points {}{unpaced_text}",
                parts.join("; "),
                reductions.len(),
                pct(-med)
            );
        }
        Rule::FinishTogether => {
            let ours = medians(&recs, claim.system, gap);
            let base = medians(&recs, claim.baseline_system, gap);
            let both: Vec<(PointKey, f64, f64)> = base
                .iter()
                .filter_map(|(k, b)| Some((k.clone(), *ours.get(k)?, *b)))
                .collect();
            let keys: Vec<PointKey> = both.iter().map(|x| x.0.clone()).collect();
            let label = labeller(&keys);
            let considered: Vec<&(PointKey, f64, f64)> = both.iter().filter(|x| x.2 >= 50.0).collect();
            let halved = considered.iter().filter(|x| x.1 <= 0.5 * x.2).count();
            let smaller = both.iter().filter(|x| x.1 < x.2).count();
            // Each point's change of the gap, %, where the baseline's is not zero.
            let gap_changes: Vec<(PointKey, f64, f64, f64)> = both
                .iter()
                .filter(|x| x.2 > 0.0)
                .map(|(k, o, b)| (k.clone(), *o, *b, (o / b - 1.0) * 100.0))
                .collect();
            let gap_reductions: Vec<f64> = gap_changes.iter().map(|x| -x.3).collect();
            let med_gap = if gap_reductions.is_empty() {
                f64::NAN
            } else {
                quantile(&gap_reductions, 0.5)
            };
            // Many points (a full run has dozens) are summed up as the other many-point
            // cells are; each point's gap stays in the tables below.
            f.vs_baseline = if both.len() <= 9 {
                both.iter()
                    .map(|(k, o, b)| format!("{} gap {o:.0} vs {b:.0} ms", label(k)).trim().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            } else {
                let o: Vec<f64> = both.iter().map(|x| x.1).collect();
                let b: Vec<f64> = both.iter().map(|x| x.2).collect();
                let worst = both.iter().max_by(|x, y| x.1.total_cmp(&y.1)).expect("some");
                format!(
                    "median gap {:.0} vs {:.0} ms over {} points; at most half the baseline's at {halved} of {} \
                     where it is ≥ 50 ms; widest {:.0} vs {:.0} ms ({})",
                    quantile(&o, 0.5),
                    quantile(&b, 0.5),
                    both.len(),
                    considered.len(),
                    worst.1,
                    worst.2,
                    label(&worst.0)
                )
            };
            let m = medians(&recs, "mptcp", gap);
            f.vs_mptcp = if m.is_empty() {
                "–".into()
            } else {
                let v: Vec<f64> = m.values().copied().collect();
                format!(
                    "mptcp's gap {:.0}–{:.0} ms",
                    v.iter().copied().fold(f64::MAX, f64::min),
                    v.iter().copied().fold(f64::MIN, f64::max)
                )
            };
            let base_range = if both.is_empty() {
                "–".to_string()
            } else {
                format!(
                    "{:.0}–{:.0} ms",
                    both.iter().map(|x| x.2).fold(f64::MAX, f64::min),
                    both.iter().map(|x| x.2).fold(f64::MIN, f64::max)
                )
            };
            f.verdict = if both.is_empty() {
                Verdict::NotMeasured
            } else if !considered.is_empty() && halved == considered.len() {
                Verdict::Reproduced
            } else if (rules.partly_on_any_point && smaller * 2 > both.len())
                || (!rules.partly_on_any_point && med_gap > NOISE)
            {
                Verdict::Partly
            } else {
                Verdict::Refuted
            };
            f.why = format!(
                "median gap {} vs {} (shown as ours vs baseline); the baseline's gaps {base_range} (paper 100–450 ms, §3 Fig. 2); \
                 at most half the baseline's at {halved} of {} points where it is ≥ 50 ms; smaller at {smaller} of {}; \
                 median change of the gap {}",
                claim.system,
                claim.baseline_system,
                considered.len(),
                both.len(),
                if med_gap.is_nan() { "–".into() } else { pct(-med_gap) },
            );
            // The gap is this claim's measure: its regressions are wider gaps.
            f.vs_baseline += &format!("; gap {}", regressions_text(&gap_changes, false));
        }
        Rule::Video => {
            let ideal = recs.iter().find_map(|r| r.ideal_mbit).unwrap_or(f64::NAN);
            let share = |s: &str| {
                let m = medians(&recs, s, bitrate);
                let v: Vec<f64> = m.values().copied().collect();
                (!v.is_empty()).then(|| quantile(&v, 0.5) / ideal * 100.0)
            };
            let (ours, base, mptcp) = (share(claim.system), share(claim.baseline_system), share("mptcp"));
            let gain = vs_base.first().map_or(f64::NAN, |x| x.3);
            f.vs_baseline = format!(
                "{} of ideal vs {} ({} bit rate)",
                ours.map_or("–".into(), |x| format!("{x:.0} %")),
                base.map_or("–".into(), |x| format!("{x:.0} %")),
                pct(gain)
            );
            f.vs_mptcp = format!(
                "mptcp {} of ideal; {}",
                mptcp.map_or("–".into(), |x| format!("{x:.0} %")),
                changes_text(&vs_mptcp)
            );
            f.verdict = match (ours, base) {
                (Some(o), Some(b)) if o >= 1.5 * b && o >= 80.0 => Verdict::Reproduced,
                (Some(_), Some(_)) if gain > NOISE => Verdict::Partly,
                (Some(_), Some(_)) => Verdict::Refuted,
                _ => Verdict::NotMeasured,
            };
            f.why = format!(
                "average bit rate / ideal {ideal:.2} Mbit/s: {} {}, {} {}, mptcp {} (paper: default 25 %, ECF closest to ideal)",
                claim.system,
                ours.map_or("–".into(), |x| format!("{x:.0} %")),
                claim.baseline_system,
                base.map_or("–".into(), |x| format!("{x:.0} %")),
                mptcp.map_or("–".into(), |x| format!("{x:.0} %")),
            );
        }
    }
    // Every row shows where ours is worse, on the claim's own measure.
    match claim.rule {
        Rule::FinishTogether => {}
        Rule::Video => f.vs_baseline += &format!("; {}", regressions_text(&vs_base, true)),
        _ => f.vs_baseline += &format!("; {}", regressions_text(&vs_base, false)),
    }
    if let Some(src) = claim.means {
        f.vs_baseline += &format!("; means, as {src}: {}", means_text(claim, &recs, measure));
    }
    f
}

/// What the unpaced baseline stands for: the paper's own MinRTT, as it ran it.
fn unpaced_label(claim: &Claim) -> &'static str {
    match claim.id {
        "dems" | "dems-grid" | "dems-finish" => {
            "our unpaced user-level MinRTT, as DEMS ran MinRTT in its own user-level proxy (§6)"
        }
        "ecf" | "ecf-video" => "unpaced, as the kernel's MinRTT the thesis ran",
        _ => "unpaced, as the paper's min-RTT over kernel TCP",
    }
}

/// The claim's changes computed from the means over the repetitions instead of the
/// medians: for a paper that reported means.
fn means_text(claim: &Claim, recs: &[Record], measure: fn(&Record) -> Option<f64>) -> String {
    let (sys, base) = (claim.system, claim.baseline_system);
    let of = |m: fn(&Record) -> Option<f64>| changes_text(&compare_by(recs, sys, base, m, Stat::Mean));
    match claim.rule {
        Rule::Queue { .. } => match deepest_path(recs, base) {
            Some(i) => {
                let c = compare_by(recs, sys, base, move |r| sojourn(r, i), Stat::Mean);
                format!("queue {}", changes_text(&c))
            }
            None => "–".into(),
        },
        Rule::Energy { .. } => format!("energy {}, time {}", of(energy), of(completion)),
        _ => of(measure),
    }
}

/// A record's duplicate bytes as a share of the bytes its paths carried, %.
fn dup_share(r: &Record) -> Option<f64> {
    let total: u64 = r.bytes_per_path.as_ref()?.iter().sum();
    let dup = r.dup_bytes?;
    (total > 0).then(|| dup as f64 * 100.0 / total as f64)
}

/// `system`'s duplicate bytes over the points: the range of the per-point medians.
fn dup_text(recs: &[Record], system: &str) -> String {
    let m: Vec<f64> = medians(recs, system, dup_share).into_values().collect();
    let (Some(lo), Some(hi)) = (m.iter().copied().reduce(f64::min), m.iter().copied().reduce(f64::max)) else {
        return "–".into();
    };
    if (hi - lo).abs() < 0.05 {
        format!("{lo:.1} %")
    } else {
        format!("{lo:.1}–{hi:.1} %")
    }
}

/// A range claim's verdict from the median reduction `med` (%): reproduced when it
/// reaches the paper's lower figure `lo` (less `rules.slack`), partly as [`partly`] says,
/// else refuted.
fn range_verdict(med: f64, lo: f64, beyond_noise: bool, rules: Strictness) -> Verdict {
    verdict(med >= lo - rules.slack, med, beyond_noise, rules)
}

/// A claim's verdict: reproduced when its own test is `met`, else partly as [`partly`]
/// says of the median reduction `med` (%), else refuted.
fn verdict(met: bool, med: f64, beyond_noise: bool, rules: Strictness) -> Verdict {
    if met {
        Verdict::Reproduced
    } else if partly(rules, med, beyond_noise) {
        Verdict::Partly
    } else {
        Verdict::Refuted
    }
}
