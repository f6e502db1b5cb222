//! Embeds the source's commit in `mpflex-lab` as `MPFLEX_LAB_COMMIT`, which every result
//! record carries (`commit`).
//!
//! Rule: `git describe --always --dirty` of the source tree when it is a git checkout;
//! else `MPFLEX_BUILD_COMMIT` from the build's environment (a source archive's builder
//! knows its commit); else the word `unknown`, never a guess. The reason:
//! every published table must come from one build, and a record must say which.

use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it");
    let dir = Path::new(&dir);
    println!("cargo:rerun-if-env-changed=MPFLEX_BUILD_COMMIT");
    // Run again when the commit or the tree changes: HEAD, the branch it names, the index,
    // and the workspace's sources (a change there makes the tree dirty).
    for p in ["HEAD", "index"] {
        if let Some(f) = git(dir, &["rev-parse", "--path-format=absolute", "--git-path", p]) {
            println!("cargo:rerun-if-changed={f}");
        }
    }
    if let Some(r) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        if let Some(f) = git(dir, &["rev-parse", "--path-format=absolute", "--git-path", &r]) {
            println!("cargo:rerun-if-changed={f}");
        }
    }
    println!("cargo:rerun-if-changed={}", dir.join("..").display());
    let commit = git(dir, &["describe", "--always", "--dirty", "--abbrev=12"])
        .or_else(|| {
            std::env::var("MPFLEX_BUILD_COMMIT")
                .ok()
                .filter(|c| !c.trim().is_empty())
        })
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=MPFLEX_LAB_COMMIT={commit}");
}
