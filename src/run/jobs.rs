//! The effects behind `--jobs auto` (`core::jobs`): the host's cores, the build use measured on
//! this work dir (`<work>/build-use`), measuring a build, and the GPU's turns.
//!
//! A build's CPU use is read from `getrusage(RUSAGE_CHILDREN)` between the probe's `Build`
//! and `Test` phases: every process of the build has been waited for by then, and the
//! difference is their user + system time. The counter is per process, so a build is
//! measured only while it is the one probe running (a `--jobs 1` run, a wave of one); a
//! build whose CPU went elsewhere (a container engine's daemon runs it) or that did nothing
//! (an up-to-date tree) is not recorded.

use crate::core::jobs::{BuildUse, Choice, Jobs};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// `<work>/build-use`: the builds measured on this work dir, summed (JSON `BuildUse`).
pub fn use_file(work_dir: &Path) -> PathBuf {
    work_dir.join("build-use")
}

pub fn measured(work_dir: &Path) -> Option<BuildUse> {
    let text = std::fs::read_to_string(use_file(work_dir)).ok()?;
    serde_json::from_str(&text).ok()
}

pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// K for this run on this host, from what earlier runs on `work_dir` measured.
pub fn choose(jobs: Jobs, work_dir: &Path) -> Choice {
    crate::core::jobs::choose(jobs, cores(), measured(work_dir))
}

/// Adds one build to `<work>/build-use` (written whole through a rename, so a reader never
/// sees half a file; two runs adding at once may lose one build's figures, never corrupt it).
pub fn record(work_dir: &Path, cpu_s: f64, wall_s: f64) {
    let mut u = measured(work_dir).unwrap_or_default();
    u.add(cpu_s, wall_s);
    let path = use_file(work_dir);
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    if let Ok(text) = serde_json::to_string(&u) {
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(&tmp, &path);
        }
    }
}

/// Children's user + system CPU seconds of this process so far.
fn children_cpu_s() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Builds shorter than this did (almost) nothing: their use says nothing of a real build.
const MIN_WALL_S: f64 = 1.0;

/// Measures the builds of the probes of one process (`Probing::probe_taking_turns`).
#[derive(Default)]
pub struct Meter {
    running: AtomicUsize,
    started: AtomicUsize,
}

/// One probe's measurement in progress.
pub struct Measuring<'a> {
    meter: &'a Meter,
    at_build: Mutex<Option<(Instant, f64, usize)>>,
}

impl Meter {
    pub fn begin(&self) -> Measuring<'_> {
        self.running.fetch_add(1, Ordering::SeqCst);
        self.started.fetch_add(1, Ordering::SeqCst);
        Measuring {
            meter: self,
            at_build: Mutex::new(None),
        }
    }
}

impl Measuring<'_> {
    /// Whether this probe runs alone: no other began or is running since `gen`.
    fn alone(&self, gen: usize) -> bool {
        self.meter.running.load(Ordering::SeqCst) == 1
            && self.meter.started.load(Ordering::SeqCst) == gen
    }

    pub fn build_starts(&self) {
        let gen = self.meter.started.load(Ordering::SeqCst);
        if let Ok(mut a) = self.at_build.lock() {
            *a = self
                .alone(gen)
                .then(|| (Instant::now(), children_cpu_s(), gen));
        }
    }

    /// The build ended (the test starts): its (CPU s, wall s) when it ran alone and did work.
    /// `ours`: its processes are this process's descendants (`Prober::builds_here`). Where
    /// they are not (a container: the engine runs them), the counter saw only the client; that
    /// is known from the prober, not guessed from a low use, which a loaded host also shows.
    pub fn build_ended(&self, ours: bool) -> Option<(f64, f64)> {
        let (t0, cpu0, gen) = self.at_build.lock().ok()?.take()?;
        if !ours || !self.alone(gen) {
            return None;
        }
        let wall = t0.elapsed().as_secs_f64();
        let cpu = children_cpu_s() - cpu0;
        (wall >= MIN_WALL_S && cpu > 0.0).then_some((cpu, wall))
    }
}

impl Drop for Measuring<'_> {
    fn drop(&mut self) {
        self.meter.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The GPU's turn: `<work>/gpu.lock`, held with `flock` from a probe's test step to its end,
/// so concurrent probes (slots of one run, or two runs on one work dir) build at once and
/// test one at a time.
pub struct GpuTurn(#[allow(dead_code)] std::fs::File);

impl GpuTurn {
    pub fn lock_file(work_dir: &Path) -> PathBuf {
        work_dir.join("gpu.lock")
    }

    /// Waits for the turn. `None` when the lock cannot be made (an unwritable work dir was
    /// refused earlier; the test then runs unserialised rather than not at all).
    pub fn take(work_dir: &Path) -> Option<GpuTurn> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(Self::lock_file(work_dir))
            .ok()?;
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor we own; released when the file is closed.
        let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        (rc == 0).then_some(GpuTurn(f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_builds_sum_in_the_work_dir() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(measured(d.path()), None);
        record(d.path(), 30.0, 20.0);
        record(d.path(), 2.0, 4.0);
        let u = measured(d.path()).unwrap();
        assert_eq!(u.builds, 2);
        assert!((u.parallelism().unwrap() - 32.0 / 24.0).abs() < 1e-9);
    }

    #[test]
    fn a_build_is_measured_only_while_it_runs_alone() {
        let m = Meter::default();
        let a = m.begin();
        a.build_starts();
        let b = m.begin();
        // b began during a's build: a's figures would include b's processes.
        assert_eq!(a.build_ended(true), None);
        drop(b);
        b_is_gone_then_a_measures_again(&m, a);
    }

    fn b_is_gone_then_a_measures_again(m: &Meter, a: Measuring<'_>) {
        a.build_starts();
        assert!(a.at_build.lock().unwrap().is_some());
        drop(a);
        assert_eq!(m.running.load(Ordering::SeqCst), 0);
    }
}
