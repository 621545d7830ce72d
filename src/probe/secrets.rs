//! The credentials the tool holds (for `--post-to`) kept away from the code it runs.
//!
//! Probes run arbitrary revisions of someone else's build scripts as our uid, so anything a
//! same-uid process can read is theirs: our environment (`/proc/<pid>/environ` is the block we
//! were started with; `unsetenv` does not change it) and our memory. So, first thing in `main`
//! ([`protect_process`]):
//!
//! 1. if any credential variable is set, the binary re-executes itself (`/proc/self/exe`, same
//!    argv) with those variables removed and their values on an inherited pipe named by
//!    `SETROWS_CRED_FD`; the new image reads the pipe, closes it and keeps the values here, in
//!    memory only ([`get`] is what `github::Token::resolve` consults before the environment);
//! 2. the process is made non-dumpable, so a same-uid process cannot read our
//!    `/proc/<pid>/{environ,mem,fd}` (root can; root is not what we defend against);
//! 3. every value held here is replaced by `[REDACTED]` in probe output where it enters the tool
//!    (`probe::exec`), so even a leak by another path reaches no log, store, report or comment.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Mutex;

/// Credentials the tool itself may hold that the code under test must never see.
pub const SECRET_ENV: &[&str] = &[
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITHUB_PAT",
    "GH_ENTERPRISE_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN",
    "RESULTS_TOKEN",
    "SETROWS_STATE_SIGNING_KEY",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_URL",
];

/// Names the inherited fd that carries the credentials across the re-exec.
pub const CRED_FD_ENV: &str = "SETROWS_CRED_FD";

/// What replaces a credential in probe output.
pub const REDACTED: &str = "[REDACTED]";

static HELD: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());
/// Values to redact (the held credentials plus e.g. a `--token-file` token).
static REDACT: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// A credential by variable name: the value handed over at start, else the environment (a
/// library caller that never ran [`protect_process`]).
pub fn get(name: &str) -> Option<String> {
    if let Some(v) = HELD.lock().ok().and_then(|h| h.get(name).cloned()) {
        return Some(v);
    }
    std::env::var(name).ok()
}

/// Adds a value that must never appear in probe output.
pub fn register_redaction(value: &str) {
    // Very short values would redact ordinary text and protect nothing.
    if value.len() < 8 {
        return;
    }
    if let Ok(mut r) = REDACT.lock() {
        if !r.iter().any(|v| v == value) {
            r.push(value.to_string());
        }
    }
}

/// The values to redact: everything registered plus credentials still in our environment.
pub fn redactions() -> Vec<String> {
    let mut out = REDACT.lock().map(|r| r.clone()).unwrap_or_default();
    for name in SECRET_ENV {
        if let Ok(v) = std::env::var(name) {
            if v.len() >= 8 && !out.contains(&v) {
                out.push(v);
            }
        }
    }
    // Longest first, so a value containing another is replaced whole.
    out.sort_by_key(|v| std::cmp::Reverse(v.len()));
    out
}

/// `text` with every value of `values` replaced by [`REDACTED`].
pub fn redact(text: &str, values: &[String]) -> String {
    let mut s = text.to_string();
    for v in values {
        if s.contains(v.as_str()) {
            s = s.replace(v.as_str(), REDACTED);
        }
    }
    s
}

fn hold(name: &str, value: &str) {
    if let Ok(mut h) = HELD.lock() {
        h.insert(name.to_string(), value.to_string());
    }
    register_redaction(value);
}

/// Call first thing in `main`, before any thread exists. Returns only in the process that
/// will do the work (the re-executed image, or this one when there was nothing to move).
pub fn protect_process() {
    if let Some(fd) = std::env::var_os(CRED_FD_ENV) {
        // SAFETY: single-threaded at this point (first thing in main).
        unsafe { std::env::remove_var(CRED_FD_ENV) };
        // Only a pipe we were handed (never stdin/stdout/stderr, whatever the variable says).
        if let Some(fd) = fd.to_str().and_then(|s| s.parse::<i32>().ok()) {
            if fd > 2 && is_pipe(fd) {
                receive(fd);
            }
        }
    } else {
        let present: Vec<(&str, String)> = SECRET_ENV
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| (*k, v)))
            .collect();
        if !present.is_empty() {
            {
                let Err(e) = reexec_without(&present);
                // Still keep the values out of probes (exec removes them from each step's
                // environment, output is redacted), but say that /proc/<pid>/environ keeps them.
                errln!("setrows-bisect: warning: could not re-execute without credentials in the environment ({e}); probes may be able to read them from /proc");
                for (k, v) in &present {
                    hold(k, v);
                }
            }
        }
    }
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
}

fn is_pipe(fd: i32) -> bool {
    // SAFETY: fstat fills the zeroed struct we pass.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    unsafe { libc::fstat(fd, &mut st) == 0 && (st.st_mode & libc::S_IFMT) == libc::S_IFIFO }
}

/// Reads `NAME=VALUE\0...` from `fd` until EOF, then closes it.
fn receive(fd: i32) {
    // SAFETY: the fd was created for us by the image we were started from; we own it now.
    let mut f = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let mut buf = Vec::new();
    if f.read_to_end(&mut buf).is_err() {
        return;
    }
    drop(f);
    for item in buf.split(|&b| b == 0) {
        let item = String::from_utf8_lossy(item);
        if let Some((k, v)) = item.split_once('=') {
            if SECRET_ENV.contains(&k) {
                hold(k, v);
            }
        }
    }
}

fn reexec_without(present: &[(&str, String)]) -> std::io::Result<std::convert::Infallible> {
    use std::os::unix::process::CommandExt;
    let mut payload = Vec::new();
    for (k, v) in present {
        payload.extend_from_slice(format!("{k}={v}").as_bytes());
        payload.push(0);
    }
    let mut fds = [0i32; 2];
    // SAFETY: pipe writes two fds into the array. The write end is close-on-exec; the read end
    // is inherited by the new image.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fresh fds we own.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: fcntl on our own fd.
    unsafe {
        libc::fcntl(fds[1], libc::F_SETFD, libc::FD_CLOEXEC);
        if payload.len() >= 4096 {
            libc::fcntl(
                fds[1],
                libc::F_SETPIPE_SZ,
                (payload.len() + 4096) as libc::c_int,
            );
        }
    }
    // SAFETY: as above.
    let capacity = unsafe { libc::fcntl(fds[1], libc::F_GETPIPE_SZ) };
    if capacity < 0 || (capacity as usize) < payload.len() {
        return Err(std::io::Error::other(
            "the credentials do not fit in a pipe buffer",
        ));
    }
    let mut w = std::fs::File::from(write_end);
    // The pipe holds it all (checked above), so this does not block with no reader yet.
    w.write_all(&payload)?;
    drop(w);
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_else(|| "setrows-bisect".into());
    let mut cmd = std::process::Command::new("/proc/self/exe");
    cmd.arg0(argv0).args(args);
    for (k, _) in present {
        cmd.env_remove(k);
    }
    cmd.env(CRED_FD_ENV, read_end_number(&read_end).to_string());
    let err = cmd.exec();
    drop(read_end);
    Err(err)
}

fn read_end_number(fd: &OwnedFd) -> i32 {
    use std::os::fd::AsRawFd;
    fd.as_raw_fd()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_replaces_every_value_longest_first() {
        let vals = vec!["ghp_abcdefgh-long".to_string(), "ghp_abcdefgh".to_string()];
        assert_eq!(
            redact("a ghp_abcdefgh-long b ghp_abcdefgh c", &vals),
            "a [REDACTED] b [REDACTED] c"
        );
    }

    #[test]
    fn received_values_are_held_in_memory() {
        let mut fds = [0i32; 2];
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let mut w = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fds[1]) });
        w.write_all(b"GH_ENTERPRISE_TOKEN=ghe_received_12345\0NOT_A_SECRET=x\0")
            .unwrap();
        drop(w);
        receive(fds[0]);
        assert_eq!(
            get("GH_ENTERPRISE_TOKEN").as_deref(),
            Some("ghe_received_12345")
        );
        assert!(HELD.lock().unwrap().get("NOT_A_SECRET").is_none());
        assert!(redactions().contains(&"ghe_received_12345".to_string()));
    }
}
