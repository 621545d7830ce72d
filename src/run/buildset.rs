//! Learning what a probe reads, from the build system itself, and the differences between
//! neighbouring commits that `core::buildset` groups by (the argument is there).
//!
//! After a probe whose build succeeded, every Ninja build directory under the probe's build
//! dir is read: its deps log `.ninja_deps` (the header dependencies the compiler wrote in its
//! depfiles; read here, as `ninja -t deps` prints it, so no Ninja is needed on a host whose
//! builds run in a container) and `build.ninja` itself (every source, every `-I` include directory
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
        // A container's build names the checkout by its mount point. Taken for any build: a
        // path under it that is not the checkout's only adds a read, never folds a commit.
        let mount = PathBuf::from(crate::probe::container::SRC_MOUNT);
        let roots = [checkout.to_path_buf()]
            .into_iter()
            .chain(std::fs::canonicalize(checkout).ok())
            .chain([mount])
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

/// `ninja -t deps` of one Ninja dir: every object and the files its depfile named, read from
/// `.ninja_deps` itself (`deps_log`), so the host needs no Ninja of its own: a build made in
/// a container (podman is all a Strix Halo host needs) is learned from as one made here.
fn ninja_deps(dir: &Path) -> Option<String> {
    deps_log(&std::fs::read(dir.join(".ninja_deps")).ok()?)
}

/// Ninja's deps log (`src/deps_log.cc`, versions 3 and 4, little-endian) in the text of
/// `ninja -t deps`: `target: #deps N` and one indented line per dependency, the latest record
/// of each target. Records are a `u32` size, its top bit set for a dependency record
/// (`out id`, the mtime: 4 bytes in v3, 8 in v4, then input ids), clear for a path (its
/// bytes padded to 4 with NULs, then a checksum); ids count the path records. A record cut
/// short (a build killed while writing) ends the log, as Ninja reads it.
fn deps_log(bytes: &[u8]) -> Option<String> {
    let word = |b: &[u8], at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let rest = bytes.strip_prefix(b"# ninjadeps\n")?;
    let version = word(rest, 0)?;
    let mtime = match version {
        3 => 4,
        4 => 8,
        _ => return None,
    };
    let mut paths: Vec<String> = Vec::new();
    let mut deps: Vec<Option<Vec<u32>>> = Vec::new();
    let mut at = 4;
    while let Some(head) = word(rest, at) {
        let size = (head & 0x7fff_ffff) as usize;
        let Some(rec) = rest.get(at + 4..at + 4 + size) else {
            break;
        };
        at += 4 + size;
        if head & 0x8000_0000 != 0 {
            let (Some(out), Some(ids)) = (word(rec, 0), rec.get(4 + mtime..)) else {
                break;
            };
            let ids = ids.chunks_exact(4).filter_map(|c| word(c, 0)).collect();
            let out = out as usize;
            if deps.len() <= out {
                deps.resize(out + 1, None);
            }
            deps[out] = Some(ids);
        } else {
            let name = rec.get(..size.checked_sub(4)?)?;
            let end = name.iter().rposition(|&b| b != 0).map_or(0, |e| e + 1);
            paths.push(String::from_utf8_lossy(&name[..end]).into_owned());
        }
    }
    let mut text = String::new();
    for (out, ids) in deps.iter().enumerate() {
        let (Some(ids), Some(target)) = (ids, paths.get(out)) else {
            continue;
        };
        text.push_str(&format!("{target}: #deps {}\n", ids.len()));
        for id in ids {
            if let Some(p) = paths.get(*id as usize) {
                text.push_str("    ");
                text.push_str(p);
                text.push('\n');
            }
        }
        text.push('\n');
    }
    Some(text)
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

    /// The deps log read here says what `ninja -t deps` says, on a real CMake + Ninja build
    /// (two objects, a header each and one shared; one rebuilt, so its record is there twice),
    /// and a log cut short keeps its whole records.
    #[test]
    fn the_deps_log_reads_as_ninja_prints_it() {
        let tools = ["cmake", "ninja", "cc"];
        if tools.iter().any(|t| which(t).is_none()) {
            assert!(std::env::var_os("CI").is_none(), "CI has {tools:?}");
            eprintln!("skipped: {tools:?} not all installed");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let (src, build) = (d.path().join("src"), d.path().join("build"));
        std::fs::create_dir_all(&src).unwrap();
        let write = |f: &str, t: &str| std::fs::write(src.join(f), t).unwrap();
        write(
            "CMakeLists.txt",
            "cmake_minimum_required(VERSION 3.13)\nproject(p C)\nadd_executable(p a.c b.c)\n",
        );
        write("a.c", "#include \"a.h\"\n#include \"s.h\"\nint b(void);\nint main(void) { return A + S + b(); }\n");
        write("b.c", "#include \"s.h\"\nint b(void) { return S; }\n");
        write("a.h", "#define A 0\n");
        write("s.h", "#define S 0\n");
        let run = |args: &[&str]| {
            let o = std::process::Command::new(args[0])
                .args(&args[1..])
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            String::from_utf8(o.stdout).unwrap()
        };
        let (s, b) = (src.to_str().unwrap(), build.to_str().unwrap());
        run(&["cmake", "-S", s, "-B", b, "-G", "Ninja"]);
        run(&["ninja", "-C", b]);
        write("a.h", "#define A (0)\n");
        run(&["ninja", "-C", b]);
        let theirs = run(&["ninja", "-C", b, "-t", "deps"]);
        let ours = ninja_deps(&build).expect("a deps log");
        let deps = |t: &str| -> Vec<(String, Vec<String>)> {
            let mut out: Vec<(String, Vec<String>)> = Vec::new();
            for l in t.lines() {
                if let Some((target, _)) = l.split_once(": #deps") {
                    out.push((target.to_string(), Vec::new()));
                } else if let (Some(last), false) = (out.last_mut(), l.trim().is_empty()) {
                    last.1.push(l.trim().to_string());
                }
            }
            out
        };
        assert_eq!(
            deps(&ours),
            deps(&theirs),
            "ours:\n{ours}\nninja's:\n{theirs}"
        );
        assert_eq!(deps(&ours).len(), 2, "{ours}");
        assert!(ours.contains("a.h") && ours.contains("s.h"), "{ours}");
        // Cut inside the last record: every record before it is still read.
        let bytes = std::fs::read(build.join(".ninja_deps")).unwrap();
        let cut = deps_log(&bytes[..bytes.len() - 2]).unwrap();
        assert!(!deps(&cut).is_empty() && deps(&cut).len() <= 2, "{cut}");
        assert!(deps_log(b"not a deps log").is_none());
    }

    fn which(tool: &str) -> Option<PathBuf> {
        std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(tool))
                .find(|p| p.is_file())
        })
    }
}
