//! Whether the GPU a configuration needs is on this machine, asked after the build and before
//! the test runs. Without an AMD GPU (the normal case on CI and hosted runners) a HIP binary
//! does not fail in a way that says so: the runtime aborts, or ggml finds no device, and the run
//! would read as a `crash` or `gpu_fault` of the commit. The build itself is still worth having
//! (it proves the tree builds for the target, and the next run on a machine with the GPU
//! rebuilds incrementally), so the probe keeps it and only the test is refused.
//!
//! The device node is the host's: a container step sees it only through `--device` of the
//! host's node (`container::argv`), so the same check holds for both launchers.

use crate::core::build::Backend;
use std::path::Path;

/// The node the ROCm runtime opens first (the kernel fusion driver): no node, no AMD GPU.
pub const AMD_KFD: &str = "/dev/kfd";

/// The untestable reason when `backend` needs a GPU this machine does not have (`None`: it has
/// one, or the backend needs none). Only HIP is checked: CUDA's device nodes differ between
/// drivers and WSL, and a CUDA run without a GPU already says so (the backend guard sees the
/// reproducer fall back to the CPU).
pub fn missing(backend: Option<Backend>) -> Option<String> {
    missing_at(backend, Path::new(AMD_KFD))
}

/// `missing` with the node's path given (the unit tests use a path that cannot exist).
pub fn missing_at(backend: Option<Backend>, kfd: &Path) -> Option<String> {
    match backend {
        Some(Backend::Hip) if !kfd.exists() => Some(format!(
            "no AMD GPU ({} is missing on this machine); the build ran and is kept",
            kfd.display()
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hip_needs_the_node() {
        let gone = Path::new("/nonexistent/setrows-bisect/kfd");
        let why = missing_at(Some(Backend::Hip), gone).expect("no node, no AMD GPU");
        assert!(why.starts_with("no AMD GPU ("), "{why}");
        assert!(why.contains("/nonexistent/setrows-bisect/kfd"), "{why}");
        assert_eq!(missing_at(Some(Backend::Cpu), gone), None);
        assert_eq!(missing_at(Some(Backend::Cuda), gone), None);
        assert_eq!(missing_at(None, gone), None);
        // a node that exists (any path does for the check) is a GPU
        assert_eq!(missing_at(Some(Backend::Hip), Path::new("/")), None);
    }
}
