//! Git access (libgit2 through `git2`): open the repository, resolve and check the endpoints,
//! turn `good..bad` into the ordered candidates the search walks, and materialise a commit into
//! a private checkout under the work dir.
//!
//! Candidates are *tree classes*: consecutive commits whose tested tree (the whole tree, or the
//! subtree named by `--path`, e.g. `ggml` in llama.cpp) is identical behave identically, so
//! they are one thing to test. The first commit of each class represents it; all members are
//! kept for the report. Each candidate carries its first-parent depth as the stable search key
//! so overlapping bisections pick the same midpoints (and reuse stored results).
//!
//! Materialising a commit into a slot is `checkout`'s: a different job (files and mtimes, not
//! history) that every slot loop shares.

mod absent;
mod checkout;

pub use crate::core::layout::Layout;
pub use crate::core::range::{Candidate, CommitInfo, Range, RangeSpec};
pub use checkout::Checkout;
pub use git2::Oid;
use git2::{Repository, Sort, Tree};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("repository path {0} does not exist")]
    NoSuchPath(PathBuf),
    #[error(
        "{0} is not a git repository ({1}): run inside the checkout to bisect, or give --repo DIR"
    )]
    NotARepo(PathBuf, String),
    #[error("unknown revision `{rev}` (given as {flag}): {msg}")]
    UnknownRev {
        rev: String,
        flag: String,
        msg: String,
    },
    #[error("--good and --bad are the same commit ({0}): nothing to bisect")]
    SameCommit(String),
    #[error("good commit {good} is not an ancestor of bad commit {bad}: the endpoints must be ancestor and descendant (swap them, or with --regress success the fixed commit still goes in --bad)")]
    NotAncestor { good: String, bad: String },
    #[error("good commit {good} is an ancestor of bad commit {bad} but not on its first-parent chain; pass --no-first-parent to bisect the full ancestry path")]
    NotOnFirstParent { good: String, bad: String },
    #[error(
        "empty range: no commit between good {good} and bad {bad} changes the tested tree{path}"
    )]
    EmptyRange {
        good: String,
        bad: String,
        path: String,
    },
    #[error("git: {context}: {source}")]
    Git {
        context: String,
        source: git2::Error,
    },
    /// Blobs the probe reads are absent and no remote gave them: the one line says which and
    /// what to run.
    #[error("{0}")]
    Absent(String),
    #[error("checkout into {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl GitError {
    /// Input errors (exit 2) versus machinery errors (exit 3).
    pub fn is_usage(&self) -> bool {
        !matches!(
            self,
            GitError::Git { .. } | GitError::Io { .. } | GitError::Absent(_)
        )
    }
}

pub(crate) fn ctx(context: impl Into<String>) -> impl FnOnce(git2::Error) -> GitError {
    let context = context.into();
    move |source| GitError::Git { context, source }
}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> GitError + '_ {
    move |source| GitError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Opens the repository at `path` exactly (no search upwards: a typo should not silently
/// bisect an enclosing repository). A partial clone made by git before 2.4x records
/// `extensions.partialClone`, which libgit2 refuses unless told: reading needs nothing of it
/// (an absent blob is `git/absent.rs`'s), so it is accepted.
pub fn open(path: &Path) -> Result<Repository, GitError> {
    static EXTENSIONS: std::sync::Once = std::sync::Once::new();
    EXTENSIONS.call_once(|| {
        // SAFETY: libgit2 keeps this list in a static it reads when opening a repository; it is
        // set once, before this process opens its first one here.
        let _ = unsafe { git2::opts::set_extensions(&["partialclone"]) };
    });
    if !path.exists() {
        return Err(GitError::NoSuchPath(path.to_path_buf()));
    }
    Repository::open(path).map_err(|e| GitError::NotARepo(path.to_path_buf(), e.message().into()))
}

/// Resolves `rev` to a commit id; `flag` names where it came from for the error message.
pub fn resolve(repo: &Repository, rev: &str, flag: &str) -> Result<Oid, GitError> {
    let unknown = |msg: String| GitError::UnknownRev {
        rev: rev.into(),
        flag: flag.into(),
        msg,
    };
    let obj = repo
        .revparse_single(rev)
        .map_err(|e| unknown(e.message().into()))?;
    let commit = obj
        .peel_to_commit()
        .map_err(|_| unknown("it does not name a commit".into()))?;
    Ok(commit.id())
}

pub fn commit_info(repo: &Repository, id: Oid) -> Result<CommitInfo, GitError> {
    let c = repo
        .find_commit(id)
        .map_err(ctx(format!("reading commit {id}")))?;
    let author = c.author();
    let when = author.when();
    let offset = chrono::FixedOffset::east_opt(when.offset_minutes() * 60)
        .unwrap_or_else(|| chrono::FixedOffset::east_opt(0).expect("zero offset is valid"));
    let date = chrono::DateTime::from_timestamp(when.seconds(), 0)
        .map(|d| d.with_timezone(&offset).to_rfc3339())
        .unwrap_or_default();
    Ok(CommitInfo {
        sha: id.to_string(),
        title: c.summary().unwrap_or("").to_string(),
        author: format!(
            "{} <{}>",
            author.name().unwrap_or("?"),
            author.email().unwrap_or("?")
        ),
        date,
    })
}

/// Where ggml sits in the tree of `commit`: `core::layout`'s rule asked of git (nothing is
/// checked out yet when a bisect decides which subtree keys its candidates).
pub fn detect_layout(repo: &Repository, commit: Oid) -> Result<Layout, GitError> {
    let tree = repo
        .find_commit(commit)
        .and_then(|c| c.tree())
        .map_err(ctx(format!("reading tree of {commit}")))?;
    Ok(Layout::of(|p| tree.get_path(Path::new(p)).is_ok()))
}

fn tested_tree(tree: &Tree<'_>, path: Option<&str>) -> String {
    match path {
        None => tree.id().to_string(),
        Some(p) => match tree.get_path(Path::new(p)) {
            Ok(e) => e.id().to_string(),
            Err(_) => "absent".into(),
        },
    }
}

/// The id `plan_range` keys a commit by: its whole tree, or the subtree at `path`. Runs
/// outside the range (validation's parent and revert) are keyed the same way, so they share
/// the store with the bisection's.
pub fn tested_tree_of(
    repo: &Repository,
    commit: &str,
    path: Option<&str>,
) -> Result<String, GitError> {
    let id = Oid::from_str(commit).map_err(ctx(format!("parsing {commit}")))?;
    let tree = repo
        .find_commit(id)
        .and_then(|c| c.tree())
        .map_err(ctx(format!("reading tree of {commit}")))?;
    Ok(tested_tree(&tree, path))
}

/// Number of commits on the first-parent chain ending at `id` (the root has depth 1).
fn first_parent_depth(repo: &Repository, id: Oid) -> Result<u64, GitError> {
    let mut walk = repo.revwalk().map_err(ctx("revwalk"))?;
    walk.simplify_first_parent().map_err(ctx("revwalk"))?;
    walk.push(id).map_err(ctx(format!("walking from {id}")))?;
    Ok(walk.count() as u64)
}

/// Enumerates and collapses `good..bad`. Errors name both commits.
pub fn plan_range(
    repo: &Repository,
    good: Oid,
    bad: Oid,
    spec: &RangeSpec,
) -> Result<Range, GitError> {
    let (gs, bs) = (good.to_string(), bad.to_string());
    if good == bad {
        return Err(GitError::SameCommit(gs));
    }
    let is_anc = repo
        .graph_descendant_of(bad, good)
        .map_err(ctx(format!("checking ancestry of {gs} and {bs}")))?;
    if !is_anc {
        return Err(GitError::NotAncestor { good: gs, bad: bs });
    }
    // Oldest first, good first.
    let mut order: Vec<Oid> = Vec::new();
    let bad_depth = first_parent_depth(repo, bad)?;
    let mut keys: Vec<u64> = Vec::new();
    if spec.first_parent {
        let mut cur = bad;
        let mut depth = bad_depth;
        loop {
            order.push(cur);
            keys.push(depth);
            if cur == good {
                break;
            }
            let c = repo
                .find_commit(cur)
                .map_err(ctx(format!("reading commit {cur}")))?;
            match c.parent_id(0) {
                Ok(p) => {
                    cur = p;
                    depth -= 1;
                }
                Err(_) => return Err(GitError::NotOnFirstParent { good: gs, bad: bs }),
            }
        }
        order.reverse();
        keys.reverse();
    } else {
        // git's --ancestry-path: descendants of good that are ancestors of bad, parents first.
        let mut walk = repo.revwalk().map_err(ctx("revwalk"))?;
        walk.set_sorting(Sort::TOPOLOGICAL | Sort::REVERSE)
            .map_err(ctx("revwalk"))?;
        walk.push(bad).map_err(ctx(format!("walking from {bs}")))?;
        walk.hide(good).map_err(ctx(format!("hiding {gs}")))?;
        let mut on_path: HashSet<Oid> = HashSet::from([good]);
        order.push(good);
        for id in walk {
            let id = id.map_err(ctx("walking the range"))?;
            let c = repo
                .find_commit(id)
                .map_err(ctx(format!("reading commit {id}")))?;
            if c.parent_ids().any(|p| on_path.contains(&p)) {
                on_path.insert(id);
                order.push(id);
            }
        }
        let good_depth = first_parent_depth(repo, good)?;
        keys = (0..order.len() as u64).map(|i| good_depth + i).collect();
    }
    let mut candidates: Vec<Candidate> = Vec::new();
    for (id, depth) in order.iter().zip(&keys) {
        let commit = repo
            .find_commit(*id)
            .map_err(ctx(format!("reading commit {id}")))?;
        // The whole tree needs no object lookup beyond the commit itself.
        let t = match spec.path.as_deref() {
            None => commit.tree_id().to_string(),
            Some(_) => {
                let tree = commit
                    .tree()
                    .map_err(ctx(format!("reading tree of {id}")))?;
                tested_tree(&tree, spec.path.as_deref())
            }
        };
        match candidates.last_mut() {
            Some(last) if last.tree == t => last.members.push(id.to_string()),
            _ => candidates.push(Candidate {
                sha: id.to_string(),
                tree: t,
                depth: *depth,
                members: vec![id.to_string()],
            }),
        }
    }
    if candidates.len() < 2 {
        return Err(GitError::EmptyRange {
            good: gs,
            bad: bs,
            path: spec
                .path
                .as_ref()
                .map(|p| format!(" `{p}`"))
                .unwrap_or_default(),
        });
    }
    Ok(Range {
        good: gs,
        bad: bs,
        spec: spec.clone(),
        commits: order.len(),
        candidates,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@e")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@e")
            .output()
            .unwrap();
        assert!(out.status.success(), "{:?}", out);
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    fn commit_all(dir: &Path, msg: &str) -> String {
        git(dir, &["add", "-A"]);
        git(dir, &["commit", "-q", "--allow-empty", "-m", msg]);
        git(dir, &["rev-parse", "HEAD"])
    }

    #[test]
    fn first_parent_chain_versus_full_ancestry_path() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        git(r, &["init", "-q", "-b", "main"]);
        let step = |name: &str| {
            fs::write(r.join(name), name).unwrap();
            commit_all(r, name)
        };
        let c0 = step("c0");
        git(r, &["checkout", "-q", "-b", "side"]);
        let b1 = step("b1");
        let b2 = step("b2");
        git(r, &["checkout", "-q", "main"]);
        let c1 = step("c1");
        git(r, &["merge", "-q", "--no-ff", "-m", "merge side", "side"]);
        let m = git(r, &["rev-parse", "HEAD"]);
        let c3 = step("c3");
        let repo = open(r).unwrap();
        let id = |s: &str| Oid::from_str(s).unwrap();
        let shas =
            |range: Range| -> Vec<String> { range.candidates.into_iter().map(|c| c.sha).collect() };
        let fp = RangeSpec {
            first_parent: true,
            path: None,
        };
        let full = RangeSpec {
            first_parent: false,
            path: None,
        };
        assert_eq!(
            shas(plan_range(&repo, id(&c0), id(&c3), &fp).unwrap()),
            vec![c0.clone(), c1.clone(), m.clone(), c3.clone()]
        );
        let all = shas(plan_range(&repo, id(&c0), id(&c3), &full).unwrap());
        assert_eq!(all.len(), 6);
        assert_eq!((&all[0], &all[4], &all[5]), (&c0, &m, &c3));
        let pos = |s: &str| all.iter().position(|x| x == s).unwrap();
        assert!(pos(&b1) < pos(&b2), "parents before children");
        // A side-branch good commit is an ancestor, but not on bad's first-parent chain.
        assert!(matches!(
            plan_range(&repo, id(&b1), id(&c3), &fp),
            Err(GitError::NotOnFirstParent { .. })
        ));
        // Ancestry path from b1: only its descendants (c1 is not one).
        assert_eq!(
            shas(plan_range(&repo, id(&b1), id(&c3), &full).unwrap()),
            vec![b1, b2, m, c3]
        );
    }

    #[test]
    fn collapses_identical_subtrees_and_checks_out_incrementally() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        git(r, &["init", "-q", "-b", "main"]);
        fs::create_dir_all(r.join("lib")).unwrap();
        fs::write(r.join("lib/a.c"), "1").unwrap();
        let c0 = commit_all(r, "c0");
        fs::write(r.join("doc.txt"), "x").unwrap();
        commit_all(r, "c1 docs only");
        fs::write(r.join("lib/a.c"), "2").unwrap();
        let c2 = commit_all(r, "c2");
        fs::remove_file(r.join("doc.txt")).unwrap();
        fs::create_dir_all(r.join("doc.txt")).unwrap();
        fs::write(r.join("doc.txt/inner"), "y").unwrap();
        let c3 = commit_all(r, "c3 docs");
        let repo = open(r).unwrap();
        let spec = RangeSpec {
            first_parent: true,
            path: Some("lib".into()),
        };
        let g = Oid::from_str(&c0).unwrap();
        let b = Oid::from_str(&c3).unwrap();
        let range = plan_range(&repo, g, b, &spec).unwrap();
        assert_eq!(range.commits, 4);
        assert_eq!(range.candidates.len(), 2);
        assert_eq!(range.candidates[1].sha, c2);
        assert_eq!(range.candidates[1].members.len(), 2);
        assert_eq!(range.candidates[0].depth + 2, range.candidates[1].depth);

        let wt = tempfile::tempdir().unwrap();
        let co = Checkout::new(wt.path().join("src"), wt.path().join("state"));
        co.checkout(&repo, &c0).unwrap();
        assert_eq!(
            fs::read_to_string(wt.path().join("src/lib/a.c")).unwrap(),
            "1"
        );
        co.checkout(&repo, &c3).unwrap();
        assert_eq!(
            fs::read_to_string(wt.path().join("src/doc.txt/inner")).unwrap(),
            "y"
        );
        assert_eq!(
            fs::read_to_string(wt.path().join("src/lib/a.c")).unwrap(),
            "2"
        );
        co.checkout(&repo, &c0).unwrap();
        assert!(!wt.path().join("src/doc.txt").exists());
        assert_eq!(
            fs::read_to_string(wt.path().join("src/lib/a.c")).unwrap(),
            "1"
        );
        assert!(matches!(
            plan_range(&repo, b, g, &spec),
            Err(GitError::NotAncestor { .. })
        ));
        assert!(matches!(
            plan_range(&repo, g, g, &spec),
            Err(GitError::SameCommit(_))
        ));
    }
}
