//! The reproducer sources compiled into this binary, their hash, and their copy on disk.

use std::path::Path;

/// The reproducer sources, embedded: (path relative to the repro-kernels root, contents).
pub const SOURCES: [(&str, &str); 7] = [
    (
        "CMakeLists.txt",
        include_str!("../../../repro-kernels/CMakeLists.txt"),
    ),
    (
        "ggml-source.cmake",
        include_str!("../../../repro-kernels/ggml-source.cmake"),
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

/// Writes the embedded sources under `dir/setrows-repro-<hash12>` and returns that folder's
/// name (`probe::bundle::materialize`).
pub fn materialize_sources(dir: &Path) -> std::io::Result<String> {
    crate::probe::bundle::materialize(dir, "setrows-repro", &SOURCES)
}
