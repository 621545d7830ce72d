//! The guard on real reproducer output (testdata/README.md says where each file comes from).

use super::*;
use crate::core::outcome::Outcome;
use crate::probe::repro::classify::{classify, classify_expected, parse_result};

const CPU2: &str = include_str!("../testdata/replay-format2-pass-cpu.txt");
const CPU1: &str = include_str!("../testdata/replay-pass-cpu.txt");
const CUDA_ON: &str = include_str!("../testdata/replay-format2-graphs-on-h200.txt");
const CUDA_OFF: &str = include_str!("../testdata/replay-format2-graphs-off-h200.txt");
const K32: &str = include_str!("../testdata/kernel-format2-w32-h200.txt");
const K64: &str = include_str!("../testdata/kernel-format2-w64-h200.txt");
const CORRUPT: &str = include_str!("../testdata/replay-inject-corrupt-cpu.txt");
const DECODE_CPU: &str = include_str!("../testdata/decode-placement-cpu.txt");
const DECODE_UNIFIED_H200: &str = include_str!("../testdata/decode-unified-h200.txt");
const DECODE_UNIFIED_NO_ENV_H200: &str =
    include_str!("../testdata/decode-unified-without-env-h200.txt");

fn exp(backend: Backend) -> Expectations {
    Expectations {
        backend: Some(backend),
        ..Expectations::default()
    }
}

fn run(out: &str, e: &Expectations, defs: Option<&CompileDefs>) -> (Outcome, String) {
    let c = classify_expected(Some(0), None, false, out, e, defs, &TreeOptions::default());
    (c.outcome, c.signature.unwrap_or_default())
}

#[test]
fn format2_lines_parse_with_their_facts() {
    let r = parse_result(CUDA_ON).expect("graphs-on line");
    assert_eq!(r.format, Some(2));
    assert_eq!(r.backend_reg.as_deref(), Some("CUDA"));
    assert!(r
        .features
        .as_ref()
        .expect("features")
        .contains_key("USE_GRAPHS"));
    assert_eq!(r.compiled_archs.as_deref(), Some("900"));
    assert_eq!(r.wave_size, None);
    let r = parse_result(CUDA_OFF).expect("graphs-off line");
    assert!(!r.features.expect("features").contains_key("USE_GRAPHS"));
    let k = parse_result(K64).expect("kernel line");
    assert_eq!(
        (k.wave_size, k.dflash_wave_size, k.api.as_deref()),
        (Some(32), Some(64), Some("cuda"))
    );
    // format 1 has none of them and classifies exactly as before, asked or not
    let old = parse_result(CPU1).expect("format 1");
    assert_eq!((old.format, old.features), (Some(1), None));
    for out in [CPU1, CPU2] {
        assert_eq!(
            classify_expected(
                Some(0),
                None,
                false,
                out,
                &Expectations::default(),
                None,
                &TreeOptions::default()
            ),
            classify(Some(0), None, false, out)
        );
    }
    assert_eq!(run(CPU1, &exp(Backend::Cpu), None).0, Outcome::Pass);
}

#[test]
fn graphs_asked_on_the_cpu_is_untestable_and_not_asking_passes() {
    let mut e = exp(Backend::Cpu);
    assert_eq!(run(CPU2, &e, None).0, Outcome::Pass);
    e.graphs = Some(false);
    assert_eq!(run(CPU2, &e, None).0, Outcome::Pass);
    e.graphs = Some(true);
    let (o, why) = run(CPU2, &e, None);
    assert_eq!(o, Outcome::Untestable);
    assert!(why.contains("CPU backend has no graphs"), "{why}");
    // not only a pass: a mismatch found by a run that is not what was asked is no verdict either
    let c = classify_expected(
        Some(1),
        None,
        false,
        CORRUPT,
        &e,
        None,
        &TreeOptions::default(),
    );
    assert_eq!(c.outcome, Outcome::Untestable);
}

#[test]
fn cuda_graphs_negative_control_on_the_h200_outputs() {
    let mut e = exp(Backend::Cuda);
    e.gpu_target = Some("90".into());
    e.graphs = Some(true);
    assert_eq!(run(CUDA_ON, &e, None).0, Outcome::Pass);
    let (o, why) = run(CUDA_OFF, &e, None);
    assert_eq!(
        o,
        Outcome::Untestable,
        "graphs ON asked on the graphs-off build"
    );
    assert!(why.contains("USE_GRAPHS"), "{why}");
    e.graphs = Some(false);
    assert_eq!(run(CUDA_OFF, &e, None).0, Outcome::Pass);
    assert_eq!(run(CUDA_ON, &e, None).0, Outcome::Untestable);
    // a GPU recipe that ran on the CPU proves nothing about the GPU
    e.graphs = None;
    let (o, why) = run(CPU2, &e, None);
    assert_eq!(o, Outcome::Untestable);
    assert!(why.contains("ran on cpu"), "{why}");
    // the library was compiled for another arch
    e.gpu_target = Some("89".into());
    let (o, why) = run(CUDA_ON, &e, None);
    assert_eq!(o, Outcome::Untestable);
    assert!(why.contains("compiled for 900"), "{why}");
}

#[test]
fn wave_size_is_what_the_device_code_reports() {
    let mut e = exp(Backend::Cuda);
    e.wave_size = Some(32);
    assert_eq!(run(K32, &e, None).0, Outcome::Pass);
    // DFLASH_WAVE_SIZE=64 on a warp-32 GPU: the hardware did not run wave64
    e.wave_size = Some(64);
    let (o, why) = run(K64, &e, None);
    assert_eq!(o, Outcome::Untestable);
    assert!(why.contains("device code runs wave size 32"), "{why}");
    // the replay reports no wave size: nothing to compare, nothing invented
    assert_eq!(run(CUDA_ON, &e, None).0, Outcome::Pass);
}

fn hip_line(arch: &str) -> String {
    format!(
        "SETROWS_RESULT {{\"tool\":\"setrows-kernel\",\"format\":2,\"status\":\"pass\",\"exit_code\":0,\"api\":\"hip\",\"steps_run\":8,\"wave_size\":32,\"arch\":\"{arch}\",\"dflash_wave_size\":32,\"device_arch\":\"gfx1151\"}}\n"
    )
}

const HIP_REPLAY: &str = "SETROWS_RESULT {\"tool\":\"setrows-replay\",\"format\":2,\"status\":\"pass\",\"exit_code\":0,\"backend\":\"ROCm0\",\"steps_run\":10,\"features\":{\"NO_VMM\":\"1\"},\"features_source\":\"ggml_backend_get_features\",\"backend_reg\":\"ROCm\",\"device_name\":\"ROCm0\",\"compiled_archs\":null,\"arch\":null,\"wave_size\":null}\n";

fn commands(define: bool) -> String {
    let d = if define { " -DGGML_HIP_GRAPHS" } else { "" };
    format!(
        r#"[{{"directory":"/w/b","command":"/opt/rocm/llvm/bin/clang++ -DGGML_USE_HIP{d} -x hip --offload-arch=gfx1151 -c /s/ggml/src/ggml-cuda/set-rows.cu","file":"/s/ggml/src/ggml-cuda/set-rows.cu"}},
           {{"directory":"/w/b","command":"c++ -c /s/ggml/src/ggml.c","file":"/s/ggml/src/ggml.c"}}]"#
    )
}

#[test]
fn hip_graphs_are_proven_by_the_build_not_the_features() {
    let on = CompileDefs::from_compile_commands("cc.json", &commands(true)).expect("json");
    let off = CompileDefs::from_compile_commands("cc.json", &commands(false)).expect("json");
    assert_eq!((on.backend_commands, on.hip_graphs), (1, 1));
    assert_eq!((off.backend_commands, off.hip_graphs), (1, 0));
    let mut e = exp(Backend::Hip);
    e.graphs = Some(true);
    // HIP never lists USE_GRAPHS: a features rule would mark every HIP graphs build untestable
    assert_eq!(run(HIP_REPLAY, &e, Some(&on)).0, Outcome::Pass);
    let (o, why) = run(HIP_REPLAY, &e, Some(&off));
    assert_eq!(o, Outcome::Untestable);
    assert!(why.contains("GGML_HIP_GRAPHS"), "{why}");
    // no proof at all is no pass either
    assert_eq!(run(HIP_REPLAY, &e, None).0, Outcome::Untestable);
    e.graphs = Some(false);
    assert_eq!(run(HIP_REPLAY, &e, Some(&off)).0, Outcome::Pass);
    assert_eq!(run(HIP_REPLAY, &e, Some(&on)).0, Outcome::Untestable);
    // a fault in a build that is not what was asked is not pinned on the asked configuration
    let fault = "Memory access fault by GPU node-1 (Agent handle: 0x1) on address 0x7f.\n";
    let c = classify_expected(
        None,
        Some(libc::SIGABRT),
        false,
        fault,
        &e,
        Some(&on),
        &TreeOptions::default(),
    );
    assert_eq!(c.outcome, Outcome::Untestable);
    assert_eq!(
        classify_expected(
            None,
            Some(libc::SIGABRT),
            false,
            fault,
            &e,
            Some(&off),
            &TreeOptions::default()
        )
        .outcome,
        Outcome::GpuFault
    );
    // `-DGGML_HIP_GRAPHS_X` is another macro
    let other = commands(false).replace("-DGGML_USE_HIP", "-DGGML_HIP_GRAPHS_X");
    let d = CompileDefs::from_compile_commands("cc.json", &other).expect("json");
    assert_eq!(d.hip_graphs, 0);
}

#[test]
fn hip_target_is_what_the_device_code_reports() {
    let mut e = exp(Backend::Hip);
    e.gpu_target = Some("gfx1151".into());
    assert_eq!(
        run(&hip_line("amdgcn-amd-amdhsa--gfx1151"), &e, None).0,
        Outcome::Pass
    );
    let (o, why) = run(&hip_line("gfx1100"), &e, None);
    assert_eq!(o, Outcome::Untestable);
    assert!(why.contains("gfx1100"), "{why}");
}

#[test]
fn no_code_for_the_gpu_is_untestable_not_a_fault() {
    for text in [
        "\"hipErrorNoBinaryForGpu: Unable to find code object for all current devices!\"",
        "rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: No such file or directory for GPU arch : gfx1151",
        "CUDA error: no kernel image is available for execution on the device",
    ] {
        let out = format!("{text}\nAborted\n");
        let c = classify(None, Some(libc::SIGABRT), false, &out);
        assert_eq!(c.outcome, Outcome::Untestable, "{text}");
        assert!(
            c.signature.unwrap_or_default().starts_with("no code for this GPU: "),
            "{text}"
        );
    }
    // a real fault stays a fault
    let c = classify(None, Some(libc::SIGABRT), false, "hipErrorIllegalAddress\n");
    assert_eq!(c.outcome, Outcome::GpuFault);
    let line = crate::probe::repro::classify::toolchain_cannot_target(
        "FAILED: x.o\nclang++: error: unsupported HIP gpu architecture: gfx1151\n",
    );
    assert!(line.is_some_and(|l| l.contains("gfx1151")));
}

#[test]
fn from_recipe_asks_what_the_recipe_pins() {
    let mut r = Recipe::new(Backend::Hip);
    r.graphs = Some(true);
    r.wave_size = Some(32);
    r.gpu_target = Some("gfx1151".into());
    let e = Expectations::from_recipe(&r);
    assert_eq!(e.backend, Some(Backend::Hip));
    assert_eq!(
        (e.graphs, e.wave_size, e.gpu_target.as_deref()),
        (Some(true), Some(32), Some("gfx1151"))
    );
    assert!(e.needs_compile_defs());
    assert!(Expectations::default().is_empty());
}

/// Graphs asked and not built stop the run when the tree has the option (a later `-D...=OFF`
/// or the toolchain turned them off: every commit would say the same), and stay a skip of this
/// commit when its tree has no such option yet. The other guards are the configuration's.
#[test]
fn the_scope_of_a_mismatch_follows_the_tree() {
    use crate::core::outcome::SkipScope;
    let mut e = exp(Backend::Cuda);
    e.graphs = Some(true);
    let scope = |tree: TreeOptions| {
        classify_expected(Some(0), None, false, CUDA_OFF, &e, None, &tree).scope
    };
    let with = TreeOptions {
        graphs_option: true,
    };
    assert_eq!(scope(with), SkipScope::Systematic);
    assert_eq!(scope(TreeOptions::default()), SkipScope::Commit);
    let mut cpu = exp(Backend::Cpu);
    cpu.graphs = Some(true);
    let c = classify_expected(Some(0), None, false, CPU2, &cpu, None, &with);
    assert_eq!(
        (c.outcome, c.scope),
        (Outcome::Untestable, SkipScope::Systematic)
    );
    let wrong = classify_expected(Some(0), None, false, CPU2, &exp(Backend::Cuda), None, &with);
    assert_eq!(
        (wrong.outcome, wrong.scope),
        (Outcome::Untestable, SkipScope::Systematic),
        "{:?}",
        wrong.signature
    );
    // a run that matches what was asked keeps its own outcome and no scope
    let fine = classify_expected(Some(0), None, false, CPU2, &exp(Backend::Cpu), None, &with);
    assert_eq!(
        (fine.outcome, fine.scope),
        (Outcome::Pass, SkipScope::Commit)
    );
}

#[test]
fn expectations_read_as_settings_not_as_a_debug_struct() {
    let e = Expectations {
        backend: Some(Backend::Hip),
        graphs: Some(true),
        wave_size: Some(32),
        gpu_target: Some("gfx1151".into()),
        memory: None,
        settings: Default::default(),
    };
    // the identity text of before the memory axis (stored results keep their keys)
    assert_eq!(
        format!("{e:?}"),
        "Expectations { backend: Some(Hip), graphs: Some(true), wave_size: Some(32), gpu_target: Some(\"gfx1151\") }"
    );
    assert_eq!(
        e.describe(),
        "backend=hip graphs=on wave_size=32 gpu_target=gfx1151"
    );
    assert_eq!(Expectations::default().describe(), "");
    let id = format!("repro:v1 launcher=host expect={e:?} cmake_spellings=per-tree");
    assert_eq!(
        e.readable_in(&id),
        "repro:v1 launcher=host expect=[backend=hip graphs=on wave_size=32 gpu_target=gfx1151] cmake_spellings=per-tree"
    );
}

/// A placement is proven by the runtime's word on every persistent buffer and output; one that
/// did not take effect is untestable for the configuration (systematic), and the CPU build that
/// cannot ask proves nothing.
#[test]
fn a_placement_that_did_not_take_effect_is_untestable() {
    let line = |requested: &str, pointer: &str, buft: &str, host: bool| {
        let b = |name: &str, role: &str, p: &str, t: &str, h: bool| {
            format!(
                r#"{{"name":"{name}","role":"{role}","buft":"{t}","is_host":{h},"pointer":"{p}","pointer_code":2}}"#
            )
        };
        format!(
            r#"SETROWS_RESULT {{"tool":"setrows-replay","format":2,"status":"pass","exit_code":0,"backend":"CUDA0","device":"CUDA0 (NVIDIA H200)","steps_run":10,"features":{{"USE_GRAPHS":"1"}},"features_source":"ggml_backend_get_features","backend_reg":"CUDA","memory":{{"requested":"{requested}","pointer_api":"cudaPointerGetAttributes","buffers":[{},{},{}]}}}}"#,
            b("raw_kv", "persistent", pointer, buft, host),
            b("outputs", "output", pointer, buft, host),
            b("inputs", "input", "device", "CUDA0", false),
        )
    };
    let want = |m: Memory| Expectations {
        backend: Some(Backend::Cuda),
        memory: Some(m),
        ..Expectations::default()
    };
    // taken effect (the H200 runs of evidence/h200-0a8ab465-placement)
    for (m, p, t, h) in [
        (Memory::Unified, "managed", "CUDA0", false),
        (Memory::Host, "host", "CUDA_Host", true),
    ] {
        let (o, s) = run(&line(m.as_str(), p, t, h), &want(m), None);
        assert_eq!(o, Outcome::Pass, "{m:?}: {s}");
    }
    // unified asked, the env did not reach ggml: device pointers
    let c = classify_expected(
        Some(0),
        None,
        false,
        &line("unified", "device", "CUDA0", false),
        &want(Memory::Unified),
        None,
        &TreeOptions::default(),
    );
    assert_eq!(c.outcome, Outcome::Untestable);
    assert_eq!(c.scope, SkipScope::Systematic);
    let sig = c.signature.unwrap_or_default();
    assert!(
        sig.contains("memory unified asked for, but raw_kv is device memory"),
        "{sig}"
    );
    // host asked, the pinned allocation fell back to a plain CPU buffer
    let (o, s) = run(
        &line("host", "unregistered", "CPU", true),
        &want(Memory::Host),
        None,
    );
    assert_eq!(o, Outcome::Untestable, "{s}");
    // a replay without the proof proves nothing
    let (o, s) = run(CUDA_ON, &want(Memory::Unified), None);
    assert_eq!(o, Outcome::Untestable, "{s}");
    assert!(s.contains("reports no placement"), "{s}");
    // nothing asked: nothing read (the default placement is no expectation)
    let (o, _) = run(
        &line("device", "managed", "CUDA0", false),
        &exp(Backend::Cuda),
        None,
    );
    assert_eq!(o, Outcome::Pass);
}

/// The decode probe reports its placement in the replay's format (placement.h): the KV cache
/// tensor the SET_ROWS node writes and a weight, both `persistent`, read by the same parser
/// and checked by the same rule. All three lines are real (testdata/README.md): the CPU build,
/// and on the H200 `--memory unified` with and without GGML_CUDA_ENABLE_UNIFIED_MEMORY=1.
#[test]
fn the_decode_probes_placement_is_read_and_checked_as_the_replays() {
    let r = parse_result(DECODE_CPU).expect("decode line");
    assert_eq!(r.tool, "decode-probe");
    let m = r.memory.as_ref().expect("placement");
    assert_eq!(m.requested, "device");
    assert_eq!(m.pointer_api, None);
    let names: Vec<&str> = m.buffers.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(
        names,
        ["weights:blk.0.attn_q.weight", "kv_cache:cache_k_l0"]
    );
    assert!(m
        .buffers
        .iter()
        .all(|b| b.is_host && b.role == "persistent"));
    assert_eq!(m.buffers[1].buft, "CPU");
    assert_eq!(
        m.summary(),
        "requested=device via no GPU runtime: weights:blk.0.attn_q.weight=CPU_Mapped/host-buffer kv_cache:cache_k_l0=CPU/host-buffer"
    );
    let unified = Expectations {
        backend: Some(Backend::Cuda),
        memory: Some(Memory::Unified),
        ..Expectations::default()
    };
    let (o, s) = run(DECODE_UNIFIED_H200, &unified, None);
    assert_eq!(o, Outcome::Pass, "{s}");
    assert_eq!(
        parse_result(DECODE_UNIFIED_H200).unwrap().memory.unwrap().summary(),
        "requested=unified via cudaPointerGetAttributes: weights:blk.0.attn_q.weight=CUDA0/managed kv_cache:cache_k_l0=CUDA0/managed"
    );
    // the env did not reach ggml: plain device memory, never a pass
    let (o, s) = run(DECODE_UNIFIED_NO_ENV_H200, &unified, None);
    assert_eq!(o, Outcome::Untestable, "{s}");
    assert!(
        s.contains("memory unified asked for, but weights:blk.0.attn_q.weight is device memory (CUDA0 buffer, cudaPointerGetAttributes)"),
        "{s}"
    );
    // a build without a GPU runtime to ask proves no placement
    let only_memory = Expectations {
        memory: Some(Memory::Unified),
        ..Expectations::default()
    };
    let (o, s) = run(DECODE_CPU, &only_memory, None);
    assert_eq!(o, Outcome::Untestable, "{s}");
    assert!(s.contains("without a GPU runtime"), "{s}");
}

/// A decode run must not contradict the settings it was asked for (decode-probe's `settings`
/// object, its effective values): flash attention asked on and reported off is `untestable`,
/// a skip of this commit (what llama.cpp made of the setting is the tree's); a run that
/// reports no settings proves none; the same values pass.
#[test]
fn a_decode_run_that_did_not_use_the_asked_settings_is_untestable_for_the_commit() {
    let mut e = exp(Backend::Cpu);
    for (a, v) in [("flash_attn", "on"), ("weight_type", "q4_0")] {
        let s = crate::core::settings::by_axis(a).unwrap();
        e.settings.set(s, v.into());
    }
    let with = |settings: &str| {
        DECODE_CPU.replacen(
            "\"kv_cells\":256,",
            &format!("\"kv_cells\":256,\"settings\":{settings},"),
            1,
        )
    };
    let as_asked =
        with(r#"{"flash_attn":"on","cache_type_k":"f16","weight_type":"q4_0","head_dim":128}"#);
    assert_eq!(run(&as_asked, &e, None).0, Outcome::Pass);
    let off = with(r#"{"flash_attn":"off","weight_type":"q4_0"}"#);
    let c = classify_expected(
        Some(0),
        None,
        false,
        &off,
        &e,
        None,
        &TreeOptions::default(),
    );
    assert_eq!(c.outcome, Outcome::Untestable);
    assert_eq!(c.scope, SkipScope::Commit);
    assert_eq!(
        c.signature.as_deref(),
        Some("not as asked: --flash-attn on asked for, but the run reports flash_attn=off")
    );
    let (o, why) = run(DECODE_CPU, &e, None);
    assert_eq!(o, Outcome::Untestable);
    assert!(why.contains("reports no settings"), "{why}");
    // nothing asked: today's line passes as it did
    assert_eq!(run(DECODE_CPU, &exp(Backend::Cpu), None).0, Outcome::Pass);
}
