//! The one place mpflex writes state to disk: the data-cap ledger, bytes per path and
//! accounting period, in an embedded SQLite database (rusqlite, SQLite built in: atomic,
//! durable transactions, and a damaged file is an error, never a crash; docs/policy.md
//! says why SQLite).
//!
//! The driver keeps the counts in memory and writes them every flush interval, so a crash
//! loses at most one interval of counting. A file that cannot be opened as a ledger is
//! moved aside (`<file>.bad-<unix time>`) and a fresh ledger started, with a log line
//! saying so: a lost count must not keep the client from carrying traffic.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use rusqlite::{Connection, ErrorCode};

pub struct Store {
    db: Connection,
    path: PathBuf,
}

impl Store {
    /// Opens the ledger at `file`, creating it (and its directory) if need be. Returns the
    /// store and, if the old file was damaged, the sentence to log about it.
    pub fn open(file: &Path) -> Result<(Store, Option<String>)> {
        if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("state_file: cannot create directory {}", dir.display()))?;
        }
        match Self::try_open(file) {
            Ok(s) => Ok((s, None)),
            Err(OpenError::InUse) => bail!(
                "state_file: {} is in use by another mpflex process; give each client its own state_file",
                file.display()
            ),
            Err(OpenError::Bad(why)) => {
                let secs = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let aside = PathBuf::from(format!("{}.bad-{secs}", file.display()));
                std::fs::rename(file, &aside).with_context(|| {
                    format!(
                        "state_file: {} cannot be read as a ledger ({why}) and cannot be moved aside; remove it",
                        file.display()
                    )
                })?;
                // A journal left beside the damaged file belongs to it.
                let journal = PathBuf::from(format!("{}-journal", file.display()));
                let _ = std::fs::rename(&journal, format!("{}-journal", aside.display()));
                let s = Self::try_open(file).map_err(|e| {
                    anyhow::anyhow!("state_file: cannot create a fresh ledger at {}: {e:?}", file.display())
                })?;
                let msg = format!(
                    "state_file: {} could not be read as a ledger ({why}); moved it to {} and started a fresh count",
                    file.display(),
                    aside.display()
                );
                Ok((s, Some(msg)))
            }
        }
    }

    fn try_open(file: &Path) -> Result<Store, OpenError> {
        let bad = |e: rusqlite::Error| match e.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => OpenError::InUse,
            _ => OpenError::Bad(e.to_string()),
        };
        let db = Connection::open(file).map_err(bad)?;
        // One process per ledger: the exclusive lock taken by the first write is kept.
        db.pragma_update(None, "locking_mode", "EXCLUSIVE").map_err(bad)?;
        // A commit is on disk when it returns (a crash loses at most the interval since).
        db.pragma_update(None, "synchronous", "FULL").map_err(bad)?;
        // Reading the whole file finds damage now, not at the first count.
        let check: String = db.query_row("PRAGMA quick_check", [], |r| r.get(0)).map_err(bad)?;
        if check != "ok" {
            return Err(OpenError::Bad(format!("integrity check: {check}")));
        }
        db.execute_batch(
            "BEGIN EXCLUSIVE;
             CREATE TABLE IF NOT EXISTS ledger (
                 path TEXT NOT NULL, period TEXT NOT NULL, bytes INTEGER NOT NULL,
                 PRIMARY KEY (path, period));
             COMMIT;",
        )
        .map_err(bad)?;
        Ok(Store {
            db,
            path: file.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes counted for `path` in `period` (0 if none).
    pub fn load(&self, path: &str, period: &str) -> Result<u64> {
        let v: Option<i64> = self
            .db
            .query_row(
                "SELECT bytes FROM ledger WHERE path = ?1 AND period = ?2",
                [path, period],
                |r| r.get(0),
            )
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e),
            })
            .context("ledger: read")?;
        Ok(v.unwrap_or(0).max(0) as u64)
    }

    /// Writes `(path, period, bytes)` counts in one durable transaction.
    pub fn save(&mut self, counts: &[(String, String, u64)]) -> Result<()> {
        let tx = self.db.transaction().context("ledger: write")?;
        for (path, period, bytes) in counts {
            tx.execute(
                "INSERT INTO ledger (path, period, bytes) VALUES (?1, ?2, ?3)
                 ON CONFLICT (path, period) DO UPDATE SET bytes = excluded.bytes",
                rusqlite::params![path, period, (*bytes).min(i64::MAX as u64) as i64],
            )
            .context("ledger: write")?;
        }
        tx.commit().context("ledger: commit")?;
        Ok(())
    }

    /// Every count of the ledger at `file`, read only (`mpflex policy check`): an error
    /// while a client holds it (see `mpflex status`) or if there is none.
    pub fn peek(file: &Path) -> Result<Vec<(String, String, u64)>> {
        if !file.exists() {
            bail!("no ledger at {} yet", file.display());
        }
        let db = Connection::open_with_flags(file, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .with_context(|| format!("ledger {}", file.display()))?;
        let s = Store {
            db,
            path: file.to_path_buf(),
        };
        s.all().with_context(|| {
            format!(
                "ledger {} (held by a running client? `mpflex status` shows its counts)",
                file.display()
            )
        })
    }

    /// Every count, for tests and `mpflex policy check`.
    pub fn all(&self) -> Result<Vec<(String, String, u64)>> {
        let mut q = self
            .db
            .prepare("SELECT path, period, bytes FROM ledger ORDER BY path, period")
            .context("ledger: read")?;
        let rows = q
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)?.max(0) as u64)))
            .context("ledger: read")?;
        rows.collect::<Result<_, _>>().context("ledger: read")
    }
}

#[derive(Debug)]
enum OpenError {
    InUse,
    Bad(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mpflex-store-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d.join("ledger.db")
    }

    #[test]
    fn counts_survive_reopening() {
        let f = tmp("reopen");
        {
            let (mut s, warn) = Store::open(&f).unwrap();
            assert!(warn.is_none());
            assert_eq!(s.load("lte", "2026-11").unwrap(), 0);
            s.save(&[("lte".into(), "2026-11".into(), 12345)]).unwrap();
            s.save(&[("lte".into(), "2026-11".into(), 23456)]).unwrap();
        }
        let (s, _) = Store::open(&f).unwrap();
        assert_eq!(s.load("lte", "2026-11").unwrap(), 23456);
        assert_eq!(s.load("lte", "2026-12").unwrap(), 0);
        assert_eq!(s.all().unwrap(), [("lte".to_string(), "2026-11".to_string(), 23456)]);
    }

    #[test]
    fn a_corrupt_file_is_moved_aside_and_a_fresh_ledger_started() {
        let f = tmp("corrupt");
        std::fs::write(&f, b"this is not a database, just some bytes that were here").unwrap();
        let (s, warn) = Store::open(&f).unwrap();
        let warn = warn.expect("a warning");
        assert!(warn.contains("moved it to") && warn.contains(".bad-"), "{warn}");
        assert_eq!(s.load("lte", "2026-11").unwrap(), 0);
        let moved = std::fs::read_dir(f.parent().unwrap())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().contains(".bad-"))
            .count();
        assert_eq!(moved, 1);
    }

    #[test]
    fn a_truncated_file_is_moved_aside_too() {
        let f = tmp("truncated");
        {
            let (mut s, _) = Store::open(&f).unwrap();
            s.save(&[("lte".into(), "p".into(), 7)]).unwrap();
        }
        let len = std::fs::metadata(&f).unwrap().len();
        let file = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
        file.set_len(len / 3).unwrap();
        drop(file);
        let (s, _warn) = Store::open(&f).unwrap();
        // Either SQLite read what was left or a fresh ledger started: never a panic.
        assert!(s.load("lte", "p").unwrap() <= 7);
    }

    #[test]
    fn a_second_process_on_the_same_file_is_told_so() {
        let f = tmp("inuse");
        let (mut s, _) = Store::open(&f).unwrap();
        s.save(&[("lte".into(), "p".into(), 1)]).unwrap();
        let e = Store::open(&f).err().expect("in use").to_string();
        assert!(e.contains("in use"), "{e}");
    }
}
