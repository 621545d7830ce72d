//! Process trees that cannot get away: every step runs under a supervisor (this binary, re-run
//! with [`SUPERVISOR_ARG`]) that is a child subreaper, so whatever the step double-forks or
//! `setsid`s away stays below it; the supervisor kills the whole tree when the step ends, on
//! timeout, and when the tool dies (even by SIGKILL: it watches a pipe only the tool holds).
//! Finding a tree walks `/proc/*/stat`; killing it stops each process first, so nothing forks
//! past the walk.

use crate::error::Exit;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};

/// The argument that makes the binary a step supervisor (see [`supervise`]); never a user flag.
pub const SUPERVISOR_ARG: &str = "__setrows-step-supervisor";

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
pub(crate) fn start_time(pid: i32) -> Option<u64> {
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
    // Find them all first: killing one tree takes its descendants with it.
    let found: Vec<i32> = parents()
        .into_iter()
        .map(|(pid, _)| pid)
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(&dir))
        })
        .collect();
    for &pid in &found {
        kill_tree(pid, true);
    }
    found.len()
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
    let exit = supervise_inner(args).unwrap_or_else(|e| {
        errln!("setrows-bisect: step supervisor: {e}");
        Exit::StepLost
    });
    std::process::exit(exit.code())
}

fn supervise_inner(args: &[std::ffi::OsString]) -> std::io::Result<Exit> {
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
                libc::_exit(Exit::Orphaned.code());
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
        unsafe { libc::_exit(Exit::Orphaned.code()) }
    });
    let status = child.wait()?;
    if sweep {
        kill_tree(me, false);
    }
    // Reap what was killed (we are their reaper now).
    // SAFETY: waitpid on any child, non-blocking.
    while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
    match (status.code(), status.signal()) {
        (Some(c), _) => Ok(Exit::Step(c)),
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
            Ok(Exit::Step(128 + sig))
        }
        _ => Ok(Exit::StepLost),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

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
        // A SIGKILLed process stays in /proc (its cwd readable) until its exit completes: on
        // a loaded machine the orphaned `sleep` may still be dying here. Gone within seconds.
        let deadline = Instant::now() + Duration::from_secs(10);
        while kill_strays_in(&d.path().join("slot")) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(kill_strays_in(&d.path().join("slot")), 0);
    }
}
