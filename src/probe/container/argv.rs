//! The `podman run` / `docker run` argv of one step: pure, pinned by golden tests, because every
//! flag here is a decision about isolation (read-only source, no network, no privileges, the
//! caller's uid) or GPU access that a reviewer should see in one place.

use super::*;

/// Everything the run argv depends on, resolved once (pure input of `run_argv`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerSpec {
    pub engine: EngineKind,
    pub program: String,
    pub image: String,
    pub gpu: GpuAccess,
    /// The shared cache of this engine and image: mounted read-only at `SHARED_MOUNT`, for
    /// the build step only (`probe::ccache`).
    pub ccache_dir: PathBuf,
    /// This run's own cache for this engine and image: mounted at `/ccache`, for the build
    /// step only.
    pub run_ccache_dir: PathBuf,
    /// This run fills the shared cache (`probe::ccache::FILL_VAR`): its build step may write it.
    pub fills_shared_ccache: bool,
    pub uid: u32,
    pub gid: u32,
    /// Host gids owning `/dev/kfd` and `/dev/dri` (`video`, `render`), numeric because the
    /// image's /etc/group need not have those names.
    pub gpu_groups: Vec<u32>,
    /// Podman without root (a user's own podman, the usual Strix Halo desktop): the caller's uid
    /// is kept inside (`--userns=keep-id`) and the GPU groups are the caller's own supplementary
    /// groups (`--group-add keep-groups`: host gids are not mapped into the user namespace).
    pub rootless: bool,
    /// SELinux is enabled on the host (Fedora, RHEL): bind mounts and device nodes are only
    /// reachable with labelling off for the container (`--security-opt label=disable`).
    pub selinux: bool,
}

impl ContainerSpec {
    /// The host facts `rootless` and `selinux` for `engine` run by `uid`.
    pub fn host_security(engine: EngineKind, uid: u32) -> (bool, bool) {
        let rootless = engine == EngineKind::Podman && uid != 0;
        let selinux = std::path::Path::new("/sys/fs/selinux/enforce").exists();
        (rootless, selinux)
    }
}

/// Seconds a podman container may outlive its step's timeout (the client kills it first; this
/// only matters when the client itself was killed).
pub const CONTAINER_TIMEOUT_GRACE_S: u64 = 30;

/// A valid container name from a run name (`[a-zA-Z0-9][a-zA-Z0-9_.-]*`).
pub fn container_name(run_name: &str) -> String {
    let mut s: String = run_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    if !s.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        s.insert_str(0, "sb");
    }
    s
}

/// The `run` command line for one step.
pub fn run_argv(spec: &ContainerSpec, job: &ShellJob) -> Vec<String> {
    let mut a: Vec<String> = vec![
        spec.program.clone(),
        "run".into(),
        "--rm".into(),
        "--name".into(),
        container_name(&job.name),
        "--pull".into(),
        "never".into(),
        "--network".into(),
        "none".into(),
        "--user".into(),
        format!("{}:{}", spec.uid, spec.gid),
    ];
    if spec.rootless {
        a.push("--userns=keep-id".into());
    }
    if spec.selinux {
        a.extend(["--security-opt".into(), "label=disable".into()]);
    }
    a.extend([
        "--volume".into(),
        format!("{}:{SRC_MOUNT}:ro", job.src.display()),
        "--volume".into(),
        format!("{}:{WORK_MOUNT}", job.work.display()),
    ]);
    // The build step alone sees a cache: the run's own, writable, over the shared one,
    // read-only to the kernel as well as to ccache. A step that runs what was built sees none.
    if job.ccache {
        a.extend([
            "--volume".into(),
            format!("{}:{CCACHE_MOUNT}", spec.run_ccache_dir.display()),
            "--volume".into(),
            if spec.fills_shared_ccache {
                format!("{}:{SHARED_MOUNT}", spec.ccache_dir.display())
            } else {
                format!("{}:{SHARED_MOUNT}:ro", spec.ccache_dir.display())
            },
        ]);
    }
    a.extend([
        "--workdir".into(),
        if job.cwd_is_work {
            WORK_MOUNT
        } else {
            SRC_MOUNT
        }
        .into(),
    ]);
    if let (EngineKind::Podman, Some(t)) = (spec.engine, job.timeout) {
        // Bounds a container whose client died with us (SIGKILL): conmon kills it anyway.
        a.push("--timeout".into());
        a.push((t.as_secs() + CONTAINER_TIMEOUT_GRACE_S).to_string());
    }
    match spec.gpu {
        GpuAccess::None => {}
        GpuAccess::Amd => {
            for d in ["/dev/kfd", "/dev/dri"] {
                a.push("--device".into());
                a.push(d.into());
            }
            if spec.rootless {
                a.extend(["--group-add".into(), "keep-groups".into()]);
            } else {
                for g in &spec.gpu_groups {
                    a.push("--group-add".into());
                    a.push(g.to_string());
                }
            }
            // AMD's documented `docker run` for ROCm (the HSA runtime's syscalls).
            a.extend(["--security-opt".into(), "seccomp=unconfined".into()]);
        }
        GpuAccess::Nvidia => match spec.engine {
            EngineKind::Docker => a.extend(["--gpus".into(), "all".into()]),
            EngineKind::Podman => a.extend(["--device".into(), "nvidia.com/gpu=all".into()]),
        },
    }
    let mut env = with_dirs(&job.env, SRC_MOUNT, WORK_MOUNT);
    if job.ccache {
        env.push(("CCACHE_DIR".into(), CCACHE_MOUNT.into()));
        env.push(if spec.fills_shared_ccache {
            crate::probe::ccache::writable_layer(SHARED_MOUNT)
        } else {
            crate::probe::ccache::read_only_layer(SHARED_MOUNT)
        });
    } else {
        env.push(("CCACHE_DISABLE".into(), "1".into()));
    }
    // The caller's uid has no home in the image; tools that write caches need one.
    env.push(("HOME".into(), "/tmp".into()));
    env.push(("GGML_NO_BACKTRACE".into(), "1".into()));
    for (k, v) in env {
        a.push("--env".into());
        a.push(format!("{k}={v}"));
    }
    a.push(spec.image.clone());
    a.extend(["sh".into(), "-c".into(), job.script.clone()]);
    a
}

/// Host gids of the groups that own AMD GPU device nodes: those of the nodes themselves
/// (`/dev/kfd`, `/dev/dri/renderD*`: distributions differ in which group owns which) and the
/// `video`/`render` entries of /etc/group. Root's group is never added.
pub fn host_gpu_group_ids() -> Vec<u32> {
    use std::os::unix::fs::MetadataExt;
    let mut nodes = vec![PathBuf::from("/dev/kfd")];
    if let Ok(rd) = std::fs::read_dir("/dev/dri") {
        nodes.extend(rd.flatten().map(|e| e.path()).filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("renderD"))
        }));
    }
    let node_gids: Vec<u32> = nodes
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok().map(|m| m.gid()))
        .collect();
    merge_gpu_groups(
        &node_gids,
        &std::fs::read_to_string("/etc/group").unwrap_or_default(),
    )
}

/// `node_gids` (the device nodes' owners) and the `video`/`render` gids of `etc_group`, sorted,
/// without duplicates and without gid 0.
pub fn merge_gpu_groups(node_gids: &[u32], etc_group: &str) -> Vec<u32> {
    let mut ids = gpu_group_ids(etc_group);
    ids.extend(node_gids.iter().copied().filter(|g| *g != 0));
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Host gids of the groups that own AMD GPU device nodes, from /etc/group text.
pub fn gpu_group_ids(etc_group: &str) -> Vec<u32> {
    let mut ids: Vec<u32> = etc_group
        .lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let gid = f.nth(1)?.parse().ok()?;
            ["video", "render"].contains(&name).then_some(gid)
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}
