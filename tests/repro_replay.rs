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

/// The whole result line, for keys `ReproSummary` does not carry (`graph`, `checks_run`).
fn result_json(output: &str) -> serde_json::Value {
    let line = output
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("SETROWS_RESULT "))
        .unwrap_or_else(|| panic!("no SETROWS_RESULT line in:\n{output}"));
    serde_json::from_str(line).expect("result line is JSON")
}

/// `--check-every 0` is the bare loop the check's cost is measured against: it must compute the
/// same graph, placed the same way, as a checked run (same `graph` fingerprint), check nothing, and
/// never read as a pass.
#[test]
fn bare_loop_runs_the_checked_graph_and_checks_nothing() {
    let Some(bin) = replay() else { return };
    let mut reuse_graph = None;
    for mode in ["reuse", "rebuild"] {
        let bare = run(
            bin,
            &["--mode", mode, "--steps", "500", "--check-every", "0"],
        );
        let checked = run(
            bin,
            &["--mode", mode, "--steps", "500", "--check-every", "1"],
        );
        assert_eq!(bare.code, 0, "{mode} bare: {}", bare.output);
        assert_eq!(checked.code, 0, "{mode} checked: {}", checked.output);
        let (b, c) = (result_json(&bare.output), result_json(&checked.output));
        assert_eq!(b["status"], "unchecked", "{mode}");
        assert_eq!(c["status"], "pass", "{mode}");
        assert_eq!(
            (b["steps_run"].as_i64(), c["steps_run"].as_i64()),
            (Some(500), Some(500))
        );
        assert_eq!(b["checks_run"].as_i64(), Some(0), "{mode}");
        assert_eq!(
            c["checks_run"].as_i64(),
            Some(500),
            "{mode}: one check per step"
        );
        assert_eq!(b["params"]["check_every"].as_i64(), Some(0));
        let fp = b["graph"]["fingerprint"].as_str().expect("fingerprint");
        assert_eq!(fp.len(), 16, "{fp}");
        assert_eq!(
            b["graph"], c["graph"],
            "{mode}: bare and checked graphs differ"
        );
        // 4 buffers x (source view, scale_bias, set_rows, gather view, 2 get_rows, sum_rows) and
        // one view per index group (3): the inputs are views of three uploaded tensors
        assert_eq!(b["graph"]["nodes"].as_i64(), Some(31));
        assert_eq!(b["uploads_per_step"].as_i64(), Some(3));
        assert!(b["timings"]["loop_steps_per_s"].as_f64().unwrap_or(0.0) > 0.0);
        let k = classify(Some(bare.code), None, false, &bare.output);
        assert_eq!(k.outcome, Outcome::Untestable, "a bare run is no verdict");
        if mode == "reuse" {
            reuse_graph = Some(b["graph"].clone());
        }
    }
    // the fingerprint tells graphs apart: reading the set_rows result instead of the buffer is
    // another graph, and so is one buffer fewer
    for other in [
        vec!["--read-via", "result"],
        vec!["--buffers", "3"],
        vec!["--width", "64"],
    ] {
        let mut args = vec!["--steps", "10", "--check-every", "0"];
        args.extend(other.iter().copied());
        let r = run(bin, &args);
        assert_eq!(r.code, 0, "{other:?}: {}", r.output);
        assert_ne!(
            Some(result_json(&r.output)["graph"].clone()),
            reuse_graph,
            "{other:?}"
        );
    }
    // nothing to catch a planted fault with
    let r = run(bin, &["--check-every", "0", "--inject", "stale-read"]);
    assert_eq!(r.code, 2, "{}", r.output);
    assert!(r.output.contains("--inject needs checking"), "{}", r.output);
}

/// Every injected fault is caught at the injection step with the right kind of first difference,
/// checking every step (the default) and every 50th (where the harness forces the check).
#[test]
fn injected_faults_are_caught() {
    let Some(bin) = replay() else { return };
    for check_every in ["1", "50"] {
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
                    check_every,
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
            let checks = result_json(&r.output)["checks_run"].as_i64();
            let want = if check_every == "1" {
                1235
            } else {
                1234 / 50 + 1
            };
            assert_eq!(
                checks,
                Some(want),
                "{fault}/{mode}/{check_every}: checks up to the fault"
            );
        }
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

/// The ds4 engine (lucebox deepseek4 at 53859c26): the engine's types and shapes, its five
/// uploads a step, a ring that wraps at 128, and each injected fault caught at its step with the
/// engine's own reads (the compressed rows' sums after the flush for a stale read).
#[test]
fn ds4_engine_passes_and_catches_faults() {
    let Some(bin) = replay() else { return };
    // one CPU thread: the graph's barriers on a loaded 2-core host (README.md)
    let base = ["--engine", "ds4", "--cpu-threads", "1", "--mode", "reuse"];
    let mut args = base.to_vec();
    args.extend(["--steps", "300", "--comp-rows", "64"]);
    let r = run(bin, &args);
    assert_eq!(r.code, 0, "{}", r.output);
    let j = result_json(&r.output);
    assert_eq!(j["status"], "pass");
    assert_eq!(j["params"]["width"].as_i64(), Some(512), "head_dim");
    assert_eq!(j["params"]["ring_rows"].as_i64(), Some(128), "n_swa");
    assert_eq!(j["uploads_per_step"].as_i64(), Some(5));
    let names: Vec<&str> = j["memory"]["buffers"]
        .as_array()
        .expect("memory.buffers")
        .iter()
        .filter(|b| b["role"] == "persistent")
        .map(|b| b["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(names, ["raw_kv", "state_kv", "state_score", "comp_cache"]);
    for (fault, expect) in [
        ("corrupt", "buffer=raw_kv unwritten-row"),
        ("skip-write", "buffer=raw_kv written-row"),
        ("stale-read", "buffer=comp_cache downstream-sum_rows"),
    ] {
        let mut args = base.to_vec();
        args.extend(["--steps", "300", "--comp-rows", "64", "--inject", fault]);
        args.extend(["--inject-step", "211"]);
        let r = run(bin, &args);
        assert_eq!(r.code, 1, "{fault}: {}", r.output);
        let sig = classify(Some(r.code), None, false, &r.output)
            .signature
            .expect("signature");
        assert!(sig.starts_with("step=211 "), "{sig}");
        assert!(sig.contains(expect), "{fault}: {sig}");
    }
    // the generic graph's shaping flags mean nothing for the engine's graph
    let r = run(bin, &["--engine", "ds4", "--dst-type", "f32"]);
    assert_eq!(r.code, 2, "{}", r.output);
    assert!(r.output.contains("--dst-type shapes the generic graph"));
}

/// Memory placement on the CPU backend: device and unified report where every buffer is (the CPU
/// buffer type, no GPU runtime to ask: pointer null); host is refused, it is the same buffer.
#[test]
fn memory_placement_is_reported_and_host_on_cpu_is_refused() {
    let Some(bin) = replay() else { return };
    for mem in ["device", "unified"] {
        let r = run(bin, &["--memory", mem, "--steps", "50"]);
        assert_eq!(r.code, 0, "{mem}: {}", r.output);
        let j = result_json(&r.output);
        assert_eq!(j["params"]["memory"], mem);
        assert_eq!(j["memory"]["requested"], mem);
        assert!(
            j["memory"]["pointer_api"].is_null(),
            "a CPU build asks no runtime"
        );
        let bufs = j["memory"]["buffers"].as_array().expect("buffers");
        assert_eq!(bufs.len(), 6, "4 persistent, outputs, inputs");
        for b in bufs {
            assert_eq!(b["buft"], "CPU", "{b}");
            assert_eq!(b["is_host"], true, "{b}");
            assert!(b["pointer"].is_null(), "{b}");
        }
    }
    let r = run(bin, &["--memory", "host", "--steps", "50"]);
    assert_eq!(r.code, 2, "{}", r.output);
    assert!(r.output.contains("--memory host"), "{}", r.output);
    let j = result_json(&r.output);
    assert!(j["memory"].is_null(), "nothing was placed");
}
