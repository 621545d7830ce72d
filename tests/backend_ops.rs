//! `--probe-kind backend-ops` (issue 46) end to end with the real binary: a real
//! test-backend-ops (the one llama.cpp ships, ggml's own CPU backend beside it) built by the
//! probe from a repository the test makes, faults planted in ggml-cpu's SET_ROWS, and the
//! bisect the user types. The tree is the ggml/ and tests/test-backend-ops.cpp of the
//! llama.cpp sdist the setup caches (scripts/setup.d/33-llama.sh, `$SETROWS_LLAMA_SRC`), laid
//! out as a ggml repository (its own `tests/CMakeLists.txt` adds the program, as ggml's does).
//!
//! `-b CPU` compares the CPU backend with itself, so what it sees of a CPU fault is what
//! differs from a finite result: a NaN, or a crash inside a case (ggml-org/ggml #1190 is one).

mod common;

use common::{git, tools};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn llama_src() -> Option<PathBuf> {
    tools::require(
        std::env::var_os("SETROWS_LLAMA_SRC").map(PathBuf::from),
        "the llama.cpp source (SETROWS_LLAMA_SRC)",
        "scripts/setup.d/33-llama.sh",
    )
}

const OPS_CPP: &str = "src/ggml-cpu/ops.cpp";
/// The line of the SET_ROWS kernel the faults are planted after (it names `i1`, the row).
const ANCHOR: &str = "GGML_ASSERT(i1 >= 0 && i1 < ne1);";

/// A ggml-layout repository: c0 the sdist's tree, c1 a README change, c2 a NaN in the first
/// element of each f32 row copied with an i32 index (those cases fail), c3 a comment in the CUDA backend (nothing the
/// CPU build reads), c4 an assert on f16 rows with an i64 index (the first such case crashes).
fn make_repo(dir: &Path, src: &Path) -> Vec<String> {
    let repo = dir.join("ggml");
    std::fs::create_dir_all(repo.join("tests")).unwrap();
    copy_dir(&src.join("ggml"), &repo);
    std::fs::copy(
        src.join("tests/test-backend-ops.cpp"),
        repo.join("tests/test-backend-ops.cpp"),
    )
    .unwrap();
    std::fs::write(
        repo.join("tests/CMakeLists.txt"),
        "add_executable(test-backend-ops test-backend-ops.cpp)\n\
         target_link_libraries(test-backend-ops PRIVATE ggml)\n\
         target_compile_features(test-backend-ops PRIVATE cxx_std_17)\n",
    )
    .unwrap();
    // What ggml's own root holds and llama.cpp's copy leaves out.
    std::fs::write(
        repo.join("ggml.pc.in"),
        "prefix=@CMAKE_INSTALL_PREFIX@\nName: ggml\nDescription: ggml\nVersion: @GGML_VERSION@\n",
    )
    .unwrap();
    std::fs::write(repo.join("README.md"), "ggml\n").unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    let commit = |msg: &str| {
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", msg]);
        git(&repo, &["rev-parse", "HEAD"])
    };
    let mut shas = vec![commit("the sdist's ggml and test-backend-ops")];
    std::fs::write(repo.join("README.md"), "ggml, a tensor library\n").unwrap();
    shas.push(commit("docs"));
    plant(
        &repo,
        "if (src1->type == GGML_TYPE_I32 && src0->type == GGML_TYPE_F32) { ((float *) ((char *) src0->data + i*nb01 + i02*nb02 + i03*nb03))[0] = NAN; }",
    );
    shas.push(commit("cpu: set_rows with an i32 index writes NaN"));
    let cu = repo.join("src/ggml-cuda/ggml-cuda.cu");
    let mut text = std::fs::read_to_string(&cu).unwrap();
    text.push_str("\n// a CUDA-only change\n");
    std::fs::write(&cu, text).unwrap();
    shas.push(commit("cuda: comment"));
    plant(
        &repo,
        "GGML_ASSERT(!(dst->type == GGML_TYPE_F16 && src1->type == GGML_TYPE_I64 && nc == 256));",
    );
    shas.push(commit("cpu: set_rows asserts on f16 rows of 256"));
    shas
}

fn plant(repo: &Path, line: &str) {
    let p = repo.join(OPS_CPP);
    let text = std::fs::read_to_string(&p).unwrap();
    assert!(text.contains(ANCHOR), "{OPS_CPP} has no `{ANCHOR}`");
    std::fs::write(
        &p,
        text.replacen(ANCHOR, &format!("{ANCHOR}\n                {line}"), 1),
    )
    .unwrap();
}

fn copy_dir(from: &Path, to: &Path) {
    let st = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success());
}

fn bisect(
    repo: &Path,
    work: &Path,
    json: &Path,
    good: &str,
    bad: &str,
    extra: &[&str],
) -> (Option<i32>, String) {
    let out = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
        .arg("--repo")
        .arg(repo)
        .args(["--good", good, "--bad", bad])
        .args([
            "--probe-kind",
            "backend-ops",
            "--op",
            "SET_ROWS",
            "--backend",
            "cpu",
        ])
        .args(extra)
        .arg("--work-dir")
        .arg(work)
        .arg("--json")
        .arg(json)
        .env_remove("SETROWS_WORK_DIR")
        .env("GGML_NO_BACKTRACE", "1")
        .output()
        .expect("run setrows-bisect");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

/// One history, two questions: the first failing SET_ROWS case of any kind (the NaN of c2),
/// and with `--match` naming the f16 assert, that crash alone (c4): the NaN cases at c2 and c3
/// are "not this bug". Each answer's report carries the failing case lines, the counts per
/// op and the line to paste; the CUDA-only commit is folded by the build's reads.
#[test]
fn a_bisect_follows_the_failing_case_it_is_asked_for() {
    let Some(src) = llama_src() else { return };
    if !common::have_ninja() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let shas = make_repo(tmp.path(), &src);
    let repo = tmp.path().join("ggml");
    let work = tmp.path().join("work");
    let json = tmp.path().join("any.json");
    let (code, text) = bisect(&repo, &work, &json, &shas[0], &shas[4], &[]);
    assert_eq!(code, Some(0), "{text}");
    let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["first_bad"], shas[2].as_str(), "{text}");
    let culprit = r["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["sha"] == shas[2].as_str())
        .expect("the culprit was probed");
    assert_eq!(culprit["outcome"], "wrong_result", "{text}");
    let sig = culprit["signature"].as_str().unwrap();
    assert!(
        sig.starts_with("SET_ROWS(type_src=f32,type_dst=f32,type_idx=i32,"),
        "{sig}"
    );
    assert!(sig.ends_with("): NaN"), "{sig}");
    let at = r["backend_ops"]["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["sha"] == shas[2].as_str())
        .expect("its cases in the result");
    assert_eq!(at["run"]["device"], "CPU");
    let count = &at["run"]["ops"][0];
    assert_eq!(count["op"], "SET_ROWS");
    assert!(count["passed"].as_u64().unwrap() > 0, "{count}");
    assert!(count["failed"].as_u64().unwrap() > 0, "{count}");
    assert!(text.contains("### test-backend-ops"), "{text}");
    assert!(
        text.contains(
            "test-backend-ops test -o SET_ROWS -p '^type_src=f32,type_dst=f32,type_idx=i32,"
        ),
        "{text}"
    );

    let json = tmp.path().join("f16.json");
    let (code, text) = bisect(
        &repo,
        &work,
        &json,
        &shas[0],
        &shas[4],
        &[
            "--match",
            r"crash \(GGML_ASSERT\(!\(dst->type == GGML_TYPE_F16",
        ],
    );
    assert_eq!(code, Some(0), "{text}");
    let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["first_bad"], shas[4].as_str(), "{text}");
    let last = r["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["sha"] == shas[4].as_str())
        .expect("the culprit was probed");
    assert_eq!(last["outcome"], "crash", "{text}");
    // The README and CUDA-only commits change nothing the CPU build of test-backend-ops
    // reads: fewer groups than candidates.
    let g = &r["grouping"];
    assert!(g["groups"].as_u64() < g["candidates"].as_u64(), "{g}");
}

/// Bad input is refused before anything is built: an op the `--bad` tree does not have (with
/// the tree's op list), `--op` without the probe kind, a `-p` that is no regex.
#[test]
fn bad_input_is_one_line_before_any_probe() {
    let Some(src) = llama_src() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let shas = make_repo(tmp.path(), &src);
    let repo = tmp.path().join("ggml");
    let work = tmp.path().join("work");
    let json = tmp.path().join("r.json");
    let run = |args: &[&str]| {
        let out = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
            .arg("--repo")
            .arg(&repo)
            .args(["--good", &shas[0], "--bad", &shas[4]])
            .args(args)
            .arg("--work-dir")
            .arg(&work)
            .env_remove("SETROWS_WORK_DIR")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // A typo (case included) is one short line naming the closest op, not the tree's list.
    let (code, err) = run(&["--probe-kind", "backend-ops", "--op", "set_rows"]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--op set_rows: no such op in this tree's ggml; did you mean --op SET_ROWS?"),
        "{err}"
    );
    assert!(err.len() < 200, "{err}");
    let (code, err) = run(&["--op", "SET_ROWS"]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        err.trim(),
        "setrows-bisect: error: --op is test-backend-ops' and the probe is replay (the default): add --probe-kind backend-ops"
    );
    let (code, err) = run(&[
        "--probe-kind",
        "backend-ops",
        "--op",
        "SET_ROWS",
        "--op-params",
        "type=(f16",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--op-params \"type=(f16\": not a regex"),
        "{err}"
    );
    // Nothing was checked out or built.
    assert!(!work.join("builds").exists() && !json.exists());
}

/// A fix's own test case, applied to every probed tree (`--apply FIX:tests/test-backend-ops.cpp`):
/// c2 plants a NaN in SET_ROWS rows of 40 floats, a shape no case of the sdist's
/// test-backend-ops has, so every tree before the fix passes; c4 removes it and adds the case
/// that shows it. With the case applied and picked by `--op-params`, the bisect names c2, and
/// the report shows that case's failing line and how to apply the case by hand.
#[test]
fn the_case_a_fix_added_is_followed_with_apply() {
    let src = llama_src().expect("the llama.cpp source: scripts/setup.d/33-llama.sh");
    assert!(
        common::have_ninja(),
        "cmake and ninja build test-backend-ops"
    );
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("ggml");
    // c0..c1 of `make_repo`'s history, then this test's own.
    let mut shas = make_repo(tmp.path(), &src);
    git(&repo, &["reset", "-q", "--hard", &shas[1]]);
    shas.truncate(2);
    let commit = |msg: &str| {
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", msg]);
        git(&repo, &["rev-parse", "HEAD"])
    };
    let ops = std::fs::read_to_string(repo.join(OPS_CPP)).unwrap();
    plant(
        &repo,
        "if (nc == 40 && src0->type == GGML_TYPE_F32) { ((float *) ((char *) src0->data + i*nb01 + i02*nb02 + i03*nb03))[0] = NAN; }",
    );
    shas.push(commit("cpu: set_rows of 40-float rows writes NaN"));
    std::fs::write(repo.join("README.md"), "ggml, tensors\n").unwrap();
    shas.push(commit("docs"));
    std::fs::write(repo.join(OPS_CPP), ops).unwrap();
    let test = repo.join("tests/test-backend-ops.cpp");
    let text = std::fs::read_to_string(&test).unwrap();
    let anchor = "    test_cases.emplace_back(new test_set_rows(GGML_TYPE_F32, GGML_TYPE_F32, GGML_TYPE_I32, { 1, 8, 1, 3 }, { 1, 1 }, 2, false));\n";
    assert!(
        text.contains(anchor),
        "the sdist's test-backend-ops changed"
    );
    std::fs::write(
        &test,
        text.replacen(
            anchor,
            &format!("{anchor}    test_cases.emplace_back(new test_set_rows(GGML_TYPE_F32, GGML_TYPE_F32, GGML_TYPE_I32, {{ 40, 5, 1, 3 }}, {{ 1, 1 }}, 1, false));\n"),
            1,
        ),
    )
    .unwrap();
    shas.push(commit(
        "cpu: fix set_rows of 40-float rows, with its test case",
    ));

    let work = tmp.path().join("work");
    let json = tmp.path().join("r.json");
    let apply = format!("{}:tests/test-backend-ops.cpp", shas[4]);
    let (code, text) = bisect(
        &repo,
        &work,
        &json,
        &shas[0],
        &shas[3],
        &["--apply", &apply, "--op-params", r"ne=\[40,"],
    );
    assert_eq!(code, Some(0), "{text}");
    let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(r["first_bad"], shas[2].as_str(), "{text}");
    let line = "SET_ROWS(type_src=f32,type_dst=f32,type_idx=i32,ne=[40,5,1,3]";
    let culprit = r["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["sha"] == shas[2].as_str())
        .expect("the culprit was probed");
    assert_eq!(culprit["outcome"], "wrong_result", "{text}");
    assert!(
        culprit["signature"].as_str().unwrap().starts_with(line),
        "{culprit}"
    );
    // The report: the case's line, and the patch applied before the hand-run's build.
    assert!(text.contains("### test-backend-ops"), "{text}");
    assert!(text.contains(line), "{text}");
    let saved = r["applied"][0]["saved"].as_str().unwrap();
    assert!(text.contains(&format!("git apply -3 {saved}")), "{text}");
}
