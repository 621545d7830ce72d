//! Where a probe's build caches its compiles, and its ccache stats log.
//!
//! The rule: a probe cannot change another run's outcome through ccache. Each run (one
//! process) writes only a cache of its own, made fresh under the temp dir and removed when the
//! run ends (`remove_run_caches`). Only the build step sees a cache; no step that runs a built
//! program, nor a script's test, does. In a container the shared cache of the engine and image
//! is mounted read-only under the run's own (ccache's read-only secondary storage), so its
//! entries serve every run and no step of any run can add to it. On the host a run's builds
//! neither read nor write the caller's own cache.
//!
//! The stats log (`CCACHE_STATSLOG`): a file of its own in the build dir, which every launcher
//! mounts, named after the run so concurrent slots never share one; read and removed after the
//! build (`core::ccache` counts it).

use crate::core::ccache::Ccache;
use crate::probe::launch::{Launcher, ShellJob};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

/// THE rule for whether a probe's builds go through ccache: in a container always (every image
/// carries it), on the host when ccache is on PATH. Recipes, build-dir keys, script probes and
/// plans ask here.
pub fn used(in_container: bool) -> bool {
    in_container || crate::probe::exec::which("ccache").is_some()
}

/// Where a container's build step sees the shared cache: read-only.
pub const SHARED_MOUNT: &str = "/ccache-shared";

/// The run's caches made so far, removed by `remove_run_caches`.
static MADE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// This run's own cache named `name` (one per engine and image, `host` on the host): a fresh
/// directory under `<temp dir>/setrows-ccache-<pid>-<start>-<n>/`, made on first use.
pub fn run_cache(name: &str) -> PathBuf {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    let root = ROOT.get_or_init(|| {
        // Ctrl-C ends the run through the interrupt handler, not through main's exit.
        crate::probe::exec::on_interrupt(remove_run_caches);
        let start = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        // Made here, never found: a directory someone prepared under this name is not used.
        let mut n = 0u32;
        loop {
            let dir = std::env::temp_dir().join(format!(
                "setrows-ccache-{}-{start:x}-{n}",
                std::process::id()
            ));
            if n > 100 || std::fs::create_dir(&dir).is_ok() {
                break dir;
            }
            n += 1;
        }
    });
    let dir = root.join(name);
    let _ = std::fs::create_dir_all(&dir);
    if let Ok(mut made) = MADE.lock() {
        if !made.contains(root) {
            made.push(root.clone());
        }
    }
    dir
}

/// Removes this run's own caches (at the end of the run; a killed run leaves its own under the
/// temp dir, which no later run reads).
pub fn remove_run_caches() {
    let made = MADE.lock().map(|mut m| std::mem::take(&mut *m));
    for root in made.unwrap_or_default() {
        let _ = std::fs::remove_dir_all(root);
    }
}

/// The environment of a build step on the host: this run's own cache, and no secondary
/// storage a user's ccache.conf may name (it would be written).
pub fn host_build_env() -> Vec<(String, String)> {
    vec![
        (
            "CCACHE_DIR".into(),
            run_cache("host").to_string_lossy().into_owned(),
        ),
        ("CCACHE_SECONDARY_STORAGE".into(), String::new()),
    ]
}

/// The shared cache layered read-only under the run's own: ccache 4.4+ reads it as secondary
/// storage and never writes it (`CCACHE_SECONDARY_STORAGE`; 4.8 renamed it remote storage and
/// keeps this name as an alias). `dir` is its path where the step runs.
pub fn read_only_layer(dir: &str) -> (String, String) {
    (
        "CCACHE_SECONDARY_STORAGE".into(),
        format!("file:{dir}|read-only"),
    )
}

/// The shared cache layered writable under the run's own: only for a run that fills it
/// (`FILL_VAR`).
pub fn writable_layer(dir: &str) -> (String, String) {
    ("CCACHE_SECONDARY_STORAGE".into(), format!("file:{dir}"))
}

/// The one way a run's build steps may add to the shared cache of a container's engine and
/// image: `SETROWS_CCACHE_FILL=1` in the run's environment, set by whoever trusts every
/// revision and script the run builds. Without it no step of the run can write that cache.
pub const FILL_VAR: &str = "SETROWS_CCACHE_FILL";

/// Whether this run fills the shared cache (`FILL_VAR` is `1`).
pub fn fills_shared() -> bool {
    std::env::var(FILL_VAR).is_ok_and(|v| v == "1")
}

pub struct StatsLog {
    host: PathBuf,
}

impl StatsLog {
    /// The log of build step `job` run through `launcher`, wired into the job (its
    /// environment, and the mark that it is the step that sees the run's cache); one left by a
    /// killed attempt of the same run is removed first, so it is never counted twice.
    pub fn for_step(launcher: &dyn Launcher, job: &mut ShellJob) -> StatsLog {
        let name = format!(".setrows-ccache-{}.log", job.name.replace('/', "-"));
        let host = job.work.join(&name);
        let _ = std::fs::remove_file(&host);
        let in_step = format!(
            "{}/{name}",
            launcher.work_in_step(job).trim_end_matches('/')
        );
        job.env.push(("CCACHE_STATSLOG".into(), in_step));
        job.ccache = true;
        job.host_ccache_env = host_build_env();
        StatsLog { host }
    }

    /// The counts, the file removed; `None` when ccache wrote nothing (no compile went through
    /// it, or it was not there).
    pub fn take(self) -> Option<Ccache> {
        let bytes = std::fs::read(&self.host).ok();
        let _ = std::fs::remove_file(&self.host);
        bytes.map(|b| Ccache::from_stats_log(&String::from_utf8_lossy(&b)))
    }
}
