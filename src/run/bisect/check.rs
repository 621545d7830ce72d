//! A request's revisions checked against its repository: what `--path` names exists at the
//! commit given as bad, and the bundled reproducer has a ggml tree there (the decode probe a
//! llama.cpp tree). Usage errors (exit 2) naming the flag, made before anything is checked out.

use super::{git_error, Subtree};
use crate::error::CliError;
use crate::run::git;
use std::path::Path;

/// The revisions `good` and `bad` of `repo` (`flags`: how the user named them, for errors).
pub fn revisions(
    repo: &git2::Repository,
    (good, bad): (&str, &str),
    flags: (&str, &str),
) -> anyhow::Result<(git::Oid, git::Oid)> {
    let good = git::resolve(repo, good, flags.0).map_err(git_error)?;
    let bad = git::resolve(repo, bad, flags.1).map_err(git_error)?;
    Ok((good, bad))
}

/// `--path DIR`: `.` (or empty, `/`) is the whole tree; a directory must exist in `bad`
/// (`what` names that commit as the user gave it).
pub fn subtree(
    repo: &git2::Repository,
    bad: git::Oid,
    path: Option<&str>,
    flag: &str,
    what: &str,
) -> anyhow::Result<Subtree> {
    let p = match path {
        None => return Ok(Subtree::Auto),
        Some(p) => p.trim_matches('/'),
    };
    if p.is_empty() || p == "." {
        return Ok(Subtree::Whole);
    }
    let tree = repo
        .find_commit(bad)
        .and_then(|c| c.tree())
        .map_err(|e| CliError::infra(format!("reading {what} {bad}: {e}")))?;
    if tree.get_path(Path::new(p)).is_err() {
        return Err(CliError::usage(format!(
            "{flag} {p}: no such path in {what} {bad}; name a directory of that commit (or {flag} . for the whole tree)"
        )));
    }
    Ok(Subtree::Dir(p.to_string()))
}

/// The bundled reproducer needs a ggml tree at `bad` (ggml, llama.cpp or lucebox layout).
pub fn ggml_tree(repo: &git2::Repository, bad: git::Oid) -> anyhow::Result<()> {
    let tree = repo
        .find_commit(bad)
        .and_then(|c| c.tree())
        .map_err(|e| CliError::infra(format!("reading bad commit {bad}: {e}")))?;
    let has = |p: &str| tree.get_path(Path::new(p)).is_ok();
    if crate::core::layout::Layout::of(has).has_ggml_header(has) {
        return Ok(());
    }
    Err(CliError::usage(format!(
        "no --script given, and bad commit {bad} is not a ggml, llama.cpp or lucebox tree for the bundled reproducer (no include/ggml.h at the root, under ggml/ or under server/deps/llama.cpp/ggml/); pass --script CMD"
    )))
}

/// The decode probe builds llama.cpp: `bad` must be a llama.cpp tree.
pub fn llama_tree(repo: &git2::Repository, bad: git::Oid) -> anyhow::Result<()> {
    let tree = repo
        .find_commit(bad)
        .and_then(|c| c.tree())
        .map_err(|e| CliError::infra(format!("reading bad commit {bad}: {e}")))?;
    if crate::probe::decode::is_llama_tree(|p| tree.get_path(Path::new(p)).is_ok()) {
        return Ok(());
    }
    Err(CliError::usage(format!(
        "--probe-kind decode: bad commit {bad} is not a llama.cpp tree (no include/llama.h beside CMakeLists.txt); the decode probe builds llama.cpp: use --probe-kind replay for a ggml tree"
    )))
}

/// `--probe-kind backend-ops`: `bad` must hold test-backend-ops and know every `--op`
/// (refused with the tree's own op list), read from the commit as the probe reads a checkout.
pub fn backend_ops_tree(
    repo: &git2::Repository,
    bad: git::Oid,
    ops: &[String],
) -> anyhow::Result<()> {
    let tree = repo
        .find_commit(bad)
        .and_then(|c| c.tree())
        .map_err(|e| CliError::infra(format!("reading bad commit {bad}: {e}")))?;
    let exists = |p: &str| tree.get_path(Path::new(p)).is_ok();
    let read = |p: &str| {
        let blob = tree
            .get_path(Path::new(p))
            .ok()?
            .to_object(repo)
            .ok()?
            .peel_to_blob()
            .ok()?;
        String::from_utf8(blob.content().to_vec()).ok()
    };
    let found = crate::probe::kinds::backend_ops::tree(exists, read).map_err(|why| {
        CliError::usage(format!("--probe-kind backend-ops: bad commit {bad}: {why}"))
    })?;
    match crate::probe::kinds::backend_ops::unknown_ops(&found, ops) {
        Some(why) => Err(CliError::usage(format!("{why} (bad commit {bad})"))),
        None => Ok(()),
    }
}
