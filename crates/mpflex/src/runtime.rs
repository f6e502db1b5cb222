//! How `mpflex status` finds the local client or server without `--addr`: a client or
//! server with a `status_listen` writes `<pid>.json` (role, pid, status address, network
//! namespace) into a runtime directory while it runs, and `status` reads them.
//!
//! Directories, in order: `$MPFLEX_RUNTIME_DIR` when set (then the only one, for both
//! sides); else the writer uses `$RUNTIME_DIRECTORY` (systemd's `RuntimeDirectory=`, under
//! /run/mpflex in the packaged units), then `$XDG_RUNTIME_DIR/mpflex`, then /run/mpflex
//! as root; the reader looks in /run/mpflex and `$XDG_RUNTIME_DIR/mpflex`, and one level
//! below each. An entry counts only while its process lives and only in
//! the reader's own network namespace (a status address is reachable only there). The
//! file goes at a clean exit; one left by a killed process is ignored by readers and
//! removed by the next writer in that directory.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// Where `mpflex status` looks when no runtime file names a process: the status address
/// the README and the example configuration give the client.
pub const DEFAULT_STATUS: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9190);

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    pub role: String,
    pub pid: u32,
    pub status: SocketAddr,
    /// `/proc/self/ns/net` of the process, e.g. `net:[4026531840]`.
    pub netns: String,
}

/// A written runtime file, removed when dropped.
pub struct Registration {
    path: PathBuf,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Writes this process's runtime file. Failing to write one is not worth stopping for
/// (`status --addr` still works), so it is logged and `None` returned.
pub fn register(role: &str, status: SocketAddr) -> Option<Registration> {
    let Some(dir) = write_dir() else {
        tracing::debug!("no runtime directory: `mpflex status` will need --addr");
        return None;
    };
    let entry = Entry {
        role: role.to_string(),
        pid: std::process::id(),
        status,
        netns: own_netns(),
    };
    match write(&dir, &entry) {
        Ok(path) => Some(Registration { path }),
        Err(e) => {
            tracing::info!(
                "cannot write a runtime file in {} ({e:#}): `mpflex status` will need --addr",
                dir.display()
            );
            None
        }
    }
}

fn write(dir: &Path, entry: &Entry) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    // Files of processes that did not exit cleanly.
    for (path, old) in read_dir(dir) {
        if !alive(old.pid) {
            let _ = std::fs::remove_file(path);
        }
    }
    let path = dir.join(format!("{}.json", entry.pid));
    let tmp = dir.join(format!(".{}.json.tmp", entry.pid));
    std::fs::write(&tmp, serde_json::to_vec(entry)?)?;
    // Readable by every user, whatever the umask (the units set 0077): it holds only an
    // address, and `mpflex status` runs as anyone.
    std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o644))?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// The status address to ask: the one process registered here, [`DEFAULT_STATUS`] when
/// none is (`Ok(None)`), an error naming them when several are.
pub fn locate() -> Result<Option<SocketAddr>> {
    let here = own_netns();
    let mut found: Vec<Entry> = read_dirs()
        .into_iter()
        .flat_map(|d| read_dir(&d))
        .map(|(_, e)| e)
        .filter(|e| e.netns == here && alive(e.pid))
        .collect();
    found.sort_by_key(|e| e.pid);
    found.dedup_by_key(|e| e.pid);
    match found.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(reachable(one.status))),
        many => {
            let list: Vec<String> = many
                .iter()
                .map(|e| format!("{} (pid {}) at {}", e.role, e.pid, reachable(e.status)))
                .collect();
            bail!(
                "{} mpflex processes run here: {}; pass one's address with --addr",
                many.len(),
                list.join(", ")
            )
        }
    }
}

/// The address to connect to for a listener on `a`: a wildcard listener answers on
/// loopback.
fn reachable(a: SocketAddr) -> SocketAddr {
    match a.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => SocketAddr::new(Ipv4Addr::LOCALHOST.into(), a.port()),
        IpAddr::V6(ip) if ip.is_unspecified() => SocketAddr::new(Ipv6Addr::LOCALHOST.into(), a.port()),
        _ => a,
    }
}

fn write_dir() -> Option<PathBuf> {
    if let Some(d) = env_dir("MPFLEX_RUNTIME_DIR") {
        return Some(d);
    }
    if let Some(d) = env_dir("RUNTIME_DIRECTORY") {
        // systemd sets a colon-separated list when a unit names several.
        return d.to_str().and_then(|s| s.split(':').next()).map(PathBuf::from);
    }
    if let Some(d) = env_dir("XDG_RUNTIME_DIR") {
        return Some(d.join("mpflex"));
    }
    // SAFETY: geteuid has no preconditions.
    (unsafe { libc::geteuid() } == 0).then(|| PathBuf::from("/run/mpflex"))
}

/// Every directory a runtime file may be in (see the module doc): each base directory and
/// those one level below it (the units' `RuntimeDirectory=mpflex/client`).
pub fn read_dirs() -> Vec<PathBuf> {
    let bases = match env_dir("MPFLEX_RUNTIME_DIR") {
        Some(d) => vec![d],
        None => {
            let mut v = vec![PathBuf::from("/run/mpflex")];
            v.extend(env_dir("XDG_RUNTIME_DIR").map(|d| d.join("mpflex")));
            v
        }
    };
    let mut dirs = Vec::new();
    for base in bases {
        let below: Vec<PathBuf> = std::fs::read_dir(&base)
            .map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect())
            .unwrap_or_default();
        dirs.push(base);
        dirs.extend(below);
    }
    dirs
}

fn env_dir(var: &str) -> Option<PathBuf> {
    std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// The readable entries of `dir`, with their files.
fn read_dir(dir: &Path) -> Vec<(PathBuf, Entry)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| {
            let e = serde_json::from_slice(&std::fs::read(&p).ok()?).ok()?;
            Some((p, e))
        })
        .collect()
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn own_netns() -> String {
    std::fs::read_link("/proc/self/ns/net")
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pid: u32, port: u16) -> Entry {
        Entry {
            role: "client".into(),
            pid,
            status: SocketAddr::from(([0, 0, 0, 0], port)),
            netns: own_netns(),
        }
    }

    #[test]
    fn files_of_dead_processes_are_swept_and_wildcards_answer_on_loopback() {
        let dir = std::env::temp_dir().join(format!("mpflex-rt-{}-{}", std::process::id(), rand::random::<u32>()));
        // A pid above the kernel's limit (4194304) never lives.
        let dead = entry(4_194_305, 1);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("4194305.json"), serde_json::to_vec(&dead).unwrap()).unwrap();
        let me = entry(std::process::id(), 9200);
        let path = write(&dir, &me).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o644);
        let left: Vec<Entry> = read_dir(&dir).into_iter().map(|(_, e)| e).collect();
        assert_eq!(left, vec![me.clone()], "the dead process's file stays");
        assert_eq!(reachable(me.status), "127.0.0.1:9200".parse().unwrap());
        assert_eq!(reachable("[::]:7".parse().unwrap()), "[::1]:7".parse().unwrap());
        assert_eq!(reachable("10.0.0.1:7".parse().unwrap()), "10.0.0.1:7".parse().unwrap());
        drop(Registration { path });
        assert!(read_dir(&dir).is_empty(), "the file outlived its registration");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Raises this process's open-file limit (`RLIMIT_NOFILE`) from its soft value to its
/// hard one, and returns (before, after). Every path connection, application connection
/// and UDP flow is a file descriptor, and a shell's soft default (1,024) is met by a
/// few hundred flows; the hard limit is what the administrator allows (the packaged units
/// set `LimitNOFILE=65536`), and raising the soft one to it needs no privilege.
pub fn raise_nofile_limit() -> std::io::Result<(u64, u64)> {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let before = l.rlim_cur;
    if l.rlim_cur < l.rlim_max {
        l.rlim_cur = l.rlim_max;
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &l) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok((before, l.rlim_cur))
}

#[cfg(test)]
mod nofile_tests {
    #[test]
    fn the_soft_open_file_limit_rises_to_the_hard_one() {
        let (_, after) = super::raise_nofile_limit().unwrap();
        let mut l = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) }, 0);
        assert_eq!(l.rlim_cur, l.rlim_max);
        assert_eq!(after, l.rlim_cur);
        // Twice is harmless.
        assert_eq!(super::raise_nofile_limit().unwrap(), (after, after));
    }
}
