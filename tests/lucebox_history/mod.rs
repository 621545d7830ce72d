//! A generated history shaped like lucebox's (never its code): ggml vendored at
//! `server/deps/llama.cpp/ggml` with a `VENDOR.md` beside it, first a submodule there (as before
//! lucebox ad69d12d), application code and a data file elsewhere. The data file's blob can be
//! deleted from the object store, as the lucebox snapshot lacks
//! `server/eval/humaneval_plus/humanevalplus.jsonl`.
#![allow(dead_code)]

use crate::common::git;
use std::path::{Path, PathBuf};

pub const GGML: &str = "server/deps/llama.cpp/ggml";
pub const NOTE: &str = "server/deps/llama.cpp/VENDOR.md";
pub const DATA: &str = "server/eval/humaneval_plus/data.jsonl";

/// lucebox 53859c26's note, its fields as written there.
pub const VENDOR_MD: &str = "# Vendored llama.cpp/ggml snapshot\n\n\
    This directory contains the ggml-only subset used by Lucebox Hub.\n\n\
    - Source repository: https://github.com/Luce-Org/lucebox-ggml\n\
    - Source base branch: `luce-dflash`\n\
    - Source base commit: `6fbe72d67069136bbd370be703e1d4f441b5e942`\n\
    - Included merged PR: `#35` (`0fe65d9354b7c5da52a7741d2e37ba85f0d0c925`)\n\
    - Included test PR: `#37` (`0699be81480428f01b9b7ac49a09a2d51c77f8df`)\n";

/// What the fork is called in provenance, from `VENDOR_MD`.
pub const FORK: &str = "lucebox-ggml luce-dflash@6fbe72d6 + PRs #35, #37";

/// What one commit changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The first commit: a submodule where ggml will be vendored, the data file, the app.
    Start,
    /// ggml vendored in place of the submodule (with `VENDOR.md`).
    Vendor,
    /// Application code only.
    App,
    /// A change inside the vendored ggml directory.
    Ggml,
    /// ggml changes and so does its note.
    GgmlAndNote,
    /// A file of ggml becomes a directory (a type change inside the tested subtree).
    GgmlTypechange,
    /// The planted fault arrives in ggml (`fault.cpp` beside the shim; see `Ggml`'s writer).
    Fault,
}

pub struct History {
    pub repo: PathBuf,
    pub shas: Vec<String>,
    /// The data file's blob id (the one `delete_data_blob` removes).
    pub data_blob: String,
}

/// Writes what the vendored ggml directory holds at step `n` (`fault`: the fault is in).
pub type GgmlWriter<'a> = &'a dyn Fn(&Path, usize, bool);

/// Builds `steps` into a new repository at `repo` with loose objects (no packing), calling
/// `ggml` to (re)write the vendored ggml directory's own files.
pub fn build(repo: &Path, steps: &[Step], ggml: GgmlWriter<'_>) -> History {
    std::fs::create_dir_all(repo).expect("mkdir repo");
    git(repo, &["init", "-q", "-b", "main"]);
    git(repo, &["config", "gc.auto", "0"]);
    let mut shas = Vec::new();
    let mut fault = false;
    for (n, step) in steps.iter().enumerate() {
        match step {
            Step::Start => {
                write(
                    repo,
                    DATA,
                    &"{\"task\": 1, \"prompt\": \"def f():\"}\n".repeat(2000),
                );
                write(repo, "server/src/engine.cpp", "int main() { return 0; }\n");
                write(repo, "README.md", "a lucebox-shaped tree\n");
            }
            Step::Vendor => {
                git(repo, &["rm", "-q", "--cached", "server/deps/llama.cpp"]);
                write(repo, NOTE, VENDOR_MD);
                write(repo, "server/deps/llama.cpp/LICENSE", "MIT\n");
                write(repo, "server/deps/llama.cpp/common/log.h", "#pragma once\n");
                ggml(&repo.join(GGML), n, fault);
            }
            Step::App => write(
                repo,
                "server/src/engine.cpp",
                &format!("int main() {{ return {n}; }}\n"),
            ),
            Step::Ggml => ggml(&repo.join(GGML), n, fault),
            Step::GgmlAndNote => {
                ggml(&repo.join(GGML), n, fault);
                write(repo, NOTE, &format!("{VENDOR_MD}\nUpdated at step {n}.\n"));
            }
            Step::GgmlTypechange => {
                let p = repo.join(GGML).join("src/extra");
                if p.is_file() {
                    std::fs::remove_file(&p).expect("rm file");
                    write(repo, &format!("{GGML}/src/extra/inner.txt"), "now a dir\n");
                } else {
                    write(repo, &format!("{GGML}/src/extra"), "a file\n");
                }
                ggml(&repo.join(GGML), n, fault);
            }
            Step::Fault => {
                fault = true;
                ggml(&repo.join(GGML), n, fault);
            }
        }
        git(repo, &["add", "-A"]);
        if *step == Step::Start {
            // A submodule where ggml will be vendored (a gitlink, as lucebox had).
            let gitlink = format!("160000,{},server/deps/llama.cpp", "1".repeat(40));
            git(repo, &["update-index", "--add", "--cacheinfo", &gitlink]);
        }
        git(
            repo,
            &["commit", "-q", "-m", &format!("step {n}: {step:?}")],
        );
        shas.push(git(repo, &["rev-parse", "HEAD"]));
    }
    let data_blob = git(repo, &["rev-parse", &format!("HEAD:{DATA}")]);
    History {
        repo: repo.to_path_buf(),
        shas,
        data_blob,
    }
}

impl History {
    /// Removes the data file's blob from the object store: every whole-tree checkout of a
    /// commit that has the file now fails, as in the lucebox snapshot.
    pub fn delete_data_blob(&self) {
        let (dir, file) = self.data_blob.split_at(2);
        let loose = self.repo.join(".git/objects").join(dir).join(file);
        std::fs::remove_file(&loose).expect("the data blob is a loose object");
        let out = std::process::Command::new("git")
            .args(["cat-file", "-e", &self.data_blob])
            .current_dir(&self.repo)
            .output()
            .expect("git cat-file");
        assert!(!out.status.success(), "the blob is gone");
    }
}

pub fn write(repo: &Path, rel: &str, text: &str) {
    let p = repo.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}
