//! The one rule for tests that need an outside tool (cmake, podman and its images, libggml,
//! hadolint, actionlint): under CI a missing tool FAILS the test, never a quiet pass; elsewhere
//! the test is skipped with a loud line saying which setup script installs it. `.ci/run` sets
//! `CI=true`; `CI` unset, empty, `false` or `0` means "not CI" (GitHub and most CI systems set
//! `CI=true`).
#![allow(dead_code)]

/// Whether these tests run under CI, where every tool they need must be present.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// `found` when present; otherwise panics under CI or prints `SKIPPED` and returns `None`.
/// `what` names the tool, `setup` the script that installs it.
pub fn require<T>(found: Option<T>, what: &str, setup: &str) -> Option<T> {
    if found.is_none() {
        if in_ci() {
            panic!("{what} is required under CI: run {setup} (scripts/test.sh does)");
        }
        eprintln!("SKIPPED (not CI): {what} is missing; run {setup}");
    }
    found
}
