//! A bundled program (the replay, decode-probe) is embedded source text: its hash names it in
//! store keys and in the directory it is written to. Its own module: both probes use it and
//! the replay's module already uses the decode probe's.

use sha2::{Digest, Sha256};
use std::path::Path;

/// THE hash of a bundled program's embedded sources (the replay's, decode-probe's): its
/// identity in store keys and the name of the directory it is written to.
pub fn hash_of(sources: &[(&str, &str)]) -> String {
    let mut h = Sha256::new();
    for (path, text) in sources {
        h.update(path.as_bytes());
        h.update([0]);
        h.update((text.len() as u64).to_le_bytes());
        h.update(text.as_bytes());
    }
    hex::encode(h.finalize())
}

/// Writes `sources` under `dir/<prefix>-<hash12>` (once: an existing complete copy is reused)
/// and returns that folder's name. The copy is made in a temp folder and renamed, so a killed
/// run never leaves a half-written tree that a later probe would trust.
pub fn materialize(dir: &Path, prefix: &str, sources: &[(&str, &str)]) -> std::io::Result<String> {
    let name = format!("{prefix}-{}", &hash_of(sources)[..12]);
    let target = dir.join(&name);
    if target.join(".complete").is_file() {
        return Ok(name);
    }
    std::fs::create_dir_all(dir)?;
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{prefix}-"))
        .tempdir_in(dir)?;
    for (path, text) in sources {
        let p = tmp.path().join(path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(p, text)?;
    }
    std::fs::write(tmp.path().join(".complete"), b"")?;
    let tmp_path = tmp.keep();
    if target.exists() && !target.join(".complete").is_file() {
        // left half-written by a killed run of an older version: replace it
        let _ = std::fs::remove_dir_all(&target);
    }
    if let Err(e) = std::fs::rename(&tmp_path, &target) {
        // Another process won the race with identical content: use theirs.
        let _ = std::fs::remove_dir_all(&tmp_path);
        if !target.join(".complete").is_file() {
            return Err(e);
        }
    }
    Ok(name)
}
