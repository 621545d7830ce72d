//! Records the git commit the binary is built from (`SETROWS_BISECT_COMMIT`, read with
//! `option_env!` in `core::result::Tool`). A build outside a git checkout (a crate tarball)
//! says `unknown`; a value already in the environment wins (packagers, reproducible builds).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-env-changed=SETROWS_BISECT_COMMIT");
    if let Ok(v) = std::env::var("SETROWS_BISECT_COMMIT") {
        println!("cargo:rustc-env=SETROWS_BISECT_COMMIT={v}");
        return;
    }
    // Rebuild when HEAD moves (a commit, a checkout), not on every source edit.
    for path in ["HEAD", "index"] {
        if let Some(p) = git(&["rev-parse", "--git-path", path]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    if let Some(p) = git(&["rev-parse", "--symbolic-full-name", "HEAD"])
        .and_then(|r| git(&["rev-parse", "--git-path", &r]))
    {
        println!("cargo:rerun-if-changed={p}");
    }
    let commit = match git(&["rev-parse", "HEAD"]) {
        Some(sha) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{sha}-dirty")
            } else {
                sha
            }
        }
        None => "unknown".to_string(),
    };
    println!("cargo:rustc-env=SETROWS_BISECT_COMMIT={commit}");
}
