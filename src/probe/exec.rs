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
pub const SECRET_ENV: &[&str] = &[
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITHUB_PAT",
    "GH_ENTERPRISE_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN",
    "RESULTS_TOKEN",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
];

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

/// Runs `cmd`, appending its output to `log_path`. `on_timeout` runs after the process group was
/// killed for exceeding `timeout` (a container launcher stops its container there).
///
/// Errors are failures to start or to log (infrastructure), never the step's own failure.
pub fn run(
    cmd: &Cmd,
    timeout: Option<Duration>,
    log_path: &Path,
    on_timeout: &dyn Fn(),
) -> std::io::Result<RunResult> {
    if let Some(parent) = log_path.parent() {
        std::fs::create_dir_all(parent)?;
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
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(&cmd.cwd)
        .envs(cmd.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    for secret in SECRET_ENV {
        command.env_remove(secret);
    }
    command
        .stdin(Stdio::null())
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
            kill_group(pgid, libc::SIGTERM);
            let grace_end = Instant::now() + GRACE;
            while Instant::now() < grace_end {
                if child.try_wait()?.is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
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
    fn quoting() {
        assert_eq!(shell_quote("a-b"), "a-b");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(
            shell_words(&["sh".into(), "-c".into(), "x y".into()]),
            "sh -c 'x y'"
        );
    }
}
