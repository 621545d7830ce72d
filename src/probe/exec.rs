//! Running one process tree with a timeout, its output captured to a log.
//!
//! Every step runs in its own process group so a timeout or Ctrl-C kills the whole tree (make,
//! compilers, the test and whatever it forked), not just `sh`. The groups alive right now are
//! registered so the interrupt handler can kill them before we exit: a killed bisect leaves no
//! orphan GPU job behind, and since results are only stored after a probe completes, re-running
//! the same command resumes cleanly.

use crate::probe::launch::Cmd;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How much of a step's output is kept in memory (for `--match`, classification and reports);
/// the whole output is always in the log file.
pub const OUTPUT_KEEP: u64 = 1 << 20;

/// Credentials the tool itself may hold (for `--post-to`) that the code under test must never see:
/// a probe runs arbitrary revisions of someone else's build scripts.
pub use crate::secrets::SECRET_ENV;

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

static INTERRUPT_HOOKS: Mutex<Vec<fn()>> = Mutex::new(Vec::new());

/// Set first thing by the interrupt handler: a step whose process group it killed must not come
/// back to the caller as the step's own outcome (a "crash" that could be stored as a result).
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Registers a function the interrupt handler runs after killing the live process groups. A
/// container launcher stops its containers there: killing the `podman run` client does not stop
/// the container, which would otherwise keep the GPU busy after Ctrl-C. Register once.
pub fn on_interrupt(hook: fn()) {
    if let Ok(mut hooks) = INTERRUPT_HOOKS.lock() {
        hooks.push(hook);
    }
}

/// Installs the SIGINT/SIGTERM/SIGHUP handler that kills every live step's process group and
/// exits with 130. Idempotent; call once from each command that runs steps.
pub fn install_interrupt_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = ctrlc::set_handler(|| {
            INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
            kill_live_groups(libc::SIGKILL);
            if let Ok(hooks) = INTERRUPT_HOOKS.lock() {
                for hook in hooks.iter() {
                    hook();
                }
            }
            eprintln!("\nsetrows-bisect: interrupted; finished probes are stored, re-run the same command to resume");
            std::process::exit(130);
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

/// The argument that makes the binary a step supervisor (see [`supervise`]); never a user flag.
pub const SUPERVISOR_ARG: &str = "__setrows-step-supervisor";

/// The binary that supervises steps; set by `main` ([`use_supervisor`]). A library caller (unit
/// tests) runs steps directly, with only the process group and the parent-death signal.
static SUPERVISOR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Runs every step under `exe SUPERVISOR_ARG ...` from now on. `/proc/self/exe` is the right
/// value for the binary itself (still valid when the file was replaced since).
pub fn use_supervisor(exe: std::path::PathBuf) {
    let _ = SUPERVISOR.set(exe);
}

/// Makes this process the reaper of every orphan below it, so a descendant that double-forks or
/// `setsid`s away stays findable from here (and is not handed to init).
pub fn become_subreaper() {
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// The parent of every process, from `/proc/*/stat`.
fn parents() -> Vec<(i32, i32)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": comm may contain anything, so split after its last ')'.
        let ppid = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().nth(1))
            .and_then(|p| p.parse::<i32>().ok());
        if let Some(ppid) = ppid {
            out.push((pid, ppid));
        }
    }
    out
}

/// When `pid` started (clock ticks since boot), to tell it from a later process with its pid.
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let i = stat.rfind(')')?;
    // Fields after comm start at 3 (state); starttime is field 22.
    stat[i + 1..].split_whitespace().nth(19)?.parse().ok()
}

/// Every process descended from `root` (not `root` itself).
pub fn descendants(root: i32) -> Vec<i32> {
    let all = parents();
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for &(pid, ppid) in &all {
            if ppid == p && pid != root && !out.contains(&pid) {
                out.push(pid);
                frontier.push(pid);
            }
        }
    }
    out
}

/// SIGKILLs every descendant of `root` (and `root` when `include_root`), whatever session or
/// group they moved to. Each one found is stopped first, then the tree is walked again, until
/// nothing new appears: a process cannot fork a new one past the walk.
pub fn kill_tree(root: i32, include_root: bool) {
    let me = std::process::id() as i32;
    let mut stopped: Vec<i32> = Vec::new();
    let stop = |p: i32, stopped: &mut Vec<i32>| {
        if p != me && p > 1 {
            // SAFETY: kill(2) on a pid; no memory involved.
            unsafe {
                libc::kill(p, libc::SIGSTOP);
            }
            stopped.push(p);
        }
    };
    if include_root {
        stop(root, &mut stopped);
    }
    for _ in 0..64 {
        let new: Vec<i32> = descendants(root)
            .into_iter()
            .filter(|p| !stopped.contains(p))
            .collect();
        if new.is_empty() {
            break;
        }
        for p in new {
            stop(p, &mut stopped);
        }
    }
    for p in stopped {
        // SAFETY: as above.
        unsafe {
            libc::kill(p, libc::SIGKILL);
        }
    }
}

/// Kills every process whose working directory is inside `dir` (a slot's checkout or build
/// dir), with all its descendants; returns how many were found. For the run loop to call after
/// taking a slot whose previous holder died (SIGKILL, power loss of a container host): a step
/// that outlived it must not race the resumed run in the same checkout.
pub fn kill_strays_in(dir: &Path) -> usize {
    let Ok(dir) = dir.canonicalize() else {
        return 0;
    };
    let me = std::process::id() as i32;
    let mut found = 0;
    for (pid, _) in parents() {
        if pid == me {
            continue;
        }
        let Ok(cwd) = std::fs::read_link(format!("/proc/{pid}/cwd")) else {
            continue;
        };
        if cwd.starts_with(&dir) {
            found += 1;
            kill_tree(pid, true);
        }
    }
    found
}

/// Free space under this floor (MiB; `SETROWS_MIN_FREE_MB` overrides) stops a step before it
/// starts: a build that runs out of space fails for no reason of its own.
pub const DEFAULT_MIN_FREE_MB: u64 = 1024;

fn min_free_bytes() -> u64 {
    std::env::var("SETROWS_MIN_FREE_MB")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(DEFAULT_MIN_FREE_MB)
        .saturating_mul(1 << 20)
}

/// Bytes an unprivileged process can still write on the file system of `dir`.
pub fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other("path with a NUL byte"))?;
    // SAFETY: statvfs fills the zeroed struct we pass; the path is a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

fn check_free_space(dir: &Path) -> std::io::Result<()> {
    let floor = min_free_bytes();
    if floor == 0 {
        return Ok(());
    }
    let free = free_bytes(dir)?;
    if free < floor {
        return Err(std::io::Error::other(format!(
            "disk full: only {} MiB free on {} (the floor is {} MiB; SETROWS_MIN_FREE_MB overrides)",
            free >> 20,
            dir.display(),
            floor >> 20
        )));
    }
    Ok(())
}

/// A full disk fails a build or a test without saying anything about the code under test. One
/// rule for every launcher (the host and containers).
pub fn disk_full(output: &str) -> bool {
    output.to_lowercase().contains("no space left on device")
}

/// Why a finished step says nothing about the code under test, as far as the step's own output
/// tells (a launcher adds its engine's failures): today, the disk ran out of space.
pub fn out_of_space(r: &RunResult) -> Option<String> {
    disk_full(&r.output).then(|| "disk full: no space left on device".to_string())
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
    if std::env::split_paths(&path).any(|d| d.join(program).is_file()) {
        Ok(())
    } else {
        Err(missing("not found in PATH".into()))
    }
}

/// The step supervisor: `setrows-bisect SUPERVISOR_ARG MODE PROGRAM ARGS...`, the step's group
/// leader. It is a child subreaper (whatever the step double-forks or `setsid`s stays below it),
/// starts PROGRAM with a parent-death SIGKILL, ignores SIGTERM (a timeout's SIGTERM is for the
/// step; it stays to clean up), and exits as PROGRAM did. It kills the whole tree below it when
///
/// - its stdin reaches EOF: the tool holds the other end, so the tool died (even by SIGKILL);
/// - PROGRAM has exited, in MODE `sweep`: daemons a step forked do not outlive it. MODE `keep`
///   (a container engine client, whose `conmon` finishes the container's removal after the
///   client exits) leaves them.
pub fn supervise(args: &[std::ffi::OsString]) -> ! {
    let code = supervise_inner(args).unwrap_or_else(|e| {
        eprintln!("setrows-bisect: step supervisor: {e}");
        127
    });
    std::process::exit(code)
}

fn supervise_inner(args: &[std::ffi::OsString]) -> std::io::Result<i32> {
    let (mode, argv) = args
        .split_first()
        .ok_or_else(|| std::io::Error::other("no mode"))?;
    let sweep = mode != "keep";
    let (program, rest) = argv
        .split_first()
        .ok_or_else(|| std::io::Error::other("no command"))?;
    become_subreaper();
    let me = std::process::id() as i32;
    let mut command = Command::new(program);
    command.args(rest).stdin(Stdio::null());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            if libc::getppid() != me {
                libc::_exit(137);
            }
            Ok(())
        });
    }
    let mut child = command.spawn()?;
    // SAFETY: setting dispositions to SIG_IGN; the step was started with the defaults.
    unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
    }
    std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        let mut stdin = std::io::stdin().lock();
        loop {
            match stdin.read(&mut buf) {
                Ok(0) => break,
                Err(e) if e.kind() != std::io::ErrorKind::Interrupted => break,
                _ => {}
            }
        }
        kill_tree(me, false);
        // SAFETY: leaving at once; nothing of ours to flush.
        unsafe { libc::_exit(137) }
    });
    let status = child.wait()?;
    if sweep {
        kill_tree(me, false);
    }
    // Reap what was killed (we are their reaper now).
    // SAFETY: waitpid on any child, non-blocking.
    while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
    match (status.code(), status.signal()) {
        (Some(c), _) => Ok(c),
        (None, Some(sig)) => {
            // Die the same way, so the tool sees the signal; without a core file of our own.
            // SAFETY: plain libc calls on our own process.
            unsafe {
                let zero = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                libc::setrlimit(libc::RLIMIT_CORE, &zero);
                libc::signal(sig, libc::SIG_DFL);
                libc::kill(libc::getpid(), sig);
            }
            Ok(128 + sig)
        }
        _ => Ok(127),
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
    writeln!(log, "$ {}", shell_words(&cmd.argv))?;
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
    command.env_remove(crate::secrets::CRED_FD_ENV);
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
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
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
    let secrets = crate::secrets::redactions();
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

fn find_bytes(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

fn replace_bytes(buf: &[u8], secrets: &[String]) -> Vec<u8> {
    let mut cur = buf.to_vec();
    for s in secrets {
        let needle = s.as_bytes();
        if find_bytes(&cur, needle).is_none() {
            continue;
        }
        let mut out = Vec::with_capacity(cur.len());
        let mut i = 0;
        while let Some(at) = find_bytes(&cur[i..], needle) {
            out.extend_from_slice(&cur[i..i + at]);
            out.extend_from_slice(crate::secrets::REDACTED.as_bytes());
            i += at + needle.len();
        }
        out.extend_from_slice(&cur[i..]);
        cur = out;
    }
    cur
}

/// Replaces every credential value in the log from `from` on by `[REDACTED]`: the one point where
/// a step's text enters the tool (the output kept in memory is read back from here), so no
/// report, store entry, comment or message can carry one. Streams, so a huge log costs no memory.
fn redact_log(
    log: &mut File,
    log_path: &Path,
    from: u64,
    secrets: &[String],
) -> std::io::Result<()> {
    const CHUNK: usize = 1 << 20;
    let keep = secrets.iter().map(String::len).max().unwrap_or(1) - 1;
    let scan = |log: &mut File, mut sink: Option<&mut File>| -> std::io::Result<bool> {
        log.seek(SeekFrom::Start(from))?;
        let mut carry: Vec<u8> = Vec::new();
        let mut chunk = vec![0u8; CHUNK];
        let mut found = false;
        loop {
            let n = log.read(&mut chunk)?;
            let eof = n == 0;
            carry.extend_from_slice(&chunk[..n]);
            let hit = secrets
                .iter()
                .any(|s| find_bytes(&carry, s.as_bytes()).is_some());
            found |= hit;
            let replaced = if hit {
                replace_bytes(&carry, secrets)
            } else {
                carry
            };
            let cut = if eof {
                replaced.len()
            } else {
                replaced.len().saturating_sub(keep)
            };
            if let Some(out) = sink.as_deref_mut() {
                out.write_all(&replaced[..cut])?;
            }
            carry = replaced[cut..].to_vec();
            if eof {
                return Ok(found);
            }
        }
    };
    if !scan(log, None)? {
        return Ok(());
    }
    let dir = log_path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::tempfile_in(dir)?;
    scan(log, Some(&mut tmp))?;
    log.set_len(from)?;
    tmp.seek(SeekFrom::Start(0))?;
    std::io::copy(&mut tmp, log)?;
    Ok(())
}

fn read_tail(log: &mut File, from: u64) -> std::io::Result<String> {
    let end = log.seek(SeekFrom::End(0))?;
    let start = from.max(end.saturating_sub(OUTPUT_KEEP));
    log.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::with_capacity((end - start) as usize);
    log.take(end - start).read_to_end(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

pub use crate::core::build::{shell_quote, shell_words};

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn sh(script: &str, dir: &Path) -> Cmd {
        Cmd {
            argv: vec!["sh".into(), "-c".into(), script.into()],
            cwd: dir.to_path_buf(),
            env: vec![("PROBE_VAR".into(), "42".into())],
        }
    }

    #[test]
    fn exit_codes_signals_and_output() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("logs/a.log");
        let r = run(
            &sh("echo out; echo err >&2; exit 3", d.path()),
            None,
            &log,
            &|| {},
        )
        .unwrap();
        assert_eq!((r.exit_code, r.signal, r.timed_out), (Some(3), None, false));
        assert!(
            r.output.contains("out\n") && r.output.contains("err\n"),
            "{}",
            r.output
        );
        let r = run(
            &sh("echo $PROBE_VAR; kill -SEGV $$", d.path()),
            None,
            &log,
            &|| {},
        )
        .unwrap();
        assert_eq!((r.exit_code, r.signal), (None, Some(libc::SIGSEGV)));
        assert_eq!(r.output.trim(), "42", "only this step's output");
        let whole = std::fs::read_to_string(&log).unwrap();
        assert!(
            whole.contains("out") && whole.contains("42"),
            "log keeps everything"
        );
    }

    #[test]
    fn timeout_kills_the_whole_tree() {
        let d = tempfile::tempdir().unwrap();
        let marker = d.path().join("survivor");
        let script = format!("(sleep 3; touch {}) & sleep 30", marker.display());
        let called = Cell::new(false);
        let r = run(
            &sh(&script, d.path()),
            Some(Duration::from_millis(200)),
            &d.path().join("t.log"),
            &|| called.set(true),
        )
        .unwrap();
        assert!(r.timed_out && called.get());
        std::thread::sleep(Duration::from_millis(3500));
        assert!(!marker.exists(), "a grandchild survived the timeout");
    }

    #[test]
    fn missing_program_is_an_error_not_a_result() {
        let d = tempfile::tempdir().unwrap();
        let cmd = Cmd {
            argv: vec!["/nonexistent/prog".into()],
            cwd: d.path().into(),
            env: vec![],
        };
        let err = run(&cmd, None, &d.path().join("x.log"), &|| {}).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/prog"));
    }

    #[test]
    fn tokens_never_reach_the_step() {
        let d = tempfile::tempdir().unwrap();
        let mut cmd = sh(
            "echo \"[${GITHUB_TOKEN:-unset}] [${GH_TOKEN:-unset}] [$PROBE_VAR]\"",
            d.path(),
        );
        // Even a caller that forwards them explicitly cannot leak them into the probe.
        cmd.env.push(("GH_TOKEN".into(), "ghp_explicit".into()));
        std::env::set_var("GITHUB_TOKEN", "ghp_inherited");
        let r = run(&cmd, None, &d.path().join("s.log"), &|| {}).unwrap();
        std::env::remove_var("GITHUB_TOKEN");
        assert_eq!(r.output.trim(), "[unset] [unset] [42]");
    }

    #[test]
    fn credentials_in_step_output_are_redacted_in_the_output_and_the_log() {
        let d = tempfile::tempdir().unwrap();
        let secret = "ghp_redact_me_0123456789";
        crate::secrets::register_redaction(secret);
        let mut cmd = sh("echo \"got $LEAKED here\"; echo \"$LEAKED\" >&2", d.path());
        cmd.env.push(("LEAKED".into(), secret.into()));
        let log = d.path().join("r.log");
        let r = run(&cmd, None, &log, &|| {}).unwrap();
        assert!(!r.output.contains(secret), "{}", r.output);
        assert!(r.output.contains("got [REDACTED] here"), "{}", r.output);
        let whole = std::fs::read_to_string(&log).unwrap();
        assert!(
            !whole.contains(secret) && whole.matches("[REDACTED]").count() == 2,
            "{whole}"
        );
    }

    #[test]
    fn redaction_streams_across_chunk_boundaries() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("big.log");
        let secret = "tok_across_the_boundary".to_string();
        let mut body = b"header\n".to_vec();
        body.extend(std::iter::repeat_n(b'x', (1 << 20) - 10));
        body.extend_from_slice(secret.as_bytes());
        body.extend(std::iter::repeat_n(b'y', 5000));
        body.extend_from_slice(secret.as_bytes());
        std::fs::write(&path, &body).unwrap();
        let mut f = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .unwrap();
        redact_log(&mut f, &path, 7, std::slice::from_ref(&secret)).unwrap();
        let out = std::fs::read(&path).unwrap();
        assert_eq!(
            out.len(),
            body.len() - 2 * secret.len() + 2 * "[REDACTED]".len()
        );
        assert!(out.starts_with(b"header\n"));
        assert_eq!(out.windows(10).filter(|w| *w == b"[REDACTED]").count(), 2);
    }

    #[test]
    fn timeout_kills_setsid_descendants_too() {
        let d = tempfile::tempdir().unwrap();
        let marker = d.path().join("escaped");
        // In its own session and group: the group kill alone misses it.
        let script = format!(
            "setsid sh -c 'sleep 2; touch {}' & sleep 30",
            marker.display()
        );
        let r = run(
            &sh(&script, d.path()),
            Some(Duration::from_millis(300)),
            &d.path().join("t.log"),
            &|| {},
        )
        .unwrap();
        assert!(r.timed_out);
        std::thread::sleep(Duration::from_millis(2500));
        assert!(
            !marker.exists(),
            "a setsid'd descendant survived the timeout"
        );
    }

    #[test]
    fn strays_in_a_slot_are_killed() {
        let d = tempfile::tempdir().unwrap();
        let slot = d.path().join("slot/src");
        std::fs::create_dir_all(&slot).unwrap();
        let mut child = Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30"])
            .current_dir(&slot)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while descendants(child.id() as i32).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(kill_strays_in(&d.path().join("slot")) >= 2);
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(descendants(child.id() as i32).is_empty());
        assert_eq!(kill_strays_in(&d.path().join("slot")), 0);
    }

    #[test]
    fn disk_full_is_one_text_rule() {
        let r = |out: &str| RunResult {
            exit_code: Some(1),
            signal: None,
            timed_out: false,
            duration: Duration::ZERO,
            output: out.into(),
        };
        assert!(out_of_space(&r("dd: error writing 'x': No space left on device")).is_some());
        assert!(out_of_space(&r("error: boom")).is_none());
        assert!(crate::probe::container::disk_full(
            "NO SPACE LEFT ON DEVICE"
        ));
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("a-b"), "a-b");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(
            shell_words(&["sh".into(), "-c".into(), "x y".into()]),
            "sh -c 'x y'"
        );
    }
}
