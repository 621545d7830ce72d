//! Running probe steps inside a container image (podman or docker), as a `launch::Launcher`.
//!
//! The launcher only builds argv: `exec` runs the client, applies the timeout and captures the
//! log, exactly as on the host. What is container-specific lives here:
//! - the run arguments (read-only source, persistent build and ccache directories, the caller's
//!   uid/gid, no network, no privileged mode, GPU devices by backend), pinned by golden tests;
//! - stopping the container by name after a timeout, because killing the `podman run` client
//!   leaves the container (owned by conmon or dockerd) running;
//! - telling the machinery's failures (engine missing, daemon down, image missing, full disk)
//!   apart from the test's own, so they become `InfraError` and never a verdict;
//! - provenance: image digest, compiler and GPU as seen from inside the image.
//!
//! Nothing is ever pulled during a run (`--pull never`): a missing image is an infrastructure
//! error found before the first probe, not a silent download in the middle of a bisection.

mod argv;
mod write_probe;
pub use write_probe::write_probe_job;
mod live;
pub use live::stop_live_containers;
use live::{force_remove, remember};
mod engine_errors;
pub use crate::probe::launch::parse_provenance;
/// Facts printed from inside the image: the same script as on the host.
use crate::probe::launch::ENVIRONMENT_SCRIPT as PROVENANCE_SCRIPT;
pub use argv::*;
pub use engine_errors::engine_failure;

use crate::probe::launch::{with_dirs, Cmd, Launcher, ShellJob};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// Where the job's directories appear inside the container.
pub const SRC_MOUNT: &str = "/src";
pub const WORK_MOUNT: &str = "/work";
pub const CCACHE_MOUNT: &str = "/ccache";
pub use crate::probe::ccache::SHARED_MOUNT;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    Podman,
    Docker,
}

impl EngineKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Podman => "podman",
            EngineKind::Docker => "docker",
        }
    }
}

/// `--engine`: which engine runs probes; `none` runs them on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum EngineChoice {
    /// podman if it works, else docker if its daemon answers.
    #[default]
    Auto,
    Podman,
    Docker,
    None,
}

/// Which GPU the container must see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuAccess {
    None,
    /// `/dev/kfd`, `/dev/dri` and the groups that own them (HIP).
    Amd,
    /// `--gpus all` (docker) or the CDI device `nvidia.com/gpu=all` (podman).
    Nvidia,
}

impl From<crate::core::build::Backend> for GpuAccess {
    fn from(b: crate::core::build::Backend) -> Self {
        match b {
            crate::core::build::Backend::Hip => GpuAccess::Amd,
            crate::core::build::Backend::Cuda => GpuAccess::Nvidia,
            crate::core::build::Backend::Cpu => GpuAccess::None,
        }
    }
}

/// Failures of the container machinery. All are infrastructure errors (exit 3, retried).
#[derive(Debug, thiserror::Error)]
pub enum ContainerError {
    #[error("container engine `{0}` is not on PATH (install it, or pass --engine none to run on the host)")]
    EngineMissing(&'static str),
    #[error("no usable container engine: {0} (install podman, start the docker daemon, or pass --engine none)")]
    NoEngine(String),
    #[error("`{engine}` does not answer (is the daemon running?): {detail}")]
    EngineDown {
        engine: &'static str,
        detail: String,
    },
    #[error("image `{image}` is not present in {engine}; build it first (see containers/README.md), nothing is pulled during a run")]
    ImageMissing { engine: &'static str, image: String },
    /// The engine ran but no container came up (the shell inside never printed a line).
    #[error("`{engine}` could not start a container from {image}: {detail} (the engine or its runtime refused; check its configuration, e.g. CONTAINERS_CONF, runtime and ulimits)")]
    StartFailed {
        engine: &'static str,
        image: String,
        detail: String,
    },
    #[error("the work dir {dir} is not writable inside {image} as {user}: {detail} (rootless podman maps the caller's uid with --userns=keep-id; on SELinux hosts label=disable is used; check the directory's owner and mode)")]
    WorkNotWritable {
        dir: String,
        image: String,
        user: String,
        detail: String,
    },
    #[error("`{engine} {action}` failed: {detail}")]
    Failed {
        engine: &'static str,
        action: String,
        detail: String,
    },
}

/// A container engine binary that answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Engine {
    pub kind: EngineKind,
    pub program: PathBuf,
}

/// The engine's own checks must not hang a run forever (a wedged daemon).
const ENGINE_QUERY_TIMEOUT: Duration = Duration::from_secs(60);

impl Engine {
    /// Resolves `--engine`. `Ok(None)` means run on the host.
    pub fn detect(choice: EngineChoice) -> Result<Option<Engine>, ContainerError> {
        let want = |kind: EngineKind| -> Result<Engine, ContainerError> {
            let program = crate::probe::exec::which(kind.as_str())
                .ok_or(ContainerError::EngineMissing(kind.as_str()))?;
            let e = Engine { kind, program };
            e.check()?;
            Ok(e)
        };
        match choice {
            EngineChoice::None => Ok(None),
            EngineChoice::Podman => want(EngineKind::Podman).map(Some),
            EngineChoice::Docker => want(EngineKind::Docker).map(Some),
            EngineChoice::Auto => match want(EngineKind::Podman) {
                Ok(e) => Ok(Some(e)),
                Err(pe) => want(EngineKind::Docker)
                    .map(Some)
                    .map_err(|de| ContainerError::NoEngine(format!("{pe}; {de}"))),
            },
        }
    }

    /// The engine answers (for docker: the daemon is up).
    pub fn check(&self) -> Result<(), ContainerError> {
        let out = self.query(&["version", "--format", "{{.Server.Version}}"], "version")?;
        if out.status_ok {
            Ok(())
        } else {
            Err(ContainerError::EngineDown {
                engine: self.kind.as_str(),
                detail: out.text,
            })
        }
    }

    /// The image's digest (or image id for local images that have none), proving it is present.
    pub fn image_digest(&self, image: &str) -> Result<String, ContainerError> {
        let fmt = match self.kind {
            EngineKind::Podman => "{{.Digest}} {{.Id}}",
            EngineKind::Docker => "{{join .RepoDigests \",\"}} {{.Id}}",
        };
        let out = self.query(
            &["image", "inspect", "--format", fmt, image],
            "image inspect",
        )?;
        if !out.status_ok {
            let lower = out.text.to_lowercase();
            if lower.contains("no such image")
                || lower.contains("image not known")
                || lower.contains("no such object")
            {
                return Err(ContainerError::ImageMissing {
                    engine: self.kind.as_str(),
                    image: image.into(),
                });
            }
            return Err(ContainerError::Failed {
                engine: self.kind.as_str(),
                action: format!("image inspect {image}"),
                detail: out.text,
            });
        }
        Ok(pick_digest(&out.text))
    }

    /// Whether a container of this name exists (running or not).
    pub fn container_exists(&self, name: &str) -> Result<bool, ContainerError> {
        let out = self.query(
            &[
                "ps",
                "-a",
                "--filter",
                &format!("name=^{name}$"),
                "--format",
                "{{.Names}}",
            ],
            "ps",
        )?;
        if !out.status_ok {
            return Err(ContainerError::Failed {
                engine: self.kind.as_str(),
                action: "ps".into(),
                detail: out.text,
            });
        }
        Ok(out.text.lines().any(|l| l.trim() == name))
    }

    fn query(&self, args: &[&str], action: &str) -> Result<QueryOut, ContainerError> {
        let fail = |detail: String| ContainerError::Failed {
            engine: self.kind.as_str(),
            action: action.into(),
            detail,
        };
        let mut child = Command::new(&self.program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| fail(format!("cannot start {}: {e}", self.program.display())))?;
        let deadline = std::time::Instant::now() + ENGINE_QUERY_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if std::time::Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(ContainerError::EngineDown {
                        engine: self.kind.as_str(),
                        detail: format!(
                            "`{action}` did not answer within {ENGINE_QUERY_TIMEOUT:?}"
                        ),
                    });
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => return Err(fail(e.to_string())),
            }
        }
        let out = child.wait_with_output().map_err(|e| fail(e.to_string()))?;
        let mut text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if !out.status.success() && !err.is_empty() {
            text = if text.is_empty() {
                err
            } else {
                format!("{text}\n{err}")
            };
        }
        Ok(QueryOut {
            status_ok: out.status.success(),
            text,
        })
    }
}

struct QueryOut {
    status_ok: bool,
    text: String,
}

/// `sha256:...` repo digest if there is one, else the image id (local builds have no digest).
pub fn pick_digest(text: &str) -> String {
    let mut parts = text.split_whitespace();
    let first = parts.next().unwrap_or("");
    let digest = first.split(',').next().unwrap_or("");
    let digest = digest.rsplit('@').next().unwrap_or(digest);
    if digest.starts_with("sha256:") {
        return digest.to_string();
    }
    let id = parts.next().unwrap_or(first);
    if id.starts_with("sha256:") || id.is_empty() {
        id.to_string()
    } else {
        format!("sha256:{id}")
    }
}

/// `path` made absolute against the current directory (without resolving links); unchanged
/// when the current directory cannot be read.
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Runs steps in one image. Construction checks the engine and the image, so a run that starts
/// has what it needs; what can still fail later is recognised by `infra_failure`.
#[derive(Debug)]
pub struct ContainerLauncher {
    spec: ContainerSpec,
    engine: Engine,
    digest: String,
    provenance: OnceLock<BTreeMap<String, String>>,
}

impl ContainerLauncher {
    pub fn new(
        engine: Engine,
        image: &str,
        gpu: GpuAccess,
        ccache_dir: &Path,
    ) -> Result<ContainerLauncher, ContainerError> {
        engine.check()?;
        let digest = engine.image_digest(image)?;
        // A relative host path in `--volume` would name a *volume*, not a directory.
        let ccache_dir = &absolute(ccache_dir);
        std::fs::create_dir_all(ccache_dir).map_err(|e| ContainerError::Failed {
            engine: engine.kind.as_str(),
            action: format!("create ccache dir {}", ccache_dir.display()),
            detail: e.to_string(),
        })?;
        // A missing `--device /dev/kfd` stops the engine starting any step, the build included;
        // the build needs no GPU, and the test is refused before it runs (`probe::device`).
        let no_kfd = !Path::new(crate::probe::device::AMD_KFD).exists();
        let gpu = if gpu == GpuAccess::Amd && no_kfd {
            GpuAccess::None
        } else {
            gpu
        };
        let gpu_groups = if gpu == GpuAccess::Amd {
            host_gpu_group_ids()
        } else {
            Vec::new()
        };
        // SAFETY: getuid/getgid cannot fail and touch no memory.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let (rootless, selinux) = ContainerSpec::host_security(engine.kind, uid);
        // This run's own cache for this engine and image (`probe::ccache`): the build step
        // writes it; the shared one is read-only to every step.
        let run_ccache_dir = crate::probe::ccache::run_cache(
            &ccache_dir
                .file_name()
                .map_or("shared".into(), |n| n.to_string_lossy().into_owned()),
        );
        let launcher = ContainerLauncher {
            spec: ContainerSpec {
                engine: engine.kind,
                program: engine.program.display().to_string(),
                image: image.into(),
                gpu,
                ccache_dir: ccache_dir.to_path_buf(),
                run_ccache_dir: run_ccache_dir.clone(),
                fills_shared_ccache: crate::probe::ccache::fills_shared(),
                uid,
                gid,
                gpu_groups,
                rootless,
                selinux,
            },
            engine,
            digest,
            provenance: OnceLock::new(),
        };
        launcher.check_writable(&run_ccache_dir)?;
        if launcher.spec.fills_shared_ccache {
            launcher.check_writable(ccache_dir)?;
        }
        Ok(launcher)
    }

    pub fn image(&self) -> &str {
        &self.spec.image
    }

    pub fn digest(&self) -> &str {
        &self.digest
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    fn collect_provenance(&self) -> BTreeMap<String, String> {
        let mut p = BTreeMap::new();
        p.insert("engine".into(), self.engine.kind.as_str().into());
        p.insert("image".into(), self.spec.image.clone());
        p.insert("image_digest".into(), self.digest.clone());
        let Ok(dir) = tempfile::tempdir() else {
            return p;
        };
        let job = ShellJob {
            script: PROVENANCE_SCRIPT.into(),
            src: dir.path().to_path_buf(),
            work: dir.path().to_path_buf(),
            cwd_is_work: true,
            env: Vec::new(),
            timeout: Some(ENGINE_QUERY_TIMEOUT),
            name: format!(
                "setrows-provenance-{}-{}",
                std::process::id(),
                rand_suffix()
            ),
            ccache: false,
            host_ccache_env: Vec::new(),
        };
        let cmd = self.command(&job);
        let log = dir.path().join("provenance.log");
        match crate::probe::exec::run(&cmd, job.timeout, &log, &|| self.cleanup(&job)) {
            Ok(r) if r.success() => p.extend(parse_provenance(&r.output)),
            Ok(r) => {
                p.insert(
                    "provenance_error".into(),
                    r.output.lines().last().unwrap_or("").to_string(),
                );
            }
            Err(e) => {
                p.insert("provenance_error".into(), e.to_string());
            }
        }
        p
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() % 1_000_000_007)
        .unwrap_or(0)
}

impl Launcher for ContainerLauncher {
    fn identity(&self) -> String {
        format!(
            "{}:{}@{}",
            self.engine.kind.as_str(),
            self.spec.image,
            self.digest
        )
    }

    fn command(&self, job: &ShellJob) -> Cmd {
        let mut job = job.clone();
        job.src = absolute(&job.src);
        job.work = absolute(&job.work);
        let job = &job;
        remember(&self.engine.program, container_name(&job.name));
        Cmd {
            argv: run_argv(&self.spec, job),
            cwd: job.work.clone(),
            env: Vec::new(),
        }
    }

    fn work_in_step(&self, _job: &ShellJob) -> String {
        WORK_MOUNT.into()
    }

    fn cleanup(&self, job: &ShellJob) {
        force_remove(&self.engine.program, &container_name(&job.name));
    }

    fn provenance(&self) -> BTreeMap<String, String> {
        self.provenance
            .get_or_init(|| self.collect_provenance())
            .clone()
    }

    fn infra_failure(&self, exit_code: Option<i32>, output: &str) -> Option<String> {
        engine_failure(self.engine.kind, exit_code, output)
    }
}
