//! The ledger of a reproduce: which (run, profile) pairs finished, on which build, in
//! which sitting. The full run takes hours (the papers' repetitions: DEMS's 36 bandwidth
//! pairs × 10, ECF's 30 downloads per size, 5-minute videos), more than one sitting of a
//! shared machine; `--resume` continues it on the same build, pair by pair, and refuses to
//! mix builds, so the table still comes from one build (issue 27: every published table
//! from one run of one build).

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// What must be the same for every pair of one table: the lab's commit, the mpflex binary
/// (size and hash), and quick or full.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub commit: String,
    pub mpflex: String,
    pub quick: bool,
}

/// One finished (run, profile): every record of it is in the run's results file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub run: String,
    pub profile: String,
    pub who: Identity,
    /// When the sitting that ran it started (RFC 3339, UTC).
    pub sitting: String,
}

/// The ledger file of an output directory.
pub struct Ledger {
    path: PathBuf,
    entries: Vec<Entry>,
}

const HEADER: &str = "# mpflex-lab reproduce ledger: run, profile, quick|full, lab commit, mpflex id, sitting";

impl Ledger {
    /// The ledger in `dir` (`ledger.tsv`); none yet is an empty ledger. A line that does
    /// not parse is an error naming the file and line: a ledger is never guessed at.
    pub fn load(dir: &Path) -> Result<Ledger> {
        let path = dir.join("ledger.tsv");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let mut entries = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let f: Vec<&str> = line.split('\t').collect();
            let [run, profile, mode, commit, mpflex, sitting] = f[..] else {
                bail!(
                    "{}:{}: expected 6 tab-separated fields, got {}",
                    path.display(),
                    i + 1,
                    f.len()
                );
            };
            let quick = match mode {
                "quick" => true,
                "full" => false,
                m => bail!("{}:{}: mode {m:?} is neither quick nor full", path.display(), i + 1),
            };
            entries.push(Entry {
                run: run.into(),
                profile: profile.into(),
                who: Identity {
                    commit: commit.into(),
                    mpflex: mpflex.into(),
                    quick,
                },
                sitting: sitting.into(),
            });
        }
        Ok(Ledger { path, entries })
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Resuming is only allowed on the build (and mode) every finished pair ran on.
    pub fn check_same(&self, me: &Identity) -> Result<()> {
        if let Some(e) = self.entries.iter().find(|e| &e.who != me) {
            bail!(
                "{} holds {}/{} from another build ({}, mpflex {}, {}); this is {}, mpflex {}, {}: \
                 resume with that build, or start anew without --resume",
                self.path.display(),
                e.run,
                e.profile,
                e.who.commit,
                e.who.mpflex,
                mode(e.who.quick),
                me.commit,
                me.mpflex,
                mode(me.quick)
            );
        }
        Ok(())
    }

    pub fn done(&self, run: &str, profile: &str) -> bool {
        self.entries.iter().any(|e| e.run == run && e.profile == profile)
    }

    /// Forgets `run`'s pairs (it starts anew).
    pub fn forget_run(&mut self, run: &str) -> Result<()> {
        let before = self.entries.len();
        self.entries.retain(|e| e.run != run);
        if self.entries.len() != before {
            self.rewrite()?;
        }
        Ok(())
    }

    /// Records a finished pair (appended and synced: a sitting stopped right after it
    /// does not run it again).
    pub fn record(&mut self, e: Entry) -> Result<()> {
        if let Some(d) = self.path.parent() {
            std::fs::create_dir_all(d)?;
        }
        let new = !self.path.exists();
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .with_context(|| format!("writing {}", self.path.display()))?;
        let mut text = String::new();
        if new {
            text += HEADER;
            text.push('\n');
        }
        text += &line(&e);
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        self.entries.push(e);
        Ok(())
    }

    /// The sittings the ledger's pairs ran in, oldest first.
    pub fn sittings(&self) -> BTreeSet<String> {
        self.entries.iter().map(|e| e.sitting.clone()).collect()
    }

    fn rewrite(&self) -> Result<()> {
        let mut text = format!("{HEADER}\n");
        for e in &self.entries {
            text += &line(e);
        }
        write_atomically(&self.path, &text)
    }
}

fn mode(quick: bool) -> &'static str {
    if quick {
        "quick"
    } else {
        "full"
    }
}

fn line(e: &Entry) -> String {
    format!(
        "{}\t{}\t{}\t{}\t{}\t{}\n",
        e.run,
        e.profile,
        mode(e.who.quick),
        e.who.commit,
        e.who.mpflex,
        e.sitting
    )
}

/// Writes `text` to `path` through a temporary file and a rename: a crash leaves the old
/// file or the new one, never half of either.
fn write_atomically(path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
    Ok(())
}

/// Drops the records of `profile` from the results file `file` (the part of a pair an
/// interrupted sitting wrote; the pair runs again whole). Lines that are not records of
/// that profile are kept as they are; a missing file is nothing to drop. Returns how many
/// lines were dropped.
pub fn drop_profile(file: &Path, profile: &str) -> Result<usize> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
    };
    let mut kept = String::with_capacity(text.len());
    let mut dropped = 0;
    for l in text.lines() {
        let of_profile = serde_json::from_str::<serde_json::Value>(l)
            .ok()
            .is_some_and(|v| v.get("profile").and_then(|p| p.as_str()) == Some(profile));
        if of_profile {
            dropped += 1;
        } else {
            kept += l;
            kept.push('\n');
        }
    }
    if dropped > 0 {
        write_atomically(file, &kept)?;
    }
    Ok(dropped)
}

/// Now as RFC 3339 (UTC, seconds): a sitting's name.
pub fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me(commit: &str) -> Identity {
        Identity {
            commit: commit.into(),
            mpflex: "100-abc".into(),
            quick: false,
        }
    }

    fn entry(run: &str, profile: &str, who: Identity, sitting: &str) -> Entry {
        Entry {
            run: run.into(),
            profile: profile.into(),
            who,
            sitting: sitting.into(),
        }
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mpflex-ledger-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn finished_pairs_survive_a_reload_and_other_builds_are_refused() {
        let d = dir("reload");
        let mut l = Ledger::load(&d).unwrap();
        assert!(l.entries().is_empty());
        l.record(entry("bw-grid", "bw-grid:2.5x2.5", me("aaa"), "sitting-1"))
            .unwrap();
        l.record(entry("bw-grid", "bw-grid:2.5x7.5", me("aaa"), "sitting-2"))
            .unwrap();
        l.record(entry("qcut", "seed-default", me("aaa"), "sitting-2")).unwrap();
        let mut l = Ledger::load(&d).unwrap();
        assert!(l.done("bw-grid", "bw-grid:2.5x7.5"));
        assert!(!l.done("bw-grid", "bw-grid:7.5x2.5"));
        assert!(!l.done("qcut", "bw-grid:2.5x2.5"));
        assert_eq!(l.sittings().len(), 2);
        l.check_same(&me("aaa")).unwrap();
        let e = l.check_same(&me("bbb")).unwrap_err().to_string();
        assert!(
            e.contains("aaa") && e.contains("bbb") && e.contains("ledger.tsv"),
            "{e}"
        );
        let quick = Identity {
            quick: true,
            ..me("aaa")
        };
        assert!(l.check_same(&quick).is_err(), "quick and full pairs do not mix");
        l.forget_run("bw-grid").unwrap();
        let l = Ledger::load(&d).unwrap();
        assert_eq!(l.entries().len(), 1);
        assert!(l.done("qcut", "seed-default") && !l.done("bw-grid", "bw-grid:2.5x2.5"));
    }

    #[test]
    fn a_malformed_ledger_line_is_an_error_naming_the_line() {
        let d = dir("bad");
        std::fs::write(
            d.join("ledger.tsv"),
            format!("{HEADER}\nqcut\tseed-default\tfull\taaa\n"),
        )
        .unwrap();
        let e = Ledger::load(&d).err().expect("a short line is refused").to_string();
        assert!(e.contains("ledger.tsv:2") && e.contains("6 tab-separated"), "{e}");
        std::fs::write(d.join("ledger.tsv"), "qcut\tseed-default\tslow\taaa\tx\ty\n").unwrap();
        let e = Ledger::load(&d).err().expect("an unknown mode is refused").to_string();
        assert!(e.contains("ledger.tsv:1") && e.contains("slow"), "{e}");
    }

    #[test]
    fn an_unfinished_profiles_records_are_dropped_and_the_rest_kept() {
        let d = dir("drop");
        let f = d.join("bw-grid.jsonl");
        assert_eq!(drop_profile(&f, "x").unwrap(), 0, "no file, nothing to drop");
        let a = r#"{"system":"mptcp","profile":"bw-grid:2.5x2.5","completion_ms":1.0}"#;
        let b = r#"{"system":"mptcp","profile":"bw-grid:2.5x7.5","completion_ms":2.0}"#;
        std::fs::write(&f, format!("{a}\n{b}\n{a}\n")).unwrap();
        assert_eq!(drop_profile(&f, "bw-grid:2.5x2.5").unwrap(), 2);
        assert_eq!(std::fs::read_to_string(&f).unwrap(), format!("{b}\n"));
        assert_eq!(drop_profile(&f, "bw-grid:2.5x2.5").unwrap(), 0);
    }
}
