//! How a configuration becomes a prober: which reproducer arguments, environment and CMake
//! arguments each probe kind gets, per tree.

use super::*;

fn host_place() -> Place {
    Place::host()
}

#[test]
fn every_bundled_reproducer_built_for_hip_asks_hipconfig() {
    let mut cfg = Resolved::for_backend(Backend::Hip);
    for (probe, asks) in [
        (ProbeSpec::Replay, true),
        (ProbeSpec::Decode, true),
        (
            ProbeSpec::Script {
                build: None,
                script: "true".into(),
            },
            false,
        ),
    ] {
        cfg.probe = probe;
        assert_eq!(needs_hipconfig(&cfg), asks, "{:?}", cfg.probe);
    }
    assert!(!needs_hipconfig(&Resolved::for_backend(Backend::Cpu)));
}

/// A llama.cpp checkout whose ggml (its `ggml/` folder) reads the unified env on CUDA and,
/// on HIP, has the old `GGML_HIP_UMA` option (ggml ff0c43e3^'s spelling).
fn llama_tree(dir: &Path, hip_option: bool) {
    let w = |rel: &str, text: &str| {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    w("CMakeLists.txt", "project(llama.cpp)\n");
    w("include/llama.h", "// llama\n");
    w("ggml/include/ggml.h", "// ggml\n");
    let option = if hip_option {
        "option(GGML_HIP_UMA \"ggml: use HIP unified memory architecture\" OFF)\n"
    } else {
        ""
    };
    w("ggml/CMakeLists.txt", &format!("project(ggml)\n{option}"));
    w(
        "ggml/src/ggml-cuda/ggml-cuda.cu",
        "if (getenv(\"GGML_CUDA_ENABLE_UNIFIED_MEMORY\") != nullptr) {}\n",
    );
}

/// The decode probe gets each placement the way the replay does, through the same
/// functions (`Recipe::reproducer_args`, `memory_env`, `cmake_args` per tree): device adds
/// nothing, unified adds `--memory unified` and the tree's knob (the env on CUDA, the CMake
/// option on an old HIP tree), read from the llama.cpp checkout's `ggml/`.
#[test]
fn the_decode_probe_gets_the_replays_placement_for_each_tree() {
    let place = host_place();
    let tmp = tempfile::tempdir().unwrap();
    let (today, old) = (tmp.path().join("today"), tmp.path().join("old"));
    llama_tree(&today, false);
    llama_tree(&old, true);
    let tree_of = |backend: Backend, memory, checkout: &Path| {
        let mut cfg = Resolved::for_backend(backend);
        cfg.probe = ProbeSpec::Decode;
        cfg.recipe.memory = memory;
        let per_tree = PerTreeRepro::new(
            repro_options(&cfg, &place),
            recipe_at(&cfg, &place),
            TreeFacts::default(),
        );
        per_tree.for_tree(checkout)
    };
    use crate::core::build::Memory;
    let device = tree_of(Backend::Cuda, Memory::Device, &today);
    assert!(
        !device.run_script().contains("--memory"),
        "{}",
        device.run_script()
    );
    assert!(!device
        .identity()
        .contains("GGML_CUDA_ENABLE_UNIFIED_MEMORY"));
    let unified = tree_of(Backend::Cuda, Memory::Unified, &today);
    let run = unified.run_script();
    assert!(run.contains("decode-probe"), "{run}");
    assert!(run.contains("--memory unified"), "{run}");
    let id = unified.identity();
    assert!(id.contains("GGML_CUDA_ENABLE_UNIFIED_MEMORY=1"), "{id}");
    assert!(!id.contains("GGML_HIP_UMA"), "{id}");
    // the build dir of an env knob is the device build's: the same CMake arguments
    assert_eq!(
        device.build_script("src"),
        unified.build_script("src"),
        "an env knob changes no build"
    );
    // HIP before ff0c43e3: the CMake option, no env
    let hip = tree_of(Backend::Hip, Memory::Unified, &old);
    let id = hip.identity();
    assert!(id.contains("-DGGML_HIP_UMA=ON"), "{id}");
    assert!(!id.contains("GGML_CUDA_ENABLE_UNIFIED_MEMORY=1"), "{id}");
    assert!(hip.build_script("src").contains("-DGGML_HIP_UMA=ON"));
}

/// A script reading SETROWS_REPRO_ARGS runs with the placement its key names, as the
/// bundled replay does (both lists come from `Recipe::reproducer_args`).
#[test]
fn a_script_and_the_replay_get_the_same_reproducer_arguments() {
    let place = host_place();
    let mut cfg = Resolved::for_backend(Backend::Cuda);
    cfg.repro_args = vec!["--steps".into(), "7".into()];
    cfg.recipe.memory = crate::core::build::Memory::Host;
    let env = script_env(&cfg, &place, &TreeFacts::default());
    let args = env.iter().find(|(k, _)| k == "SETROWS_REPRO_ARGS");
    assert_eq!(
        args.map(|(_, v)| v.as_str()),
        Some("--steps 7 --memory host")
    );
    assert_eq!(
        repro_options(&cfg, &place).repro_args,
        ["--steps", "7", "--memory", "host"]
    );
}

/// The decode settings reach decode-probe's command line (options first, then the model the
/// model settings name) and the prober's identity, and leave its build alone: another model
/// or option is another test of the same build tree; the defaults change nothing.
#[test]
fn the_decode_settings_reach_the_command_line_and_the_identity_not_the_build() {
    let place = host_place();
    let tmp = tempfile::tempdir().unwrap();
    let today = tmp.path().join("today");
    llama_tree(&today, false);
    let with = |pairs: &[(&str, &str)]| {
        let mut cfg = Resolved::for_backend(Backend::Cpu);
        cfg.probe = ProbeSpec::Decode;
        for (a, v) in pairs {
            cfg.settings
                .set(crate::core::settings::by_axis(a).unwrap(), v.to_string());
        }
        PerTreeRepro::new(
            repro_options(&cfg, &place),
            recipe_at(&cfg, &place),
            TreeFacts::default(),
        )
        .for_tree(&today)
    };
    let plain = with(&[]);
    let defaults = with(&[("cache_type_k", "f16"), ("weight_type", "f16")]);
    assert_eq!(defaults.identity(), plain.identity());
    assert_eq!(defaults.run_script(), plain.run_script());
    let set = with(&[("flash_attn", "on"), ("weight_type", "q4_0")]);
    let run = set.run_script();
    assert!(run.contains("tiny-llama-s42-q4_0-"), "{run}");
    assert!(run.contains(".gguf\" --flash-attn on"), "{run}");
    assert!(!run.contains("weight"), "{run}");
    assert_ne!(set.identity(), plain.identity());
    assert_eq!(set.build_script("src"), plain.build_script("src"));
}
