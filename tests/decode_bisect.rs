//! The decode probe through the real binary on a generated llama.cpp history: the llama.cpp that
//! the llama-cpp-python 0.3.36 sdist vendors (scripts/setup.d/33-llama.sh) is committed as the
//! first revision, followed by revisions that change nothing the probe reads, and from FAULT_AT on
//! a planted fault in llama.cpp's own decode: when the decode graph is reused after the KV ring
//! has wrapped, the K write index of the token is one cell ahead (the K row lands in the next
//! cell, the token's own cell keeps a stale row). Wrong with reuse, right without it, so only the
//! reference decode with LLAMA_GRAPH_REUSE_DISABLE=1 can tell: `--probe-kind decode` and
//! otherwise default flags find it. A repository that is not llama.cpp is refused before any
//! probe.

mod common;

use common::{git, tools};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const COMMITS: usize = 6;
const FAULT_AT: usize = 4;

/// What the history takes from the vendored tree: what building the llama library reads.
const TREE: [&str; 8] = [
    "CMakeLists.txt",
    "LICENSE",
    "cmake",
    "ggml",
    "include",
    "licenses",
    "src",
    "vendor",
];

fn llama_src() -> Option<PathBuf> {
    tools::require(
        std::env::var_os("SETROWS_LLAMA_SRC").map(PathBuf::from),
        "the vendored llama.cpp (SETROWS_LLAMA_SRC)",
        "scripts/setup.d/33-llama.sh",
    )
}

/// The planted fault, as edits of src/llama-context.cpp (each anchor must be there once).
fn plant(ctx: &str) -> String {
    let edits = [
        (
            "    if (!graph_reuse_disable && gf_res_prev_active == res && res->can_reuse(gparams)) {\n",
            "    bool planted_reused = false;\n    if (!graph_reuse_disable && gf_res_prev_active == res && res->can_reuse(gparams)) {\n        planted_reused = true;\n",
        ),
        (
            "        // FIXME this call causes a crash if any model inputs were not used in the graph and were therefore not allocated\n        res->set_inputs(&ubatch);\n",
            "        // FIXME this call causes a crash if any model inputs were not used in the graph and were therefore not allocated\n        res->set_inputs(&ubatch);\n\
        // planted: a reused graph writes K one cell ahead once the KV ring has wrapped\n\
        if (planted_reused && ubatch.pos && ubatch.pos[0] >= (llama_pos) cparams.n_ctx) {\n\
            for (auto & inp : res->inputs) {\n\
                auto * kv = dynamic_cast<llm_graph_input_attn_kv *>(inp.get());\n\
                if (kv && kv->self_k_idxs && kv->self_k_idxs->buffer) {\n\
                    int64_t * idx = (int64_t *) kv->self_k_idxs->data;\n\
                    idx[0] = (idx[0] + 1) % (int64_t) cparams.n_ctx;\n\
                }\n\
            }\n\
        }\n",
        ),
    ];
    let mut s = ctx.to_string();
    for (anchor, with) in edits {
        assert_eq!(
            s.matches(anchor).count(),
            1,
            "anchor not found once: {anchor}"
        );
        s = s.replace(anchor, with);
    }
    s
}

struct History {
    repo: PathBuf,
    work: PathBuf,
    out: PathBuf,
    shas: Vec<String>,
    _tmp: tempfile::TempDir,
}

fn copy_tree(from: &Path, to: &Path) {
    let st = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .expect("cp");
    assert!(st.success(), "cp -a {} {}", from.display(), to.display());
}

fn history() -> Option<History> {
    let src = llama_src()?;
    if !common::have_cmake() {
        return None;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&repo).expect("mkdir");
    for p in TREE {
        copy_tree(&src.join(p), &repo.join(p));
    }
    git(&repo, &["init", "-q", "-b", "main"]);
    let mut shas = Vec::new();
    let ctx_path = repo.join("src/llama-context.cpp");
    let clean = std::fs::read_to_string(&ctx_path).expect("llama-context.cpp");
    for i in 0..COMMITS {
        if i == FAULT_AT {
            std::fs::write(&ctx_path, plant(&clean)).expect("plant");
        }
        std::fs::write(repo.join("NOTES"), format!("revision {i}\n")).expect("notes");
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", &format!("revision {i}")]);
        shas.push(git(&repo, &["rev-parse", "HEAD"]));
    }
    Some(History {
        repo,
        work: tmp.path().join("work"),
        out: tmp.path().join("out"),
        shas,
        _tmp: tmp,
    })
}

impl History {
    fn bisect(&self, extra: &[&str]) -> Output {
        std::fs::create_dir_all(&self.out).expect("out dir");
        Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
            .arg("--repo")
            .arg(&self.repo)
            .args(["--good", &self.shas[0], "--bad", &self.shas[COMMITS - 1]])
            .arg("--work-dir")
            .arg(&self.work)
            .args(extra)
            .env_remove("SETROWS_WORK_DIR")
            .env_remove("LLAMA_GRAPH_REUSE_DISABLE")
            .env("GGML_NO_BACKTRACE", "1")
            .output()
            .expect("run setrows-bisect")
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn the_decode_probe_finds_a_fault_that_shows_only_when_the_graph_is_reused_after_the_ring_wraps() {
    let Some(h) = history() else { return };
    let json = h.out.join("r.json");
    let out = h.bisect(&["--probe-kind", "decode", "--json", json.to_str().unwrap()]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["first_bad"], h.shas[FAULT_AT].as_str(), "{t}");
    let culprit = r["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["sha"] == h.shas[FAULT_AT].as_str())
        .expect("the culprit was probed");
    assert_eq!(culprit["outcome"], "wrong_result", "{t}");
    let sig = culprit["signature"].as_str().unwrap_or_default();
    // the first token after the ring wrapped, its position and the cell it was written to
    assert!(
        sig.starts_with("token=256 pos=256 kv_cell=0 reference=same "),
        "{sig}"
    );
}

#[test]
fn a_repository_that_is_not_llama_cpp_is_refused_before_any_probe() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(repo.join("include")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    let mut shas = vec![];
    for i in 0..2 {
        std::fs::write(repo.join("include/ggml.h"), format!("// {i}\n")).unwrap();
        std::fs::write(repo.join("CMakeLists.txt"), "project(x)\n").unwrap();
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", &format!("r{i}")]);
        shas.push(git(&repo, &["rev-parse", "HEAD"]));
    }
    let work = tmp.path().join("work");
    let out = Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
        .arg("--repo")
        .arg(&repo)
        .args([
            "--good",
            &shas[0],
            "--bad",
            &shas[1],
            "--probe-kind",
            "decode",
        ])
        .arg("--work-dir")
        .arg(&work)
        .env_remove("SETROWS_WORK_DIR")
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(2), "{t}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    assert!(lines[0].contains("--probe-kind decode"), "{stderr}");
    assert!(lines[0].contains("llama.cpp"), "{stderr}");
    assert!(!work.join("logs").exists(), "no probe ran");
}
