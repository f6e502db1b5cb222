//! Named namespaces in groups: a group is `mpfl-<kind>-<pid>-<tag>` and its namespaces are
//! the group's name alone or followed by `-<role>`. Each live group holds an exclusive
//! `flock` on a file in [`LOCK_DIR`]; the kernel drops it when the owner dies however it
//! dies, so a lock anyone can take marks the group stale.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{bail, Context, Result};

use crate::{is_root, run, run_quiet};

/// Every namespace made here starts with it.
pub const PREFIX: &str = "mpfl-";

const LOCK_DIR: &str = "/run/mpflex-netns";

/// Where `ip netns` keeps namespace `ns`, to open for `setns`.
pub fn ns_path(ns: &str) -> PathBuf {
    Path::new("/run/netns").join(ns)
}

fn lock_path(group: &str) -> PathBuf {
    Path::new(LOCK_DIR).join(format!("{group}.lock"))
}

/// Opens and exclusively locks `path` without waiting; `None` if another holder has it.
fn try_lock(path: &Path) -> Result<Option<File>> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open lock file {}", path.display()))?;
    // SAFETY: flock on an fd we own.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        Ok(Some(f))
    } else {
        Ok(None)
    }
}

/// The group a namespace of ours belongs to (`mpfl-<kind>-<pid>-<tag>`) and its pid.
fn group_of(ns: &str) -> Option<(&str, u32)> {
    let rest = ns.strip_prefix(PREFIX)?;
    let mut fields = rest.splitn(4, '-');
    let (kind, pid, tag) = (fields.next()?, fields.next()?, fields.next()?);
    if kind.is_empty() || tag.is_empty() {
        return None;
    }
    let len = PREFIX.len() + kind.len() + 1 + pid.len() + 1 + tag.len();
    Some((&ns[..len], pid.parse().ok()?))
}

/// Whether group `group` of process `pid` belongs to a live owner.
fn owner_alive(group: &str, pid: u32) -> bool {
    let lock = lock_path(group);
    if lock.exists() {
        // Held by a live owner, or free because the owner died.
        return !matches!(try_lock(&lock), Ok(Some(_)));
    }
    // Without a lock file (an owner that died before taking it): the pid in the name.
    pid != std::process::id() && Path::new(&format!("/proc/{pid}")).exists()
}

/// Deletes the namespaces (and their processes) of owners that are gone: killed with
/// SIGKILL, crashed, or their machine's power cut before `Drop` could run.
pub fn clean_stale() {
    let Ok(list) = run(&["ip", "netns", "list"]) else {
        return;
    };
    let mut checked: Vec<(String, bool)> = Vec::new();
    for line in list.lines() {
        let ns = line.split_whitespace().next().unwrap_or("");
        let Some((group, pid)) = group_of(ns) else {
            continue;
        };
        let alive = match checked.iter().find(|(g, _)| g == group) {
            Some((_, a)) => *a,
            None => {
                let a = owner_alive(group, pid);
                checked.push((group.to_string(), a));
                a
            }
        };
        if !alive {
            delete_ns(ns);
        }
    }
    for (group, alive) in checked {
        if !alive {
            let _ = std::fs::remove_file(lock_path(&group));
        }
    }
}

/// Kills the processes inside `ns`, then deletes it.
fn delete_ns(ns: &str) {
    if let Ok(pids) = run(&["ip", "netns", "pids", ns]) {
        for pid in pids.split_whitespace() {
            run_quiet(&["kill", "-9", pid]);
        }
    }
    run_quiet(&["ip", "netns", "delete", ns]);
}

/// A group's namespaces and its lock; dropping it deletes them.
pub(crate) struct Group {
    pub name: String,
    namespaces: Vec<String>,
    lock: Option<File>,
}

impl Group {
    /// Creates `mpfl-<kind>-<pid>-<tag>` with a namespace per role (`""`: the group's
    /// name alone), each with `lo` up. `tag` tells one process's groups of a kind apart.
    pub fn create(kind: &str, tag: u32, roles: &[&str]) -> Result<Group> {
        if !is_root() {
            bail!("network namespaces need root");
        }
        assert!(!kind.is_empty() && !kind.contains('-'), "kind {kind:?}: one word");
        clean_stale();
        let name = format!("{PREFIX}{kind}-{}-{tag}", std::process::id());
        std::fs::create_dir_all(LOCK_DIR).with_context(|| format!("cannot create {LOCK_DIR}"))?;
        let lock = try_lock(&lock_path(&name))?.with_context(|| format!("namespaces {name} are in use already"))?;
        let namespaces: Vec<String> = roles
            .iter()
            .map(|r| {
                if r.is_empty() {
                    name.clone()
                } else {
                    format!("{name}-{r}")
                }
            })
            .collect();
        // Same name as ours but unlocked: left over by an earlier process with our pid.
        for ns in &namespaces {
            if ns_path(ns).exists() {
                delete_ns(ns);
            }
        }
        let g = Group {
            name,
            namespaces,
            lock: Some(lock),
        };
        // From here on Drop removes whatever was made.
        for ns in &g.namespaces {
            run(&["ip", "netns", "add", ns])?;
            run(&["ip", "-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(g)
    }

    pub fn ns(&self, i: usize) -> &str {
        &self.namespaces[i]
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        for ns in &self.namespaces {
            delete_ns(ns);
        }
        if self.lock.take().is_some() {
            let _ = std::fs::remove_file(lock_path(&self.name));
        }
    }
}

/// One namespace of its own, `mpfl-<kind>-<pid>-<n>`, deleted with its processes on drop
/// (also when the test that made it panics).
pub struct Netns(Group);

impl Netns {
    pub fn create(kind: &str) -> Result<Netns> {
        static N: AtomicU32 = AtomicU32::new(0);
        Group::create(kind, N.fetch_add(1, Ordering::Relaxed), &[""]).map(Netns)
    }

    pub fn name(&self) -> &str {
        self.0.ns(0)
    }

    /// Runs a program inside, to completion (see [`crate::run`]).
    pub fn exec(&self, args: &[&str]) -> Result<String> {
        crate::exec(self.name(), args)
    }

    /// Moves the calling thread into this namespace.
    pub fn enter(&self) {
        enter(self.name());
    }
}

/// Moves the calling thread (and threads it spawns later) into namespace `ns`.
pub fn try_enter(ns: &str) -> Result<()> {
    let path = ns_path(ns);
    let fd = File::open(&path).with_context(|| format!("no namespace {ns} ({})", path.display()))?;
    // SAFETY: setns on this thread only, with a namespace fd we hold open.
    if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        bail!("setns {ns}: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// [`try_enter`], for tests: a namespace that cannot be entered is a failure.
pub fn enter(ns: &str) {
    try_enter(ns).unwrap_or_else(|e| panic!("{e:#}"));
}

/// Runs `f` on a thread inside namespace `ns`, so sockets it creates live there.
pub fn in_ns<R: Send + 'static>(ns: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    spawn_in_ns(ns, f).join().expect("namespace thread panicked")
}

/// Starts `f` on a thread inside namespace `ns` (threads it spawns stay there too).
pub fn spawn_in_ns<R: Send + 'static>(ns: &str, f: impl FnOnce() -> R + Send + 'static) -> std::thread::JoinHandle<R> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        enter(&ns);
        f()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_read_from_names() {
        assert_eq!(group_of("mpfl-lab-123-4-c"), Some(("mpfl-lab-123-4", 123)));
        assert_eq!(group_of("mpfl-rd-9-0"), Some(("mpfl-rd-9-0", 9)));
        assert_eq!(group_of("mpfl-e2e-77-ssthresh"), Some(("mpfl-e2e-77-ssthresh", 77)));
        assert_eq!(group_of("mpfl-lab-x-4-c"), None);
        assert_eq!(group_of("mpfl-lab-12"), None);
        assert_eq!(group_of("other-lab-1-2"), None);
    }
}
