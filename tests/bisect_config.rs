//! A commit bisect in a named configuration: exact command lines of the HIP configuration on
//! both sides of ggml's `AMDGPU_TARGETS` -> `GPU_TARGETS` rename (no GPU needed: the prober is
//! built by the same `run::probers` path every command uses, and its steps are printed, not
//! run), the lucebox layout, and `--config` usage errors.

mod gitcommit;

use assert_cmd::Command;
use gitcommit::commit_all;
use setrows_bisect::core::build::TreeFacts;
use setrows_bisect::core::config::Resolved;
use setrows_bisect::core::matrix;
use setrows_bisect::probe::container::{run_argv, ContainerSpec, EngineKind, GpuAccess};
use setrows_bisect::probe::launch::{HostLauncher, ShellJob};
use setrows_bisect::run::probers::{self, PerTreeRepro, Place};
use std::path::Path;
use std::sync::Arc;

const HIP: &str = r#"
[probe]
kind = "replay"
timeout_s = 600
[images]
hip = "localhost/setrows-rocm:{rocm}"
[matrix]
backend = ["hip"]
rocm = ["6.4.1"]
gfx = ["gfx1151"]
wave_size = [32]
graphs = [true]
launch = ["serialized"]
params = ["reuse"]
[launch.serialized]
hip_launch_blocking = true
amd_serialize_kernel = 3
[params.reuse]
args = ["--mode", "reuse", "--steps", "100000"]
"#;

/// A ggml tree whose HIP CMake file reads `targets_var`.
fn ggml_tree(dir: &Path, targets_var: &str) {
    std::fs::create_dir_all(dir.join("src/ggml-hip")).unwrap();
    std::fs::create_dir_all(dir.join("include")).unwrap();
    std::fs::write(dir.join("include/ggml.h"), "/* ggml */\n").unwrap();
    std::fs::write(dir.join("CMakeLists.txt"), "option(GGML_HIP \"hip\" OFF)\n").unwrap();
    std::fs::write(
        dir.join("src/ggml-hip/CMakeLists.txt"),
        format!("if ({targets_var} AND NOT CMAKE_HIP_ARCHITECTURES)\n"),
    )
    .unwrap();
}

fn hip_config() -> Resolved {
    let m = matrix::parse("matrix.toml", HIP).unwrap();
    Resolved::from_matrix(&m.configs[0], &m.probe, &m.file)
}

fn place() -> Place {
    Place {
        launcher: Arc::new(HostLauncher),
        in_container: true,
        hip_env: vec![
            ("HIPCXX".into(), "/opt/rocm/llvm/bin/clang".into()),
            ("HIP_PATH".into(), "/opt/rocm".into()),
        ],
        fallback_facts: TreeFacts::default(),
        fallback_subdir: String::new(),
    }
}

/// The configure line of the build script (the one line that starts with `cmake -S`).
fn configure_line(checkout: &Path) -> String {
    let cfg = hip_config();
    let p = place();
    let repro = PerTreeRepro::new(
        probers::repro_options(&cfg, &p),
        probers::recipe_at(&cfg, &p),
        TreeFacts::default(),
    );
    let script = repro.for_tree(checkout).build_script("SRCS");
    let line = script
        .lines()
        .find(|l| l.starts_with("cmake -S"))
        .unwrap()
        .to_string();
    // The build dir name hashes the arguments; the arguments themselves are what is pinned.
    let (head, rest) = line.split_once("-B \"$WORK/").unwrap();
    let (_, tail) = rest.split_once('"').unwrap();
    format!("{head}-B \"$WORK/BUILD\"{tail}")
}

#[test]
fn the_hip_configuration_builds_for_gfx1151_on_both_sides_of_the_gpu_targets_rename() {
    let d = tempfile::tempdir().unwrap();
    let (old, new) = (d.path().join("old"), d.path().join("new"));
    ggml_tree(&old, "AMDGPU_TARGETS");
    ggml_tree(&new, "GPU_TARGETS");
    let common = "cmake -S \"$WORK/SRCS\" -B \"$WORK/BUILD\" $gen -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \"-DGGML_SOURCE_DIR=$SRC\" $launcher -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DGGML_CCACHE=OFF -DCMAKE_HIP_COMPILER_LAUNCHER=ccache -DGGML_HIP=ON";
    let tail = "-DCMAKE_HIP_FLAGS=-DDFLASH_WAVE_SIZE=32 -DGGML_HIP_GRAPHS=ON";
    assert_eq!(
        configure_line(&old),
        format!("{common} -DAMDGPU_TARGETS=gfx1151 {tail}")
    );
    assert_eq!(
        configure_line(&new),
        format!("{common} -DGPU_TARGETS=gfx1151 {tail}")
    );
}

#[test]
fn the_hip_configuration_runs_in_its_image_with_the_gpu_and_its_launch_environment() {
    let cfg = hip_config();
    let opts = probers::repro_options(&cfg, &place());
    assert_eq!(
        opts.run_env,
        vec![
            ("HIP_LAUNCH_BLOCKING".to_string(), "1".to_string()),
            ("AMD_SERIALIZE_KERNEL".to_string(), "3".to_string()),
            ("GGML_NO_BACKTRACE".to_string(), "1".to_string()),
        ]
    );
    assert_eq!(
        opts.build_env,
        vec![
            ("HIPCXX".to_string(), "/opt/rocm/llvm/bin/clang".to_string()),
            ("HIP_PATH".to_string(), "/opt/rocm".to_string()),
        ]
    );
    let spec = ContainerSpec {
        engine: EngineKind::Podman,
        program: "podman".into(),
        image: cfg.image.clone().unwrap(),
        gpu: GpuAccess::from(cfg.backend),
        ccache_dir: "/cache/ccache".into(),
        run_ccache_dir: "/tmp/run".into(),
        fills_shared_ccache: false,
        uid: 1000,
        gid: 1000,
        gpu_groups: vec![44, 992],
        rootless: false,
        selinux: false,
    };
    let job = ShellJob {
        script: "exec \"$WORK/b/setrows-replay\" --mode reuse --steps 100000".into(),
        src: "/w/src".into(),
        work: "/w/build".into(),
        cwd_is_work: true,
        env: opts.run_env.clone(),
        timeout: cfg.timeout_s.map(std::time::Duration::from_secs_f64),
        name: "setrows-1-run".into(),
        ccache: false,
        host_ccache_env: Vec::new(),
    };
    let argv = run_argv(&spec, &job).join(" ");
    assert_eq!(
        argv,
        "podman run --rm --name setrows-1-run --pull never --network none --user 1000:1000 \
         --volume /w/src:/src:ro --volume /w/build:/work \
         --workdir /work --timeout 630 --device /dev/kfd --device /dev/dri --group-add 44 \
         --group-add 992 --security-opt seccomp=unconfined --env HIP_LAUNCH_BLOCKING=1 \
         --env AMD_SERIALIZE_KERNEL=3 \
         --env GGML_NO_BACKTRACE=1 --env SRC=/src --env WORK=/work --env CCACHE_DISABLE=1 --env HOME=/tmp \
         --env GGML_NO_BACKTRACE=1 localhost/setrows-rocm:6.4.1 sh -c \
         exec \"$WORK/b/setrows-replay\" --mode reuse --steps 100000"
    );
}

#[test]
fn the_bundled_reproducer_builds_against_a_lucebox_trees_ggml() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("lucebox");
    ggml_tree(&root.join("server/deps/llama.cpp/ggml"), "AMDGPU_TARGETS");
    std::fs::write(root.join("CMakeLists.txt"), "project(lucebox)\n").unwrap();
    let line = configure_line(&root);
    assert!(
        line.contains("\"-DGGML_SOURCE_DIR=$SRC/server/deps/llama.cpp/ggml\""),
        "{line}"
    );
    // The spelling is the vendored ggml's, not the lucebox root's.
    assert!(line.contains("-DAMDGPU_TARGETS=gfx1151"), "{line}");
}

/// A lucebox-like history: ggml vendored at server/deps/llama.cpp/ggml; commit `i` changes the
/// server every time and ggml's `state` only at `bad_from`.
fn lucebox_repo(dir: &Path, n: usize, bad_from: usize) -> Vec<String> {
    let repo = git2::Repository::init(dir).unwrap();
    let g = dir.join("server/deps/llama.cpp/ggml");
    ggml_tree(&g, "GPU_TARGETS");
    std::fs::create_dir_all(g.join("src")).unwrap();
    (0..n)
        .map(|i| {
            let state = if i >= bad_from { "bad" } else { "good" };
            std::fs::write(g.join("src/state"), format!("{state}\n")).unwrap();
            std::fs::write(dir.join("server/main.cpp"), format!("// {i}\n")).unwrap();
            commit_all(&repo, &format!("lucebox {i}"))
        })
        .collect()
}

#[test]
fn a_lucebox_checkout_is_bisected_over_its_ggml_subtree() {
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("lucebox");
    let shas = lucebox_repo(&repo, 9, 5);
    let json = d.path().join("r.json");
    let out = Command::cargo_bin("setrows-bisect")
        .unwrap()
        .env_remove("SETROWS_WORK_DIR")
        .arg("--repo")
        .arg(&repo)
        .args(["--good", &shas[0], "--bad", &shas[8]])
        .args([
            "--script",
            "test \"$(cat \"$SRC/server/deps/llama.cpp/ggml/src/state\")\" = good",
        ])
        .arg("--work-dir")
        .arg(d.path().join("work"))
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("lucebox layout detected"), "{stderr}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["range"]["path"], "server/deps/llama.cpp/ggml", "{r}");
    // Commits that change only the server share one probe: the first one with ggml's new
    // state is the answer, found in 2 ggml trees.
    assert_eq!(r["first_bad"], shas[5].as_str(), "{r}");
    assert_eq!(r["range"]["candidates"], 2, "{r}");
}

fn usage(args: &[&str], dir: &Path) -> String {
    let out = Command::cargo_bin("setrows-bisect")
        .unwrap()
        .current_dir(dir)
        .env_remove("SETROWS_WORK_DIR")
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    stderr
}

#[test]
fn an_unknown_configuration_id_says_how_to_see_the_ids() {
    let d = tempfile::tempdir().unwrap();
    let shas = lucebox_repo(&d.path().join("r"), 2, 1);
    let repo = d.path().join("r");
    let repo = repo.to_str().unwrap();
    // No matrix.toml here: the embedded copy answers.
    let e = usage(
        &[
            "--repo", repo, "--good", &shas[0], "--bad", &shas[1], "--config", "nosuchid",
        ],
        d.path(),
    );
    assert!(
        e.contains("--config nosuchid")
            && e.contains("embedded matrix.toml")
            && e.contains("matrix --list"),
        "{e}"
    );
    let e = usage(
        &[
            "--repo",
            repo,
            "--good",
            &shas[0],
            "--bad",
            &shas[1],
            "--launch-env",
            "NOEQUALS",
        ],
        d.path(),
    );
    assert!(
        e.contains("--launch-env") && e.contains("NAME=VALUE"),
        "{e}"
    );
}

/// `--sanitize address` is the long spelling of case 23 (two `--cmake-arg`, `ASAN_OPTIONS`): the
/// same plan and store key; what it cannot be is a one-line error before any probe.
#[test]
fn sanitize_is_the_long_spelling_and_its_conflicts_are_refused_up_front() {
    let d = tempfile::tempdir().unwrap();
    let shas = lucebox_repo(&d.path().join("r"), 2, 1);
    let repo = d.path().join("r");
    let work = d.path().join("w");
    let base = [
        "--repo",
        repo.to_str().unwrap(),
        "--good",
        &shas[0],
        "--bad",
        &shas[1],
        "--work-dir",
        work.to_str().unwrap(),
        "--dry-run",
    ];
    let plan = |more: &[&str]| {
        let out = Command::cargo_bin("setrows-bisect")
            .unwrap()
            .current_dir(d.path())
            .args(base)
            .args(more)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let short = plan(&["--sanitize", "address"]);
    let long = plan(&[
        "--cmake-arg=-DCMAKE_C_FLAGS=-fsanitize=address",
        "--cmake-arg=-DCMAKE_CXX_FLAGS=-fsanitize=address",
        "--launch-env",
        "ASAN_OPTIONS=detect_stack_use_after_return=1",
    ]);
    assert_eq!(short, long);
    assert!(
        short.contains("ASAN_OPTIONS=detect_stack_use_after_return=1 setrows-replay")
            && short.contains("-DCMAKE_CXX_FLAGS=-fsanitize=address"),
        "{short}"
    );
    // the user's own runtime options win over the shorthand's
    let own = plan(&[
        "--sanitize",
        "address",
        "--launch-env",
        "ASAN_OPTIONS=detect_leaks=0",
    ]);
    assert!(
        own.contains("ASAN_OPTIONS=detect_leaks=0 setrows-replay")
            && !own.contains("detect_stack_use_after_return"),
        "{own}"
    );
    let refused = |more: &[&str]| {
        let r = repo.to_str().unwrap();
        let mut a = vec!["--repo", r, "--good", &shas[0], "--bad", &shas[1]];
        a.extend_from_slice(more);
        usage(&a, d.path())
    };
    let e = refused(&["--sanitize", "address,thread"]);
    assert!(e.contains("cannot share a build"), "{e}");
    let e = refused(&[
        "--sanitize",
        "undefined",
        "--cmake-arg=-DCMAKE_CXX_FLAGS=-O1",
    ]);
    assert!(
        e.contains("--cmake-arg -DCMAKE_CXX_FLAGS=-O1 and --sanitize"),
        "{e}"
    );
}
