//! Tests that cannot run everywhere (root, tools, shared data). A developer's machine may
//! lack them and skips with a message; CI (`CI=true`) must have them, because a test that
//! skips passes without having tested anything.

use crate::{have_command, is_root};

/// Test `test` cannot run here for `reason`. Under `CI=true` this panics, failing the
/// test; elsewhere it prints `SKIP <test>: <reason>` and returns false, so callers write
/// `if !require…(…) { return; }`.
pub fn skip(test: &str, reason: &str) -> bool {
    skip_under(std::env::var("CI").ok().as_deref(), test, reason)
}

/// [`skip`] with the value of `CI` given, so its rule is testable without touching the
/// process environment (tests run on parallel threads).
fn skip_under(ci: Option<&str>, test: &str, reason: &str) -> bool {
    if ci == Some("true") {
        panic!(
            "{test} cannot run here: {reason}. Under CI=true a skipped test is a failure: \
             run the tests as root on a machine set up by .ci/run"
        );
    }
    eprintln!("SKIP {test}: {reason}");
    false
}

/// True if `ok`; otherwise [`skip`]s with `reason`.
pub fn require(test: &str, ok: bool, reason: &str) -> bool {
    ok || skip(test, reason)
}

/// True as root (network namespaces, iptables, tc); otherwise [`skip`]s.
pub fn require_root(test: &str) -> bool {
    require(test, is_root(), "needs root (network namespaces)")
}

/// True if every program is on `PATH`; otherwise [`skip`]s, naming the missing ones.
pub fn require_tools(test: &str, programs: &[&str]) -> bool {
    let missing: Vec<&str> = programs.iter().copied().filter(|p| !have_command(p)).collect();
    require(
        test,
        missing.is_empty(),
        &format!("needs {} on PATH", missing.join(", ")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_ci_a_skip_returns_false() {
        assert!(!skip_under(None, "t", "no reason"));
        assert!(!skip_under(Some("false"), "t", "no reason"));
        assert!(!skip_under(Some(""), "t", "no reason"));
    }

    #[test]
    fn under_ci_a_skip_fails_the_test() {
        let r = std::panic::catch_unwind(|| skip_under(Some("true"), "some_test", "needs iptables on PATH"));
        let msg = r.expect_err("a skip under CI=true must panic");
        let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            msg.contains("some_test") && msg.contains("needs iptables on PATH") && msg.contains("CI=true"),
            "{msg}"
        );
    }

    #[test]
    fn tools_on_path_are_found() {
        assert!(have_command("sh"));
        assert!(!have_command("mpflex-no-such-program"));
        assert!(require_tools("t", &["sh"]));
    }
}
