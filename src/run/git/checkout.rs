//! A commit materialised into a private directory. Checkouts never touch the user's working
//! tree or index: each slot is a plain directory that we write blobs into ourselves, moving
//! between commits by writing only the files that differ, because mtimes of unchanged files
//! must survive for the persistent build directory to stay incremental.

use super::absent::{self, Absent};
use super::{ctx, io_err, GitError};
use crate::core::layout::Layout;
use crate::probe::{vendor, Reads};
use git2::{Delta, ObjectType, Oid, Repository, Tree};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A private checkout directory, moved between commits by writing only what changed.
#[derive(Debug, Clone)]
pub struct Checkout {
    pub dir: PathBuf,
    /// Records the tree now on disk and what of it was written (`<tree>`, or `<tree> ggml`);
    /// absent while a checkout is in progress (a killed checkout is redone from scratch).
    state: PathBuf,
}

impl Checkout {
    pub fn new(dir: PathBuf, state: PathBuf) -> Self {
        Checkout { dir, state }
    }

    /// Makes `dir` hold exactly the tree of `commit`.
    pub fn checkout(&self, repo: &Repository, commit: &str) -> Result<(), GitError> {
        self.checkout_reading(repo, commit, Reads::Tree, None)
    }

    /// Makes `dir` hold exactly what a prober that `reads` this much reads of `commit`:
    /// every other blob is never read, so one missing from the repository (a partial clone, a
    /// pruned data file) cannot stop the probe, and a probe of a 24 MB tree writes its ggml.
    /// Of a whole tree tested at `scope` (`--path`), a blob absent outside `scope` is left
    /// unwritten; one the probe reads is fetched from a remote or stops the checkout
    /// (`GitError::Absent`).
    pub fn checkout_reading(
        &self,
        repo: &Repository,
        commit: &str,
        reads: Reads,
        scope: Option<&str>,
    ) -> Result<(), GitError> {
        let tree = commit_tree(repo, commit)?;
        let previous = fs::read_to_string(&self.state).ok().and_then(|s| {
            let mut lines = s.lines();
            let mut words = lines.next()?.split_whitespace();
            let old = repo.find_tree(Oid::from_str(words.next()?).ok()?).ok()?;
            let old_reads = match words.next() {
                Some(GGML_STATE) => Reads::Ggml,
                _ => Reads::Tree,
            };
            // Files left out under another scope may be read now: those trees are not moved.
            let left_out = lines.next().and_then(|l| l.strip_prefix(LEFT_OUT_STATE));
            if left_out.is_some_and(|l| Some(l) != scope) {
                return None;
            }
            Some((old, old_reads, left_out.is_some()))
        });
        let wanted = parts(&tree, reads);
        let here = self.dir.is_dir();
        if let Some((old, old_reads, _)) = &previous {
            if old.id() == tree.id() && *old_reads == reads && here {
                return Ok(());
            }
        }
        match fs::remove_file(&self.state) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&self.state)(e)),
        }
        let mut absent = Absent::new(reads, scope);
        let mut left_out = false;
        match previous {
            // Same reads, same parts: file by file, so unchanged files keep their mtimes.
            Some((old, old_reads, old_left_out))
                if here && old_reads == reads && parts(&old, reads) == wanted =>
            {
                left_out = old_left_out;
                for p in &wanted {
                    let (a, b) = (part(repo, &old, p)?, part(repo, &tree, p)?);
                    self.apply_part(repo, p, a, b, &mut absent)?;
                }
            }
            _ => self.write_all(repo, &tree, &wanted, &mut absent)?,
        }
        if !absent.needed.is_empty() {
            let ids: Vec<Oid> = absent.needed.iter().map(|n| n.id).collect();
            let tried = absent::fetch(repo, &ids);
            let mut still = Absent::new(reads, scope);
            for n in &absent.needed {
                self.write_blob(repo, &n.rel, n.id, n.mode, &mut still)?;
            }
            if !still.needed.is_empty() {
                return Err(GitError::Absent(absent::message(
                    repo, commit, &still, &tried,
                )));
            }
        }
        absent.announce_outside(repo);
        left_out |= !absent.outside.is_empty();
        let mut state = match reads {
            Reads::Tree => tree.id().to_string(),
            Reads::Ggml => format!("{} {GGML_STATE}", tree.id()),
        };
        if left_out {
            state = format!("{state}\n{LEFT_OUT_STATE}{}", scope.unwrap_or(""));
        }
        fs::write(&self.state, state).map_err(io_err(&self.state))?;
        Ok(())
    }

    /// Before a patch is applied to the checkout (`run::apply`): the state file is taken away,
    /// so a run killed with the patch on disk leaves a checkout the next one rewrites whole.
    /// Returns the state to give back to `restore`.
    pub fn unsettle(&self) -> Result<Option<String>, GitError> {
        let state = fs::read_to_string(&self.state).ok();
        match fs::remove_file(&self.state) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&self.state)(e)),
        }
        Ok(state)
    }

    /// After a patched probe: `paths` written again as `commit` has them (removed where it
    /// has none), then the state `unsettle` took is given back, so the next probe's checkout
    /// starts from `commit`'s own files, not the patched ones.
    pub fn restore(
        &self,
        repo: &Repository,
        commit: &str,
        paths: &[String],
        state: Option<String>,
    ) -> Result<(), GitError> {
        let tree = commit_tree(repo, commit)?;
        let mut absent = Absent::new(Reads::Tree, None);
        for p in paths {
            let rel = Path::new(p);
            match tree.get_path(rel) {
                Ok(e) if e.kind() == Some(ObjectType::Blob) => {
                    self.write_blob(repo, rel, e.id(), e.filemode(), &mut absent)?;
                }
                _ => {
                    let path = self.dir.join(rel);
                    remove_path(&path).map_err(io_err(&path))?;
                    prune_empty_parents(&self.dir, &path);
                }
            }
        }
        if !absent.needed.is_empty() {
            // A blob of the commit is missing here: leave the state away (a whole rewrite).
            return Ok(());
        }
        if let Some(state) = state {
            fs::write(&self.state, state).map_err(io_err(&self.state))?;
        }
        Ok(())
    }

    fn write_all(
        &self,
        repo: &Repository,
        tree: &Tree<'_>,
        parts: &[String],
        absent: &mut Absent<'_>,
    ) -> Result<(), GitError> {
        if self.dir.exists() {
            fs::remove_dir_all(&self.dir).map_err(io_err(&self.dir))?;
        }
        fs::create_dir_all(&self.dir).map_err(io_err(&self.dir))?;
        for p in parts {
            if let Some(found) = part(repo, tree, p)? {
                self.write_part(repo, p, found, absent)?;
            }
        }
        Ok(())
    }

    fn write_part(
        &self,
        repo: &Repository,
        rel: &str,
        found: Part<'_>,
        absent: &mut Absent<'_>,
    ) -> Result<(), GitError> {
        match found {
            Part::Dir(t) => {
                let p = self.dir.join(rel);
                fs::create_dir_all(&p).map_err(io_err(&p))?;
                self.write_tree(repo, Path::new(rel), &t, absent)
            }
            Part::File(id, mode) => self.write_blob(repo, Path::new(rel), id, mode, absent),
            // Submodules: an empty directory, as git leaves an uninitialised one.
            Part::Other => {
                let p = self.dir.join(rel);
                fs::create_dir_all(&p).map_err(io_err(&p))
            }
        }
    }

    /// Moves one part from `old` to `new`: a directory on both sides by its diff, anything
    /// else by rewriting it when it changed.
    fn apply_part(
        &self,
        repo: &Repository,
        rel: &str,
        old: Option<Part<'_>>,
        new: Option<Part<'_>>,
        absent: &mut Absent<'_>,
    ) -> Result<(), GitError> {
        match (old, new) {
            (Some(Part::Dir(a)), Some(Part::Dir(b))) => {
                self.apply_diff(repo, Path::new(rel), &a, &b, absent)
            }
            (Some(Part::File(a, ma)), Some(Part::File(b, mb))) if a == b && ma == mb => Ok(()),
            (None, None) | (Some(Part::Other), Some(Part::Other)) => Ok(()),
            (old, new) => {
                if old.is_some() {
                    let full = self.dir.join(rel);
                    remove_path(&full).map_err(io_err(&full))?;
                    prune_empty_parents(&self.dir, &full);
                }
                match new {
                    Some(found) => self.write_part(repo, rel, found, absent),
                    None => Ok(()),
                }
            }
        }
    }

    /// Writes every entry of `tree` under `prefix`.
    fn write_tree(
        &self,
        repo: &Repository,
        prefix: &Path,
        tree: &Tree<'_>,
        absent: &mut Absent<'_>,
    ) -> Result<(), GitError> {
        let mut failure: Option<GitError> = None;
        tree.walk(git2::TreeWalkMode::PreOrder, |root, entry| {
            let Some(name) = entry.name() else {
                return git2::TreeWalkResult::Skip;
            };
            let rel = prefix.join(root).join(name);
            let res = match entry.kind() {
                Some(ObjectType::Tree) => {
                    let p = self.dir.join(&rel);
                    fs::create_dir_all(&p).map_err(io_err(&p))
                }
                Some(ObjectType::Blob) => {
                    self.write_blob(repo, &rel, entry.id(), entry.filemode(), absent)
                }
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
        prefix: &Path,
        old: &Tree<'_>,
        new: &Tree<'_>,
        absent: &mut Absent<'_>,
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
                    let full = self.dir.join(prefix).join(p);
                    remove_path(&full).map_err(io_err(&full))?;
                    prune_empty_parents(&self.dir, &full);
                }
            }
            if d.status() != Delta::Deleted {
                if let Some(p) = d.new_file().path() {
                    writes.push((prefix.join(p), d.new_file().id(), d.new_file().mode()));
                }
            }
        }
        for (rel, id, mode) in writes {
            if mode == git2::FileMode::Commit {
                let p = self.dir.join(&rel);
                fs::create_dir_all(&p).map_err(io_err(&p))?;
            } else {
                self.write_blob(repo, &rel, id, mode.into(), absent)?;
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
        absent: &mut Absent<'_>,
    ) -> Result<(), GitError> {
        let path = self.dir.join(rel);
        let Some(blob) = absent.read(repo, rel, id, mode).map_err(ctx(format!(
            "reading blob {} ({})",
            id,
            rel.display()
        )))?
        else {
            // Whatever an older tree left at this path must not pass for this commit's file.
            remove_path(&path).map_err(io_err(&path))?;
            return Ok(());
        };
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

/// The state file's word for a checkout that wrote what `Reads::Ggml` reads.
const GGML_STATE: &str = "ggml";

/// The state file's second line, before the scope, when absent blobs outside it were left out.
const LEFT_OUT_STATE: &str = "left out outside ";

/// The paths of `tree` a checkout for `reads` writes, the root as `""`: the whole tree, or
/// ggml's directory and the vendoring note beside it. Decided from the tree alone, with the
/// same `core::layout` rule the prober then runs on the written files, so both find the same
/// directory. A tree without ggml gets nothing, and the prober says so.
fn parts(tree: &Tree<'_>, reads: Reads) -> Vec<String> {
    let whole = vec![String::new()];
    match reads {
        Reads::Tree => whole,
        Reads::Ggml => {
            let exists = |p: &str| tree.get_path(Path::new(p)).is_ok();
            let layout = Layout::of(exists);
            if !layout.has_ggml_header(exists) {
                return Vec::new();
            }
            match layout.ggml_dir() {
                "" => whole,
                sub => std::iter::once(sub.to_string())
                    .chain(vendor::note_path(sub))
                    .collect(),
            }
        }
    }
}

/// What sits at one path of a commit's tree.
enum Part<'r> {
    Dir(Tree<'r>),
    File(Oid, i32),
    /// A submodule (a commit entry).
    Other,
}

fn part<'r>(
    repo: &'r Repository,
    tree: &Tree<'r>,
    path: &str,
) -> Result<Option<Part<'r>>, GitError> {
    if path.is_empty() {
        return Ok(Some(Part::Dir(tree.clone())));
    }
    let Ok(entry) = tree.get_path(Path::new(path)) else {
        return Ok(None);
    };
    Ok(Some(match entry.kind() {
        Some(ObjectType::Tree) => Part::Dir(
            repo.find_tree(entry.id())
                .map_err(ctx(format!("reading tree {} ({path})", entry.id())))?,
        ),
        Some(ObjectType::Blob) => Part::File(entry.id(), entry.filemode()),
        _ => Part::Other,
    }))
}

/// The tree of `commit` (a full sha).
fn commit_tree<'r>(repo: &'r Repository, commit: &str) -> Result<Tree<'r>, GitError> {
    let id = Oid::from_str(commit).map_err(ctx(format!("parsing {commit}")))?;
    repo.find_commit(id)
        .and_then(|c| c.tree())
        .map_err(ctx(format!("reading tree of {commit}")))
}
