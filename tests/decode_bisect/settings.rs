//! decode-probe's llama.cpp settings (--flash-attn, --cache-type-k/-v, --batch-size,
//! --ubatch-size, --parallel), each run by the real binary the bisect of this test binary built
//! (no build of its own), on the CPU backend of the vendored llama.cpp. Each run must pass against
//! a reference that takes another path (`path`: flash attention off, an f32 cache, token by token,
//! each sequence alone) and prove its configuration from the decode graph (`settings`); a setting
//! llama.cpp refuses is untestable with llama.cpp's words.

use super::*;

/// Two wraps of the 256-cell ring (as WRAPPED) would double these runs' time: one wrap and a half
/// still rewrites every cell, with the path reference decoding beside the probe.
const STEPS: &str = "400";

/// Runs the probe with `args` on the f16 model and returns its result, after the checks every
/// settings run shares: it passed, the graph was reused, `same` matched bit for bit, and the path
/// reference was judged by NMSE, within its threshold; `differs`: and not equal (flash attention
/// and a quantized cache round otherwise; a batch may give the very same floats).
fn passing(args: &[&str], differs: bool) -> Value {
    let Some(b) = bisected() else {
        return Value::Null;
    };
    let m = model(DType::F16);
    let mut all = vec!["--steps", STEPS];
    all.extend_from_slice(args);
    let r = run(b.probe(), &m.path, &all, &[]);
    assert_eq!(r.code, 0, "{args:?}: {}", r.output);
    assert_eq!(outcome(&r).0, Outcome::Pass, "{}", r.output);
    let res = result_json(&r.output);
    let s = &res["settings"];
    // the model as its file states it (tiny_llama.rs: 256-dim, 2 heads, f16)
    assert_eq!(s["weight_type"], "f16", "{s}");
    assert_eq!(s["head_dim"], 128, "{s}");
    assert_eq!(s["gqa"], 1, "{s}");
    let streams = res["streams"].as_array().unwrap();
    let probe = &streams[0];
    assert!(probe["graphs_reused"].as_i64().unwrap() > 0, "{res}");
    let path = streams
        .iter()
        .find(|s| s["name"] == "path")
        .unwrap_or_else(|| panic!("a path reference: {res}"));
    assert_eq!(path["backend"], "CPU");
    assert_eq!(path["graphs_reused"], 0, "{res}");
    let (worst, max) = (
        path["nmse_worst"].as_f64().unwrap(),
        path["nmse_threshold"].as_f64().unwrap(),
    );
    assert_eq!(Some(max), s["path_nmse"].as_f64(), "{res}");
    assert!(worst <= max && (worst > 0.0 || !differs), "{res}");
    res
}

#[test]
fn flash_attention_on_is_checked_against_off() {
    let res = passing(&["--flash-attn", "on"], true);
    if res.is_null() {
        return;
    }
    let s = &res["settings"];
    // read from the graph: a FLASH_ATTN_EXT node decoded every token
    assert_eq!(s["flash_attn"], "on", "{s}");
    assert_eq!(s["flash_attn_option"], "on", "{s}");
    assert_eq!(s["path_nmse"], 1e-4, "llama.cpp's own threshold: {s}");
    let path = &res["streams"].as_array().unwrap()[2];
    assert!(path["path"]
        .as_str()
        .unwrap()
        .starts_with("flash_attn off, cache f16/f16"));
}

#[test]
fn a_q8_0_cache_is_checked_against_an_f32_cache_within_its_threshold() {
    // a quantized V cache needs flash attention in llama.cpp (below)
    let res = passing(
        &[
            "--flash-attn",
            "on",
            "--cache-type-k",
            "q8_0",
            "--cache-type-v",
            "q8_0",
        ],
        true,
    );
    if res.is_null() {
        return;
    }
    let s = &res["settings"];
    assert_eq!(s["cache_type_k"], "q8_0", "{s}");
    assert_eq!(s["cache_type_v"], "q8_0", "{s}");
    assert_eq!(s["cache_types_from"], "graph", "{s}");
    assert_eq!(s["path_nmse"], 5e-3, "{s}");
    let path = &res["streams"].as_array().unwrap()[2];
    assert!(path["path"]
        .as_str()
        .unwrap()
        .starts_with("flash_attn off, cache f32/f32"));
}

#[test]
fn a_batch_of_8_in_ubatches_of_4_is_checked_against_token_by_token() {
    let res = passing(&["--batch-size", "8", "--ubatch-size", "4"], false);
    if res.is_null() {
        return;
    }
    let s = &res["settings"];
    assert_eq!(
        (s["n_batch"].as_i64(), s["n_ubatch"].as_i64()),
        (Some(8), Some(4)),
        "{s}"
    );
    assert_eq!(s["flash_attn"], "off", "{s}");
    let streams = res["streams"].as_array().unwrap();
    // every token decoded once by each stream: the probe in 50 batches, the path one by one
    for st in streams {
        assert_eq!(st["decodes"], 400, "{res}");
    }
    // in 100 graphs of 4 tokens, all but the first reused
    assert_eq!(streams[0]["ubatches"], 100, "{res}");
    assert_eq!(streams[0]["graphs_built"], 1, "{res}");
}

#[test]
fn two_parallel_sequences_are_checked_against_each_sequence_alone() {
    let res = passing(&["--parallel", "2"], false);
    if res.is_null() {
        return;
    }
    let s = &res["settings"];
    assert_eq!(s["parallel"], 2, "{s}");
    // one llama_decode carries a token of each sequence
    assert_eq!(s["n_batch"], 2, "{s}");
    let path = &res["streams"].as_array().unwrap()[2];
    assert_eq!(path["workers"], 2, "one context per sequence: {res}");
}

#[test]
fn a_setting_llama_cpp_refuses_is_untestable_with_its_words() {
    let Some(b) = bisected() else { return };
    let m = model(DType::F16);
    let r = run(
        b.probe(),
        &m.path,
        &[
            "--steps",
            "10",
            "--cache-type-v",
            "q8_0",
            "--flash-attn",
            "off",
        ],
        &[],
    );
    assert_eq!(r.code, 3, "{}", r.output);
    let (o, sig) = outcome(&r);
    assert_eq!(o, Outcome::Untestable);
    let sig = sig.unwrap();
    assert!(
        sig.contains("could not create the probe context: "),
        "{sig}"
    );
    assert!(sig.contains("flash_attn"), "llama.cpp's own reason: {sig}");
}

/// A llama.cpp whose `llama_context_params` has neither `flash_attn_type` nor `flash_attn`: a
/// generated tree whose llama.h is the vendored one with that field renamed (the same layout, a
/// name decode-probe does not know), its libraries the ones the bisect built (imported targets), so
/// decode-probe's own CMakeLists and API probes run against it at the cost of one compile.
#[test]
fn a_setting_the_tree_cannot_express_is_untestable_and_named() {
    let Some(b) = bisected() else { return };
    let build = b.probe().parent().unwrap();
    let src = llama_src().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let old = tmp.path().join("old");
    std::fs::create_dir_all(old.join("include")).unwrap();
    std::fs::create_dir_all(old.join("ggml")).unwrap();
    let header = std::fs::read_to_string(src.join("include/llama.h")).unwrap();
    let field = "enum llama_flash_attn_type   flash_attn_type;";
    assert_eq!(
        header.matches(field).count(),
        1,
        "the vendored llama.h changed"
    );
    let header = header.replace(field, "enum llama_flash_attn_type   fa_kind_unexposed;");
    std::fs::write(old.join("include/llama.h"), header).unwrap();
    std::os::unix::fs::symlink(src.join("ggml/include"), old.join("ggml/include")).unwrap();
    let imported = |name: &str, lib: &Path, deps: &str| {
        assert!(lib.is_file(), "{}", lib.display());
        format!(
            "add_library({name} SHARED IMPORTED GLOBAL)\nset_target_properties({name} PROPERTIES \
             IMPORTED_LOCATION \"{}\" INTERFACE_LINK_LIBRARIES \"{deps}\")\n",
            lib.display()
        )
    };
    let ggml = build.join("ggml/src");
    std::fs::write(
        old.join("ggml/CMakeLists.txt"),
        imported("ggml-base", &ggml.join("libggml-base.so"), "")
            + &imported("ggml", &ggml.join("libggml.so"), "ggml-base"),
    )
    .unwrap();
    std::fs::write(
        old.join("CMakeLists.txt"),
        imported("llama", &build.join("bin/libllama.so"), "ggml"),
    )
    .unwrap();
    let probe_src = Path::new(env!("CARGO_MANIFEST_DIR")).join("repro-kernels/decode-probe");
    let bdir = tmp.path().join("build");
    let cmake = |args: &[&str]| {
        let out = Command::new("cmake").args(args).output().expect("cmake");
        assert!(out.status.success(), "cmake {args:?}: {}", text(&out));
        text(&out)
    };
    let configured = cmake(&[
        "-S",
        probe_src.to_str().unwrap(),
        "-B",
        bdir.to_str().unwrap(),
        &format!("-DLLAMA_SOURCE_DIR={}", old.display()),
    ]);
    assert!(
        configured.contains("DECODE_HAVE_FLASH_ATTN_TYPE=0;DECODE_HAVE_FLASH_ATTN_BOOL=0;"),
        "{configured}"
    );
    cmake(&[
        "--build",
        bdir.to_str().unwrap(),
        "--target",
        "decode-probe",
    ]);
    let bin = bdir.join("decode-probe");
    let m = model(DType::F16);
    for fa in ["on", "auto"] {
        let r = run(&bin, &m.path, &["--steps", "10", "--flash-attn", fa], &[]);
        assert_eq!(r.code, 3, "{}", r.output);
        let (o, sig) = outcome(&r);
        assert_eq!(o, Outcome::Untestable);
        let sig = sig.unwrap();
        assert!(
            sig.contains("this tree's llama_context_params has no flash_attn_type/flash_attn"),
            "{sig}"
        );
        assert!(sig.contains(&format!("--flash-attn {fa}")), "{sig}");
    }
    // Nor can it be set off: this library defaults to auto under the renamed field and resolves
    // flash attention on by itself; the run proves from the graph that it is not the decode asked.
    let r = run(&bin, &m.path, &["--steps", "10"], &[]);
    assert_eq!(r.code, 3, "{}", r.output);
    let sig = outcome(&r).1.unwrap();
    assert!(
        sig.contains(
            "flash attention was asked off but the decode graph has a FLASH_ATTN_EXT node"
        ),
        "{sig}"
    );
}
