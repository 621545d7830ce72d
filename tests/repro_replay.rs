//! setrows-replay built with real CMake against the prebuilt ggml from PyPI (libggml-python,
//! installed by scripts/setup.d/20-ggml.sh) and run on the CPU: both modes pass, and each fault
//! the harness injects around ggml (a corrupted row, a missing write, a stale downstream read) is
//! caught by the unchanged checker.

mod tools;

use setrows_bisect::core::outcome::Outcome;
use setrows_bisect::probe::repro::{classify, parse_result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn ggml_dir() -> Option<PathBuf> {
    tools::require(
        std::env::var_os("SETROWS_GGML_DIR").map(PathBuf::from),
        "libggml-python (SETROWS_GGML_DIR)",
        "scripts/setup.d/20-ggml.sh",
    )
}

fn run_checked(cmd: &mut Command, what: &str) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Configures and builds the replay once per test binary.
fn replay() -> Option<&'static Path> {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    let ggml = ggml_dir()?;
    Some(BIN.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("repro-kernels");
        let build = Path::new(env!("CARGO_TARGET_TMPDIR")).join("repro-replay-pip");
        run_checked(
            Command::new("cmake")
                .arg("-S")
                .arg(&src)
                .arg("-B")
                .arg(&build)
                .args(["-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"])
                .arg(format!("-Dggml_DIR={}", ggml.display())),
            "cmake configure",
        );
        run_checked(
            Command::new("cmake")
                .arg("--build")
                .arg(&build)
                .args(["--target", "setrows-replay"]),
            "cmake build",
        );
        build.join("setrows-replay")
    }))
}

struct Ran {
    code: i32,
    output: String,
}

fn run(bin: &Path, args: &[&str]) -> Ran {
    let out = Command::new(bin)
        .args(["--backend", "CPU"])
        .args(args)
        .env("GGML_NO_BACKTRACE", "1")
        .output()
        .expect("run setrows-replay");
    let mut output = String::from_utf8_lossy(&out.stderr).into_owned();
    output.push_str(&String::from_utf8_lossy(&out.stdout));
    Ran {
        code: out.status.code().unwrap_or(-1),
        output,
    }
}

#[test]
fn both_modes_pass_for_thousands_of_steps() {
    let Some(bin) = replay() else { return };
    for mode in ["reuse", "rebuild"] {
        let r = run(bin, &["--mode", mode, "--steps", "3000"]);
        assert_eq!(r.code, 0, "{mode}: {}", r.output);
        let res = parse_result(&r.output).expect("SETROWS_RESULT line");
        assert_eq!(res.status, "pass");
        assert_eq!(res.steps_run, 3000);
        assert_eq!(res.first_failing_step, None);
        assert_eq!(
            classify(Some(r.code), None, false, &r.output).outcome,
            Outcome::Pass
        );
    }
}

#[test]
fn quantized_and_i32_indices_at_high_rows_pass() {
    let Some(bin) = replay() else { return };
    for (t, idx) in [
        ("q8_0", "i32"),
        ("q4_0", "i64"),
        ("bf16", "i32"),
        ("f16", "i64"),
    ] {
        let r = run(
            bin,
            &[
                "--dst-type",
                t,
                "--index-type",
                idx,
                "--ring-rows",
                "4096",
                "--start-row",
                "4000",
                "--steps",
                "400",
                "--check-every",
                "7",
            ],
        );
        assert_eq!(r.code, 0, "{t}/{idx}: {}", r.output);
    }
}

/// Every injected fault is caught at the injection step with the right kind of first difference.
#[test]
fn injected_faults_are_caught() {
    let Some(bin) = replay() else { return };
    for (fault, mode, expect) in [
        ("corrupt", "reuse", "unwritten-row"),
        ("skip-write", "reuse", "buffer=raw_kv written-row"),
        ("stale-read", "reuse", "buffer=raw_kv downstream-get_rows"),
        ("corrupt", "rebuild", "unwritten-row"),
        ("skip-write", "rebuild", "buffer=raw_kv written-row"),
        ("stale-read", "rebuild", "buffer=raw_kv downstream-get_rows"),
    ] {
        // --check-every 50 with the fault at step 1234: the harness forces a check where it
        // tampered, so the checker cannot miss it by sampling.
        let r = run(
            bin,
            &[
                "--mode",
                mode,
                "--steps",
                "2000",
                "--check-every",
                "50",
                "--inject",
                fault,
                "--inject-step",
                "1234",
            ],
        );
        assert_eq!(r.code, 1, "{fault}/{mode} was not caught: {}", r.output);
        let res = parse_result(&r.output).expect("result line");
        assert_eq!(res.status, "mismatch");
        assert_eq!(res.first_failing_step, Some(1234), "{fault}");
        let c = classify(Some(r.code), None, false, &r.output);
        assert_eq!(c.outcome, Outcome::WrongResult);
        let sig = c.signature.expect("signature");
        assert!(sig.starts_with("step=1234 "), "{sig}");
        assert!(sig.contains(expect), "{fault}/{mode}: {sig}");
    }
}

#[test]
fn usage_and_unsupported_exit_codes() {
    let Some(bin) = replay() else { return };
    let r = run(bin, &["--dst-type", "q4_0", "--width", "33"]);
    assert_eq!(r.code, 2, "{}", r.output);
    assert!(r.output.contains("not a multiple of the q4_0 block size"));
    let r = run(bin, &["--steps", "x"]);
    assert_eq!(r.code, 2, "{}", r.output);
    // user text in the JSON line stays valid JSON
    let r = run(bin, &["--dst-type", "q\"4\\"]);
    assert_eq!(r.code, 2, "{}", r.output);
    let res = parse_result(&r.output).expect("valid SETROWS_RESULT despite quotes in a flag");
    assert_eq!(res.status, "usage");
    assert!(res.message.contains("q\"4\\"), "{}", res.message);
    // the last --backend wins: a device this ggml build does not have
    let r = run(bin, &["--backend", "NoSuchGPU0", "--steps", "10"]);
    assert_eq!(r.code, 3, "{}", r.output);
    let c = classify(Some(3), None, false, &r.output);
    assert_eq!(c.outcome, Outcome::Untestable);
    assert!(c.signature.unwrap_or_default().contains("NoSuchGPU0"));
}
