//! A namespace goes on drop, and one whose owner died is swept by the next owner. Needs
//! root; skipped otherwise, a failure under CI=true.

use std::process::Command;

use mpflex_netns::{clean_stale, ns_path, require_root, run, Netns};

#[test]
fn a_dropped_namespace_is_gone_and_a_dead_owners_is_swept() {
    if !require_root("a_dropped_namespace_is_gone_and_a_dead_owners_is_swept") {
        return;
    }
    let ns = Netns::create("cleanup").unwrap();
    let name = ns.name().to_string();
    assert!(ns_path(&name).exists());
    ns.exec(&["ip", "link", "show", "lo"]).unwrap();
    drop(ns);
    assert!(!ns_path(&name).exists(), "{name} survived its drop");

    // A pid that is certainly gone: a child that has exited and been reaped.
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let stale = format!("mpfl-cleanup-{dead}-0");
    run(&["ip", "netns", "add", &stale]).unwrap();
    let live = Netns::create("cleanup").unwrap();
    clean_stale();
    assert!(!ns_path(&stale).exists(), "{stale} of a dead owner survived");
    assert!(ns_path(live.name()).exists(), "a live owner's namespace was swept");
}
