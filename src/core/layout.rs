//! Where ggml sits in a tree: the one rule behind range keying (`run::git`), ggml's directory
//! in a checkout (`probe::vendor`, `probe::layout` for the reproducer's source directory) and
//! the guard that refuses a replay of a tree without ggml.
//!
//! The rule looks only at which paths exist, so a git tree (the `--bad` commit, before anything
//! is checked out) and a checkout on disk answer it the same way: the caller passes its own
//! "does this relative path exist" test.

/// The trees whose ggml we know how to find, most specific first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// A lucebox checkout: llama.cpp vendored at `server/deps/llama.cpp`, ggml below it.
    Lucebox,
    /// llama.cpp (or any project vendoring ggml the same way): ggml under `ggml/`.
    LlamaCpp,
    /// ggml itself, or a tree that is not ggml at all: the whole tree.
    Ggml,
}

impl Layout {
    /// The layout of a tree: the first layout whose ggml directory has a `CMakeLists.txt` and
    /// an `include` directory; a tree with neither is taken as a whole (`Ggml`).
    ///
    /// Why so little: a vendored ggml is a CMake subproject with public headers wherever it
    /// sits, and the check must hold for the oldest and newest revisions of a range alike, so it
    /// names no file that ggml renamed over time (`include/ggml/ggml.h` became `include/ggml.h`).
    pub fn of(exists: impl Fn(&str) -> bool) -> Layout {
        [Layout::Lucebox, Layout::LlamaCpp]
            .into_iter()
            .find(|l| exists(&l.path("CMakeLists.txt")) && exists(&l.path("include")))
            .unwrap_or(Layout::Ggml)
    }

    /// ggml's directory relative to the tree root (`""`: the root).
    pub fn ggml_dir(self) -> &'static str {
        match self {
            Layout::Lucebox => "server/deps/llama.cpp/ggml",
            Layout::LlamaCpp => "ggml",
            Layout::Ggml => "",
        }
    }

    /// The subtree that decides whether two commits are the same test (`None`: the whole
    /// tree): commits that leave ggml alone share one probe.
    pub fn keyed_subtree(self) -> Option<&'static str> {
        Some(self.ggml_dir()).filter(|d| !d.is_empty())
    }

    /// `rel` (a path inside ggml) relative to the tree root.
    pub fn path(self, rel: &str) -> String {
        match self.ggml_dir() {
            "" => rel.to_string(),
            d => format!("{d}/{rel}"),
        }
    }

    /// Whether the bundled reproducer can build against this tree: ggml's public header is
    /// where the layout puts ggml.
    pub fn has_ggml_header(self, exists: impl Fn(&str) -> bool) -> bool {
        exists(&self.path("CMakeLists.txt")) && exists(&self.path("include/ggml.h"))
    }

    /// Every path the layout rule and the header check test, for every layout: what deciding a
    /// tree's layout reads of it (build-aware grouping must count these as read, since a commit
    /// that adds or removes one changes where the probe looks for ggml).
    pub fn markers() -> Vec<String> {
        [Layout::Lucebox, Layout::LlamaCpp, Layout::Ggml]
            .into_iter()
            .flat_map(|l| ["CMakeLists.txt", "include", "include/ggml.h"].map(|r| l.path(r)))
            .collect()
    }

    pub fn name(self) -> &'static str {
        match self {
            Layout::Lucebox => "lucebox",
            Layout::LlamaCpp => "llama.cpp",
            Layout::Ggml => "ggml",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree<'a>(paths: &'a [&'a str]) -> impl Fn(&str) -> bool + 'a {
        move |p: &str| paths.contains(&p)
    }

    #[test]
    fn ggml_is_found_in_lucebox_llama_cpp_and_ggml_trees() {
        let lucebox = [
            "CMakeLists.txt",
            "server/deps/llama.cpp/CMakeLists.txt",
            "server/deps/llama.cpp/ggml/CMakeLists.txt",
            "server/deps/llama.cpp/ggml/include",
            "server/deps/llama.cpp/ggml/include/ggml.h",
            // llama.cpp's own ggml/ is not where a lucebox tree keeps it.
            "ggml/CMakeLists.txt",
            "ggml/include",
        ];
        let l = Layout::of(tree(&lucebox));
        assert_eq!(l, Layout::Lucebox);
        assert_eq!(l.keyed_subtree(), Some("server/deps/llama.cpp/ggml"));
        assert!(l.has_ggml_header(tree(&lucebox)));

        let llama = [
            "CMakeLists.txt",
            "include",
            "ggml/CMakeLists.txt",
            "ggml/include",
        ];
        let l = Layout::of(tree(&llama));
        assert_eq!(l, Layout::LlamaCpp);
        assert_eq!(l.path("src/ggml-hip"), "ggml/src/ggml-hip");
        // No ggml.h: a vendored project that is not ggml, which a replay refuses.
        assert!(!l.has_ggml_header(tree(&llama)));

        let ggml = ["CMakeLists.txt", "include", "include/ggml.h"];
        let l = Layout::of(tree(&ggml));
        assert_eq!(l, Layout::Ggml);
        assert_eq!(l.keyed_subtree(), None);
        assert_eq!(l.path("CMakeLists.txt"), "CMakeLists.txt");
        assert!(l.has_ggml_header(tree(&ggml)));

        // A directory named ggml without a CMake project is not where ggml sits.
        assert_eq!(Layout::of(tree(&["ggml/include"])), Layout::Ggml);
        assert!(!Layout::Ggml.has_ggml_header(tree(&["CMakeLists.txt"])));
    }
}
