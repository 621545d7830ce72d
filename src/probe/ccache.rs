//! One probe's ccache stats log (`CCACHE_STATSLOG`): a file of its own in the build dir, which
//! every launcher mounts, named after the run so concurrent slots never share one; read and
//! removed after the build (`core::ccache` counts it).

use crate::core::ccache::Ccache;
use crate::probe::launch::{Launcher, ShellJob};
use std::path::PathBuf;

/// THE rule for whether a probe's builds go through ccache: in a container always (every image
/// carries it; the launcher mounts one cache per engine and image), on the host when ccache is
/// on PATH (the caller's own cache). Recipes, build-dir keys, script probes and plans ask here.
pub fn used(in_container: bool) -> bool {
    in_container || crate::probe::exec::which("ccache").is_some()
}

pub struct StatsLog {
    host: PathBuf,
    in_step: String,
}

impl StatsLog {
    /// The log of build step `job` run through `launcher`; one left by a killed attempt of the
    /// same run is removed first, so it is never counted twice.
    pub fn for_step(launcher: &dyn Launcher, job: &ShellJob) -> StatsLog {
        let name = format!(".setrows-ccache-{}.log", job.name.replace('/', "-"));
        let host = job.work.join(&name);
        let _ = std::fs::remove_file(&host);
        let in_step = format!(
            "{}/{name}",
            launcher.work_in_step(job).trim_end_matches('/')
        );
        StatsLog { host, in_step }
    }

    pub fn env(&self) -> (String, String) {
        ("CCACHE_STATSLOG".into(), self.in_step.clone())
    }

    /// The counts, the file removed; `None` when ccache wrote nothing (no compile went through
    /// it, or it was not there).
    pub fn take(self) -> Option<Ccache> {
        let bytes = std::fs::read(&self.host).ok();
        let _ = std::fs::remove_file(&self.host);
        bytes.map(|b| Ccache::from_stats_log(&String::from_utf8_lossy(&b)))
    }
}
