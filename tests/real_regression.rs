//! A real regression, found end to end by the real binary with the user's command (issue 34):
//! ggml_scale_bias's x86 SIMD path (`ggml_vec_mad1_f32`) computed `x + s*b` instead of
//! `x*s + b` from ggml 3ae98975 (2025-07-09) until its fix in ggml-org/llama.cpp#16307 (ggml
//! ecdd3836, 2025-09-28); bench/real/README.md, case 1.
//!
//! The history is what PyPI holds, nothing planted and no network in the test: the ggml that the
//! llama-cpp-python 0.3.14, 0.3.15, 0.3.16 and 0.3.17 sdists vendor, one commit per release
//! (scripts/setup.d/34-real-history.sh). The first three vendor the bug, 0.3.17 is the first
//! release after the fix (PyPI has none between 2025-08-15 and 2026-03-23). The user's question is
//! "0.3.15 is broken, 0.3.17 works: which release fixed it?": `--regress success`, the bundled
//! replay, the CPU backend, default parameters. From 0.3.15 rather than 0.3.14 (both broken) to
//! keep CI at two cold ggml builds (0.3.16, then 0.3.17 since the answer lies next to `--bad`);
//! bench/real/scale_bias_fix.sh pypi runs the same question from 0.3.14 (three probes). The thread implies 0.3.17; the replay sees the bug as a wrong row at step 0
//! (`expected=9.5 got=5.5`: 4.5*2+0.5 against 4.5+2*0.5), which the test also asserts, so a
//! right answer for a wrong reason (a build failure, an untestable tree) fails it.
//!
//! Needs a CPU whose ggml build takes the SIMD path (x86-64 with AVX2, as CI's VM and this
//! project's dev VM): ggml's scalar tail is right, so a non-SIMD build would not see the bug.

mod common;

use common::tools;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn history() -> Option<PathBuf> {
    tools::require(
        std::env::var_os("SETROWS_REAL_GGML_HISTORY").map(PathBuf::from),
        "the llama-cpp-python ggml history (SETROWS_REAL_GGML_HISTORY)",
        "scripts/setup.d/34-real-history.sh",
    )
}

fn rev(repo: &std::path::Path, r: &str) -> String {
    common::git(repo, &["rev-parse", &format!("{r}^{{commit}}")])
}

#[test]
fn the_scale_bias_fix_is_found_in_pypis_llama_cpp_python_releases() {
    let Some(src) = history() else { return };
    if !common::have_ninja() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    // A clone: the setup's repository is shared by every run and never written.
    let repo = tmp.path().join("repo");
    let status = Command::new("git")
        .args(["clone", "-q"])
        .arg(&src)
        .arg(&repo)
        .status()
        .expect("git clone");
    assert!(status.success(), "git clone {}", src.display());
    let (v15, v16, v17) = (
        rev(&repo, "v0.3.15"),
        rev(&repo, "v0.3.16"),
        rev(&repo, "v0.3.17"),
    );
    let json = tmp.path().join("result.json");
    let out = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
        .arg("--repo")
        .arg(&repo)
        .args(["--good", &v15, "--bad", &v17, "--regress", "success"])
        .arg("--work-dir")
        .arg(tmp.path().join("work"))
        .arg("--json")
        .arg(&json)
        .env_remove("SETROWS_WORK_DIR")
        .env("GGML_NO_BACKTRACE", "1")
        .output()
        .expect("run setrows-bisect");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "exit code; output:\n{text}");
    let r: Value = serde_json::from_slice(&std::fs::read(&json).expect("result json")).unwrap();
    assert_eq!(r["term"], "first fixed commit", "{text}");
    assert_eq!(
        r["first_bad"],
        Value::from(v17.clone()),
        "answer; output:\n{text}"
    );
    // The answer's parent was seen broken by the replay itself, with the bug's own numbers.
    let probes = r["probes"].as_array().expect("probes");
    let parent = probes
        .iter()
        .find(|p| p["sha"].as_str() == Some(v16.as_str()))
        .unwrap_or_else(|| panic!("0.3.16 was not probed: {text}"));
    assert_eq!(parent["outcome"], "wrong_result", "{parent}");
    let sig = parent["signature"].as_str().unwrap_or_default();
    assert!(
        sig.contains("expected=9.5") && sig.contains("got=5.5"),
        "0.3.16's signature is the scale_bias bug: {sig}"
    );
    let fixed = probes
        .iter()
        .find(|p| p["sha"].as_str() == Some(v17.as_str()))
        .expect("0.3.17 probed");
    assert_eq!(fixed["outcome"], "pass", "{fixed}");
}
