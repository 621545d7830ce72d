//! A commit materialised into a private directory. Checkouts never touch the user's working
//! tree or index: each slot is a plain directory that we write blobs into ourselves, moving
//! between commits by writing only the files that differ, because mtimes of unchanged files
//! must survive for the persistent build directory to stay incremental.

use super::{ctx, io_err, GitError};
use git2::{Delta, ObjectType, Oid, Repository, Tree};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A private checkout directory, moved between commits by writing only what changed.
#[derive(Debug, Clone)]
pub struct Checkout {
    pub dir: PathBuf,
    /// Records the tree now on disk; absent while a checkout is in progress (a killed
    /// checkout is redone from scratch).
    state: PathBuf,
}

impl Checkout {
    pub fn new(dir: PathBuf, state: PathBuf) -> Self {
        Checkout { dir, state }
    }

    /// Makes `dir` hold exactly the tree of `commit`.
    pub fn checkout(&self, repo: &Repository, commit: &str) -> Result<(), GitError> {
        let id = Oid::from_str(commit).map_err(ctx(format!("parsing {commit}")))?;
        let tree = repo
            .find_commit(id)
            .and_then(|c| c.tree())
            .map_err(ctx(format!("reading tree of {commit}")))?;
        let previous = fs::read_to_string(&self.state)
            .ok()
            .and_then(|s| Oid::from_str(s.trim()).ok())
            .and_then(|o| repo.find_tree(o).ok());
        if previous.as_ref().map(|t| t.id()) == Some(tree.id()) && self.dir.is_dir() {
            return Ok(());
        }
        match fs::remove_file(&self.state) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&self.state)(e)),
        }
        match previous {
            Some(old) if self.dir.is_dir() => self.apply_diff(repo, &old, &tree)?,
            _ => self.write_all(repo, &tree)?,
        }
        fs::write(&self.state, tree.id().to_string()).map_err(io_err(&self.state))?;
        Ok(())
    }

    fn write_all(&self, repo: &Repository, tree: &Tree<'_>) -> Result<(), GitError> {
        if self.dir.exists() {
            fs::remove_dir_all(&self.dir).map_err(io_err(&self.dir))?;
        }
        fs::create_dir_all(&self.dir).map_err(io_err(&self.dir))?;
        let mut failure: Option<GitError> = None;
        tree.walk(git2::TreeWalkMode::PreOrder, |root, entry| {
            let Some(name) = entry.name() else {
                return git2::TreeWalkResult::Skip;
            };
            let rel = Path::new(root).join(name);
            let res = match entry.kind() {
                Some(ObjectType::Tree) => {
                    let p = self.dir.join(&rel);
                    fs::create_dir_all(&p).map_err(io_err(&p))
                }
                Some(ObjectType::Blob) => self.write_blob(repo, &rel, entry.id(), entry.filemode()),
                // Submodules: an empty directory, as git leaves an uninitialised one.
                _ => {
                    let p = self.dir.join(&rel);
                    fs::create_dir_all(&p).map_err(io_err(&p))
                }
            };
            match res {
                Ok(()) => git2::TreeWalkResult::Ok,
                Err(e) => {
                    failure = Some(e);
                    git2::TreeWalkResult::Abort
                }
            }
        })
        .map_err(|e| match failure.take() {
            Some(f) => f,
            None => GitError::Git {
                context: "walking tree".into(),
                source: e,
            },
        })?;
        match failure {
            Some(f) => Err(f),
            None => Ok(()),
        }
    }

    fn apply_diff(
        &self,
        repo: &Repository,
        old: &Tree<'_>,
        new: &Tree<'_>,
    ) -> Result<(), GitError> {
        let diff = repo
            .diff_tree_to_tree(Some(old), Some(new), None)
            .map_err(ctx("diffing trees"))?;
        let mut writes = Vec::new();
        // Deletions first, so a file that becomes a directory (or back) has room.
        for d in diff.deltas() {
            if matches!(
                d.status(),
                Delta::Deleted | Delta::Typechange | Delta::Renamed
            ) {
                if let Some(p) = d.old_file().path() {
                    let full = self.dir.join(p);
                    remove_path(&full).map_err(io_err(&full))?;
                    prune_empty_parents(&self.dir, &full);
                }
            }
            if d.status() != Delta::Deleted {
                if let Some(p) = d.new_file().path() {
                    writes.push((p.to_path_buf(), d.new_file().id(), d.new_file().mode()));
                }
            }
        }
        for (rel, id, mode) in writes {
            if mode == git2::FileMode::Commit {
                let p = self.dir.join(&rel);
                fs::create_dir_all(&p).map_err(io_err(&p))?;
            } else {
                self.write_blob(repo, &rel, id, mode.into())?;
            }
        }
        Ok(())
    }

    fn write_blob(
        &self,
        repo: &Repository,
        rel: &Path,
        id: Oid,
        mode: i32,
    ) -> Result<(), GitError> {
        let path = self.dir.join(rel);
        let blob =
            repo.find_blob(id)
                .map_err(ctx(format!("reading blob {} ({})", id, rel.display())))?;
        if let Some(parent) = path.parent() {
            if parent.is_file() || parent.is_symlink() {
                fs::remove_file(parent).map_err(io_err(parent))?;
            }
            fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        remove_path(&path).map_err(io_err(&path))?;
        if mode == i32::from(git2::FileMode::Link) {
            let target = String::from_utf8_lossy(blob.content()).into_owned();
            std::os::unix::fs::symlink(target, &path).map_err(io_err(&path))?;
        } else {
            fs::write(&path, blob.content()).map_err(io_err(&path))?;
            let perm = if mode == i32::from(git2::FileMode::BlobExecutable) {
                0o755
            } else {
                0o644
            };
            fs::set_permissions(&path, fs::Permissions::from_mode(perm)).map_err(io_err(&path))?;
        }
        Ok(())
    }
}

fn remove_path(p: &Path) -> std::io::Result<()> {
    match fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(p),
        Ok(_) => fs::remove_file(p),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

fn prune_empty_parents(root: &Path, removed: &Path) {
    let mut cur = removed.parent();
    while let Some(dir) = cur {
        if dir == root || !dir.starts_with(root) || fs::remove_dir(dir).is_err() {
            break;
        }
        cur = dir.parent();
    }
}
