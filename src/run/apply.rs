//! Applied patches, the effects (`core::applied` is the pure part): each `--apply` read once
//! when the request is made (`git diff REV^ REV -- PATH`, or the patch file), so every probe
//! applies the same bytes; saved under the work dir for the hand-run line; applied with
//! `git apply` to a slot's checkout before the probe, and taken off after it
//! (`Slot::restore`), so the next probe's checkout starts from its commit's own files.

use crate::core::applied::{self, AppliedPatch, FileSides, Source};
use crate::error::CliError;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Each `--apply` argument read, in order; a bad one is one line (exit 2): no such revision,
/// a root commit, a path its diff does not touch, no such file, not a patch.
pub fn resolve(repo_dir: &Path, args: &[String]) -> anyhow::Result<Vec<AppliedPatch>> {
    if args.is_empty() {
        return Ok(Vec::new());
    }
    let repo =
        crate::run::git::open(repo_dir).map_err(|e| CliError::usage(format!("--apply: {e}")))?;
    let mut out = Vec::new();
    for arg in args {
        let bad = |why: String| CliError::usage(format!("--apply {arg}: {why}"));
        let patch = match applied::source(arg, |p| Path::new(p).is_file()) {
            Source::Commit { rev, path } => {
                let id = repo
                    .revparse_single(&rev)
                    .and_then(|o| o.peel_to_commit())
                    .map_err(|_| {
                        bad(format!(
                            "no revision `{rev}` in {} (REV:PATH takes a commit and a path it changed; a patch file that does not exist is read as REV:PATH)",
                            repo_dir.display()
                        ))
                    })?;
                if id.parent_count() == 0 {
                    return Err(bad(format!(
                        "{} is a root commit: it has no parent to diff against",
                        crate::core::range::short_sha(&id.id().to_string())
                    )));
                }
                let sha = id.id().to_string();
                let text = diff(repo_dir, &sha, &path).map_err(&bad)?;
                if text.trim().is_empty() {
                    return Err(bad(format!(
                        "commit {} does not change `{path}` (git diff {0}^ {0} -- {path} is empty)",
                        crate::core::range::short_sha(&sha)
                    )));
                }
                let sides = applied::touched_files(&text)
                    .into_iter()
                    .map(|f| FileSides {
                        before: text_at(&repo, &format!("{sha}^:{f}")),
                        after: text_at(&repo, &format!("{sha}:{f}")),
                        path: f,
                    })
                    .collect();
                AppliedPatch {
                    given: arg.clone(),
                    commit: Some(sha),
                    text,
                    sides,
                }
            }
            Source::File(f) => {
                let text = std::fs::read(&f)
                    .map_err(|e| bad(format!("cannot read it as a patch file: {e}")))?;
                let text = String::from_utf8(text)
                    .map_err(|_| bad("not a patch (not text)".to_string()))?;
                if !applied::is_patch(&text) || !git_reads(&text) {
                    return Err(bad(
                        "not a patch (no diff git apply can read; make one with git diff or git format-patch)".to_string(),
                    ));
                }
                AppliedPatch {
                    given: arg.clone(),
                    commit: None,
                    text,
                    sides: Vec::new(),
                }
            }
        };
        out.push(patch);
    }
    Ok(out)
}

/// The blob at `REV:PATH` as text, read through the repository already open; `None` where the
/// file is not there (or is not text).
fn text_at(repo: &git2::Repository, spec: &str) -> Option<String> {
    let blob = repo.revparse_single(spec).ok()?.peel_to_blob().ok()?;
    String::from_utf8(blob.content().to_vec()).ok()
}

/// `git diff SHA^ SHA -- PATH`, as text (binary changes included).
fn diff(repo_dir: &Path, sha: &str, path: &str) -> Result<String, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo_dir)
        .args(["diff", "--no-color", "--no-ext-diff", "--binary"])
        .arg(format!("{sha}^"))
        .arg(sha)
        .args(["--", path])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run git diff: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "git diff failed: {}",
            err.lines().next().unwrap_or("").trim()
        ));
    }
    String::from_utf8(out.stdout).map_err(|_| "the diff is not text".to_string())
}

/// Whether `git apply --numstat` reads `text` as a patch (nothing is applied).
fn git_reads(text: &str) -> bool {
    let dir = std::env::temp_dir();
    run_git_apply(&dir, &["--numstat"], text).is_ok_and(|o| o.0)
}

/// `git apply ARGS` in `dir` with `text` on its standard input, outside any repository
/// (`GIT_CEILING_DIRECTORIES`: a work dir inside a repository must not make git apply paths
/// relative to that repository's root). Returns (success, output).
fn run_git_apply(dir: &Path, args: &[&str], text: &str) -> std::io::Result<(bool, String)> {
    use std::io::Write;
    let ceiling = dir.parent().unwrap_or(dir);
    let mut child = Command::new("git")
        .arg("apply")
        .args(args)
        .current_dir(dir)
        .env("GIT_CEILING_DIRECTORIES", ceiling)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(text.as_bytes());
    }
    let out = child.wait_with_output()?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok((out.status.success(), text))
}

/// Applies `patches` in order to the checkout `dir`. Err: the reason the first one that does
/// not apply gives (a skip of this tree, never a verdict), with git apply's own words.
pub fn apply(dir: &Path, patches: &[AppliedPatch]) -> Result<(), String> {
    for p in patches {
        let (ok, out) = run_git_apply(dir, &["--whitespace=nowarn"], &p.text)
            .map_err(|e| format!("applied patch {}: cannot run git apply: {e}", p.given))?;
        // The diff's context is the fix's tree; an older tree may have moved lines around it.
        // A commit's change then goes in as cherry-pick would put it: a three-way merge.
        if !ok && !p.sides.is_empty() {
            merge(dir, p)?;
            continue;
        }
        if !ok {
            let why = out
                .lines()
                .find(|l| l.starts_with("error:"))
                .or_else(|| out.lines().next())
                .unwrap_or("")
                .trim()
                .trim_start_matches("error: ")
                .to_string();
            return Err(format!(
                "applied patch {} does not apply to this tree: {why}",
                p.given
            ));
        }
    }
    Ok(())
}

/// `p`'s commit merged into the checkout's files (`git merge-file`: the commit's parent is the
/// base, the checkout ours, the commit theirs). All or nothing: a conflict in any file leaves
/// every file as it was and is the reason this tree is a skip.
fn merge(dir: &Path, p: &AppliedPatch) -> Result<(), String> {
    let fail = |why: String| {
        format!(
            "applied patch {} does not apply to this tree: {why}",
            p.given
        )
    };
    let tmp = tempfile::tempdir().map_err(|e| fail(format!("no temp dir: {e}")))?;
    let mut merged = Vec::new();
    for (i, f) in p.sides.iter().enumerate() {
        let target = dir.join(&f.path);
        let ours = std::fs::read_to_string(&target).ok();
        let text = match (ours, &f.before, &f.after) {
            // The commit adds or deletes the file: only a tree in the state it expects takes it.
            (None, None, Some(after)) => after.clone(),
            (Some(ours), Some(before), None) if ours == *before => String::new(),
            (Some(ours), Some(before), Some(after)) => {
                let side = |name: &str, text: &str| {
                    let path = tmp.path().join(format!("{i}.{name}"));
                    std::fs::write(&path, text).map(|_| path)
                };
                let (o, b, t) = match (
                    side("ours", &ours),
                    side("base", before),
                    side("theirs", after),
                ) {
                    (Ok(o), Ok(b), Ok(t)) => (o, b, t),
                    _ => return Err(fail("cannot write the merge's inputs".into())),
                };
                let out = Command::new("git")
                    .args(["merge-file", "-p", "-q"])
                    .args([&o, &b, &t])
                    .current_dir(tmp.path())
                    .env("GIT_CEILING_DIRECTORIES", tmp.path())
                    .stdin(Stdio::null())
                    .output()
                    .map_err(|e| fail(format!("cannot run git merge-file: {e}")))?;
                match out.status.code() {
                    Some(0) => String::from_utf8(out.stdout)
                        .map_err(|_| fail(format!("{}: the merge is not text", f.path)))?,
                    Some(n) if n > 0 => {
                        return Err(fail(format!(
                            "{}: a three-way merge leaves {n} conflict{}",
                            f.path,
                            if n == 1 { "" } else { "s" }
                        )))
                    }
                    _ => {
                        return Err(fail(format!(
                            "{}: git merge-file failed: {}",
                            f.path,
                            String::from_utf8_lossy(&out.stderr).trim()
                        )))
                    }
                }
            }
            _ => {
                return Err(fail(format!(
                    "{}: the tree does not have it as the commit's parent does",
                    f.path
                )))
            }
        };
        merged.push((target, f.after.is_some(), text));
    }
    for (target, keep, text) in merged {
        let done = match keep {
            true => target
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|_| std::fs::write(&target, text)),
            false => std::fs::remove_file(&target),
        };
        done.map_err(|e| fail(format!("cannot write {}: {e}", target.display())))?;
    }
    Ok(())
}

/// Every file the patches touch, once.
pub fn files(patches: &[AppliedPatch]) -> Vec<String> {
    let mut all: Vec<String> = patches.iter().flat_map(AppliedPatch::files).collect();
    all.sort();
    all.dedup();
    all
}

/// Where `p`'s copy is kept under the work dir (`patches/<id>.patch`).
pub fn saved_path(work_dir: &Path, p: &AppliedPatch) -> PathBuf {
    work_dir.join("patches").join(p.file_name())
}

/// Writes each patch's copy under the work dir (the hand-run line applies it).
pub fn save(work_dir: &Path, patches: &[AppliedPatch]) -> std::io::Result<()> {
    for p in patches {
        let path = saved_path(work_dir, p);
        if path.is_file() {
            continue;
        }
        std::fs::create_dir_all(path.parent().unwrap_or(work_dir))?;
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, p.text.as_bytes())?;
        std::fs::rename(&tmp, &path)?;
    }
    Ok(())
}
