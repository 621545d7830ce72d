//! decode-probe (repro-kernels/decode-probe) built with real CMake against the llama.cpp that
//! the llama-cpp-python 0.3.36 sdist vendors (scripts/setup.d/33-llama.sh), on the tiny model the
//! tool writes itself, run on the CPU: llama.cpp's own decode with its KV ring and graph reuse
//! passes against the no-reuse reference and proves the reuse; a run without reuse, a model the
//! tree cannot load and a run without references are untestable, never a pass.

mod tools;

use setrows_bisect::core::gguf::DType;
use setrows_bisect::core::outcome::Outcome;
use setrows_bisect::probe::decode::{materialize_sources, write_model, Model};
use setrows_bisect::probe::repro::{classify, parse_result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn llama_src() -> Option<PathBuf> {
    tools::require(
        std::env::var_os("SETROWS_LLAMA_SRC").map(PathBuf::from),
        "the vendored llama.cpp (SETROWS_LLAMA_SRC)",
        "scripts/setup.d/33-llama.sh",
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

/// The build shared with the other decode tests (SETROWS_LLAMA_BUILD: one llama library build
/// per machine, incremental afterwards), from the sources embedded in the tool.
fn probe_bin() -> Option<&'static Path> {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    let src = llama_src()?;
    Some(BIN.get_or_init(|| {
        let build = std::env::var_os("SETROWS_LLAMA_BUILD")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("llama-build"));
        let sources = build.join("sources");
        let name = materialize_sources(&sources).expect("write the decode-probe sources");
        let bdir = build.join("cpu");
        let mut configure = Command::new("cmake");
        configure
            .arg("-S")
            .arg(sources.join(name))
            .arg("-B")
            .arg(&bdir)
            .args([
                "-G",
                "Ninja",
                "-DCMAKE_BUILD_TYPE=Release",
                "-DGGML_NATIVE=OFF",
                "-DBUILD_SHARED_LIBS=OFF",
            ])
            .arg(format!("-DLLAMA_SOURCE_DIR={}", src.display()));
        if which("ccache") {
            configure.args([
                "-DCMAKE_C_COMPILER_LAUNCHER=ccache",
                "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache",
            ]);
        }
        run_checked(&mut configure, "cmake configure");
        run_checked(
            Command::new("cmake")
                .arg("--build")
                .arg(&bdir)
                .args(["--target", "decode-probe"]),
            "cmake build",
        );
        bdir.join("decode-probe")
    }))
}

fn which(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn model(dtype: DType) -> Model {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("decode-models");
    write_model(&dir, 42, dtype).expect("write the model")
}

struct Ran {
    code: i32,
    output: String,
}

fn run(bin: &Path, model: &Path, args: &[&str], env: &[(&str, &str)]) -> Ran {
    let out = Command::new(bin)
        .arg("--model")
        .arg(model)
        .args(["--backend", "CPU"])
        .args(args)
        .env("GGML_NO_BACKTRACE", "1")
        .env_remove("LLAMA_GRAPH_REUSE_DISABLE")
        .envs(env.iter().copied())
        .output()
        .expect("run decode-probe");
    let mut output = String::from_utf8_lossy(&out.stderr).into_owned();
    output.push_str(&String::from_utf8_lossy(&out.stdout));
    Ran {
        code: out.status.code().unwrap_or(-1),
        output,
    }
}

fn outcome(r: &Ran) -> (Outcome, Option<String>) {
    let c = classify(Some(r.code), None, false, &r.output);
    (c.outcome, c.signature)
}

#[test]
fn ten_thousand_tokens_through_the_kv_ring_pass_with_the_graph_reused() {
    let Some(bin) = probe_bin() else { return };
    for dtype in [DType::F32, DType::F16] {
        let m = model(dtype);
        let r = run(bin, &m.path, &[], &[]);
        assert_eq!(r.code, 0, "{dtype:?}: {}", r.output);
        assert_eq!(outcome(&r).0, Outcome::Pass, "{}", r.output);
        let res = parse_result(&r.output).expect("SETROWS_RESULT");
        assert_eq!(res.status, "pass");
        assert_eq!(res.steps_run, 10_000, "the default is 10,000 tokens");
        let line = r
            .output
            .lines()
            .find(|l| l.starts_with("SETROWS_RESULT "))
            .unwrap();
        let v: serde_json::Value =
            serde_json::from_str(line.trim_start_matches("SETROWS_RESULT ")).unwrap();
        assert_eq!(v["kv_cells"], 256, "{line}");
        assert_eq!(v["model_bytes"], m.bytes, "{line}");
        let streams = v["streams"].as_array().unwrap();
        let probe = &streams[0];
        assert_eq!(probe["name"], "probe");
        assert_eq!(probe["decodes"], 10_000);
        // every decode but the first few (the first graph, a reserve) reused the graph
        let reused = probe["graphs_reused"].as_i64().unwrap();
        assert!(reused >= 9_990, "{line}");
        let same = &streams[1];
        assert_eq!(same["name"], "same");
        assert_eq!(
            same["graphs_reused"], 0,
            "the reference must not reuse: {line}"
        );
        assert_eq!(same["decodes"], 10_000);
    }
}

#[test]
fn a_run_without_graph_reuse_is_untestable() {
    let Some(bin) = probe_bin() else { return };
    let m = model(DType::F16);
    let r = run(
        bin,
        &m.path,
        &["--steps", "300"],
        &[("LLAMA_GRAPH_REUSE_DISABLE", "1")],
    );
    assert_eq!(r.code, 3, "{}", r.output);
    let (o, sig) = outcome(&r);
    assert_eq!(o, Outcome::Untestable);
    assert!(sig.unwrap().contains("no graph reuse"), "{}", r.output);
}

#[test]
fn a_model_the_tree_cannot_load_is_untestable_with_llama_cpps_message() {
    let Some(bin) = probe_bin() else { return };
    let m = model(DType::F16);
    let bad = Path::new(env!("CARGO_TARGET_TMPDIR")).join("decode-models/truncated.gguf");
    let bytes = std::fs::read(&m.path).unwrap();
    std::fs::write(&bad, &bytes[..bytes.len() / 2]).unwrap();
    let r = run(bin, &bad, &["--steps", "10"], &[]);
    assert_eq!(r.code, 3, "{}", r.output);
    let (o, sig) = outcome(&r);
    assert_eq!(o, Outcome::Untestable);
    let sig = sig.unwrap();
    assert!(sig.contains("could not load the model: "), "{sig}");
    // llama.cpp's own words follow, never an empty reason
    assert!(!sig.contains("(no message)"), "{sig}");
}

#[test]
fn a_run_without_references_is_unchecked_not_a_pass() {
    let Some(bin) = probe_bin() else { return };
    let m = model(DType::F16);
    let r = run(bin, &m.path, &["--steps", "500", "--check", "none"], &[]);
    assert_eq!(r.code, 0, "{}", r.output);
    assert_eq!(parse_result(&r.output).unwrap().status, "unchecked");
    assert_eq!(outcome(&r).0, Outcome::Untestable);
}
