//! Build-aware candidates: which commits of a range are the same thing to test because they
//! change nothing the build and the test read.
//!
//! # The argument
//!
//! A probe is a deterministic function of the files it reads (build and test) and of the
//! directory listings it reads (globs, include-path searches). Let `S` be a set of paths of the
//! checkout (`files`) and of directories (`dirs`) such that a probe of commit `M` reads nothing
//! of the checkout outside `S`: every file it opens is in `files`, every directory it lists or
//! searches is in `dirs`. Take two neighbouring commits `c` and `c'` whose difference
//! touches no file in `files`, and neither adds nor removes an entry of a directory in `dirs`.
//! Run the probe of `c'` next to the probe of `M == c`: each read returns the same bytes (the
//! file is unchanged) or the same listing (the directory is unchanged), so the two runs take
//! the same steps, read the same paths and end the same way. By induction along the chain,
//! every commit joined to `M` through such differences behaves exactly as `M` does.
//!
//! The driver therefore groups the range's commits at the boundaries that touch the union `U`
//! of the read sets it has *learned* (from probed commits), and only trusts a group's verdict
//! when it came from a member whose own read set is known (so `D(M) ⊆ U`). A group with no such
//! member is a hypothesis until its representative is probed; if that probe reads a path
//! outside `U`, `U` grows and the range is regrouped, so the answer (two adjacent groups,
//! both probed) never rests on a guess. Where no read set can be learned (no Ninja build,
//! a prober that cannot say what it reads, a failed build), the groups are the plain
//! tree classes: the whole tree.
//!
//! `dirs` holds every ancestor directory of every file in `files` (and the include
//! directories the build names), so a new source file anywhere under a directory the build
//! reads from — a globbed directory, a new subdirectory of one — is a boundary, while a new
//! file under `docs/` or another backend's folder is not.

use std::collections::BTreeSet;

mod partition;
pub use partition::{Cut, Partition};

/// Paths (relative to the checkout root, `/`-separated) a probe reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadSet {
    pub files: BTreeSet<String>,
    /// Directories whose listing may be read; "" is the root.
    pub dirs: BTreeSet<String>,
}

impl ReadSet {
    /// Adds a file and all its ancestor directories.
    pub fn add_file(&mut self, rel: &str) {
        let rel = rel.trim_matches('/');
        if rel.is_empty() {
            return;
        }
        self.files.insert(rel.to_string());
        self.add_ancestors(rel);
    }

    /// Adds a directory (its listing counts) and its ancestors.
    pub fn add_dir(&mut self, rel: &str) {
        let rel = rel.trim_matches('/');
        self.dirs.insert(rel.to_string());
        self.add_ancestors(rel);
    }

    fn add_ancestors(&mut self, rel: &str) {
        let mut cur = rel;
        while let Some(i) = cur.rfind('/') {
            cur = &cur[..i];
            self.dirs.insert(cur.to_string());
        }
        self.dirs.insert(String::new());
    }

    pub fn union(&mut self, other: &ReadSet) {
        self.files.extend(other.files.iter().cloned());
        self.dirs.extend(other.dirs.iter().cloned());
    }

    /// True when `other` reads nothing outside `self`.
    pub fn covers(&self, other: &ReadSet) -> bool {
        other.files.is_subset(&self.files) && other.dirs.is_subset(&self.dirs)
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// One line per path: `f path` or `d path` (the on-disk form).
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for f in &self.files {
            s.push_str("f ");
            s.push_str(f);
            s.push('\n');
        }
        for d in &self.dirs {
            s.push_str("d ");
            s.push_str(d);
            s.push('\n');
        }
        s
    }

    pub fn from_text(text: &str) -> Option<ReadSet> {
        let mut r = ReadSet::default();
        for line in text.lines() {
            match line.split_at_checked(2)? {
                ("f ", p) => {
                    r.files.insert(p.to_string());
                }
                ("d ", p) => {
                    r.dirs.insert(p.to_string());
                }
                _ => return None,
            }
        }
        (!r.files.is_empty()).then_some(r)
    }
}

/// One path that differs between two neighbouring commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub path: String,
    /// For an added or removed path: the deepest directory that exists on both sides (its
    /// listing is what changed); `None` for a modification in place.
    pub listing: Option<String>,
}

impl Change {
    /// Does this change matter to a probe that reads only `set`?
    pub fn touches(&self, set: &ReadSet) -> bool {
        set.files.contains(&self.path)
            || set.dirs.contains(&self.path)
            || self
                .listing
                .as_ref()
                .is_some_and(|dir| set.dirs.contains(dir))
    }
}

/// Group starts over `n` candidates: `boundaries[i]` (for `1 <= i < n`) is the difference
/// between candidate `i - 1` and candidate `i`, `None` when unknown (always a boundary).
/// `forced[i]` makes candidate `i` and `i + 1` start groups of their own. Returns the start
/// index of each group, ascending, beginning with 0.
pub fn group_starts(
    boundaries: &[Option<Vec<Change>>],
    set: &ReadSet,
    forced: &[bool],
) -> Vec<usize> {
    let mut starts = vec![0];
    for (i, boundary) in boundaries.iter().enumerate().skip(1) {
        let cut = forced.get(i).copied().unwrap_or(false)
            || forced.get(i - 1).copied().unwrap_or(false)
            || match boundary {
                None => true,
                Some(changes) => changes.iter().any(|c| c.touches(set)),
            };
        if cut {
            starts.push(i);
        }
    }
    starts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(files: &[&str]) -> ReadSet {
        let mut s = ReadSet::default();
        for f in files {
            s.add_file(f);
        }
        s
    }

    fn modify(p: &str) -> Change {
        Change {
            path: p.into(),
            listing: None,
        }
    }

    fn add(p: &str, listing: &str) -> Change {
        Change {
            path: p.into(),
            listing: Some(listing.into()),
        }
    }

    #[test]
    fn only_changes_to_what_is_read_cut() {
        let s = set(&[
            "CMakeLists.txt",
            "src/ggml.c",
            "src/ggml-cpu/ops.cpp",
            "include/ggml.h",
        ]);
        assert!(modify("src/ggml.c").touches(&s));
        assert!(!modify("src/ggml-cuda/x.cu").touches(&s));
        assert!(!modify("docs/a.md").touches(&s));
        // A new file in a directory the build reads from (a glob would see it).
        assert!(add("src/ggml-cpu/new.c", "src/ggml-cpu").touches(&s));
        // A new subdirectory of one: the parent's listing changes.
        assert!(add("src/ggml-cpu/arch/z/q.c", "src/ggml-cpu").touches(&s));
        assert!(add("newdir/x.c", "").touches(&s));
        // A new file in another backend's existing folder does not.
        assert!(!add("src/ggml-cuda/new.cu", "src/ggml-cuda").touches(&s));
        assert!(!add("docs/new.md", "docs").touches(&s));
        // A read directory replaced by a file.
        assert!(modify("src/ggml-cpu").touches(&s));
    }

    #[test]
    fn groups_cut_at_unknown_forced_and_touching_boundaries() {
        let s = set(&["a.c"]);
        let b = vec![
            None,
            Some(vec![modify("doc")]),
            Some(vec![modify("a.c")]),
            None,
            Some(vec![]),
            Some(vec![modify("doc")]),
        ];
        assert_eq!(group_starts(&b, &s, &[]), vec![0, 2, 3]);
        let mut forced = vec![false; 6];
        forced[4] = true;
        assert_eq!(group_starts(&b, &s, &forced), vec![0, 2, 3, 4, 5]);
    }

    #[test]
    fn text_round_trip_and_cover() {
        let s = set(&["x/y.c", "z.h"]);
        let back = ReadSet::from_text(&s.to_text()).unwrap();
        assert_eq!(back, s);
        assert!(s.covers(&set(&["x/y.c"])));
        assert!(!s.covers(&set(&["x/w.c"])));
        assert_eq!(ReadSet::from_text("garbage"), None);
        assert_eq!(ReadSet::from_text(""), None);
    }
}
