//! The decode probe (repro-kernels/decode-probe) through the real binary, on a generated
//! llama.cpp history made of the llama.cpp that the llama-cpp-python 0.3.36 sdist vendors
//! (scripts/setup.d/33-llama.sh): revision 0 is the vendored tree, revisions 1 and 2 change
//! nothing the probe reads (llama.cpp's own docs/build.md and tools/server/server.cpp, which the
//! probe's build never opens: grouping folds them into revision 0's candidate), revision 3 a
//! header the build reads (src/llama-chat.h: a candidate of its own, though only a comment
//! changed), revision 4 plants a fault in llama.cpp's own decode: when the decode graph is
//! reused after the KV ring has wrapped, the K write index of the token is one cell ahead (the K
//! row lands in the next cell, the token's own cell keeps a stale row). Wrong with reuse, right
//! without it, so only the reference decode with LLAMA_GRAPH_REUSE_DISABLE=1 can tell:
//! `--probe-kind decode` and otherwise default flags find it.
//!
//! One llama.cpp build serves every test here (a cold llama library build is minutes on CI's two
//! cores): the bisect builds decode-probe through the tool's own build script, and the direct
//! checks of decode-probe (graph reuse and the CPU placement report on f32 and f16 models, a run without reuse, a
//! model the tree cannot load, a run without references) run that binary after the test puts the
//! slot back to the clean tree (at most one incremental rebuild). A repository that is not
//! llama.cpp is refused before any probe.

mod common;
#[path = "decode_bisect/settings.rs"]
mod settings;

use common::{git, llama, tools};
use serde_json::Value;
use setrows_bisect::core::gguf::tiny_llama::Shape;
use setrows_bisect::core::gguf::DType;
use setrows_bisect::core::outcome::Outcome;
use setrows_bisect::probe::decode::{write_model, Model};
use setrows_bisect::probe::repro::{classify, parse_result};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The planted revision (the last one: the bisect must tell it from revision 3).
const FAULT_AT: usize = 4;

/// What revisions 1..=3 change: llama.cpp's own files, each in revision 0 as the sdist has it.
/// The first two are a docs-only and a server-only commit (nothing the decode probe's build
/// reads), the third a header its build reads.
const EDITED: [&str; 3] = [
    "docs/build.md",
    "tools/server/server.cpp",
    "src/llama-chat.h",
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
    clean_ctx: String,
    _tmp: tempfile::TempDir,
}

fn history() -> Option<History> {
    let src = llama_src()?;
    if !common::have_cmake() {
        return None;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = tmp.path().join("repo");
    llama::stage_tree(&src, &repo, &["ggml-cpu"]);
    let clean_ctx = std::fs::read_to_string(src.join("src/llama-context.cpp")).expect("ctx");
    let original = |f: &str| std::fs::read_to_string(src.join(f)).expect(f);
    for f in EDITED {
        llama::stage_text(&repo, f, &original(f));
    }
    let mut shas = Vec::new();
    for i in 0..=FAULT_AT {
        llama::stage_text(&repo, "NOTES", &format!("revision {i}\n"));
        if let Some(f) = i.checked_sub(1).and_then(|k| EDITED.get(k)) {
            let edited = format!("{}\n// revision {i}\n", original(f));
            llama::stage_text(&repo, f, &edited);
        }
        if i == FAULT_AT {
            llama::stage_text(&repo, "src/llama-context.cpp", &plant(&clean_ctx));
        }
        git(&repo, &["commit", "-q", "-m", &format!("revision {i}")]);
        shas.push(git(&repo, &["rev-parse", "HEAD"]));
    }
    Some(History {
        repo,
        work: tmp.path().join("work"),
        out: tmp.path().join("out"),
        shas,
        clean_ctx,
        _tmp: tmp,
    })
}

impl History {
    fn bisect(&self, extra: &[&str]) -> Output {
        std::fs::create_dir_all(&self.out).expect("out dir");
        self.run_tool(&self.work, extra)
    }

    /// The tool on revision 0 .. the planted one, in `work`, with `extra`.
    fn run_tool(&self, work: &Path, extra: &[&str]) -> Output {
        Command::new(assert_cmd::cargo::cargo_bin("setrows-bisect"))
            .arg("--repo")
            .arg(&self.repo)
            .args(["--good", &self.shas[0], "--bad", &self.shas[FAULT_AT]])
            .arg("--work-dir")
            .arg(work)
            .args(extra)
            .env_remove("SETROWS_WORK_DIR")
            .env_remove("LLAMA_GRAPH_REUSE_DISABLE")
            .env("GGML_NO_BACKTRACE", "1")
            .output()
            .expect("run setrows-bisect")
    }

    /// The decode-probe the tool built (one slot, one build tree), rebuilt for the clean tree
    /// when the bisect's last probe left the planted one in the slot (ccache has that build).
    fn clean_probe(&self) -> Result<PathBuf, String> {
        let found: Vec<PathBuf> = std::fs::read_dir(self.work.join("checkouts"))
            .map_err(|e| format!("the bisect's checkouts: {e}"))?
            .flat_map(|repo| std::fs::read_dir(repo.unwrap().path()).unwrap())
            .flat_map(|slot| {
                let build = slot.unwrap().path().join("build");
                std::fs::read_dir(&build).into_iter().flatten()
            })
            .map(|t| t.unwrap().path().join("decode-probe"))
            .filter(|p| p.is_file())
            .collect();
        let [bin] = &found[..] else {
            return Err(format!("not one decode-probe build: {found:?}"));
        };
        let tree = bin.parent().unwrap();
        let ctx = tree.join("../../src/src/llama-context.cpp");
        let now = std::fs::read_to_string(&ctx).map_err(|e| format!("{}: {e}", ctx.display()))?;
        if now != self.clean_ctx {
            std::fs::write(&ctx, &self.clean_ctx).map_err(|e| e.to_string())?;
            let out = Command::new("cmake")
                .arg("--build")
                .arg(tree)
                .args(["--target", "decode-probe"])
                .output()
                .map_err(|e| format!("cmake --build: {e}"))?;
            if !out.status.success() {
                return Err(format!("rebuild for the clean tree: {}", text(&out)));
            }
        }
        Ok(bin.clone())
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The bisect, run once for every test of this binary, and the clean decode-probe it built.
struct Bisected {
    history: History,
    output: Output,
    result: Option<Value>,
    probe: Result<PathBuf, String>,
}

impl Bisected {
    fn probe(&self) -> &Path {
        match &self.probe {
            Ok(p) => p,
            Err(e) => panic!("{e}\n{}", text(&self.output)),
        }
    }
}

/// `None` where the tools are missing outside CI. A failure while making the history is kept
/// and reported by every test (a panic inside the cell would run the bisect again per test).
fn bisected() -> Option<&'static Bisected> {
    static DONE: OnceLock<Result<Option<Bisected>, String>> = OnceLock::new();
    let done = DONE.get_or_init(|| {
        std::panic::catch_unwind(|| {
            let history = history()?;
            let json = history.out.join("r.json");
            let md = history.out.join("r.md");
            let output = history.bisect(&[
                "--probe-kind",
                "decode",
                "--json",
                json.to_str().unwrap(),
                "--report",
                md.to_str().unwrap(),
            ]);
            let result = std::fs::read_to_string(&json)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok());
            let probe = history.clean_probe();
            Some(Bisected {
                history,
                output,
                result,
                probe,
            })
        })
        .map_err(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        })
    });
    match done {
        Ok(b) => b.as_ref(),
        Err(e) => panic!("making the history or running the bisect: {e}"),
    }
}

#[test]
fn the_decode_probe_finds_a_fault_that_shows_only_when_the_graph_is_reused_after_the_ring_wraps() {
    let Some(b) = bisected() else { return };
    let (h, t) = (&b.history, text(&b.output));
    assert_eq!(b.output.status.code(), Some(0), "{t}");
    let r = b.result.as_ref().expect("the --json result");
    assert_eq!(r["first_bad"], h.shas[FAULT_AT].as_str(), "{t}");
    let probes = r["probes"].as_array().unwrap();
    // what each probe cost (CI's log shows it; BENCHMARKS.md has the figures)
    for p in probes {
        let i = h.shas.iter().position(|s| p["sha"] == s.as_str());
        eprintln!(
            "decode bisect: revision {i:?} {} in {:.1} s, ccache {}",
            p["outcome"], p["duration_s"], p["ccache"]
        );
    }
    let culprit = probes
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
    // Grouping on a real llama.cpp tree: the docs-only and the server-only commit joined
    // revision 0, the header change did not (a comment, but in a file the build reads).
    let g = &r["grouping"];
    assert_eq!(g["candidates"], 5, "{g}");
    assert_eq!(g["starts"], serde_json::json!([0, 3, 4]), "{g}");
    assert!(g["read_files"].as_u64().unwrap() > 100, "{g}");
    // The first midpoint (revision 2) is probed before any read set is known; revision 1 is
    // never asked: its group's verdict came from revision 2.
    assert!(
        !probes.iter().any(|p| p["sha"] == h.shas[1].as_str()),
        "revision 1 changes nothing the build reads: {:#}",
        r["probes"]
    );
    let report = std::fs::read_to_string(h.out.join("r.md")).expect("the --report");
    assert!(
        report.contains("2 of the 5 candidates change nothing the probes' builds read"),
        "{report}"
    );
    // revision 3 passed (the bisect must tell it from the culprit), and the passing probe that
    // ran its test ran the tool's default decode: 10,000 tokens with the graph reused
    let rev3 = probes
        .iter()
        .find(|p| p["sha"] == h.shas[3].as_str())
        .expect("revision 3 was probed: the bisect must tell it from the culprit");
    assert_eq!(rev3["outcome"], "pass", "{t}");
    let good = probes
        .iter()
        .find(|p| p["outcome"] == "pass" && p["reused_from"].is_null())
        .expect("a passing probe ran its test");
    let log = std::fs::read_to_string(good["log"].as_str().unwrap()).expect("its log");
    let res = result_json(&log);
    assert_eq!(res["steps_run"], 10_000, "the default is 10,000 tokens");
    assert_reuse_proven(&res, 10_000);
}

fn result_json(output: &str) -> Value {
    let line = output
        .lines()
        .rev()
        .find_map(|l| l.trim_start().strip_prefix("SETROWS_RESULT "))
        .unwrap_or_else(|| panic!("no SETROWS_RESULT in {output}"));
    serde_json::from_str(line).unwrap()
}

/// Every decode of the probe context but the first few (the first graph, a reserve) reused the
/// graph, and the no-reuse reference reused none.
fn assert_reuse_proven(res: &Value, tokens: i64) {
    assert_eq!(res["kv_cells"], 256, "{res}");
    let streams = res["streams"].as_array().unwrap();
    let probe = &streams[0];
    assert_eq!(probe["name"], "probe");
    assert_eq!(probe["decodes"], tokens);
    assert!(
        probe["graphs_reused"].as_i64().unwrap() >= tokens - 10,
        "{res}"
    );
    let same = &streams[1];
    assert_eq!(same["name"], "same");
    assert_eq!(
        same["graphs_reused"], 0,
        "the reference must not reuse: {res}"
    );
    // with several reference workers (more than two cores) each token once, plus their warm-ups
    let warm = same["warmup_decodes"].as_i64().unwrap_or(0);
    assert_eq!(same["decodes"].as_i64().unwrap() - warm, tokens, "{res}");
}

fn model(dtype: DType) -> Model {
    model_shaped(dtype, Shape::default())
}

fn model_shaped(dtype: DType, shape: Shape) -> Model {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("decode-models");
    write_model(&dir, 42, dtype, shape).expect("write the model")
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
    Ran {
        code: out.status.code().unwrap_or(-1),
        output: text(&out),
    }
}

fn outcome(r: &Ran) -> (Outcome, Option<String>) {
    let c = classify(Some(r.code), None, false, &r.output);
    (c.outcome, c.signature)
}

/// Past the ring's second wrap (256 cells): every cell rewritten twice with the graph reused.
const WRAPPED: &str = "600";

#[test]
fn f32_and_f16_models_pass_through_the_wrapped_ring_with_the_graph_reused() {
    let Some(b) = bisected() else { return };
    for dtype in [DType::F32, DType::F16] {
        let m = model(dtype);
        let r = run(b.probe(), &m.path, &["--steps", WRAPPED], &[]);
        assert_eq!(r.code, 0, "{dtype:?}: {}", r.output);
        assert_eq!(outcome(&r).0, Outcome::Pass, "{}", r.output);
        let res = result_json(&r.output);
        assert_eq!(res["status"], "pass");
        assert_eq!(res["model_bytes"], m.bytes, "{res}");
        assert_reuse_proven(&res, WRAPPED.parse().unwrap());
        assert_cpu_placement(&r.output);
    }
}

/// The quantized weight types (ggml's q8_0 and q4_0 blocks, `core::gguf::quant`) and the head
/// shapes load in the real llama.cpp and decode through the wrapped ring with the graph reused:
/// llama.cpp itself reads the files the `--weight-type`, `--head-dim` and `--gqa` settings write.
#[test]
fn quantized_weights_and_other_head_shapes_load_and_pass_in_llama_cpp() {
    let Some(b) = bisected() else { return };
    for (dtype, head_dim, gqa) in [
        (DType::Q4_0, 128, 1),
        (DType::Q8_0, 128, 1),
        (DType::Q4_0, 64, 4),
        (DType::F16, 256, 2),
    ] {
        let m = model_shaped(dtype, Shape::with_heads(head_dim, gqa).unwrap());
        let r = run(b.probe(), &m.path, &["--steps", WRAPPED], &[]);
        let what = format!("{dtype:?} head {head_dim} gqa {gqa}");
        assert_eq!(r.code, 0, "{what}: {}", r.output);
        assert_eq!(outcome(&r).0, Outcome::Pass, "{what}: {}", r.output);
        let res = result_json(&r.output);
        assert_eq!(res["model_bytes"], m.bytes, "{res}");
        assert_reuse_proven(&res, WRAPPED.parse().unwrap());
    }
}

/// `--sliding-window N` writes a gemma2 file (layer 0 sees the last N positions, layer 1 all):
/// the real llama.cpp loads it as an iSWA model, reports the window, and decodes it through the
/// wrapped ring with the graph reused.
#[test]
fn a_sliding_window_model_loads_as_iswa_and_passes_with_the_graph_reused() {
    let Some(b) = bisected() else { return };
    let m = model_shaped(DType::F16, swa(64));
    let r = run(b.probe(), &m.path, &["--steps", WRAPPED], &[]);
    assert_eq!(r.code, 0, "{}", r.output);
    assert_eq!(outcome(&r).0, Outcome::Pass, "{}", r.output);
    let res = result_json(&r.output);
    assert_eq!(res["settings"]["sliding_window"], 64, "{res}");
    assert_eq!(res["model_bytes"], m.bytes, "{res}");
    assert_reuse_proven(&res, WRAPPED.parse().unwrap());
}

/// The good reference (`--compare-good`'s): a run compared with the logits it recorded passes
/// bit for bit; a model whose attention sees other positions (a window of 128 where the
/// recording had 64) passes every reference of its own tree, and only the recorded logits tell
/// it apart, from the first token past the smaller window.
#[test]
fn the_good_reference_passes_its_own_logits_and_catches_a_changed_mask_the_tree_cannot() {
    let Some(b) = bisected() else { return };
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("good.bin");
    let (m64, m128) = (
        model_shaped(DType::F16, swa(64)),
        model_shaped(DType::F16, swa(128)),
    );
    let steps = ["--steps", "300"];
    let out = [&steps[..], &["--logits-out", rec.to_str().unwrap()]].concat();
    let r = run(b.probe(), &m64.path, &out, &[]);
    assert_eq!(r.code, 0, "{}", r.output);
    // 300 tokens of 128 logits, one sequence, after the 16-byte header
    assert_eq!(std::fs::metadata(&rec).unwrap().len(), 16 + 300 * 128 * 4);
    let cmp = [&steps[..], &["--logits-ref", rec.to_str().unwrap()]].concat();
    let same = run(b.probe(), &m64.path, &cmp, &[]);
    assert_eq!(same.code, 0, "{}", same.output);
    let good = &result_json(&same.output)["good_reference"];
    assert_eq!(good["compared"], true, "{good}");
    assert_eq!(good["tokens"], 300, "{good}");
    assert_eq!(good["nmse_worst"], 0.0, "the same binary and model: {good}");
    // the window-128 model is right by its own tree's references...
    let own = run(b.probe(), &m128.path, &steps, &[]);
    assert_eq!(own.code, 0, "{}", own.output);
    // ...and differs from the recording once a position falls out of the 64-token window
    let other = run(b.probe(), &m128.path, &cmp, &[]);
    assert_eq!(other.code, 1, "{}", other.output);
    let (o, sig) = outcome(&other);
    assert_eq!(o, Outcome::WrongResult, "{}", other.output);
    let sig = sig.unwrap();
    assert!(sig.contains("reference=good what=logits"), "{sig}");
    let token: i64 = sig["token=".len()..sig.find(' ').unwrap()].parse().unwrap();
    assert!(token >= 64, "{sig}");
}

/// `--compare-good` through the tool: one probe of `--good` records its logits (kept under
/// the work dir, named by what made them), in the slot the bisect's probes build in, and the
/// probed commit is compared with them.
#[test]
fn compare_good_records_the_good_commit_once_and_compares_the_probe_with_it() {
    let Some(b) = bisected() else { return };
    let h = &b.history;
    let work = tempfile::tempdir().unwrap();
    let probe = |extra: &[&str]| {
        let args = [
            "--probe-kind",
            "decode",
            "--compare-good",
            "--probe",
            &h.shas[1],
        ];
        h.run_tool(work.path(), &[&args[..], extra].concat())
    };
    let out = probe(&[]);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(0), "{t}");
    assert!(t.contains("--compare-good: recorded"), "{t}");
    // the logits and the recording probe's report beside them
    let mut kept: Vec<String> = std::fs::read_dir(work.path().join("good-logits"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    kept.sort();
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert!(
        kept[0].ends_with(".bin") && kept[1] == kept[0].replace(".bin", ".report.json"),
        "{kept:?}"
    );
    let j: Value = serde_json::from_slice(&out.stdout).expect("--probe prints JSON");
    assert_eq!(j["outcome"], "pass", "{j}");
    let run = Path::new(j["result_dir"].as_str().unwrap()).join("run-0000.json");
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(&run).unwrap()).unwrap();
    let log =
        std::fs::read_to_string(stored["report"]["log_path"].as_str().unwrap()).expect("its log");
    let good = &result_json(&log)["good_reference"];
    assert_eq!(good["compared"], true, "{good}");
    assert_eq!(good["tokens"], 10_000, "{good}");
    // one build tree: the recording built in the slot the probe then reused
    let builds: Vec<PathBuf> = std::fs::read_dir(work.path().join("checkouts"))
        .unwrap()
        .flat_map(|k| std::fs::read_dir(k.unwrap().path()).unwrap())
        .map(|s| s.unwrap().path())
        .filter(|s| s.join("build").is_dir())
        .collect();
    assert_eq!(builds.len(), 1, "{builds:?}");
    // the recording is also the good end's run under the comparison: the search never decodes
    // --good twice (two runs stored: --good's, marked as the recording, and the probe's)
    let runs: Vec<Value> = std::fs::read_dir(work.path().join("results"))
        .unwrap()
        .map(|k| k.unwrap().path().join("run-0000.json"))
        .map(|f| serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap())
        .collect();
    assert_eq!(runs.len(), 2, "{runs:?}");
    let good_run = runs
        .iter()
        .find(|r| r["commit"] == h.shas[0].as_str())
        .expect("--good's run");
    assert_eq!(good_run["report"]["outcome"], "pass");
    assert!(good_run["report"]["provenance"]["good_logits"].is_string());
    // a second run records nothing: the logits are kept
    let again = probe(&["--run-index", "1"]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert!(!text(&again).contains("recording"), "{}", text(&again));
}

fn swa(window: u32) -> Shape {
    Shape {
        n_swa: window,
        ..Shape::default()
    }
}

/// The placement report (placement.h's format, read by the replay's parser): on the CPU the
/// KV cache the SET_ROWS node writes is a host buffer, the weights a host or CPU extra buffer, and no GPU runtime was
/// asked about their pointers.
fn assert_cpu_placement(output: &str) {
    let r = parse_result(output).expect("result line");
    let m = r.memory.expect("the decode probe reports its placement");
    assert_eq!(m.requested, "device");
    assert_eq!(m.pointer_api, None, "a CPU build asks no GPU runtime");
    let kinds: Vec<&str> = m
        .buffers
        .iter()
        .map(|b| b.name.split(':').next().unwrap())
        .collect();
    assert_eq!(kinds, ["weights", "kv_cache"], "{:?}", m.buffers);
    for b in &m.buffers {
        // Weights may sit in one of the CPU backend's extra buffer types (AMX on a Xeon with
        // AMX, CPU_REPACK): system memory in a layout of their own, so not "host" to ggml.
        let cpu_extra =
            b.name.starts_with("weights:") && (b.buft == "AMX" || b.buft.starts_with("CPU_"));
        assert!(
            cpu_extra || (b.is_host && b.buft.starts_with("CPU")),
            "{b:?}"
        );
        assert_eq!(b.pointer, None, "{b:?}");
    }
}

#[test]
fn a_run_without_graph_reuse_is_untestable() {
    let Some(b) = bisected() else { return };
    let m = model(DType::F16);
    let r = run(
        b.probe(),
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
    let Some(b) = bisected() else { return };
    let m = model(DType::F16);
    let bad = Path::new(env!("CARGO_TARGET_TMPDIR")).join("decode-models/truncated.gguf");
    let bytes = std::fs::read(&m.path).unwrap();
    std::fs::write(&bad, &bytes[..bytes.len() / 2]).unwrap();
    let r = run(b.probe(), &bad, &["--steps", "10"], &[]);
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
    let Some(b) = bisected() else { return };
    let m = model(DType::F16);
    let r = run(
        b.probe(),
        &m.path,
        &["--steps", "300", "--check", "none"],
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.output);
    assert_eq!(parse_result(&r.output).unwrap().status, "unchecked");
    assert_eq!(outcome(&r).0, Outcome::Untestable);
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
