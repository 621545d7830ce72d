//! Running one process tree with a timeout, its output captured to a log.
//!
//! Every step runs in its own process group so a timeout or Ctrl-C kills the whole tree (make,
//! compilers, the test and whatever it forked), not just `sh`. The groups alive right now are
//! registered so the interrupt handler can kill them before we exit: a killed bisect leaves no
//! orphan GPU job behind, and since results are only stored after a probe completes, re-running
//! the same command resumes cleanly.

use crate::probe::launch::Cmd;
mod disk;
mod redact;
pub use crate::probe::reaper::{become_subreaper, kill_strays_in, supervise, SUPERVISOR_ARG};
use crate::probe::reaper::{descendants, kill_tree, start_time};
use disk::check_free_space;
pub use disk::{disk_full, free_bytes, out_of_space, DEFAULT_MIN_FREE_MB};
use redact::redact_log;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How much of a step's output is kept in memory (for `--match`, classification and reports);
/// the whole output is always in the log file.
pub const OUTPUT_KEEP: u64 = 1 << 20;

/// Credentials the tool itself may hold (for `--post-to`) that the code under test must never see:
/// a probe runs arbitrary revisions of someone else's build scripts.
pub use crate::probe::secrets::SECRET_ENV;

/// Grace period between SIGTERM and SIGKILL on timeout.
const GRACE: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, PartialEq)]
pub struct RunResult {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub duration: Duration,
    /// The step's output (stdout and stderr interleaved), at most the last `OUTPUT_KEEP` bytes.
    pub output: String,
}

impl RunResult {
    pub fn success(&self) -> bool {
        !self.timed_out && self.exit_code == Some(0)
    }
}

static LIVE_GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// How often a watched step's log is read for new lines.
const WATCH_EVERY: Duration = Duration::from_millis(250);

/// Reads what a step appended to its log since `pos` and hands complete lines to the watcher
/// (`flush`: the step ended, so a last line without a newline counts too).
struct Tail<'a> {
    watch: &'a dyn Fn(&str),
    file: Option<File>,
    pending: Vec<u8>,
}

impl<'a> Tail<'a> {
    fn open(watch: Option<&'a dyn Fn(&str)>, log_path: &Path, from: u64) -> Option<Tail<'a>> {
        let watch = watch?;
        let mut file = File::open(log_path).ok()?;
        file.seek(SeekFrom::Start(from)).ok()?;
        Some(Tail {
            watch,
            file: Some(file),
            pending: Vec::new(),
        })
    }

    fn read(&mut self, flush: bool) {
        let watch = self.watch;
        if let Some(f) = &mut self.file {
            let mut buf = Vec::new();
            if f.read_to_end(&mut buf).is_err() {
                self.file = None;
            }
            self.pending.extend_from_slice(&buf);
        }
        // Ninja on a terminal ends its status lines with \r; in a log, with \n.
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n' || b == b'\r') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            watch(&String::from_utf8_lossy(&line[..line.len() - 1]));
        }
        // A line this long is no status line: drop it rather than hold it.
        if self.pending.len() > 64 * 1024 {
            self.pending.clear();
        }
        if flush && !self.pending.is_empty() {
            watch(&String::from_utf8_lossy(&std::mem::take(&mut self.pending)));
        }
    }
}

static INTERRUPT_HOOKS: Mutex<Vec<fn()>> = Mutex::new(Vec::new());

/// Set first thing by the interrupt handler: a step whose process group it killed must not come
/// back to the caller as the step's own outcome (a "crash" that could be stored as a result).
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Registers a function the interrupt handler runs before it kills the live process groups. A
/// container launcher stops its containers there: killing the `podman run` client does not stop
/// the container, which would otherwise keep the GPU busy after Ctrl-C. Register once.
pub fn on_interrupt(hook: fn()) {
    if let Ok(mut hooks) = INTERRUPT_HOOKS.lock() {
        hooks.push(hook);
    }
}

/// Installs the SIGINT/SIGTERM/SIGHUP handler that kills every live step's process group and
/// exits as interrupted (`Exit::Interrupted`). Idempotent; call once from each command that runs steps.
pub fn install_interrupt_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = ctrlc::set_handler(|| {
            INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
            // Hooks first: the engine removes its containers while their conmon is alive.
            // Killing the step trees first would also kill conmon (the supervisor is its
            // subreaper), leaving an exited container the engine cannot remove in time.
            if let Ok(hooks) = INTERRUPT_HOOKS.lock() {
                for hook in hooks.iter() {
                    hook();
                }
            }
            kill_live_groups(libc::SIGKILL);
            errln!("\nsetrows-bisect: interrupted; finished probes are stored, re-run the same command to resume");
            std::process::exit(crate::error::Exit::Interrupted.code());
        });
    });
}

fn kill_live_groups(sig: i32) {
    if let Ok(groups) = LIVE_GROUPS.lock() {
        for &pgid in groups.iter() {
            // The group leader is the step's supervisor (or its shell): everything descended
            // from it goes too, including what left the group with setsid.
            kill_tree(pgid, true);
            // SAFETY: kill(2) with a negative pid signals a process group; no memory involved.
            unsafe {
                libc::kill(-pgid, sig);
            }
        }
    }
}

fn kill_group(pgid: i32, sig: i32) {
    // SAFETY: as above.
    unsafe {
        libc::kill(-pgid, sig);
    }
}

/// The binary that supervises steps; set by `main` ([`use_supervisor`]). A library caller (unit
/// tests) runs steps directly, with only the process group and the parent-death signal.
static SUPERVISOR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Runs every step under `exe SUPERVISOR_ARG ...` from now on. `/proc/self/exe` is the right
/// value for the binary itself (still valid when the file was replaced since).
pub fn use_supervisor(exe: std::path::PathBuf) {
    let _ = SUPERVISOR.set(exe);
}

/// Where `program` is on this process's `PATH`, as `Command` would find it: the one lookup
/// for every tool the machinery asks about (ccache, ninja, cmake, hipconfig, the engine).
pub fn which(program: &str) -> Option<PathBuf> {
    which_in(&std::env::var_os("PATH")?, program)
}

fn which_in(path: &std::ffi::OsStr, program: &str) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Where a program would be found, as `Command` looks for it, so a missing one is an error of
/// ours before the supervisor starts (not an exit 127 that reads like a failing test).
fn check_startable(program: &str, cwd: &Path, env: &[(String, String)]) -> std::io::Result<()> {
    let missing = |what: String| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("cannot start `{program}` in {}: {what}", cwd.display()),
        )
    };
    if !cwd.is_dir() {
        return Err(missing("no such directory".into()));
    }
    if program.contains('/') {
        let p = if Path::new(program).is_absolute() {
            Path::new(program).to_path_buf()
        } else {
            cwd.join(program)
        };
        return if p.is_file() {
            Ok(())
        } else {
            Err(missing("no such file".into()))
        };
    }
    let path = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| std::ffi::OsString::from(v))
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_default();
    if which_in(&path, program).is_some() {
        Ok(())
    } else {
        Err(missing("not found in PATH".into()))
    }
}

/// Runs `cmd`, appending its output to `log_path`. `on_timeout` runs after the process group was
/// killed for exceeding `timeout` (a container launcher stops its container there).
///
/// Errors are failures to start or to log (infrastructure), never the step's own failure; so is
/// free space on the log's file system below the floor ([`DEFAULT_MIN_FREE_MB`]).
pub fn run(
    cmd: &Cmd,
    timeout: Option<Duration>,
    log_path: &Path,
    on_timeout: &dyn Fn(),
) -> std::io::Result<RunResult> {
    run_watched(cmd, timeout, log_path, on_timeout, None)
}

/// [`run`], with `watch` seeing each complete output line while the step runs (read back from
/// the log every 250 ms, before redaction: a watcher keeps nothing but what it parses, as the
/// build-progress watcher keeps only Ninja's `[n/N]`).
pub fn run_watched(
    cmd: &Cmd,
    timeout: Option<Duration>,
    log_path: &Path,
    on_timeout: &dyn Fn(),
    watch: Option<&dyn Fn(&str)>,
) -> std::io::Result<RunResult> {
    if let Some(parent) = log_path.parent() {
        std::fs::create_dir_all(parent)?;
        check_free_space(parent)?;
    }
    let mut log = OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .open(log_path)?;
    let start_offset = log.seek(SeekFrom::End(0))?;
    writeln!(log, "$ {}", crate::core::shell::line(&cmd.argv))?;
    let body_offset = log.stream_position()?;
    let (program, args) = cmd
        .argv
        .split_first()
        .ok_or_else(|| std::io::Error::other("empty command line"))?;
    let mut command = match SUPERVISOR.get() {
        Some(exe) => {
            check_startable(program, &cmd.cwd, &cmd.env)?;
            let base = Path::new(program)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let mode = if base == "podman" || base == "docker" {
                "keep"
            } else {
                "sweep"
            };
            let mut c = Command::new(exe);
            c.arg(SUPERVISOR_ARG).arg(mode).arg(program).args(args);
            c.stdin(Stdio::piped());
            c
        }
        None => {
            let mut c = Command::new(program);
            c.args(args).stdin(Stdio::null());
            // SAFETY: one async-signal-safe prctl between fork and exec.
            unsafe {
                c.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                    Ok(())
                });
            }
            c
        }
    };
    command
        .current_dir(&cmd.cwd)
        .envs(cmd.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    for secret in SECRET_ENV {
        command.env_remove(secret);
    }
    command.env_remove(crate::probe::secrets::CRED_FD_ENV);
    command
        .stdout(log.try_clone()?)
        .stderr(log.try_clone()?)
        .process_group(0);
    let started = Instant::now();
    let mut child = command.spawn().map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("cannot start `{program}` in {}: {e}", cmd.cwd.display()),
        )
    })?;
    // The supervisor's lifeline: closed when we exit, however we exit.
    let lifeline = child.stdin.take();
    let pgid = child.id() as i32;
    LIVE_GROUPS.lock().map(|mut g| g.push(pgid)).ok();
    let deadline = timeout.map(|t| started + t);
    let mut timed_out = false;
    let mut poll = Duration::from_millis(1);
    let mut tail = Tail::open(watch, log_path, body_offset);
    let mut read_at = started;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if let Some(t) = &mut tail {
            if read_at.elapsed() >= WATCH_EVERY {
                t.read(false);
                read_at = Instant::now();
            }
        }
        if deadline.is_some_and(|d| Instant::now() >= d) && !timed_out {
            timed_out = true;
            // Who is below the step now: a shell that dies of the SIGTERM hands its setsid'd
            // children to our reaper (or init, without a supervisor), out of the tree's reach.
            let below: Vec<(i32, Option<u64>)> = descendants(pgid)
                .into_iter()
                .map(|p| (p, start_time(p)))
                .collect();
            kill_group(pgid, libc::SIGTERM);
            let grace_end = Instant::now() + GRACE;
            while Instant::now() < grace_end {
                if child.try_wait()?.is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            // Everything below the step, whichever session it moved to, then the group.
            kill_tree(pgid, true);
            for (p, started) in below {
                // The same process, not a new one that reused its pid since.
                if started.is_some() && start_time(p) == started {
                    kill_tree(p, true);
                }
            }
            kill_group(pgid, libc::SIGKILL);
            break child.wait()?;
        }
        std::thread::sleep(poll);
        poll = (poll * 2).min(Duration::from_millis(25));
    };
    if INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
        // The handler killed this step and is about to exit the process (after stopping what the
        // step started elsewhere, e.g. its container): report nothing.
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    let duration = started.elapsed();
    if let Some(t) = &mut tail {
        t.read(true);
    }
    // Stragglers (daemons the step forked) do not outlive their step.
    kill_group(pgid, libc::SIGKILL);
    drop(lifeline);
    LIVE_GROUPS
        .lock()
        .map(|mut g| g.retain(|&p| p != pgid))
        .ok();
    if timed_out {
        on_timeout();
        writeln!(
            log,
            "[setrows-bisect: killed after {:.1}s timeout]",
            duration.as_secs_f64()
        )?;
    }
    let secrets = crate::probe::secrets::redactions();
    if !secrets.is_empty() {
        redact_log(&mut log, log_path, body_offset.max(start_offset), &secrets)?;
    }
    let output = read_tail(&mut log, body_offset.max(start_offset))?;
    Ok(RunResult {
        exit_code: status.code(),
        signal: status.signal(),
        timed_out,
        duration,
        output,
    })
}

fn read_tail(log: &mut File, from: u64) -> std::io::Result<String> {
    let end = log.seek(SeekFrom::End(0))?;
    let start = from.max(end.saturating_sub(OUTPUT_KEEP));
    log.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::with_capacity((end - start) as usize);
    log.take(end - start).read_to_end(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The last `max` bytes of `s` (from a character boundary): every prober's output tail.
pub(crate) fn tail_bytes(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    s[start..].to_string()
}

#[cfg(test)]
mod tests;
