//! Whether a tree's build reads the configured wave size (`wave_size` collapses where not).

/// Whether a checkout's ggml mentions `DFLASH_WAVE_SIZE` in its GPU sources or CMake files
/// (upstream ggml does not; the reported fork forces it).
pub(super) fn reads_wave_size(checkout: &std::path::Path) -> bool {
    fn scan(dir: &std::path::Path, depth: usize) -> bool {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return false;
        };
        rd.flatten().any(|e| {
            let p = e.path();
            if p.is_dir() {
                return depth > 0 && scan(&p, depth - 1);
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let wanted = [".cu", ".cuh", ".h", ".hpp", ".cmake", ".txt"]
                .iter()
                .any(|x| name.ends_with(x));
            wanted && std::fs::read_to_string(&p).is_ok_and(|t| t.contains("DFLASH_WAVE_SIZE"))
        })
    }
    let root = checkout.join(crate::probe::layout(checkout).ggml_dir());
    ["src/ggml-cuda", "src/ggml-hip"]
        .iter()
        .any(|d| scan(&root.join(d), 2))
        || ["CMakeLists.txt", "src/CMakeLists.txt"].iter().any(|f| {
            std::fs::read_to_string(root.join(f)).is_ok_and(|t| t.contains("DFLASH_WAVE_SIZE"))
        })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_lucebox_trees_vendored_ggml_is_scanned() {
        let d = tempfile::tempdir().unwrap();
        let ggml = d.path().join("server/deps/llama.cpp/ggml");
        std::fs::create_dir_all(ggml.join("src/ggml-hip")).unwrap();
        std::fs::create_dir_all(ggml.join("include")).unwrap();
        std::fs::write(ggml.join("CMakeLists.txt"), "project(ggml)\n").unwrap();
        assert!(!super::reads_wave_size(d.path()));
        std::fs::write(
            ggml.join("src/ggml-hip/set-rows.cu"),
            "#define WARP DFLASH_WAVE_SIZE\n",
        )
        .unwrap();
        assert!(super::reads_wave_size(d.path()));
    }
}
