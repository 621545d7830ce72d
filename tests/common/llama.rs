//! Git histories over the llama.cpp that the llama-cpp-python 0.3.36 sdist vendors
//! (scripts/setup.d/33-llama.sh; CI reaches no GitHub): what building llama.cpp and ggml reads,
//! committed where it lies (the vendored tree is never written), with ggml's backend folders a
//! test's builds never enter left out (ggml/src/CMakeLists.txt adds a backend's folder only when
//! its GGML_<NAME> option is on): less to commit and to check out.

use super::git;
use std::path::Path;

/// What the history takes from the vendored tree: what building the llama library reads.
const TREE: [&str; 8] = [
    "CMakeLists.txt",
    "LICENSE",
    "cmake",
    "ggml",
    "include",
    "licenses",
    "src",
    "vendor",
];

/// Makes `repo` with the vendored tree `src` in its index, ggml's backend folders but `backends`
/// (e.g. `ggml-cpu`) left out: the first commit is one `git commit` away.
pub fn stage_tree(src: &Path, repo: &Path, backends: &[&str]) {
    std::fs::create_dir_all(repo).expect("mkdir");
    git(repo, &["init", "-q", "-b", "main"]);
    let work_tree = format!("--work-tree={}", src.display());
    let mut add: Vec<String> = vec![work_tree, "add".into(), "-f".into(), "--".into()];
    add.extend(TREE.iter().map(|p| p.to_string()));
    for e in std::fs::read_dir(src.join("ggml/src")).expect("ggml/src") {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        let backend = name.starts_with("ggml-") && !name.contains('.');
        if backend && !backends.contains(&name.as_str()) {
            add.push(format!(":(exclude)ggml/src/{name}"));
        }
    }
    let add: Vec<&str> = add.iter().map(String::as_str).collect();
    git(repo, &add);
}

/// A blob of `text` in `repo`'s index at `path` (the work tree is the vendored tree, which is
/// never written).
pub fn stage_text(repo: &Path, path: &str, text: &str) {
    let tmp = repo.join(".git/staged");
    std::fs::write(&tmp, text).expect("write staged blob");
    let blob = git(repo, &["hash-object", "-w", tmp.to_str().unwrap()]);
    git(
        repo,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("100644,{blob},{path}"),
        ],
    );
}
