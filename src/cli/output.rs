//! Output files (`--json`, `--report`, `--out`): checked before the first probe and written
//! atomically after the last, so hours of probing never end in "cannot write", and a full disk
//! never leaves a truncated file that looks like a result.

use crate::error::CliError;
use std::path::Path;

/// Where an output goes: `-` is standard output; an existing file that is not a regular file
/// (`/dev/stdout`, a FIFO, a terminal) is written in place, since replacing it by rename would
/// swap the device or pipe for a plain file (as root, `/dev/stdout` itself); anything else is
/// replaced atomically.
enum Target<'a> {
    Stdout,
    InPlace(&'a Path),
    Atomic(&'a Path),
}

fn target(path: &Path) -> Target<'_> {
    if path.as_os_str() == "-" {
        return Target::Stdout;
    }
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() && !m.is_dir() => Target::InPlace(path),
        _ => Target::Atomic(path),
    }
}

/// Proves `path` can be written where it is (its directory exists and takes a new file; the
/// path is not a directory), without touching an existing file there. Exit 2 when it cannot.
/// `-` and a non-regular target (a pipe, a device) are opened when written, not before: opening
/// a FIFO for writing would wait for its reader.
pub fn check_writable(flag: &str, path: &Path) -> anyhow::Result<()> {
    let shown = path.display();
    if !matches!(target(path), Target::Atomic(_)) {
        return Ok(());
    }
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

/// Proves the directory `dir` can hold new files: it is one and takes a file, or it does not
/// exist yet and its nearest existing ancestor is a directory that does (it is made when
/// written, not now: a check makes nothing). Exit 2, naming the flag and the path.
pub fn check_dir_writable(flag: &str, dir: &Path) -> anyhow::Result<()> {
    let shown = dir.display();
    let mut at = dir;
    while !at.exists() {
        match at.parent() {
            Some(p) if !p.as_os_str().is_empty() => at = p,
            _ => {
                at = Path::new(".");
                break;
            }
        }
    }
    if !at.is_dir() {
        return Err(CliError::usage(format!(
            "{flag} {shown}: {} is not a directory; pick another path",
            at.display()
        )));
    }
    tempfile::Builder::new()
        .prefix(".setrows-check-")
        .tempfile_in(at)
        .map_err(|e| {
            CliError::usage(format!(
                "{flag} {shown}: cannot write in {}: {e}; pick another path",
                at.display()
            ))
        })?;
    Ok(())
}

/// Writes `bytes` to `path` (`-`: standard output; a pipe or device: in place; a file:
/// atomically through `run::store::write_atomic`, so a reader sees the old file or the whole
/// new one). Failing now (a full disk, a
/// directory removed while probing) is the machinery's fault: exit 3.
pub fn write(flag: &str, path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    let written = match target(path) {
        // The reader of `--json -` took what it wanted and left (`| head -1`): like a closed
        // pipe for printed text, not a failure of the run.
        Target::Stdout => {
            let mut out = std::io::stdout().lock();
            match out.write_all(bytes).and_then(|()| out.flush()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                r => r,
            }
        }
        Target::InPlace(p) => std::fs::OpenOptions::new()
            .write(true)
            .open(p)
            .and_then(|mut f| f.write_all(bytes)),
        Target::Atomic(p) => crate::run::store::write_atomic(p, bytes),
    };
    written.map_err(|e| CliError::infra(format!("{flag} {}: {e}", path.display())))
}

/// A path flag's value as the user wrote it, made absolute against the directory the command
/// was started in, once, when the command line is parsed (issue 37 item 7): every later step
/// (a build in its own directory, a container mount, a message) sees one meaning. `-` stays
/// standard input/output; nothing is created or resolved through symlinks.
pub fn absolute(s: &str) -> Result<std::path::PathBuf, String> {
    if s.is_empty() {
        return Err("an empty path".into());
    }
    if s == "-" {
        return Ok("-".into());
    }
    std::path::absolute(s).map_err(|e| format!("{s}: cannot make it absolute: {e}"))
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
        assert_eq!(
            crate::error::Exit::of_error(&e),
            crate::error::Exit::Usage,
            "{e}"
        );
        let e = check_writable("--report", d.path()).unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
    }

    /// A FIFO is written in place (a reader gets the bytes), never replaced by a regular file.
    #[test]
    fn a_fifo_is_written_in_place() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .unwrap();
        assert!(made.success());
        let reader = {
            let p = p.clone();
            std::thread::spawn(move || std::fs::read_to_string(p).unwrap())
        };
        check_writable("--json", &p).unwrap();
        write("--json", &p, b"{}\n").unwrap();
        assert_eq!(reader.join().unwrap(), "{}\n");
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::metadata(&p).unwrap().file_type().is_fifo());
    }

    #[test]
    fn a_directory_to_be_made_is_checked_where_it_would_be_made() {
        let d = tempfile::tempdir().unwrap();
        assert!(check_dir_writable("--out", &d.path().join("a/b")).is_ok());
        assert!(!d.path().join("a").exists(), "a check makes nothing");
        let file = d.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let e = check_dir_writable("--out", &file.join("sub")).unwrap_err();
        assert_eq!(crate::error::Exit::of_error(&e), crate::error::Exit::Usage);
        assert!(e.to_string().starts_with("--out "), "{e}");
    }

    #[test]
    fn atomic_write_replaces_whole() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.json");
        std::fs::write(&p, "old").unwrap();
        write("--json", &p, b"new\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new\n");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }
}
