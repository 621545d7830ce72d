//! Matrix runs on the host (`--engine none`): what a configuration hands its probe, and the
//! `matrix` / `bisect-config` commands end to end without a container engine.

mod gitcommit;

use assert_cmd::Command;
use gitcommit::commit_all;
use setrows_bisect::core::matrix;
use setrows_bisect::probe::Prober;
use setrows_bisect::run::matrix::Runner;
use std::path::Path;

const MATRIX: &str = r#"
[probe]
kind = "script"
build = 'echo "$SETROWS_CMAKE_ARGS" > "$WORK/args"'
script = 'echo "args: $(cat "$WORK/args")"; echo "env: ${HIP_LAUNCH_BLOCKING:-unset} repro: $SETROWS_REPRO_ARGS"; test "$(cat "$SRC/state")" = good'
[launch.plain]
[launch.blocking]
hip_launch_blocking = true
[params.p]
args = ["--steps", "7"]
[matrix]
backend = ["hip"]
gfx = ["gfx1151"]
wave_size = [32]
launch = ["plain", "blocking"]
params = ["p"]
"#;

/// A ggml-like tree that spells the HIP target the old way, with a `state` file the test
/// script reads: `good` at the first commit, `bad` at the second.
fn old_ggml_repo(dir: &Path) -> (String, String) {
    let repo = git2::Repository::init(dir).unwrap();
    std::fs::create_dir_all(dir.join("src/ggml-hip")).unwrap();
    std::fs::write(dir.join("CMakeLists.txt"), "option(GGML_HIP \"\" OFF)\n").unwrap();
    std::fs::write(
        dir.join("src/ggml-hip/CMakeLists.txt"),
        "if (AMDGPU_TARGETS AND NOT CMAKE_HIP_ARCHITECTURES)\n",
    )
    .unwrap();
    std::fs::write(dir.join("state"), "good\n").unwrap();
    let a = commit_all(&repo, "good");
    std::fs::write(dir.join("state"), "bad\n").unwrap();
    let b = commit_all(&repo, "bad");
    (a, b)
}

#[test]
fn a_configuration_reaches_its_probe_with_the_trees_spelling_and_its_own_identity() {
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    old_ggml_repo(&repo);
    let m = matrix::parse("m.toml", MATRIX).unwrap();
    let runner = Runner::new(
        repo,
        d.path().join("work"),
        None,
        m.probe.clone(),
        0,
        d.path().join("logs"),
    );
    let mut rev = runner.resolve("HEAD").unwrap();
    runner.checkout(&mut rev).unwrap();
    let env = runner.env(&m.configs[1], &rev);
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let args = get("SETROWS_CMAKE_ARGS").unwrap();
    assert!(args.contains("-DAMDGPU_TARGETS=gfx1151"), "{args}");
    assert!(!args.contains("-DGPU_TARGETS"), "{args}");
    assert!(
        args.contains("-DCMAKE_HIP_FLAGS=-DDFLASH_WAVE_SIZE=32"),
        "{args}"
    );
    assert_eq!(get("HIP_LAUNCH_BLOCKING").as_deref(), Some("1"));
    assert_eq!(get("SETROWS_REPRO_ARGS").as_deref(), Some("--steps 7"));
    let ids: Vec<String> = m
        .configs
        .iter()
        .map(|c| runner.prober(c, &rev).unwrap().identity())
        .collect();
    assert_ne!(
        ids[0], ids[1],
        "configurations differing only in launch settings must not share stored results"
    );
}

#[test]
fn matrix_and_bisect_config_run_on_the_host() {
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    let (good, bad) = old_ggml_repo(&repo);
    let conf = d.path().join("matrix.toml");
    std::fs::write(&conf, MATRIX).unwrap();
    let out = d.path().join("out");
    let run = |args: &[&str]| {
        let mut c = Command::cargo_bin("setrows-bisect").unwrap();
        c.env("SETROWS_WORK_DIR", d.path().join("work"))
            .args(args)
            .arg("--matrix")
            .arg(&conf)
            .arg("--repo")
            .arg(&repo)
            .arg("--out")
            .arg(&out)
            .args(["--engine", "none"]);
        c.assert()
    };
    run(&["matrix", "--rev", &good, "--rev", &bad]).success();
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("matrix-results.json")).unwrap())
            .unwrap();
    let outcomes: Vec<&str> = r["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["pass", "pass", "wrong_result", "wrong_result"]);
    let log = std::fs::read_to_string(r["cells"][1]["log"].as_str().unwrap()).unwrap();
    assert!(
        log.contains("env: 1 repro: --steps 7") && log.contains("-DAMDGPU_TARGETS=gfx1151"),
        "{log}"
    );
    // Only the listed ids run; an unknown id is a usage error naming it.
    let id = r["configs"][0]["id"].as_str().unwrap().to_string();
    run(&["matrix", "--rev", &good, "--only", &id]).success();
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("matrix-results.json")).unwrap())
            .unwrap();
    assert_eq!(r["cells"].as_array().unwrap().len(), 1);
    assert_eq!(
        r["cells"][0]["cached"], true,
        "answered from the store: {r:#}"
    );
    assert_eq!(r["cells"][0]["outcome"], "pass");
    run(&["matrix", "--rev", &good, "--only", &id, "--fresh"]).success();
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("matrix-results.json")).unwrap())
            .unwrap();
    assert_eq!(r["cells"][0]["cached"], false, "--fresh runs again");
    let a = run(&["matrix", "--rev", &good, "--only", "deadbeef"]).code(2);
    assert!(String::from_utf8_lossy(&a.get_output().stderr).contains("--only deadbeef"));
    // A ladder whose first value already fails is reported, not bisected.
    let a = run(&["bisect-config", "--axis", "launch", "--rev", &bad]).code(1);
    assert!(
        String::from_utf8_lossy(&a.get_output().stdout).contains("nothing to bisect"),
        "{:?}",
        a.get_output()
    );
    let a = run(&["bisect-config", "--axis", "nonsense"]).code(2);
    assert!(String::from_utf8_lossy(&a.get_output().stderr).contains("--axis nonsense"));
}

/// One vocabulary with `bisect`: `--matrix FILE`, `--config ID`; the old `--config FILE` still
/// works with one line of notice, and without either the built-in matrix answers from anywhere.
#[test]
fn matrix_takes_matrix_file_and_config_id_like_bisect() {
    let d = tempfile::tempdir().unwrap();
    let conf = d.path().join("m.toml");
    std::fs::write(
        &conf,
        "[images]\nhip = \"r/rocm:{rocm}\"\n[matrix]\nrocm = [\"6.4.1\", \"7.0.2\"]\n",
    )
    .unwrap();
    let run = |args: &[&str]| {
        let out = Command::cargo_bin("setrows-bisect")
            .unwrap()
            .current_dir(d.path())
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (code, all, err) = run(&["matrix", "--list", "--matrix", "m.toml"]);
    assert_eq!((code, err.as_str()), (Some(0), ""), "{err}");
    assert_eq!(all.lines().count(), 2, "{all}");
    let id = all
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    let (code, one, err) = run(&["matrix", "--list", "--matrix", "m.toml", "--config", id]);
    assert_eq!((code, err.as_str()), (Some(0), ""), "{err}");
    assert_eq!(
        one.lines().collect::<Vec<_>>(),
        vec![all.lines().nth(1).unwrap()]
    );
    let (code, old, err) = run(&["matrix", "--list", "--config", "m.toml"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(old, all);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--matrix m.toml"), "{err}");
    let (code, _, err) = run(&[
        "matrix", "--list", "--matrix", "m.toml", "--config", "nosuchid",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--config nosuchid"), "{err}");
    // bisect-config's base configuration is `--config ID` too; `--base ID` still works, noted.
    let (code, _, err) = run(&[
        "bisect-config",
        "--matrix",
        "m.toml",
        "--axis",
        "rocm",
        "--config",
        "nosuchid",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--config nosuchid: no such configuration"),
        "{err}"
    );
    let (code, _, err) = run(&[
        "bisect-config",
        "--matrix",
        "m.toml",
        "--axis",
        "rocm",
        "--base",
        "nosuchid",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.starts_with("note: `--base nosuchid` is spelled `--config nosuchid` now\n"),
        "{err}"
    );
    // No matrix.toml here: the copy built into the binary, as `bisect --config ID` uses.
    let empty = tempfile::tempdir().unwrap();
    let out = Command::cargo_bin("setrows-bisect")
        .unwrap()
        .current_dir(empty.path())
        .args(["matrix", "--list"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("backend=hip rocm=6.4.1"));
}

#[test]
fn list_formats() {
    let d = tempfile::tempdir().unwrap();
    let conf = d.path().join("m.toml");
    std::fs::write(
        &conf,
        "[images]\nhip = \"r/rocm:{rocm}\"\n[matrix]\nrocm = [\"6.4.1\", \"7.0.2\"]\nwave_size = [32, 64]\n",
    )
    .unwrap();
    let list = |fmt: &str| {
        let a = Command::cargo_bin("setrows-bisect")
            .unwrap()
            .args(["matrix", "--list", "--format", fmt, "--matrix"])
            .arg(&conf)
            .assert()
            .success();
        String::from_utf8(a.get_output().stdout.clone()).unwrap()
    };
    let text = list("text");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4);
    assert!(
        lines[0].ends_with("  rocm=6.4.1 wave_size=32  r/rocm:6.4.1"),
        "{text}"
    );
    let gh: serde_json::Value = serde_json::from_str(&list("github")).unwrap();
    let jobs = gh["include"].as_array().unwrap();
    assert_eq!(jobs.len(), 2, "one job per image: {gh}");
    assert_eq!(jobs[1]["name"], "hip-7.0.2");
    assert_eq!(jobs[1]["ids"].as_str().unwrap().split(',').count(), 2);
    let json: serde_json::Value = serde_json::from_str(&list("json")).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 4);
    assert!(json[1]["cmake_args"]
        .as_array()
        .unwrap()
        .contains(&"-DCMAKE_HIP_FLAGS=-DDFLASH_WAVE_SIZE=64".into()));
}

#[test]
fn hip_compiler_comes_from_the_images_hipconfig() {
    use setrows_bisect::run::matrix::parse_hip_env;
    let env =
        parse_hip_env("HIPCXX=/opt/rocm-6.4.1/lib/llvm/bin/clang\nHIP_PATH=/opt/rocm-6.4.1\n");
    assert_eq!(
        env,
        [
            (
                "HIPCXX".to_string(),
                "/opt/rocm-6.4.1/lib/llvm/bin/clang".to_string()
            ),
            ("HIP_PATH".to_string(), "/opt/rocm-6.4.1".to_string())
        ]
    );
    // No hipconfig in the image: `$(hipconfig -l)/clang` is just "/clang".
    assert!(parse_hip_env("sh: 1: hipconfig: not found\nHIPCXX=/clang\nHIP_PATH=\n").is_empty());
}

#[test]
fn two_runs_cannot_share_a_work_dir() {
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    old_ggml_repo(&repo);
    let m = matrix::parse("m.toml", MATRIX).unwrap();
    let mk = || {
        Runner::new(
            repo.clone(),
            d.path().join("work"),
            None,
            m.probe.clone(),
            0,
            d.path().join("logs"),
        )
    };
    let (a, b) = (mk(), mk());
    let mut rev = a.resolve("HEAD").unwrap();
    a.checkout(&mut rev).unwrap();
    let err = b.checkout(&mut rev).unwrap_err().to_string();
    assert!(err.contains("another setrows-bisect matrix run"), "{err}");
    drop(a);
    b.checkout(&mut rev).unwrap();
}

/// A full disk on the host is the machinery's failure, not the code's: infra, retried, no verdict.
#[test]
fn a_full_disk_is_an_infrastructure_error_even_on_the_host() {
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    old_ggml_repo(&repo);
    let text = MATRIX.replace(
        "build = 'echo \"$SETROWS_CMAKE_ARGS\" > \"$WORK/args\"'",
        "build = 'echo \"cc1plus: fatal error: write: No space left on device\"; exit 1'",
    );
    assert_ne!(text, MATRIX);
    let m = matrix::parse("m.toml", &text).unwrap();
    let runner = Runner::new(
        repo,
        d.path().join("work"),
        None,
        m.probe.clone(),
        1,
        d.path().join("logs"),
    );
    let mut rev = runner.resolve("HEAD").unwrap();
    runner.checkout(&mut rev).unwrap();
    let cell = runner.run_cell(&m.configs[0], &rev, &|_| {});
    assert_eq!(
        cell.outcome,
        setrows_bisect::core::outcome::Outcome::InfraError
    );
    assert_eq!(cell.attempts, 2);
    assert!(cell.signature.unwrap().contains("disk full"));
}

/// The configure line the first HIP configuration of the shipped matrix on AMD's 6.4.1 image
/// runs inside it (the bundled replay's build script with this configuration's recipe), pinned.
#[test]
fn golden_hip_replay_build_from_the_shipped_matrix() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("matrix.toml");
    let m = setrows_bisect::cli::matrix::read_matrix(&path).unwrap();
    let c = m
        .configs
        .iter()
        .find(|c| c.values["rocm"].to_string() == "6.4.1")
        .unwrap();
    assert_eq!(
        c.label(),
        "backend=hip rocm=6.4.1 gfx=gfx1151 wave_size=32 graphs=false launch=default params=decode-reuse"
    );
    let mut opts = setrows_bisect::probe::repro::ReproOptions::new(std::sync::Arc::new(
        setrows_bisect::probe::launch::HostLauncher,
    ));
    opts.cmake_args = c.recipe.cmake_args(&Default::default());
    let script =
        setrows_bisect::probe::repro::ReproProber::new(opts).build_script("setrows-repro-src");
    let configure = script.lines().find(|l| l.starts_with("cmake -S")).unwrap();
    let tail = configure.split("$launcher ").nth(1).unwrap();
    assert_eq!(
        tail,
        "-DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER_LAUNCHER=ccache \
         -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DGGML_CCACHE=OFF \
         -DCMAKE_HIP_COMPILER_LAUNCHER=ccache -DGGML_HIP=ON -DGPU_TARGETS=gfx1151 \
         -DCMAKE_HIP_FLAGS=-DDFLASH_WAVE_SIZE=32 -DGGML_HIP_GRAPHS=OFF"
    );
    assert!(script.contains("--target setrows-replay"), "{script}");
}

/// Two configurations whose resolved build and run are identical share one result: the second
/// cell carries the first one's outcome and names it, and the probe ran once.
#[test]
fn identical_cells_share_one_result() {
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    old_ggml_repo(&repo);
    let text = r#"
[probe]
kind = "script"
build = 'echo x >> "$WORK/builds"'
script = 'echo run >> "$WORK/runs"; test "$(cat "$SRC/state")" = bad'
[launch.plain]
[launch.also-plain]
[launch.blocking]
hip_launch_blocking = true
[matrix]
backend = ["hip"]
gfx = ["gfx1151"]
launch = ["plain", "also-plain", "blocking"]
"#;
    let m = matrix::parse("m.toml", text).unwrap();
    let work = d.path().join("work");
    let runner = Runner::new(
        repo,
        work.clone(),
        None,
        m.probe.clone(),
        0,
        d.path().join("logs"),
    );
    let mut rev = runner.resolve("HEAD").unwrap();
    runner.checkout(&mut rev).unwrap();
    let cells: Vec<_> = m
        .configs
        .iter()
        .map(|c| runner.run_cell(c, &rev, &|_| {}))
        .collect();
    assert_eq!(cells[0].config, m.configs[0].id);
    assert_eq!(cells[1].config, m.configs[1].id, "both cells are reported");
    assert_eq!(cells[1].outcome, cells[0].outcome);
    assert_eq!(
        cells[1].provenance.get("shared_with"),
        Some(&m.configs[0].id),
        "and the shared one says so"
    );
    assert!(!cells[0].provenance.contains_key("shared_with"));
    assert!(
        !cells[2].provenance.contains_key("shared_with"),
        "a real difference runs"
    );
    let runs: usize = walk_count(&work, "runs");
    assert_eq!(runs, 2, "plain and also-plain ran once between them");
}

fn walk_count(dir: &Path, name: &str) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            n += walk_count(&p, name);
        } else if e.file_name() == name {
            n += std::fs::read_to_string(&p).unwrap().lines().count();
        }
    }
    n
}

/// For the bundled probes (replay, decode), `wave_size` only makes cells where the build reads
/// it: on a tree without `DFLASH_WAVE_SIZE` the values collapse to one build and run; a tree that
/// defines it keeps them.
#[test]
fn wave_size_collapses_where_the_build_does_not_read_it() {
    let text = "[matrix]\nbackend = [\"hip\"]\ngfx = [\"gfx1151\"]\nwave_size = [32, 64]\n";
    let cases = [(false, 1), (true, 2)];
    for (text, (defines, distinct)) in [
        text.to_string(),
        format!("[probe]\nkind = \"decode\"\n{text}"),
    ]
    .iter()
    .flat_map(|t| cases.map(|c| (t, c)))
    {
        let m = matrix::parse("m.toml", text).unwrap();
        let d = tempfile::tempdir().unwrap();
        let repo = d.path().join("repo");
        let r = git2::Repository::init(&repo).unwrap();
        std::fs::create_dir_all(repo.join("src/ggml-cuda")).unwrap();
        std::fs::write(repo.join("CMakeLists.txt"), "option(GGML_HIP \"\" OFF)\n").unwrap();
        let body = if defines {
            "#ifndef DFLASH_WAVE_SIZE\n#define DFLASH_WAVE_SIZE 32\n#endif\n"
        } else {
            "#define WARP_SIZE 32\n"
        };
        std::fs::write(repo.join("src/ggml-cuda/common.cuh"), body).unwrap();
        commit_all(&r, "tree");
        let runner = Runner::new(
            repo,
            d.path().join("work"),
            None,
            m.probe.clone(),
            0,
            d.path().join("logs"),
        );
        let mut rev = runner.resolve("HEAD").unwrap();
        runner.checkout(&mut rev).unwrap();
        let resolved: std::collections::BTreeSet<String> = m
            .configs
            .iter()
            .map(|c| runner.resolved(&runner.effective(c, &rev)).identity())
            .collect();
        assert_eq!(
            resolved.len(),
            distinct,
            "defines DFLASH_WAVE_SIZE: {defines}, {text}"
        );
        let kept = runner.effective(&m.configs[1], &rev).recipe.wave_size;
        assert_eq!(kept, defines.then_some(64));
    }
}

/// `matrix --dry-run`: every cell as a run would resolve it; nothing checked out or run.
#[test]
fn dry_run_prints_every_cell_and_runs_nothing() {
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    let (good, bad) = old_ggml_repo(&repo);
    let conf = d.path().join("m.toml");
    std::fs::write(&conf, MATRIX).unwrap();
    let work = d.path().join("work");
    let a = Command::cargo_bin("setrows-bisect")
        .unwrap()
        .args(["matrix", "--dry-run", "--engine", "none", "--matrix"])
        .arg(&conf)
        .arg("--repo")
        .arg(&repo)
        .args(["--rev", &good, "--rev", &bad])
        .env("SETROWS_WORK_DIR", &work)
        .assert()
        .success();
    let out = String::from_utf8(a.get_output().stdout.clone()).unwrap();
    assert!(
        out.starts_with("4 cells: 2 revision(s) x 2 configuration(s)"),
        "{out}"
    );
    assert!(out.contains("HIP_LAUNCH_BLOCKING=1"), "{out}");
    assert!(
        out.contains("-DGGML_HIP=ON") && out.contains("gfx1151"),
        "{out}"
    );
    assert!(
        out.contains(&good[..12]) && out.contains(&bad[..12]),
        "{out}"
    );
    let stored = std::fs::read_dir(work.join("results"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(stored, 0, "a dry run stored something");
    assert!(
        !work.join("matrix/src").exists(),
        "a dry run checked something out"
    );
}

/// `[probe] timeout_s` of 0 (every probe killed at once) or over a week (a typo that lets a hung
/// GPU hold the run for days) is refused with one line naming file, position and key, before
/// anything is checked out, built or run; a week itself is accepted.
#[test]
fn an_out_of_range_probe_timeout_is_refused_before_any_probe() {
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    let (good, _) = old_ggml_repo(&repo);
    let counter = d.path().join("probes-run");
    let work = d.path().join("work");
    let run = |timeout: &str| {
        let conf = d.path().join("m.toml");
        let text = MATRIX
            .replacen("[probe]\n", &format!("[probe]\ntimeout_s = {timeout}\n"), 1)
            .replace(
                "script = '",
                &format!("script = 'echo x >> {}; ", counter.display()),
            );
        std::fs::write(&conf, text).unwrap();
        let mut c = Command::cargo_bin("setrows-bisect").unwrap();
        c.env("SETROWS_WORK_DIR", &work)
            .args(["matrix", "--engine", "none", "--rev", &good, "--matrix"])
            .arg(&conf)
            .arg("--repo")
            .arg(&repo)
            .arg("--out")
            .arg(d.path().join("out"));
        c.assert()
    };
    for bad in ["0", "604801", "99999999999"] {
        let a = run(bad).code(2);
        let stderr = String::from_utf8_lossy(&a.get_output().stderr).to_string();
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "one line: {stderr}");
        assert!(
            lines[0].contains("m.toml:3:13: key `timeout_s`:")
                && lines[0].contains(&format!("timeout_s = {bad} is out of range")),
            "{stderr}"
        );
        assert!(!counter.exists(), "a probe ran with timeout_s = {bad}");
        assert!(!work.join("matrix/src").exists(), "checked out: {bad}");
    }
    run("604800").success();
    assert!(counter.exists(), "the accepted timeout ran no probe");
}

/// `--timeout` is one flag with one rule in every command: a fraction of a second is a
/// deadline for `matrix` too (it was refused there, whole seconds only), and it reaches the
/// cells in place of `[probe] timeout_s`: a test that outlives it is a hang, one that ends
/// within it passes.
#[test]
fn a_fractional_timeout_reaches_the_matrix_cells() {
    let d = tempfile::tempdir().unwrap();
    let repo = d.path().join("repo");
    let (good, _) = old_ggml_repo(&repo);
    let run = |sleep: &str, timeout: &str| {
        let conf = d.path().join("m.toml");
        let text = MATRIX
            .replacen("[probe]\n", "[probe]\ntimeout_s = 600\n", 1)
            .replace("script = '", &format!("script = 'sleep {sleep}; "))
            .replace("launch = [\"plain\", \"blocking\"]", "launch = [\"plain\"]");
        std::fs::write(&conf, text).unwrap();
        let out = d.path().join(format!("out-{sleep}"));
        Command::cargo_bin("setrows-bisect")
            .unwrap()
            .env("SETROWS_WORK_DIR", d.path().join("work"))
            .args(["matrix", "--engine", "none", "--fresh", "--rev", &good])
            .args(["--timeout", timeout, "--matrix"])
            .arg(&conf)
            .arg("--repo")
            .arg(&repo)
            .arg("--out")
            .arg(&out)
            .assert()
            .success();
        let r: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.join("matrix-results.json")).unwrap(),
        )
        .unwrap();
        r["cells"][0]["outcome"].as_str().unwrap().to_string()
    };
    assert_eq!(run("30", "0.5"), "hang");
    assert_eq!(run("0.1", "20.5"), "pass");
}
