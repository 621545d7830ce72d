//! Learning what a probe reads, from the build system itself, and the differences between
//! neighbouring commits that `core::buildset` groups by (the argument is there).
//!
//! After a probe whose build succeeded, every Ninja build directory under the probe's build
//! dir is asked: `ninja -t deps` (the header dependencies the compiler wrote in its depfiles,
//! kept in `.ninja_deps`) and `build.ninja` itself (every source, every `-I` include directory
//! and, in CMake's `RERUN_CMAKE` edge, every CMakeLists.txt / .cmake / configure_file input the
//! configure step read). Paths under the checkout become the read set; paths elsewhere
//! (system headers, the user's own project) do not vary with the commit. The prober adds the
//! checkout paths its own commands name. No Ninja build dir, or nothing under the checkout:
//! no read set, and the driver keeps whole-tree candidates.
//!
//! Read sets are kept per tested tree under `<store>/readsets/<prober>/<tree>`, so a later
//! bisection of an overlapping range starts with the groups the first one learned.

use crate::core::buildset::{Change, ReadSet};
use crate::run::git::{ctx, GitError};
use git2::{Delta, Oid, Repository};
use std::path::{Component, Path, PathBuf};

/// What Ninja recorded after one probe's build: each Ninja dir under the build dir with its
/// `ninja -t deps` text, and the spellings of the checkout's root. Asked once per probe; the
/// read set (here) and the rebuild model (`run::rebuild`) both read it.
pub struct NinjaBuild {
    pub dirs: Vec<(PathBuf, String)>,
    pub roots: Vec<PathBuf>,
}

impl NinjaBuild {
    /// `None` when there is no Ninja build dir or one cannot answer.
    pub fn read(build_dir: &Path, checkout: &Path) -> Option<Self> {
        let dirs = ninja_dirs(build_dir)
            .into_iter()
            .map(|d| ninja_deps(&d).map(|deps| (d, deps)))
            .collect::<Option<Vec<_>>>()?;
        let roots = [checkout.to_path_buf()]
            .into_iter()
            .chain(std::fs::canonicalize(checkout).ok())
            .collect();
        (!dirs.is_empty()).then_some(NinjaBuild { dirs, roots })
    }
}

/// What the build read from the checkout (`named`: the paths the prober's own commands name).
pub fn learn(build: &NinjaBuild, named: &[String]) -> Option<ReadSet> {
    let roots = &build.roots;
    let mut set = ReadSet::default();
    for (dir, deps) in &build.dirs {
        let text = std::fs::read_to_string(dir.join("build.ninja")).ok()?;
        for token in tokens(&text).chain(deps.lines().map(str::trim)) {
            let Some(rel) = relative(dir, token, roots) else {
                continue;
            };
            let full = roots[0].join(&rel);
            if full.is_dir() {
                set.add_dir(&rel);
            } else {
                // A path the build names but that does not exist (yet) still counts: its
                // appearance would change the build.
                set.add_file(&rel);
            }
        }
    }
    if set.is_empty() {
        return None;
    }
    for n in named {
        if roots[0].join(n).is_dir() {
            set.add_dir(n);
        } else {
            set.add_file(n);
        }
    }
    Some(set)
}

/// `ninja -t deps` of one Ninja dir: every object and the files its depfile named.
fn ninja_deps(dir: &Path) -> Option<String> {
    std::process::Command::new("ninja")
        .arg("-C")
        .arg(dir)
        .args(["-t", "deps"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
}

/// `build_dir` and its subdirectories (two levels) holding a `build.ninja`.
fn ninja_dirs(build_dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut level = vec![build_dir.to_path_buf()];
    for _ in 0..3 {
        let mut next = Vec::new();
        for d in level {
            if d.join("build.ninja").is_file() {
                out.push(d.clone());
            }
            if let Ok(rd) = std::fs::read_dir(&d) {
                next.extend(
                    rd.flatten()
                        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                        .filter(|e| e.file_name() != "CMakeFiles")
                        .map(|e| e.path()),
                );
            }
        }
        level = next;
    }
    out
}

/// Path-like words of a build.ninja: split on whitespace and quoting, `-I`/`-isystem`
/// prefixes removed, Ninja's `$ ` and `$:` escapes undone.
fn tokens(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == ';' || c == '=')
        .map(|t| t.trim_end_matches(['$', ':', ',']))
        .map(|t| {
            t.strip_prefix("-I")
                .or_else(|| t.strip_prefix("-isystem"))
                .or_else(|| t.strip_prefix("-iquote"))
                .unwrap_or(t)
        })
        .filter(|t| t.contains('/'))
}

/// `token` (absolute, or relative to the Ninja dir) as a path relative to a checkout root.
pub(crate) fn relative(ninja_dir: &Path, token: &str, roots: &[PathBuf]) -> Option<String> {
    let p = Path::new(token);
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        ninja_dir.join(p)
    };
    let norm = normalize(&abs);
    roots.iter().find_map(|r| {
        let rel = norm.strip_prefix(r).ok()?;
        let s = rel.to_str()?.to_string();
        (!s.is_empty() && !s.starts_with(".git/") && s != ".git").then_some(s)
    })
}

/// Lexical normalization (`a/./b/../c` -> `a/c`); the checkout holds no symlinked directories
/// the build goes through that matter here, and a wrong guess only adds a path.
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// What differs between commits `old` and `new` (trees compared, no contents read).
pub fn changes(repo: &Repository, old: &str, new: &str) -> Result<Vec<Change>, GitError> {
    let tree = |sha: &str| {
        Oid::from_str(sha)
            .and_then(|id| repo.find_commit(id))
            .and_then(|c| c.tree())
            .map_err(ctx(format!("reading tree of {sha}")))
    };
    let (a, b) = (tree(old)?, tree(new)?);
    let diff = repo
        .diff_tree_to_tree(Some(&a), Some(&b), None)
        .map_err(ctx("diffing trees"))?;
    let mut out = Vec::new();
    for d in diff.deltas() {
        let (path, other_side) = match d.status() {
            Delta::Added => (d.new_file().path(), &a),
            Delta::Deleted => (d.old_file().path(), &b),
            _ => {
                for p in [d.old_file().path(), d.new_file().path()]
                    .into_iter()
                    .flatten()
                {
                    out.push(Change {
                        path: p.to_string_lossy().into_owned(),
                        listing: None,
                    });
                }
                if matches!(
                    d.status(),
                    Delta::Renamed | Delta::Copied | Delta::Typechange
                ) {
                    // Entries appear or vanish: both parents' listings change.
                    for p in [d.old_file().path(), d.new_file().path()]
                        .into_iter()
                        .flatten()
                    {
                        let s = p.to_string_lossy().into_owned();
                        out.push(Change {
                            listing: Some(parent(&s).to_string()),
                            path: s,
                        });
                    }
                }
                continue;
            }
        };
        let Some(path) = path else { continue };
        let s = path.to_string_lossy().into_owned();
        // The deepest ancestor that exists on the other side: its listing is what changed.
        let mut dir = parent(&s);
        while !dir.is_empty() && other_side.get_path(Path::new(dir)).is_err() {
            dir = parent(dir);
        }
        out.push(Change {
            listing: Some(dir.to_string()),
            path: s,
        });
    }
    Ok(out)
}

fn parent(p: &str) -> &str {
    p.rfind('/').map_or("", |i| &p[..i])
}

/// Read sets on disk, one file per tested tree, per prober identity.
pub struct ReadSets {
    dir: PathBuf,
}

impl ReadSets {
    pub fn new(store_root: &Path, prober_identity: &str) -> Self {
        let key = crate::run::store::bisect_id(&[prober_identity]);
        ReadSets {
            dir: store_root.join("readsets").join(key),
        }
    }

    pub fn get(&self, tree: &str) -> Option<ReadSet> {
        ReadSet::from_text(&std::fs::read_to_string(self.dir.join(tree)).ok()?)
    }

    /// Every read set learned so far (any commit: a superset only adds boundaries).
    pub fn union_all(&self) -> Option<ReadSet> {
        let mut u = ReadSet::default();
        for e in std::fs::read_dir(&self.dir).ok()?.flatten() {
            if let Some(s) = std::fs::read_to_string(e.path())
                .ok()
                .and_then(|t| ReadSet::from_text(&t))
            {
                u.union(&s);
            }
        }
        (!u.is_empty()).then_some(u)
    }

    /// Atomic write (a killed run never leaves half a set).
    pub fn save(&self, tree: &str, set: &ReadSet) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let tmp = self.dir.join(format!(".{tree}.{}", std::process::id()));
        std::fs::write(&tmp, set.to_text())?;
        std::fs::rename(tmp, self.dir.join(tree))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_relative_paths() {
        let text = "build a.o: C_COMPILER /s/src/ggml.c || x\n  FLAGS = -I/s/src/. -I/s/src/../include -isystem/usr/include\nbuild build.ninja: RERUN_CMAKE | /s/CMakeLists.txt /usr/share/x.cmake\n";
        let roots = [PathBuf::from("/s")];
        let mut rel: Vec<String> = tokens(text)
            .filter_map(|t| relative(Path::new("/b"), t, &roots))
            .collect();
        rel.sort();
        rel.dedup();
        assert_eq!(rel, ["CMakeLists.txt", "include", "src", "src/ggml.c"]);
        assert_eq!(
            relative(Path::new("/s/build"), "../x.h", &roots).as_deref(),
            Some("x.h")
        );
    }
}
