//! The launcher's one-shot write probe: a work dir the container cannot write is an
//! infrastructure error before any probe. The probe first says it started, so an engine that
//! cannot start a container at all (a runtime refusing an rlimit, a broken storage driver) is
//! reported with the engine's own error, not as a permission problem of the work dir.

/// Printed by the write probe's shell: its presence proves the container started.
const STARTED: &str = "setrows-write-probe-started";

use super::*;

/// The launcher's one-shot write probe: `touch` in `$WORK` (mounted from `dir`).
pub fn write_probe_job(dir: &Path) -> ShellJob {
    ShellJob {
        script: format!(
            "echo {STARTED}; touch \"$WORK/.setrows-write-probe\" && rm -f \"$WORK/.setrows-write-probe\""
        ),
        src: dir.to_path_buf(),
        work: dir.to_path_buf(),
        cwd_is_work: true,
        env: Vec::new(),
        timeout: Some(Duration::from_secs(120)),
        name: format!(
            "setrows-write-probe-{}-{:x}",
            std::process::id(),
            rand_suffix()
        ),
        ccache: false,
        host_ccache_env: Vec::new(),
    }
}

impl ContainerLauncher {
    /// One `touch` in the image, with the same mounts and user as every step, on a directory
    /// under the work dir: a work dir the container cannot write (rootless uid mapping, SELinux
    /// labels, ownership) is one clear infrastructure error here, before any probe, instead of
    /// a run of build failures.
    pub(super) fn check_writable(&self, dir: &Path) -> Result<(), ContainerError> {
        let job = write_probe_job(dir);
        let cmd = self.command(&job);
        let log = dir.join(".setrows-write-probe.log");
        let out = crate::probe::exec::run(&cmd, job.timeout, &log, &|| self.cleanup(&job));
        let _ = std::fs::remove_file(&log);
        match out {
            Ok(r) if r.success() => Ok(()),
            Ok(r) if !r.output.contains(STARTED) => Err(ContainerError::StartFailed {
                engine: self.engine.kind.as_str(),
                image: self.spec.image.clone(),
                detail: r.output.trim().chars().take(600).collect(),
            }),
            Ok(r) => Err(ContainerError::WorkNotWritable {
                dir: dir.display().to_string(),
                image: self.spec.image.clone(),
                user: format!("{}:{}", self.spec.uid, self.spec.gid),
                detail: r.output.trim().chars().take(400).collect(),
            }),
            Err(e) => Err(ContainerError::Failed {
                engine: self.engine.kind.as_str(),
                action: "run the work-dir write probe".into(),
                detail: e.to_string(),
            }),
        }
    }
}
