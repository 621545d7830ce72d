//! Real probes in real containers (podman). Needs what `scripts/setup.d/30-podman.sh` sets up:
//! podman + runc, `CONTAINERS_CONF`, and the CPU test images (`SETROWS_TEST_IMAGE`,
//! `SETROWS_TEST_IMAGE_B`). Without them these tests fail under `CI=true` and say so elsewhere.

mod container_common;

use container_common::*;
use setrows_bisect::probe::container::{
    ContainerError, ContainerLauncher, Engine, EngineKind, GpuAccess,
};
use setrows_bisect::probe::launch::{Launcher, ShellJob};
use std::time::Duration;

fn job(src: &std::path::Path, work: &std::path::Path, script: &str, name: &str) -> ShellJob {
    ShellJob {
        script: script.into(),
        src: src.into(),
        work: work.into(),
        cwd_is_work: true,
        env: vec![("PROBE_VAR".into(), "42".into())],
        timeout: None,
        name: name.into(),
        // A build step: the one that sees the run's cache.
        ccache: true,
        host_ccache_env: Vec::new(),
    }
}

#[test]
fn a_step_runs_isolated_with_read_only_source_and_its_own_uid() {
    let Some(engine) = podman() else { return };
    let d = tempfile::tempdir().unwrap();
    let (src, work) = (d.path().join("src"), d.path().join("work"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(src.join("input"), "hello").unwrap();
    let l =
        ContainerLauncher::new(engine, &image_a(), GpuAccess::None, &d.path().join("cc")).unwrap();
    let script = r#"set -e
cat "$SRC/input" > "$WORK/copied"
if touch "$SRC/written" 2>/dev/null; then echo SRC_WRITABLE; fi
echo "uid=$(id -u):$(id -g) var=$PROBE_VAR pwd=$(pwd) ccache=$CCACHE_DIR"
# Only the loopback interface: no network during the run.
tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ',' ; echo
"#;
    let j = job(&src, &work, script, &unique("isolated"));
    let r = setrows_bisect::probe::exec::run(&l.command(&j), None, &d.path().join("log"), &|| {})
        .unwrap();
    assert!(r.success(), "{}", r.output);
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    assert!(
        r.output
            .contains(&format!("uid={uid}:{gid} var=42 pwd=/work ccache=/ccache")),
        "{}",
        r.output
    );
    assert!(
        !r.output.contains("SRC_WRITABLE"),
        "source must be read-only"
    );
    assert!(r.output.contains("\nlo,\n"), "network: {}", r.output);
    assert_eq!(
        std::fs::read_to_string(work.join("copied")).unwrap(),
        "hello"
    );
    assert!(!src.join("written").exists());
    let p = l.provenance();
    assert!(p["image_digest"].starts_with("sha256:"), "{p:?}");
    assert!(
        p["compiler"].contains("g++") || p["compiler"].contains("c++"),
        "{p:?}"
    );
    assert!(!p["kernel"].is_empty() && p["engine"] == "podman", "{p:?}");
    assert!(l
        .identity()
        .starts_with(&format!("podman:{}@sha256:", image_a())));
}

#[test]
fn a_hang_is_killed_and_its_container_is_gone() {
    let Some(engine) = podman() else { return };
    let d = tempfile::tempdir().unwrap();
    let l = ContainerLauncher::new(
        engine.clone(),
        &image_a(),
        GpuAccess::None,
        &d.path().join("cc"),
    )
    .unwrap();
    let name = unique("hang");
    let j = job(d.path(), d.path(), "echo started; sleep 600", &name);
    let r = setrows_bisect::probe::exec::run(
        &l.command(&j),
        Some(Duration::from_secs(3)),
        &d.path().join("log"),
        &|| l.cleanup(&j),
    )
    .unwrap();
    assert!(r.timed_out, "{r:?}");
    assert!(
        !engine.container_exists(&name).unwrap(),
        "the container outlived its timeout"
    );
}

#[test]
fn a_missing_image_is_an_infrastructure_error() {
    let Some(engine) = podman() else { return };
    let d = tempfile::tempdir().unwrap();
    let err = ContainerLauncher::new(
        engine,
        "localhost/setrows-no-such-image:none",
        GpuAccess::None,
        d.path(),
    )
    .unwrap_err();
    assert!(matches!(err, ContainerError::ImageMissing { .. }), "{err}");
    assert!(err
        .to_string()
        .contains("localhost/setrows-no-such-image:none"));
}

#[test]
fn an_engine_that_cannot_run_is_an_infrastructure_error() {
    let e = Engine {
        kind: EngineKind::Docker,
        program: "/nonexistent/docker".into(),
    };
    let err = e.check().unwrap_err();
    assert!(err.to_string().contains("/nonexistent/docker"), "{err}");
    let d = tempfile::tempdir().unwrap();
    assert!(ContainerLauncher::new(e, "x", GpuAccess::None, d.path()).is_err());
}

#[test]
fn relative_host_paths_are_mounted_as_directories_not_named_volumes() {
    let Some(engine) = podman() else { return };
    // Integration tests run in the crate root, so a path under target/ can be given relatively.
    std::fs::create_dir_all("target").unwrap();
    let d = tempfile::tempdir_in("target").unwrap();
    let cwd = std::env::current_dir().unwrap();
    let rel = d
        .path()
        .strip_prefix(&cwd)
        .unwrap_or(d.path())
        .to_path_buf();
    assert!(rel.is_relative(), "{rel:?}");
    let l = ContainerLauncher::new(engine, &image_a(), GpuAccess::None, &rel.join("cc")).unwrap();
    let j = job(&rel, &rel, "echo ok > \"$WORK/out\"", &unique("relative"));
    let r = setrows_bisect::probe::exec::run(&l.command(&j), None, &d.path().join("log"), &|| {})
        .unwrap();
    assert!(r.success(), "{}", r.output);
    assert_eq!(
        std::fs::read_to_string(d.path().join("out")).unwrap(),
        "ok\n"
    );
}

/// Where the docker client is installed but no daemon runs (this CI machine), choosing docker
/// is an infrastructure error that says so, before anything runs.
#[test]
fn a_docker_daemon_that_is_down_is_an_infrastructure_error() {
    let on_path = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|d| d.join("docker").is_file());
    let daemon = std::path::Path::new("/var/run/docker.sock").exists()
        || std::env::var_os("DOCKER_HOST").is_some();
    if !on_path || daemon {
        eprintln!("not applicable: docker client {on_path}, daemon socket {daemon}");
        return;
    }
    let err = Engine::detect(setrows_bisect::probe::container::EngineChoice::Docker).unwrap_err();
    assert!(matches!(err, ContainerError::EngineDown { .. }), "{err}");
    assert!(err.to_string().contains("daemon"), "{err}");
    let d = tempfile::tempdir().unwrap();
    let conf = d.path().join("m.toml");
    std::fs::write(
        &conf,
        "[probe]\nkind = \"script\"\nscript = \"true\"\n[matrix]\nbackend = [\"cpu\"]\n",
    )
    .unwrap();
    let out = assert_cmd::Command::cargo_bin("setrows-bisect")
        .unwrap()
        .args(["matrix", "--engine", "docker", "--rev", "HEAD", "--matrix"])
        .arg(&conf)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("daemon"),
        "{out:?}"
    );
}

/// A HIP launcher on a machine without an AMD GPU (CI, hosted runners) still runs its steps:
/// the build needs no device, and passing a missing `/dev/kfd` would stop the engine from
/// starting any step. Where the node exists it is passed (the golden argv tests pin that).
#[test]
fn a_hip_launcher_without_an_amd_gpu_still_runs_its_build_steps() {
    let Some(engine) = podman() else { return };
    let d = tempfile::tempdir().unwrap();
    let (src, work) = (d.path().join("src"), d.path().join("work"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let l =
        ContainerLauncher::new(engine, &image_a(), GpuAccess::Amd, &d.path().join("cc")).unwrap();
    let j = job(&src, &work, "echo built", &unique("nokfd"));
    let argv = l.command(&j).argv.join(" ");
    let has_kfd = std::path::Path::new(setrows_bisect::probe::device::AMD_KFD).exists();
    assert_eq!(argv.contains("/dev/kfd"), has_kfd, "{argv}");
    let r = setrows_bisect::probe::exec::run(&l.command(&j), None, &d.path().join("log"), &|| {})
        .unwrap();
    assert!(r.success(), "{}", r.output);
    assert!(r.output.contains("built"), "{}", r.output);
}
