//! `reproduce`: each seed claim's experiment as its paper ran it — the paper's baseline,
//! sizes, paths and repetitions — on current code, side by side in one run, and the table
//! of claims in `docs/results.md` written from it.
//!
//! Rule: a claim's verdict compares the claimed system with the baseline *its paper* used
//! (DEMS, ECF and TxDelay against MinRTT; MPFlex and eMPTCP against the kernel's MPTCP;
//! QCUT against no queue control; WearMan against reactive handover), measured in
//! the same run on the same build, with kernel MPTCP beside it; the rules for
//! "reproduced", "partly" and "refuted" are fixed here and printed with the table. The
//! reason: issue 27 — our docs compared with kernel MPTCP and the oracle, so a reviewer
//! could not check a paper's number against its own baseline, and tables stitched runs of
//! different builds.
//!
//! This module only plans runs and judges their records: the runs go through
//! [`crate::runner`], the tables through [`crate::report`], the profiles and workloads are
//! the lab's own.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use anyhow::{bail, Context, Result};

use crate::profile;
use crate::record::Record;
use crate::runner::{self, RunConfig, System};
use crate::units::parse_size;
use crate::workload::Workload;

mod catalog;
mod judge;
pub mod ledger;
pub use judge::{judge, judge_by};

/// One `mpflex-lab run` a claim reads: (quick, full) where the two differ.
#[derive(Clone, Copy)]
pub struct Run {
    /// Its results file's stem.
    pub name: &'static str,
    pub profiles: (&'static str, &'static str),
    pub workload: &'static str,
    pub systems: &'static str,
    pub sizes: (&'static str, &'static str),
    pub modes: (&'static str, &'static str),
    pub variants: Option<&'static str>,
    pub secs: Option<(f64, f64)>,
    pub reps: (usize, usize),
}

pub use catalog::{CLAIMS, RUNS};

/// What a claim's judge found.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub vs_baseline: String,
    pub vs_mptcp: String,
    pub verdict: Verdict,
    /// The measured numbers the verdict rests on, and the rule it met.
    pub why: String,
    /// What the gain cost: the claimed system's and the baseline's duplicate bytes.
    pub cost: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Reproduced,
    Partly,
    Refuted,
    /// The run has no records for it.
    NotMeasured,
}

impl Verdict {
    fn word(self) -> &'static str {
        match self {
            Verdict::Reproduced => "**reproduced**",
            Verdict::Partly => "**partly**",
            Verdict::Refuted => "**refuted**",
            Verdict::NotMeasured => "not measured",
        }
    }
}

/// How strictly the rules read a paper's figure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Strictness {
    /// Points by which a reduction may fall short of the paper's figure and still reach it.
    pub slack: f64,
    /// *partly* when any single point is better by more than [`NOISE`] %; otherwise only
    /// when the median over the claim's points is.
    pub partly_on_any_point: bool,
}

/// The table's rules: a claim reaches the paper's figure itself, and *partly* needs the
/// median over its points to improve beyond the noise. The reason: a reader checks our
/// number against the paper's, not against the paper's less a slack, and one good point
/// among regressions is not a partial reproduction (issue 50).
pub const STRICT: Strictness = Strictness {
    slack: 0.0,
    partly_on_any_point: false,
};

/// The rules of the tables before [`STRICT`]: a [`NOISE`]-point slack, and *partly* on any
/// one point. Kept to show, beside each verdict, what they said.
pub const LENIENT: Strictness = Strictness {
    slack: NOISE,
    partly_on_any_point: true,
};

/// How a claim is judged ([`STRICT`]; each rule says where [`LENIENT`] differed). Where
/// a rule says *partly*, it means: the median of the reductions over the claim's points
/// is more than [`NOISE`] % (lenient: some point was).
pub enum Rule {
    /// The claimed system's time is `lo`…`hi` % below the baseline's: reproduced when the
    /// median of our reductions over the points reaches `lo` (lenient: `lo` − [`NOISE`]);
    /// partly, refuted otherwise.
    Range { lo: f64, hi: f64 },
    /// "Up to" these reductions, one per size (bytes, %): reproduced when every size's
    /// best reduction over the points reaches the figure and the median over all points
    /// is more than [`NOISE`] % (lenient: the best within [`NOISE`], whatever the
    /// median); partly; refuted otherwise.
    UpTo(&'static [(u64, f64)]),
    /// DEMS: paths finish together where MinRTT's finish 100–450 ms apart: reproduced
    /// when the claimed system's median finish gap is at most half the baseline's at every
    /// point where the baseline's is ≥ 50 ms; partly when the median change of the gap
    /// over the points is more than [`NOISE`] % shorter (lenient: shorter at most
    /// points); refuted otherwise.
    FinishTogether,
    /// ECF's video: the baseline reached 25 % of the ideal bit rate, ECF the closest to
    /// it: reproduced when the claimed system's bit rate is ≥ 1.5 × the baseline's and
    /// ≥ 80 % of the ideal; partly when it is more than [`NOISE`] % above the baseline's;
    /// refuted otherwise.
    Video,
    /// QCUT: the queue below the socket `lo` % shorter with "little" loss of upload
    /// throughput: reproduced when the claimed system's bottleneck queue (the path where the
    /// baseline's is deepest) is at least `lo` % shorter (lenient: `lo` − [`NOISE`]) and its
    /// upload rate at most `loss` % below the baseline's; partly when the queue is more
    /// than [`NOISE`] % shorter; refuted otherwise.
    Queue { lo: f64, loss: f64 },
    /// WearMan: the interruption (the longest gap in a fixed-rate stream) `lo`…`hi` % shorter
    /// than the baseline's, judged as [`Rule::Range`] on the gap.
    Interruption { lo: f64, hi: f64 },
    /// eMPTCP: `lo`…`hi` % less energy than the baseline for downloads at most `time` %
    /// longer: reproduced when the median energy reduction over the points reaches `lo`
    /// and the median time change is at most `time` (lenient: both with [`NOISE`] points
    /// of slack); `time` 0 is the paper's "about the same time", read as at most
    /// [`NOISE`] % longer under both; partly on the energy; refuted otherwise.
    Energy { lo: f64, hi: f64, time: f64 },
}

/// Differences within this many percent are taken as noise (the lab's medians over a few
/// repetitions move by a few percent from run to run on the shared machine).
pub const NOISE: f64 = 5.0;

/// A seed's claim and how it is checked.
pub struct Claim {
    pub id: &'static str,
    /// A few words for the README's summary.
    pub short: &'static str,
    /// The paper and what it claims, with its numbers.
    pub claim: &'static str,
    pub figure: &'static str,
    /// The paper's baseline, as it names it.
    pub baseline: &'static str,
    /// The claimed system and its baseline, as systems of the run.
    pub system: &'static str,
    pub baseline_system: &'static str,
    /// The run it reads, and its profiles' names the claim covers (all when empty).
    pub run: &'static str,
    pub profiles: &'static [&'static str],
    pub rule: Rule,
    /// Where the paper reported means over its repetitions rather than medians: where it
    /// says so (the row then shows the changes of the means beside the medians').
    pub means: Option<&'static str>,
    /// What the verdict is a verdict on, where the run cannot test the paper's claim
    /// itself (its baseline is not built): shown beside the verdict.
    pub scope: Option<&'static str>,
    /// How the experiment here differs from the paper's, and what explains a miss.
    pub note: &'static str,
}

/// What `reproduce` was asked.
pub struct Options {
    pub quick: bool,
    /// Where the runs' results files go (one per run, written anew).
    pub out_dir: PathBuf,
    /// The Markdown file whose generated section is (re)written (none: print only).
    pub doc: Option<PathBuf>,
    /// The README whose summary (between its markers) is rewritten (none: left alone).
    pub readme: Option<PathBuf>,
    pub mpflex_bin: PathBuf,
    /// Judge the results files already in `out_dir` instead of running.
    pub report_only: bool,
    /// Continue the runs in `out_dir` on the same build: skip the (run, profile) pairs its
    /// ledger says finished, run the rest (an interrupted pair again, whole).
    pub resume: bool,
}

/// The claims `which` names: one id, or `all`.
pub fn select(which: &str) -> Result<Vec<&'static Claim>> {
    if which == "all" {
        return Ok(CLAIMS.iter().collect());
    }
    match CLAIMS.iter().find(|c| c.id == which) {
        Some(c) => Ok(vec![c]),
        None => bail!(
            "unknown claim {which:?}: all, {}",
            CLAIMS.iter().map(|c| c.id).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// The runs `claims` read, each once, in [`RUNS`] order.
pub fn runs_for(claims: &[&Claim]) -> Vec<&'static Run> {
    RUNS.iter().filter(|r| claims.iter().any(|c| c.run == r.name)).collect()
}

fn pick<T: Copy>(quick: bool, v: (T, T)) -> T {
    if quick {
        v.0
    } else {
        v.1
    }
}

/// What `--quick` cuts from `run` against the full run, for the claim's row: a reader of
/// a quick table must see what it did not run (issue 27: indicative verdicts say why).
pub fn quick_cut(run: &Run) -> String {
    let mut cut = Vec::new();
    let mut differs = |what: &str, (q, f): (&str, &str)| {
        if q != f {
            cut.push(format!("{what} {q} (full: {f})"));
        }
    };
    differs("profiles", run.profiles);
    differs("sizes", run.sizes);
    differs("modes", run.modes);
    if let Some((q, f)) = run.secs.filter(|s| s.0 != s.1) {
        cut.push(format!("{q} s (full: {f} s)"));
    }
    if run.reps.0 != run.reps.1 {
        let (q, f) = run.reps;
        cut.push(format!("{q} rep{} (full: {f})", if q == 1 { "" } else { "s" }));
    }
    if cut.is_empty() {
        "as the full run".into()
    } else {
        cut.join("; ")
    }
}

/// The results file of `run`.
pub fn results_file(opts: &Options, run: &Run) -> PathBuf {
    opts.out_dir.join(format!("{}.jsonl", run.name))
}

/// One run, one build: a new run forgets every pair and record of `runs` at its start,
/// not run by run as it reaches them, so that a sitting stopped early leaves nothing of
/// an earlier build for `--resume` to trip on (its ledger lines) or to append to (its
/// results files). Other runs' files and pairs stay.
fn start_anew(opts: &Options, runs: &[&Run], book: &mut ledger::Ledger) -> Result<()> {
    for run in runs {
        let f = results_file(opts, run);
        if f.exists() {
            std::fs::remove_file(&f)?;
        }
        book.forget_run(run.name)?;
    }
    Ok(())
}

/// The `run` configuration of `run`, on its first profile, and all its profiles.
fn config(run: &Run, opts: &Options) -> Result<(RunConfig, Vec<profile::Profile>)> {
    config_of(run, opts.quick, &results_file(opts, run), &opts.mpflex_bin)
}

/// The `run` configuration of `run` writing to `out`, on its first profile, and all its
/// profiles.
pub fn config_of(run: &Run, q: bool, out: &Path, mpflex_bin: &Path) -> Result<(RunConfig, Vec<profile::Profile>)> {
    let profiles = profile::expand(pick(q, run.profiles))?;
    let first = profiles[0].clone();
    let workload = Workload::parse(run.workload).context("a known workload")?;
    let list = |s: &str| -> Vec<String> {
        s.split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(String::from)
            .collect()
    };
    let cfg = RunConfig {
        systems: run
            .systems
            .split(',')
            .map(|s| System::parse(s, &first))
            .collect::<Result<_>>()?,
        workload,
        variants: workload.variants(run.variants)?,
        secs: run.secs.map_or(workload.spec().default_secs(), |s| pick(q, s)),
        rate_kbit: 2000,
        handover_path: 0,
        sizes: list(pick(q, run.sizes))
            .iter()
            .map(|s| parse_size(s))
            .collect::<Result<_>>()?,
        modes: list(pick(q, run.modes)),
        // The seeds ran CUBIC (MPFlex: "min-RTT + decoupled Cubic"), with the kernel's
        // slow start after idle kept (MPFlex says so; DEMS and ECF ran stock kernels).
        ccs: vec!["cubic".into()],
        reps: pick(q, run.reps),
        oracle_step: 0.05,
        out: out.to_path_buf(),
        mpflex_bin: mpflex_bin.to_path_buf(),
        builds: Vec::new(),
        idle_restart: true,
        keep_mpflex: false,
        profile: first,
    };
    cfg.check_binaries()?;
    Ok((cfg, profiles))
}

/// Runs what `claims` need (unless `report_only`), writes the doc's section and the
/// README's summary, and returns the section.
pub fn reproduce(claims: &[&Claim], which: &str, opts: &Options, stop: &AtomicBool) -> Result<String> {
    let runs = runs_for(claims);
    if !opts.report_only {
        std::fs::create_dir_all(&opts.out_dir)?;
        // Every configuration is checked before the first run starts.
        let configs = runs.iter().map(|r| config(r, opts)).collect::<Result<Vec<_>>>()?;
        let mut book = ledger::Ledger::load(&opts.out_dir)?;
        let me = ledger::Identity {
            commit: crate::COMMIT.to_string(),
            mpflex: runner::describe_mpflex(None, &opts.mpflex_bin)
                .id
                .with_context(|| format!("reading {}", opts.mpflex_bin.display()))?,
            quick: opts.quick,
        };
        if opts.resume {
            book.check_same(&me)?;
        }
        let sitting = ledger::now();
        if !opts.resume {
            start_anew(opts, &runs, &mut book)?;
        }
        for (run, (mut cfg, profiles)) in runs.iter().zip(configs) {
            let f = results_file(opts, run);
            eprintln!("reproduce: run {} ({})", run.name, pick(opts.quick, run.profiles));
            for p in profiles {
                if stop.load(std::sync::atomic::Ordering::SeqCst) {
                    bail!("interrupted: `--resume` continues on this build");
                }
                if book.done(run.name, &p.name) {
                    eprintln!("reproduce: {} {} finished in an earlier sitting", run.name, p.name);
                    continue;
                }
                let dropped = ledger::drop_profile(&f, &p.name)?;
                if dropped > 0 {
                    eprintln!(
                        "reproduce: {} {}: {dropped} records of an unfinished sitting dropped",
                        run.name, p.name
                    );
                }
                let name = p.name.clone();
                eprintln!("reproduce: {} {name}", run.name);
                let ran = runner::run_profiles(&mut cfg, vec![p], stop);
                if stop.load(std::sync::atomic::Ordering::SeqCst) {
                    let why = ran.err().map(|e| format!(" ({e:#})")).unwrap_or_default();
                    bail!("interrupted in {} {name}{why}: `--resume` runs it again", run.name);
                }
                ran?;
                book.record(ledger::Entry {
                    run: run.name.into(),
                    profile: name,
                    who: me.clone(),
                    sitting: sitting.clone(),
                })?;
            }
        }
    }
    let files: Vec<PathBuf> = runs.iter().map(|r| results_file(opts, r)).collect();
    let (section, summary) = section(claims, which, opts, &runs, &files)?;
    let tables = tables(&files)?;
    if let Some(doc) = &opts.doc {
        write_section(doc, &section)?;
        eprintln!("wrote {}", doc.display());
        // The per-point tables stay beside the records they are drawn from: the doc
        // keeps to the verdicts and links to them.
        let t = tables_file(opts);
        std::fs::write(&t, &tables)?;
        eprintln!("wrote {}", t.display());
    }
    if let Some(readme) = &opts.readme {
        if write_summary(readme, &summary)? {
            eprintln!("wrote the summary in {}", readme.display());
        } else {
            eprintln!("{}: no summary markers, left alone", readme.display());
        }
    }
    Ok(format!("{section}\n{tables}"))
}

/// Where the tables behind the verdicts go: beside the runs' results files.
pub fn tables_file(opts: &Options) -> PathBuf {
    opts.out_dir.join("tables.md")
}

/// The per-point tables of the runs' results files, as a page of their own.
fn tables(files: &[PathBuf]) -> Result<String> {
    let mut md = String::from(
        "# The tables behind the seeds' claims\n\n\
         Written by `mpflex-lab reproduce` with the claims' section of docs/results.md, from \
         the results files beside this one (`mpflex-lab report <file>` draws the same).\n",
    );
    let existing: Vec<PathBuf> = files.iter().filter(|f| f.exists()).cloned().collect();
    if !existing.is_empty() {
        // One level below the page's title.
        md += &crate::report::report_files(&existing)?.replace("\n### ", "\n## ");
    }
    Ok(md)
}

/// Start and end of the generated section in the doc.
pub const BEGIN: &str = "<!-- reproduce:begin — written by `mpflex-lab reproduce`; edits inside are overwritten -->";
pub const END: &str = "<!-- reproduce:end -->";

/// Start and end of the summary in the README.
pub const SUMMARY_BEGIN: &str =
    "<!-- reproduce:summary:begin — written by `mpflex-lab reproduce` from docs/results.md's run -->";
pub const SUMMARY_END: &str = "<!-- reproduce:summary:end -->";

/// Puts `section` between [`BEGIN`] and [`END`] in `doc` (replacing what was there), or,
/// without the markers, before the doc's first `## ` heading.
pub fn write_section(doc: &Path, section: &str) -> Result<()> {
    let text = std::fs::read_to_string(doc).unwrap_or_default();
    let out = match between(&text, BEGIN, END, section) {
        Some(t) => t,
        None => {
            let block = format!("{BEGIN}\n{section}{END}\n");
            match text.find("\n## ") {
                Some(i) => format!("{}{block}\n{}", &text[..i + 1], &text[i + 1..]),
                None => format!("{text}\n{block}"),
            }
        }
    };
    if let Some(d) = doc.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d)?;
    }
    std::fs::write(doc, out)?;
    Ok(())
}

/// `text` with what lies between `begin` and `end` replaced by `inner`; none without
/// both markers in that order.
fn between(text: &str, begin: &str, end: &str, inner: &str) -> Option<String> {
    let a = text.find(begin)?;
    let b = a + text[a..].find(end)?;
    Some(format!("{}{begin}\n{inner}{}", &text[..a], &text[b..]))
}

/// Puts `summary` between the README's summary markers; a README without them is left
/// alone (returns false).
pub fn write_summary(readme: &Path, summary: &str) -> Result<bool> {
    let Ok(text) = std::fs::read_to_string(readme) else {
        return Ok(false);
    };
    match between(&text, SUMMARY_BEGIN, SUMMARY_END, summary) {
        Some(t) => {
            std::fs::write(readme, t)?;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// The generated section (the table of claims, the rules, the runs, and their tables) and
/// the README's summary of it.
fn section(
    claims: &[&Claim],
    which: &str,
    opts: &Options,
    runs: &[&Run],
    files: &[PathBuf],
) -> Result<(String, String)> {
    let quick = if opts.quick { " --quick" } else { "" };
    let mut all: Vec<Record> = Vec::new();
    let mut per_run: Vec<(&Run, Vec<Record>)> = Vec::new();
    for (run, f) in runs.iter().zip(files) {
        let recs = if f.exists() {
            crate::report::load_results(std::slice::from_ref(f))?
        } else {
            Vec::new()
        };
        all.extend(recs.iter().cloned());
        per_run.push((run, recs));
    }
    let commits: std::collections::BTreeSet<String> = all
        .iter()
        .map(|r| r.commit.clone().unwrap_or_else(|| "not recorded".into()))
        .collect();
    let mpflex_ids: std::collections::BTreeSet<String> = all
        .iter()
        .filter_map(|r| r.build.as_ref())
        .map(|b| {
            format!(
                "`{}` (size and hash {})",
                b.version.clone().unwrap_or_else(|| "mpflex".into()),
                b.id.clone().unwrap_or_default()
            )
        })
        .collect();
    // A run resumed over several sittings is still one build's (the ledger refuses to mix
    // builds); the table says so, and when.
    let sittings: std::collections::BTreeSet<String> = ledger::Ledger::load(&opts.out_dir)?
        .entries()
        .iter()
        .filter(|e| runs.iter().any(|r| r.name == e.run))
        .map(|e| e.sitting.clone())
        .collect();
    let how = match (sittings.first(), sittings.last()) {
        (Some(a), Some(b)) if sittings.len() > 1 => format!(
            "from one run of one build, in {} sittings (`--resume`) from {a} to {b}",
            sittings.len()
        ),
        _ => "from one run of one build".to_string(),
    };
    let mut md = String::from("## The seeds' claims against the seeds' baselines\n\n");
    md += &format!(
        "Generated by `sudo mpflex-lab reproduce {which}{quick}` {how}: \
         `mpflex-lab` commit {} (every record), mpflex binary {}. Congestion control CUBIC and the kernel's slow \
         start after idle on, as the seeds ran; mpflex paces its paths (its default) and the \
         kernel's TCP and MPTCP do not (the kernel paces only BBR here). {}\n\n",
        commits.iter().cloned().collect::<Vec<_>>().join(", "),
        mpflex_ids.iter().cloned().collect::<Vec<_>>().join(", "),
        if opts.quick {
            "Where MinRTT is the paper's baseline it also ran unpaced (`+pacing=false`), as the \
             papers' MinRTT ran (ECF's in the kernel, DEMS's and MPFlex's in their own user-level \
             proxies over kernel TCP; none paced under CUBIC). **`--quick`: a reduced set** (fewer profiles, sizes \
             and repetitions; see Runs) — verdicts on few repetitions are indicative only; the \
             full run uses the papers' repetitions."
        } else {
            "Where MinRTT is the paper's baseline it also ran unpaced (`+pacing=false`), as the \
             papers' MinRTT ran (ECF's in the kernel, DEMS's and MPFlex's in their own user-level \
             proxies over kernel TCP; none paced under CUBIC). Full run: the papers' repetitions."
        }
    );
    if commits.len() > 1 || mpflex_ids.len() > 1 {
        md += "**These runs come from more than one build**: rerun `reproduce` to make them one.\n\n";
    }
    // The records are the run's; how they are summed up (medians, verdict rules) is the
    // code's that draws the table, which may be later than the run.
    if !commits.is_empty() && !commits.contains(crate::COMMIT) {
        md += &format!(
            "The table was drawn from those records by `mpflex-lab` {} (`--report-only`).\n\n",
            crate::COMMIT
        );
    }
    md += "| claim | paper's figure | paper's baseline | ours vs that baseline | ours vs kernel MPTCP | duplicate bytes | verdict | command |\n";
    md += "|---|---|---|---|---|---|---|---|\n";
    let mut notes = String::new();
    // Each claim whose verdict the LENIENT rules would give otherwise: (id, strict, lenient).
    let mut changed: Vec<(&str, Verdict, Verdict)> = Vec::new();
    let mut summary = format!(
        "Each seed's claim against the seed's own baseline, from `sudo mpflex-lab reproduce {which}{quick}` \
         (one run of `mpflex-lab` {}{}; emulated links); the table with kernel MPTCP beside \
         it, the verdict rules and the data are in \
         [docs/results.md](docs/results.md#the-seeds-claims-against-the-seeds-baselines).\n\n\
         | claim | paper | ours vs the paper's baseline | verdict |\n|---|---|---|---|\n",
        commits.iter().cloned().collect::<Vec<_>>().join(", "),
        if opts.quick {
            ", `--quick`: few repetitions, indicative"
        } else {
            ""
        }
    );
    for c in claims {
        let recs = per_run
            .iter()
            .find(|(r, _)| r.name == c.run)
            .map(|(_, v)| v.as_slice())
            .unwrap_or(&[]);
        let f = judge(c, recs);
        let lenient = judge_by(c, recs, LENIENT).verdict;
        if lenient != f.verdict {
            changed.push((c.id, f.verdict, lenient));
        }
        let verdict = match c.scope {
            Some(scope) => format!("{} ({scope})", f.verdict.word()),
            None => f.verdict.word().to_string(),
        };
        let cut = match runs.iter().find(|r| r.name == c.run) {
            Some(r) if opts.quick => format!(" (`--quick`: {})", quick_cut(r)),
            _ => String::new(),
        };
        md += &format!(
            "| {} | {} | {} ({}) | {} | {} | {} | {} | `sudo mpflex-lab reproduce {}{quick}`{cut} |\n",
            c.claim, c.figure, c.baseline, c.baseline_system, f.vs_baseline, f.vs_mptcp, f.cost, verdict, c.id
        );
        notes += &format!(
            "* **{}** ({} vs {}): {}. {}\n",
            c.id, c.system, c.baseline_system, f.why, c.note
        );
        summary += &format!("| {} | {} | {} | {} |\n", c.short, c.figure, f.vs_baseline, verdict);
    }
    md += &format!(
        "\nChanges are of the median over the repetitions, per point (profile, mode, size), \
         ours against the baseline: − is less time (video: − is a lower bit rate; energy: \
         less energy; handover: a shorter gap; queue: a shorter queue). Verdicts, against the \
         paper's own figure with no slack: a range claim is *reproduced* when the median of \
         our reductions over its points reaches the paper's lower figure; an \"up to\" claim \
         when the best reduction at each size reaches the paper's figure and the median over \
         its points is more than {NOISE:.0} % better; *partly* when the median over the \
         points is more than {NOISE:.0} % better but the figure is not reached; *refuted* \
         otherwise. The finish claim is reproduced when the claimed system's gap is at most \
         half MinRTT's wherever MinRTT's is ≥ 50 ms, partly when the median change of the gap \
         over the points is more than {NOISE:.0} % shorter; the video claim when ECF streams \
         at ≥ 1.5 × the baseline's bit rate and ≥ 80 % of the ideal, partly when more than \
         {NOISE:.0} % above it. The queue claim (QCUT) is reproduced when the bottleneck's \
         queue, on the path where the baseline's is deepest, is shortened by the paper's \
         figure and the upload loses at most 10 % of the baseline's rate, partly when the \
         queue is more than {NOISE:.0} % shorter; the handover claim (WearMan) is a range \
         claim on the stream's longest gap; an energy claim (eMPTCP) is reproduced when the \
         median energy reduction reaches the paper's lower figure and the median download \
         time is no longer than the paper's time cost allows (\"about the same time\": at \
         most {NOISE:.0} % longer), partly when the median energy reduction is more than \
         {NOISE:.0} %. Every row counts the points where ours is more than {NOISE:.0} % \
         worse than the baseline on the claim's measure; where the paper reported means \
         over its repetitions, the row gives the changes of the means too (the verdict rests \
         on the medians). Duplicate bytes: the bytes a system sent \
         twice (copies, re-sent frames) as a share of all it sent over its paths, the \
         range of the per-point medians; `–` where the system does not report them \
         (kernel TCP and MPTCP).\n\n"
    );
    md += &lenient_text(&changed);
    md += "### What each verdict rests on\n\n";
    md += &notes;
    md += "\n### Runs\n\n| run | profiles | workload | systems | sizes / variants | modes | repetitions | results |\n|---|---|---|---|---|---|---|---|\n";
    for (run, f) in runs.iter().zip(files) {
        let q = opts.quick;
        let what = match run.variants {
            Some(v) => {
                let secs = run.secs.map(|s| format!(", {} s", pick(q, s))).unwrap_or_default();
                format!("{v}{secs}")
            }
            None => match run.secs {
                Some(s) if pick(q, run.sizes).is_empty() => format!("{} s", pick(q, s)),
                _ => pick(q, run.sizes).to_string(),
            },
        };
        md += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | `{}` |\n",
            run.name,
            pick(q, run.profiles),
            run.workload,
            run.systems,
            what,
            pick(q, run.modes),
            pick(q, run.reps),
            f.display()
        );
    }
    md += &format!(
        "\nThe tables behind the verdicts (every point's median and p10–p90 per system) are in \
         `{}`, written with this section.\n\n",
        tables_file(opts).display()
    );
    Ok((md, summary))
}

/// What the rules before [`STRICT`] said where they differ from it (once, beside the
/// verdicts they replaced).
fn lenient_text(changed: &[(&str, Verdict, Verdict)]) -> String {
    let rules = format!(
        "Under the rules these replaced (a {NOISE:.0}-point slack below the paper's figure; \
         *partly* when any one point was more than {NOISE:.0} % better)"
    );
    if changed.is_empty() {
        return format!("{rules}, every verdict above would be the same.\n\n");
    }
    let list: Vec<String> = changed
        .iter()
        .map(|(id, strict, lenient)| format!("{id} {} (now {})", lenient.word(), strict.word()))
        .collect();
    format!(
        "{rules}, these verdicts were: {}; the others are the same.\n\n",
        list.join(", ")
    )
}

#[cfg(test)]
mod tests;
