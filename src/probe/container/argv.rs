//! The `podman run` / `docker run` argv of one step: pure, pinned by golden tests, because every
//! flag here is a decision about isolation (read-only source, no network, no privileges, the
//! caller's uid) or GPU access that a reviewer should see in one place.

use super::*;

/// Everything the run argv depends on, resolved once (pure input of `run_argv`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSpec {
    pub engine: EngineKind,
    pub program: String,
    pub image: String,
    pub gpu: GpuAccess,
    /// Host directory mounted at `/ccache`, one per (image, recipe).
    pub ccache_dir: PathBuf,
    pub uid: u32,
    pub gid: u32,
    /// Host gids owning `/dev/kfd` and `/dev/dri` (`video`, `render`), numeric because the
    /// image's /etc/group need not have those names.
    pub gpu_groups: Vec<u32>,
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
pub fn run_argv(spec: &RunSpec, job: &ShellJob) -> Vec<String> {
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
        "--volume".into(),
        format!("{}:{SRC_MOUNT}:ro", job.src.display()),
        "--volume".into(),
        format!("{}:{WORK_MOUNT}", job.work.display()),
        "--volume".into(),
        format!("{}:{CCACHE_MOUNT}", spec.ccache_dir.display()),
        "--workdir".into(),
        if job.cwd_is_work {
            WORK_MOUNT
        } else {
            SRC_MOUNT
        }
        .into(),
    ];
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
            for g in &spec.gpu_groups {
                a.push("--group-add".into());
                a.push(g.to_string());
            }
        }
        GpuAccess::Nvidia => match spec.engine {
            EngineKind::Docker => a.extend(["--gpus".into(), "all".into()]),
            EngineKind::Podman => a.extend(["--device".into(), "nvidia.com/gpu=all".into()]),
        },
    }
    let mut env = with_dirs(&job.env, SRC_MOUNT, WORK_MOUNT);
    env.push(("CCACHE_DIR".into(), CCACHE_MOUNT.into()));
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
