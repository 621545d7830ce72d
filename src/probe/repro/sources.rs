//! The reproducer sources compiled into this binary, their hash, and their copy on disk.

use std::path::Path;

/// The reproducer sources, embedded: (path relative to the repro-kernels root, contents).
pub const SOURCES: [(&str, &str); 6] = [
    (
        "CMakeLists.txt",
        include_str!("../../../repro-kernels/CMakeLists.txt"),
    ),
    (
        "setrows-replay/setrows-replay.cpp",
        include_str!("../../../repro-kernels/setrows-replay/setrows-replay.cpp"),
    ),
    (
        "setrows-replay/placement.h",
        include_str!("../../../repro-kernels/setrows-replay/placement.h"),
    ),
    (
        "setrows-replay/placement.cmake",
        include_str!("../../../repro-kernels/setrows-replay/placement.cmake"),
    ),
    (
        "setrows-kernel/setrows-kernel.cu",
        include_str!("../../../repro-kernels/setrows-kernel/setrows-kernel.cu"),
    ),
    (
        "setrows-kernel/gpu-portability.h",
        include_str!("../../../repro-kernels/setrows-kernel/gpu-portability.h"),
    ),
];

/// Hex sha256 over the embedded sources (paths and contents), identical on every machine.
pub fn sources_hash() -> String {
    crate::probe::bundle::hash_of(&SOURCES)
}

/// Writes the embedded sources under `dir/setrows-repro-<hash12>` (once: an existing complete
/// copy is reused) and returns that folder's name. The copy is made in a temp folder and renamed,
/// so a killed run never leaves a half-written tree that a later probe would trust.
pub fn materialize_sources(dir: &Path) -> std::io::Result<String> {
    let name = format!("setrows-repro-{}", &sources_hash()[..12]);
    let target = dir.join(&name);
    if target.join(".complete").is_file() {
        return Ok(name);
    }
    std::fs::create_dir_all(dir)?;
    let tmp = tempfile::Builder::new()
        .prefix(".setrows-repro-")
        .tempdir_in(dir)?;
    for (path, text) in SOURCES {
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
