//! ggml's own HIP backend built for gfx1151 by the tool itself, in the ROCm image made from
//! Debian sid's packages (scripts/rocm-image.sh sid: HIP 6.4.3, clang 21), on a real ggml tree
//! (llama-cpp-python's vendored ggml from PyPI: CI reaches no GitHub). Two commits: the tree,
//! then a change to set-rows.cu only. The path is the user's: `setrows-bisect matrix` with a
//! HIP configuration (graphs on, wave 32, flash attention off: the smallest real build), the
//! bundled replay linked against libggml-hip.
//!
//! What is proven, from the build (this machine has no AMD GPU): the library carries gfx1151
//! device code (its offload bundles), GGML_HIP_GRAPHS is defined in every GPU compile command,
//! the test is `untestable: no AMD GPU` with the build kept (never a verdict), and the second
//! commit rebuilt set-rows.cu alone. Setup: scripts/setup.d/35-rocm.sh; under CI a missing
//! image or tree fails (`tools::require`). Times are in BENCHMARKS.md, never asserted.

mod tools;

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

#[path = "gitcommit/mod.rs"]
mod gitcommit;

fn setup() -> Option<(String, PathBuf)> {
    let image = std::env::var("SETROWS_ROCM_IMAGE_SID").ok();
    let src = std::env::var("SETROWS_HIP_GGML_SRC")
        .ok()
        .map(PathBuf::from)
        .filter(|p| p.join("src/ggml-hip/CMakeLists.txt").is_file());
    tools::require(
        image.zip(src),
        "the Debian sid ROCm image and a ggml HIP tree (SETROWS_ROCM_IMAGE_SID, SETROWS_HIP_GGML_SRC)",
        "scripts/setup.d/35-rocm.sh",
    )
}

#[test]
fn ggml_hip_builds_for_gfx1151_in_the_debian_rocm_image() {
    let Some((image, ggml)) = setup() else { return };
    let d = tempfile::tempdir().unwrap();
    let repo_dir = d.path().join("ggml");
    let cp = std::process::Command::new("cp")
        .arg("-a")
        .arg(&ggml)
        .arg(&repo_dir)
        .status()
        .unwrap();
    assert!(cp.success());
    let repo = git2::Repository::init(&repo_dir).unwrap();
    let first = gitcommit::commit_all(&repo, "ggml as vendored by llama-cpp-python");
    let set_rows = repo_dir.join("src/ggml-cuda/set-rows.cu");
    let text = std::fs::read_to_string(&set_rows).unwrap();
    let changed = text.replacen(
        "if (i >= ne_total) {",
        "if (i >= ne_total || ne_total < 0) {",
        1,
    );
    assert_ne!(
        changed, text,
        "set-rows.cu no longer has the line this test edits"
    );
    std::fs::write(&set_rows, changed).unwrap();
    let second = gitcommit::commit_all(&repo, "set-rows.cu only: same behaviour, new device code");

    let m = d.path().join("matrix.toml");
    std::fs::write(
        &m,
        format!(
            "[probe]\nkind = \"replay\"\ntimeout_s = 7200\ncmake_args = [\"-DGGML_CUDA_FA=OFF\"]\n\
             [images]\nhip = \"{image}\"\n\
             [matrix]\nbackend = [\"hip\"]\ngfx = [\"gfx1151\"]\nwave_size = [32]\ngraphs = [true]\n\
             params = [\"short\"]\n[params.short]\nargs = [\"--steps\", \"200\"]\n"
        ),
    )
    .unwrap();
    let out = d.path().join("out");
    let run = Command::cargo_bin("setrows-bisect")
        .unwrap()
        .env_remove("GITHUB_TOKEN")
        .args(["matrix", "--engine", "podman", "--matrix"])
        .arg(&m)
        .arg("--repo")
        .arg(&repo_dir)
        .args(["--rev", &first, "--rev", &second, "--work-dir"])
        .arg(d.path().join("work"))
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
    let cells = r["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "{text}");
    let gpu = Path::new("/dev/kfd").exists();
    for cell in cells {
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
        if gpu {
            assert_ne!(cell["signature"].as_str().unwrap_or(""), "", "{cell}");
        } else {
            assert_eq!(cell["outcome"], "untestable", "{cell}");
            let sig = cell["signature"].as_str().unwrap();
            assert!(sig.starts_with("no AMD GPU"), "{sig}");
            assert_eq!(cell["test_s"].as_f64().unwrap(), 0.0, "{cell}");
        }
    }
    // The second commit changed set-rows.cu alone: its build compiled that one HIP source.
    let log = std::fs::read_to_string(cells[1]["log"].as_str().unwrap()).unwrap();
    let hip_objects: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Building HIP object"))
        .collect();
    assert_eq!(hip_objects.len(), 1, "{hip_objects:?}");
    assert!(hip_objects[0].ends_with("set-rows.cu.o"), "{hip_objects:?}");
}
