//! Memory placement as a configuration (issue 26), through the real binary: a placement the CPU
//! backend cannot have is one line and exit 2 before any probe; the shipped matrix runs unified
//! and host placement and the reported graph on HIP, and leaves every device row's id alone.
//! The decode probe takes unified memory (proven by its own report) and refuses host.
mod common;
use assert_cmd::Command;
use common::*;
use setrows_bisect::core::build::{Backend, Memory};
use setrows_bisect::core::matrix;

#[test]
fn a_placement_the_cpu_cannot_have_is_refused_before_any_probe() {
    let f = Fixture::new(&spec(12, 6));
    for m in ["host", "unified"] {
        let mut c: Command = f.bisect(0, 11);
        c.args(["--memory", m]);
        let out = c.assert().code(2);
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "one line expected: {stderr}");
        assert!(lines[0].starts_with("setrows-bisect: error: "), "{stderr}");
        assert!(lines[0].contains(&format!("--memory {m}")), "{stderr}");
    }
    // device on the CPU is the CPU buffer: what every CPU run did, accepted
    let mut c: Command = f.bisect(0, 11);
    c.args(["--memory", "device", "--dry-run"]);
    c.assert().success();
}

#[test]
fn a_matrix_placement_on_the_cpu_is_an_error_with_its_position() {
    let text = "[matrix]\nbackend = [\"cpu\"]\nmemory = [\"device\", \"host\"]\n";
    let e = matrix::parse("m.toml", text).expect_err("host on cpu");
    let e = e.to_string();
    assert!(e.starts_with("m.toml:3:"), "{e}");
    assert!(e.contains("key `memory`"), "{e}");
    let e = matrix::parse("m.toml", "[matrix]\nmemory = [\"managed\"]\n")
        .expect_err("unknown placement")
        .to_string();
    assert!(e.contains("device, unified or host"), "{e}");
}

#[test]
fn the_shipped_matrix_runs_placements_and_the_reported_graph_on_hip() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let m = setrows_bisect::cli::matrix::read_matrix(&root.join("matrix.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    let hip: Vec<_> = m
        .configs
        .iter()
        .filter(|c| c.backend == Backend::Hip)
        .collect();
    for mem in Memory::ALL {
        for p in ["decode-reuse", "decode-ds4"] {
            assert!(
                hip.iter()
                    .any(|c| c.recipe.memory == mem && c.values["params"].to_string() == p),
                "no HIP {p} row with memory {mem:?}"
            );
        }
    }
    let ds4 = hip
        .iter()
        .find(|c| c.values["params"].to_string() == "decode-ds4")
        .unwrap();
    assert!(ds4.repro_args.windows(2).any(|w| w == ["--engine", "ds4"]));
    // the default placement is no value: ids, labels and identities of device rows are those
    // of before the axis (the README's example id among them)
    let dev = hip
        .iter()
        .find(|c| c.id == "2e65ffd7")
        .expect("the README's configuration keeps its id");
    assert_eq!(dev.recipe.memory, Memory::Device);
    assert!(!dev.label().contains("memory"), "{}", dev.label());
    let identity =
        setrows_bisect::core::config::Resolved::from_matrix(dev, &m.probe, &m.file).identity();
    assert!(!identity.contains("memory"), "{identity}");
    let mut without = dev.values.clone();
    without.remove("memory");
    assert_eq!(matrix::config_id(&without), dev.id);
    // non-CPU only: the CPU control stays device
    assert!(m
        .configs
        .iter()
        .filter(|c| c.backend == Backend::Cpu)
        .all(|c| c.recipe.memory == Memory::Device));
}

/// The decode probe has no host placement (llama.cpp keeps its KV cache on the device or the
/// CPU): one line naming the flag, exit 2, before any probe; unified is no longer refused there.
#[test]
fn the_decode_probe_refuses_host_and_takes_unified() {
    let f = Fixture::new(&spec(12, 6));
    let decode_with = |memory: &str| {
        // No --script: with one, --probe-kind is refused naming both (issue 37 item 2).
        let mut c = Command::cargo_bin("setrows-bisect").unwrap();
        c.env_remove("SETROWS_WORK_DIR")
            .arg("--repo")
            .arg(f.repo())
            .args(["--good", f.sha(0), "--bad", f.sha(11), "--work-dir"])
            .arg(f.work());
        c.args([
            "--probe-kind",
            "decode",
            "--backend",
            "cuda",
            "--memory",
            memory,
        ]);
        let out = c.assert().code(2);
        String::from_utf8_lossy(&out.get_output().stderr).to_string()
    };
    let stderr = decode_with("host");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one line expected: {stderr}");
    assert!(lines[0].contains("--memory host"), "{stderr}");
    assert!(lines[0].contains("offload_kqv"), "{stderr}");
    // unified passes the placement rule: what stops this run is the tree (not llama.cpp)
    let stderr = decode_with("unified");
    assert!(!stderr.contains("--memory"), "{stderr}");
    assert!(stderr.contains("llama.cpp"), "{stderr}");

    let decode = |mem: &str| {
        format!("[probe]\nkind = \"decode\"\n[matrix]\nbackend = [\"cuda\"]\nmemory = [{mem}]\n")
    };
    let e = matrix::parse("m.toml", &decode("\"device\", \"host\""))
        .expect_err("host with decode")
        .to_string();
    assert!(e.starts_with("m.toml:5:"), "{e}");
    assert!(e.contains("offload_kqv"), "{e}");
    let m =
        matrix::parse("m.toml", &decode("\"device\", \"unified\"")).expect("unified with decode");
    let cells = &m.configs;
    let mems: Vec<Memory> = cells.iter().map(|c| c.recipe.memory).collect();
    assert_eq!(mems, [Memory::Device, Memory::Unified]);
    // the cell's reproducer arguments carry the placement, as the replay's do
    let unified = &cells[1];
    assert_eq!(
        unified.recipe.reproducer_args(&unified.repro_args),
        ["--memory", "unified"]
    );
}

/// The configuration a result names carries the placement's environment: a unified row's
/// `launch_env` is what its probes ran with (GGML_CUDA_ENABLE_UNIFIED_MEMORY=1 where today's trees
/// read it), so its command pasted from the report runs the same placement.
#[test]
fn a_unified_configuration_names_its_environment() {
    let d = tempfile::tempdir().unwrap();
    let m = d.path().join("m.toml");
    std::fs::write(
        &m,
        "[matrix]\nbackend = [\"cuda\", \"hip\"]\nmemory = [\"device\", \"unified\"]\n",
    )
    .unwrap();
    let out = Command::cargo_bin("setrows-bisect")
        .unwrap()
        .args(["matrix", "--list", "--format", "json", "--matrix"])
        .arg(&m)
        .assert()
        .success();
    let all: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let rows = all.as_array().unwrap();
    assert_eq!(rows.len(), 4, "{all}");
    for row in rows {
        let env: Vec<&str> = row["launch_env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let unified = row["label"].as_str().unwrap().contains("unified");
        assert_eq!(
            env.contains(&"GGML_CUDA_ENABLE_UNIFIED_MEMORY=1"),
            unified,
            "{row}"
        );
    }
}
