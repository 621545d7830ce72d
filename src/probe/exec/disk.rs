//! A full disk is the machinery's failure, never the code under test's: a step does not start
//! below a free-space floor, and a step whose output says the disk ran out is an
//! infrastructure error for every launcher.

use super::RunResult;
use std::path::Path;

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

pub(super) fn check_free_space(dir: &Path) -> std::io::Result<()> {
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
