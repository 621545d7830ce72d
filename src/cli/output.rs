//! Output files (`--json`, `--report`, `--out`): checked before the first probe and written
//! atomically after the last, so hours of probing never end in "cannot write", and a full disk
//! never leaves a truncated file that looks like a result.

use crate::error::CliError;
use std::path::Path;

/// Proves `path` can be written where it is (its directory exists and takes a new file; the
/// path is not a directory), without touching an existing file there. Exit 2 when it cannot.
pub fn check_writable(flag: &str, path: &Path) -> anyhow::Result<()> {
    let shown = path.display();
    if path.is_dir() {
        return Err(CliError::usage(format!("{flag} {shown}: is a directory")));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(CliError::usage(format!(
            "{flag} {shown}: directory {} does not exist",
            dir.display()
        )));
    }
    tempfile::Builder::new()
        .prefix(".setrows-check-")
        .tempfile_in(dir)
        .map_err(|e| CliError::usage(format!("{flag} {shown}: cannot write there: {e}")))?;
    Ok(())
}

/// Writes `bytes` to `path` atomically (`run::store::write_atomic`): a reader sees the old
/// file or the whole new one. Failing now (a full disk, a
/// directory removed while probing) is the machinery's fault: exit 3.
pub fn write_atomic(flag: &str, path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    crate::run::store::write_atomic(path, bytes)
        .map_err(|e| CliError::infra(format!("{flag} {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_paths_are_usage_errors_and_good_ones_leave_nothing() {
        let d = tempfile::tempdir().unwrap();
        assert!(check_writable("--json", &d.path().join("r.json")).is_ok());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
        let e = check_writable("--json", &d.path().join("no/such/r.json")).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), 2, "{e}");
        let e = check_writable("--report", d.path()).unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
    }

    #[test]
    fn atomic_write_replaces_whole() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.json");
        std::fs::write(&p, "old").unwrap();
        write_atomic("--json", &p, b"new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new\n");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }
}
