//! Reasons a probe of the bundled reproducer cannot test what was asked, read from the build
//! and the probed tree, each with its scope (`SkipScope`): whether another commit could do
//! better, or the configuration cannot run here at all and the run must stop.

use super::{classify, expect, Expectations};
use crate::core::outcome::SkipScope;
use std::path::Path;

/// A failed build that says the toolchain cannot build this configuration at all: one that
/// cannot target the asked GPU (systematic when its line names the asked target; an old tree's
/// own hard-coded architecture list failing is that tree's), or no compiler at all.
pub(super) fn toolchain(exp: &Expectations, output: &str) -> Option<(String, SkipScope)> {
    if let Some(line) = classify::toolchain_cannot_target(output) {
        let lower = line.to_ascii_lowercase();
        let asked = exp
            .gpu_target
            .as_deref()
            .filter(|t| lower.contains(&target_word(t).to_ascii_lowercase()));
        return Some(match asked {
            Some(t) => (
                format!("toolchain cannot target {}: {line}", target_word(t)),
                SkipScope::Systematic,
            ),
            None => (
                format!("the toolchain cannot target this GPU: {line}"),
                SkipScope::Commit,
            ),
        });
    }
    classify::missing_toolchain(output)
        .map(|line| (format!("missing toolchain: {line}"), SkipScope::Systematic))
}

/// `gfx1151:xnack-` → `gfx1151`, `90-real` → `90`: the word a compiler's message names.
fn target_word(t: &str) -> &str {
    t.split([':', '-']).next().unwrap_or(t)
}

/// Whether the probed tree's CMake files declare the graphs option of the asked backend.
pub(super) fn tree_options(exp: &Expectations, ggml_root: &Path) -> expect::TreeOptions {
    let Some(option) = exp.backend.and_then(expect::graphs_option) else {
        return expect::TreeOptions::default();
    };
    let graphs_option = crate::core::build::CMAKE_FILES
        .iter()
        .any(|rel| std::fs::read_to_string(ggml_root.join(rel)).is_ok_and(|t| t.contains(option)));
    expect::TreeOptions { graphs_option }
}

/// The first line a person needs to see when a build failed.
pub(super) fn build_error_line(output: &str) -> Option<String> {
    output
        .lines()
        .map(str::trim)
        .find(|l| l.contains("error:") || l.starts_with("CMake Error") || l.contains("FAILED:"))
        .map(|l| l.chars().take(300).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::build::Backend;

    fn hip(target: &str) -> Expectations {
        Expectations {
            backend: Some(Backend::Hip),
            gpu_target: Some(target.into()),
            ..Expectations::default()
        }
    }

    // Compiler messages as the toolchains print them: clang's driver diagnostics
    // `err_drv_offload_bad_gpu_arch` ("unsupported %0 gpu architecture: %1") and
    // `err_drv_bad_target_id` ("invalid target ID '%0'; format is ..."), in a CMake build log.
    const CLANG_UNSUPPORTED: &str = "-- The HIP compiler identification is Clang 15.0.0\n\
        FAILED: ggml/src/ggml-hip/CMakeFiles/ggml-hip.dir/__/ggml-cuda/acc.cu.o\n\
        clang: error: unsupported HIP gpu architecture: gfx1151\nninja: build stopped: subcommand failed.\n";
    const CLANG_TARGET_ID: &str = "clang: error: invalid target ID 'gfx1151'; format is a processor name followed by an optional colon-delimited list of features followed by an enable/disable sign (e.g., 'gfx908:sramecc+:xnack-')\n";
    const NVCC: &str = "nvcc fatal   : Unsupported gpu architecture 'compute_90'\n";

    #[test]
    fn a_toolchain_without_the_asked_target_stops_the_run() {
        for out in [CLANG_UNSUPPORTED, CLANG_TARGET_ID] {
            let (why, scope) = toolchain(&hip("gfx1151"), out).expect("recognised");
            assert!(
                why.starts_with("toolchain cannot target gfx1151: "),
                "{why}"
            );
            assert_eq!(scope, SkipScope::Systematic, "{why}");
        }
        // with target features in the asked target, the message still names the processor
        let (why, _) = toolchain(&hip("gfx1151:xnack-"), CLANG_UNSUPPORTED).unwrap();
        assert!(
            why.starts_with("toolchain cannot target gfx1151: "),
            "{why}"
        );
        let cuda = Expectations {
            backend: Some(Backend::Cuda),
            gpu_target: Some("90".into()),
            ..Expectations::default()
        };
        let (why, scope) = toolchain(&cuda, NVCC).expect("nvcc's line");
        assert_eq!(scope, SkipScope::Systematic, "{why}");
    }

    #[test]
    fn another_architecture_failing_is_the_trees() {
        // an old tree's own list names gfx803, which a newer toolchain dropped
        let out = "clang: error: unsupported HIP gpu architecture: gfx803\n";
        let (why, scope) = toolchain(&hip("gfx1151"), out).unwrap();
        assert_eq!(scope, SkipScope::Commit, "{why}");
        assert!(why.contains("gfx803"), "{why}");
    }

    #[test]
    fn no_compiler_is_a_missing_toolchain_and_a_compile_error_is_neither() {
        let cmake = "CMake Error at CMakeLists.txt:12 (enable_language):\n  No CMAKE_HIP_COMPILER could be found.\n";
        let (why, scope) = toolchain(&hip("gfx1151"), cmake).unwrap();
        assert!(why.starts_with("missing toolchain: "), "{why}");
        assert_eq!(scope, SkipScope::Systematic);
        let shell = "sh: 12: cmake: not found\n";
        assert_eq!(
            toolchain(&Expectations::default(), shell).map(|w| w.1),
            Some(SkipScope::Systematic)
        );
        let compile = "set-rows.cu:42:5: error: use of undeclared identifier 'foo'\n";
        assert_eq!(toolchain(&hip("gfx1151"), compile), None);
    }

    #[test]
    fn the_tree_says_whether_it_has_the_graphs_option() {
        let d = tempfile::tempdir().unwrap();
        let cuda = Expectations {
            backend: Some(Backend::Cuda),
            graphs: Some(true),
            ..Expectations::default()
        };
        assert!(!tree_options(&cuda, d.path()).graphs_option);
        std::fs::write(
            d.path().join("CMakeLists.txt"),
            "option(GGML_CUDA_GRAPHS \"ggml: use CUDA graphs (llama.cpp only)\" ${GGML_CUDA_GRAPHS_DEFAULT})\n",
        )
        .unwrap();
        assert!(tree_options(&cuda, d.path()).graphs_option);
        // the HIP option is another word
        assert!(!tree_options(&hip("gfx1151"), d.path()).graphs_option);
    }
}
