//! ggml's own HIP backend and both bundled programs built for gfx1151 by the tool itself, in the
//! ROCm image made from Debian sid's packages (scripts/rocm-image.sh sid: HIP 6.4.3, clang 21), on
//! a real llama.cpp tree (the one the llama-cpp-python 0.3.36 sdist vendors, from PyPI: CI reaches
//! no GitHub). Two commits: the tree, then a change to set-rows.cu only. The path is the user's:
//! `setrows-bisect matrix` with a HIP configuration (graphs on, wave 32, flash attention off: the
//! smallest real build): the replay at both commits, then the decode probe (llama.cpp's own
//! decode) at the second, in the same work directory. Device code is Release (-O3), as users
//! build it; host code (C, C++: ggml's CPU side, llama.cpp, both programs) is -O0, through the
//! configuration's `cmake_args` as a user passes them: none of it runs on this machine, and CI's
//! two cores could not pay llama.cpp's optimised build on top of the device code. (-O0 device
//! code does not build: at -O0 clang keeps a DPP wavefront shift that GFX10 and later lack,
//! which is why ggml's own HIP Debug flags are -O2.)
//!
//! What is proven, from the builds (this machine has no AMD GPU): each build's library carries
//! gfx1151 device code (its offload bundles), GGML_HIP_GRAPHS is defined in every GPU compile
//! command, each cell is `untestable: no AMD GPU` with the build kept (never a verdict), the
//! second replay build compiled set-rows.cu alone, and the decode build compiled llama.cpp and
//! decode-probe and took every HIP object of ggml from the replay's compiles (ccache, which the
//! replay run fills as a trusted run (`SETROWS_CCACHE_FILL`) and the decode run reads: both
//! programs add ggml by one rule, repro-kernels/ggml-source.cmake, so their commands are the
//! same). Setup: scripts/setup.d/33-llama.sh and 35-rocm.sh; under CI a missing image or tree
//! fails (`tools::require`). Times are in BENCHMARKS.md, never asserted.

mod common;

use assert_cmd::Command;
use common::{git, llama, tools};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn setup() -> Option<(String, PathBuf)> {
    let image = std::env::var("SETROWS_ROCM_IMAGE_SID").ok();
    let src = std::env::var("SETROWS_LLAMA_SRC")
        .ok()
        .map(PathBuf::from)
        .filter(|p| p.join("ggml/src/ggml-hip/CMakeLists.txt").is_file());
    tools::require(
        image.zip(src),
        "the Debian sid ROCm image and a llama.cpp tree with ggml's HIP backend (SETROWS_ROCM_IMAGE_SID, SETROWS_LLAMA_SRC)",
        "scripts/setup.d/33-llama.sh and 35-rocm.sh",
    )
}

/// The vendored tree, then the same tree with set-rows.cu changed (same behaviour, new device
/// code): the two commits' shas.
fn history(src: &Path, repo: &Path) -> (String, String) {
    llama::stage_tree(src, repo, &["ggml-cpu", "ggml-cuda", "ggml-hip"]);
    git(
        repo,
        &[
            "commit",
            "-q",
            "-m",
            "llama.cpp as vendored by llama-cpp-python",
        ],
    );
    let first = git(repo, &["rev-parse", "HEAD"]);
    let rel = "ggml/src/ggml-cuda/set-rows.cu";
    let text = std::fs::read_to_string(src.join(rel)).unwrap();
    let changed = text.replacen(
        "if (i >= ne_total) {",
        "if (i >= ne_total || ne_total < 0) {",
        1,
    );
    assert_ne!(
        changed, text,
        "set-rows.cu no longer has the line this test edits"
    );
    llama::stage_text(repo, rel, &changed);
    git(
        repo,
        &[
            "commit",
            "-q",
            "-m",
            "set-rows.cu only: same behaviour, new device code",
        ],
    );
    (first, git(repo, &["rev-parse", "HEAD"]))
}

/// What both programs are built with: flash attention off (the smallest real build), and -O0 for
/// host code (see the top of this file).
const CMAKE_ARGS: &str = "[\"-DGGML_CUDA_FA=OFF\", \"-DCMAKE_C_FLAGS_RELEASE=-O0 -DNDEBUG\", \
    \"-DCMAKE_CXX_FLAGS_RELEASE=-O0 -DNDEBUG\"]";

/// `setrows-bisect matrix` over `revs` with `probe` (a `[probe]` table's body) in the shared
/// work directory; its cells, and everything it printed for a failing assertion.
/// `fill`: the run may add to the shared ccache of the image (`SETROWS_CCACHE_FILL`; this tree
/// is trusted), which later runs read.
fn matrix(
    d: &Path,
    image: &str,
    name: &str,
    probe: &str,
    revs: &[&str],
    fill: bool,
) -> (Vec<Value>, String) {
    let m = d.join(format!("{name}.toml"));
    std::fs::write(
        &m,
        format!(
            "[probe]\n{probe}timeout_s = 7200\ncmake_args = {CMAKE_ARGS}\n\
             [images]\nhip = \"{image}\"\n\
             [matrix]\nbackend = [\"hip\"]\ngfx = [\"gfx1151\"]\nwave_size = [32]\ngraphs = [true]\n"
        ),
    )
    .unwrap();
    let out = d.join(format!("out-{name}"));
    let mut cmd = Command::cargo_bin("setrows-bisect").unwrap();
    if fill {
        cmd.env("SETROWS_CCACHE_FILL", "1");
    } else {
        cmd.env_remove("SETROWS_CCACHE_FILL");
    }
    cmd.env_remove("GITHUB_TOKEN")
        .args(["matrix", "--engine", "podman", "--matrix"])
        .arg(&m)
        .arg("--repo")
        .arg(d.join("llama.cpp"));
    for r in revs {
        cmd.args(["--rev", r]);
    }
    let run = cmd
        .arg("--work-dir")
        .arg(d.join("work"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let r: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("matrix-results.json"))
            .unwrap_or_else(|e| panic!("no results ({e}):\n{text}")),
    )
    .unwrap();
    let cells = r["cells"].as_array().unwrap().clone();
    assert_eq!(cells.len(), revs.len(), "{text}");
    (cells, text)
}

/// What every cell's build proves, GPU or not: gfx1151 device code, graphs in every GPU compile
/// command, HIP 6.4, and no verdict without an AMD GPU.
fn assert_built_for_gfx1151(cell: &Value) {
    let p = &cell["provenance"];
    let offload = p["offload_targets"]
        .as_str()
        .unwrap_or_else(|| panic!("{cell}"));
    assert!(
        offload.starts_with("gfx1151 x") && offload.contains("libggml-hip.so"),
        "{offload}"
    );
    let graphs = p["graphs_build"]
        .as_str()
        .unwrap_or_else(|| panic!("{cell}"));
    let words: Vec<&str> = graphs.split_whitespace().collect();
    // "GGML_HIP_GRAPHS defined in N of N ggml GPU compile commands"
    assert_eq!(words[3], words[5], "{graphs}");
    assert!(words[3].parse::<usize>().unwrap() > 50, "{graphs}");
    assert!(p["hip"].as_str().unwrap().starts_with("6.4."), "{cell}");
    assert!(cell["build_s"].as_f64().unwrap() > 0.0, "{cell}");
    if Path::new("/dev/kfd").exists() {
        assert_ne!(cell["signature"].as_str().unwrap_or(""), "", "{cell}");
    } else {
        assert_eq!(cell["outcome"], "untestable", "{cell}");
        let sig = cell["signature"].as_str().unwrap();
        assert!(sig.starts_with("no AMD GPU"), "{sig}");
        assert_eq!(cell["test_s"].as_f64().unwrap(), 0.0, "{cell}");
    }
}

fn build_log(cell: &Value) -> String {
    std::fs::read_to_string(cell["log"].as_str().unwrap()).unwrap()
}

fn hip_objects(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("Building HIP object"))
        .collect()
}

#[test]
fn ggml_hip_and_both_programs_build_for_gfx1151_in_the_debian_rocm_image() {
    let Some((image, src)) = setup() else { return };
    let d = tempfile::tempdir().unwrap();
    let (first, second) = history(&src, &d.path().join("llama.cpp"));

    let (replay, text) = matrix(
        d.path(),
        &image,
        "replay",
        "kind = \"replay\"\n",
        &[&first, &second],
        true,
    );
    for cell in &replay {
        assert_built_for_gfx1151(cell);
    }
    let cold = build_log(&replay[0]);
    let cold_hip = hip_objects(&cold).len();
    assert!(cold_hip > 50, "{cold_hip} HIP objects:\n{text}");
    // The second commit changed set-rows.cu alone: its build compiled that one HIP source.
    let log = build_log(&replay[1]);
    let hip = hip_objects(&log);
    assert_eq!(hip.len(), 1, "{hip:?}");
    assert!(hip[0].ends_with("set-rows.cu.o"), "{hip:?}");

    // The decode probe at the second commit, a later run: llama.cpp and decode-probe compiled
    // for this configuration, ggml's HIP objects the same commands as the replay's, so
    // ccache's (the shared cache the replay run filled, read-only to this one).
    let (decode, text) = matrix(
        d.path(),
        &image,
        "decode",
        "kind = \"decode\"\n",
        &[&second],
        false,
    );
    let cell = &decode[0];
    assert_built_for_gfx1151(cell);
    let log = build_log(cell);
    assert!(log.contains("decode-probe: llama.cpp API:"), "{text}");
    assert!(
        log.contains("Linking CXX executable decode-probe"),
        "{text}"
    );
    assert!(log.contains("libllama.so"), "{text}");
    assert_eq!(hip_objects(&log).len(), cold_hip, "{text}");
    let c = &cell["ccache"];
    assert_eq!(
        c["state"], "used",
        "the decode build went without ccache: {c}"
    );
    let (hits, misses) = (c["hits"].as_u64().unwrap(), c["misses"].as_u64().unwrap());
    // Every compile hit or missed; only what the replay never compiled (llama.cpp, decode-probe,
    // ggml-base's few commands that name their build tree) may miss.
    let units = compile_units(&d.path().join("work"), "decode-probe.cpp");
    assert!(
        hits >= cold_hip as u64 && misses <= (units.0 - cold_hip) as u64 && misses > 0,
        "{hits} hits, {misses} misses: {cold_hip} HIP objects compiled by the replay, {units:?} (all, HIP) compile commands in the decode build"
    );
    assert_eq!(units.1, cold_hip, "{units:?}");
}

/// (all, HIP) compile commands of the build tree under `work` that compiles `source`.
fn compile_units(work: &Path, source: &str) -> (usize, usize) {
    let build = work.join("matrix/build");
    for key in std::fs::read_dir(&build).unwrap() {
        for tree in std::fs::read_dir(key.unwrap().path()).unwrap() {
            let cc = tree.unwrap().path().join("compile_commands.json");
            let Ok(text) = std::fs::read_to_string(&cc) else {
                continue;
            };
            let all: Vec<Value> = serde_json::from_str(&text).unwrap();
            if all
                .iter()
                .any(|e| e["file"].as_str().unwrap().ends_with(source))
            {
                let hip: Vec<&str> = all
                    .iter()
                    .map(|e| e["command"].as_str().unwrap())
                    .filter(|c| c.contains("-x hip"))
                    .collect();
                // device code as users build it (Release), host code at -O0 (the top of this file)
                assert!(hip.iter().all(|c| c.contains(" -O3 ")), "{:?}", hip.first());
                let cxx = all
                    .iter()
                    .map(|e| e["command"].as_str().unwrap())
                    .find(|c| c.contains("decode-probe.cpp"))
                    .unwrap();
                assert!(cxx.contains(" -O0 "), "{cxx}");
                return (all.len(), hip.len());
            }
        }
    }
    panic!("no build tree under {} compiles {source}", build.display())
}
