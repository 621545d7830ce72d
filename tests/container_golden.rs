//! Golden tests: the exact container command lines per engine and GPU, and the pure helpers
//! behind engine-error detection and provenance. No engine needed.

use setrows_bisect::core::shell;
use setrows_bisect::probe::container::*;
use setrows_bisect::probe::launch::ShellJob;

fn job(cwd_is_work: bool) -> ShellJob {
    ShellJob {
        script: "cmake --build \"$WORK\"".into(),
        src: "/cache/checkouts/abc".into(),
        work: "/cache/build/k1".into(),
        cwd_is_work,
        env: vec![("HIP_LAUNCH_BLOCKING".into(), "1".into())],
        timeout: None,
        name: "setrows probe/1".into(),
        // The build step: it alone sees a cache.
        ccache: true,
        host_ccache_env: Vec::new(),
    }
}

fn spec(engine: EngineKind, gpu: GpuAccess) -> ContainerSpec {
    ContainerSpec {
        engine,
        program: engine.as_str().into(),
        image: "localhost/setrows-rocm:6.4.1".into(),
        gpu,
        ccache_dir: "/cache/ccache/k1".into(),
        run_ccache_dir: "/tmp/run/k1".into(),
        fills_shared_ccache: false,
        uid: 1000,
        gid: 1000,
        gpu_groups: vec![44, 992],
        rootless: false,
        selinux: false,
    }
}

const COMMON: &str = "--rm --name setrows-probe-1 --pull never --network none --user 1000:1000 \
    --volume /cache/checkouts/abc:/src:ro --volume /cache/build/k1:/work \
    --volume /tmp/run/k1:/ccache --volume /cache/ccache/k1:/ccache-shared:ro --workdir /work";
const ENV: &str = "--env HIP_LAUNCH_BLOCKING=1 --env SRC=/src --env WORK=/work \
    --env CCACHE_DIR=/ccache --env 'CCACHE_SECONDARY_STORAGE=file:/ccache-shared|read-only' --env HOME=/tmp --env GGML_NO_BACKTRACE=1";

#[test]
fn golden_podman_hip() {
    let argv = run_argv(&spec(EngineKind::Podman, GpuAccess::Amd), &job(true));
    assert_eq!(
        shell::line(&argv),
        format!(
            "podman run {COMMON} --device /dev/kfd --device /dev/dri --group-add 44 \
             --group-add 992 --security-opt seccomp=unconfined {ENV} localhost/setrows-rocm:6.4.1 \
             sh -c 'cmake --build \"$WORK\"'"
        )
    );
    assert!(!argv.iter().any(|a| a.contains("privileged")));
}

/// A user's own podman (no root): the caller's uid kept inside, the caller's own groups for the
/// GPU (host gids are not mapped into the user namespace), AMD's seccomp setting.
#[test]
fn golden_rootless_podman_hip() {
    let mut s = spec(EngineKind::Podman, GpuAccess::Amd);
    s.rootless = true;
    let argv = run_argv(&s, &job(true));
    assert_eq!(
        shell::line(&argv),
        "podman run --rm --name setrows-probe-1 --pull never --network none --user 1000:1000 \
         --userns=keep-id --volume /cache/checkouts/abc:/src:ro --volume /cache/build/k1:/work \
         --volume /tmp/run/k1:/ccache --volume /cache/ccache/k1:/ccache-shared:ro --workdir /work --device /dev/kfd --device /dev/dri \
         --group-add keep-groups --security-opt seccomp=unconfined --env HIP_LAUNCH_BLOCKING=1 \
         --env SRC=/src --env WORK=/work --env CCACHE_DIR=/ccache --env 'CCACHE_SECONDARY_STORAGE=file:/ccache-shared|read-only' --env HOME=/tmp \
         --env GGML_NO_BACKTRACE=1 localhost/setrows-rocm:6.4.1 sh -c 'cmake --build \"$WORK\"'"
    );
    // rootless CPU: keep-id, no devices, no groups, no seccomp change
    let cpu = shell::line(&run_argv(
        &ContainerSpec {
            gpu: GpuAccess::None,
            ..s.clone()
        },
        &job(true),
    ));
    assert!(
        cpu.contains("--user 1000:1000 --userns=keep-id --volume"),
        "{cpu}"
    );
    assert!(
        !cpu.contains("--group-add") && !cpu.contains("seccomp"),
        "{cpu}"
    );
}

/// SELinux hosts: labelling off for the container (bind mounts and /dev/kfd stay reachable),
/// rootful and rootless alike, docker too.
#[test]
fn golden_selinux() {
    let mut s = spec(EngineKind::Podman, GpuAccess::Amd);
    s.selinux = true;
    assert_eq!(
        shell::line(&run_argv(&s, &job(true))),
        "podman run --rm --name setrows-probe-1 --pull never --network none --user 1000:1000 \
         --security-opt label=disable --volume /cache/checkouts/abc:/src:ro \
         --volume /cache/build/k1:/work --volume /tmp/run/k1:/ccache --volume /cache/ccache/k1:/ccache-shared:ro --workdir /work \
         --device /dev/kfd --device /dev/dri --group-add 44 --group-add 992 \
         --security-opt seccomp=unconfined --env HIP_LAUNCH_BLOCKING=1 --env SRC=/src \
         --env WORK=/work --env CCACHE_DIR=/ccache --env 'CCACHE_SECONDARY_STORAGE=file:/ccache-shared|read-only' --env HOME=/tmp --env GGML_NO_BACKTRACE=1 \
         localhost/setrows-rocm:6.4.1 sh -c 'cmake --build \"$WORK\"'"
    );
    s.rootless = true;
    let r = shell::line(&run_argv(&s, &job(true)));
    assert!(
        r.contains("--user 1000:1000 --userns=keep-id --security-opt label=disable --volume"),
        "{r}"
    );
    let mut d = spec(EngineKind::Docker, GpuAccess::Amd);
    d.selinux = true;
    let d = shell::line(&run_argv(&d, &job(true)));
    assert!(
        d.contains("--user 1000:1000 --security-opt label=disable --volume"),
        "{d}"
    );
    assert!(!d.contains("keep-id"), "{d}");
}

#[test]
fn gpu_groups_come_from_the_device_nodes_too() {
    // /dev/kfd owned by `render` (992), renderD128 by a gid /etc/group does not call video/render
    assert_eq!(
        merge_gpu_groups(&[992, 105, 0], "root:x:0:\nvideo:x:44:\nrender:x:992:\n"),
        vec![44, 105, 992]
    );
    assert_eq!(merge_gpu_groups(&[], ""), Vec::<u32>::new());
}

#[test]
fn the_write_probe_touches_the_work_mount() {
    let j = write_probe_job(std::path::Path::new("/cache/ccache/k1"));
    let argv = shell::line(&run_argv(&spec(EngineKind::Podman, GpuAccess::None), &j));
    assert!(argv.contains("--volume /cache/ccache/k1:/work "), "{argv}");
    assert!(
        argv.ends_with(
            "sh -c 'echo setrows-write-probe-started; touch \"$WORK/.setrows-write-probe\" && rm -f \"$WORK/.setrows-write-probe\"'"
        ),
        "{argv}"
    );
}

#[test]
fn golden_nvidia_per_engine() {
    let d = shell::line(&run_argv(
        &spec(EngineKind::Docker, GpuAccess::Nvidia),
        &job(true),
    ));
    assert!(
        d.starts_with(&format!("docker run {COMMON} --gpus all {ENV} ")),
        "{d}"
    );
    let p = shell::line(&run_argv(
        &spec(EngineKind::Podman, GpuAccess::Nvidia),
        &job(true),
    ));
    assert!(
        p.starts_with(&format!(
            "podman run {COMMON} --device nvidia.com/gpu=all {ENV} "
        )),
        "{p}"
    );
}

#[test]
fn cpu_runs_in_src_when_asked_and_passes_no_devices() {
    let argv = run_argv(&spec(EngineKind::Podman, GpuAccess::None), &job(false));
    let s = shell::line(&argv);
    assert!(s.contains("--workdir /src "), "{s}");
    assert!(!s.contains("--device") && !s.contains("--group-add"), "{s}");
}

#[test]
fn names_groups_digests_provenance() {
    assert_eq!(container_name("-x y"), "sb-x-y");
    assert_eq!(
        gpu_group_ids("root:x:0:\nvideo:x:44:\nrender:x:992:u\nvideox:x:5:\n"),
        vec![44, 992]
    );
    assert_eq!(pick_digest("sha256:aa 03b3"), "sha256:aa");
    assert_eq!(
        pick_digest("r@sha256:bb,q@sha256:cc sha256:03"),
        "sha256:bb"
    );
    assert_eq!(pick_digest(" sha256:03"), "sha256:03");
    let p = parse_provenance(
        "@@kernel\n6.1.0\n@@hip\n@@compiler\ng++ 12.2\n@@gpu\ngfx1151 (AMD Radeon 8060S)\n",
    );
    assert_eq!(p.get("kernel").map(String::as_str), Some("6.1.0"));
    assert_eq!(
        p.get("gpu").map(String::as_str),
        Some("gfx1151 (AMD Radeon 8060S)")
    );
    assert!(!p.contains_key("hip"));
}

#[test]
fn engine_failures_are_told_apart_from_test_failures() {
    let k = EngineKind::Podman;
    assert!(engine_failure(k, Some(125), "Error: localhost/x: image not known").is_some());
    // A test script that exits 125 (git bisect's skip) is not an engine failure.
    assert!(engine_failure(k, Some(125), "cannot build this revision").is_none());
    assert!(engine_failure(k, Some(1), "Error: assertion").is_none());
    let oci = "Error: runc: runc create failed: error setting rlimits: OCI permission denied";
    assert!(engine_failure(k, Some(126), oci).is_some());
    assert!(engine_failure(k, Some(127), "sh: 1: frobnicate: not found").is_none());
    // A full disk is one rule for every launcher (`probe::step_infra_failure`), not an engine's.
    let full = "write: No space left on device";
    assert!(engine_failure(k, Some(1), full).is_none());
    let step = setrows_bisect::probe::exec::RunResult {
        exit_code: Some(1),
        signal: None,
        timed_out: false,
        duration: std::time::Duration::ZERO,
        output: full.into(),
    };
    let host = setrows_bisect::probe::launch::HostLauncher;
    let why = setrows_bisect::probe::step_infra_failure(&host, &step);
    assert_eq!(why.as_deref(), Some("disk full: no space left on device"));
    assert!(engine_failure(
        EngineKind::Docker,
        Some(125),
        "docker: Cannot connect to the Docker daemon at unix:///var/run/docker.sock."
    )
    .is_some());
}

#[test]
fn podman_containers_carry_their_own_deadline() {
    let mut j = job(true);
    j.timeout = Some(std::time::Duration::from_secs(60));
    let p = shell::line(&run_argv(&spec(EngineKind::Podman, GpuAccess::None), &j));
    assert!(p.contains(" --workdir /work --timeout 90 --env "), "{p}");
    let d = shell::line(&run_argv(&spec(EngineKind::Docker, GpuAccess::None), &j));
    assert!(!d.contains("--timeout"), "docker run has no --timeout: {d}");
}

/// Only the build step sees a cache (the run's own, over the shared one mounted read-only); a
/// step that runs what was built sees none, and ccache is off in it.
#[test]
fn only_the_build_step_sees_a_cache() {
    let s = spec(EngineKind::Podman, GpuAccess::Amd);
    let build = shell::line(&run_argv(&s, &job(true)));
    assert!(
        build.contains("--volume /cache/ccache/k1:/ccache-shared:ro ")
            && build.contains("--volume /tmp/run/k1:/ccache "),
        "{build}"
    );
    // A run told to fill the shared cache (by whoever trusts what it builds) writes it.
    let fill = ContainerSpec {
        fills_shared_ccache: true,
        ..s.clone()
    };
    let fill = shell::line(&run_argv(&fill, &job(true)));
    assert!(
        fill.contains("--volume /cache/ccache/k1:/ccache-shared ")
            && fill.contains("--env CCACHE_SECONDARY_STORAGE=file:/ccache-shared "),
        "{fill}"
    );
    let test = ShellJob {
        ccache: false,
        host_ccache_env: Vec::new(),
        ..job(true)
    };
    let test = shell::line(&run_argv(&s, &test));
    assert!(
        !test.contains("ccache:") && !test.contains("/ccache "),
        "{test}"
    );
    assert!(
        test.contains("--env CCACHE_DISABLE=1") && !test.contains("CCACHE_DIR"),
        "{test}"
    );
}
