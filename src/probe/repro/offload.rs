//! Which AMD GPUs a HIP build carries device code for, read from the built libraries' offload
//! bundles. Without an AMD GPU (CI, hosted runners, the machine that bisects build breaks) this
//! is the only proof that a "gfx1151" build is one: clang names every device code object in a
//! bundle `hipv4-amdgcn-amd-amdhsa--gfx1151[:features]`, so a library built for the wrong
//! target (a tree that ignored the targets variable, a ROCm whose default list was used) says so
//! here before any device could.

use regex::bytes::Regex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// What one built library says about its device code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffloadTargets {
    /// The library read (its file name: the build tree's location is not a fact of the build).
    pub file: String,
    /// Bare GPU names (`gfx1151`) and how many bundle entries name each.
    pub counts: BTreeMap<String, usize>,
    /// The library holds compressed bundles (`CCOB`), whose entry names are not readable here.
    pub compressed: bool,
}

impl OffloadTargets {
    /// `gfx1151 x254 (libggml-hip.so)`: the line the report and the guard quote.
    pub fn summary(&self) -> String {
        let list: Vec<String> = self
            .counts
            .iter()
            .map(|(t, n)| format!("{t} x{n}"))
            .collect();
        let what = if list.is_empty() && self.compressed {
            "compressed offload bundles (targets not readable)".to_string()
        } else if list.is_empty() {
            "no AMD device code".to_string()
        } else {
            list.join(", ")
        };
        format!("{what} ({})", self.file)
    }

    /// Whether the library carries code for `target` (`gfx1151`, `gfx1151:xnack-`);
    /// `None` when compressed bundles hide the answer.
    pub fn carries(&self, target: &str) -> Option<bool> {
        let want = target.split(':').next().unwrap_or(target).trim();
        if self.counts.contains_key(want) {
            Some(true)
        } else if self.compressed {
            None
        } else {
            Some(false)
        }
    }
}

fn entry_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    // The target id ends at the first byte that cannot be part of it (the bundle header stores
    // ids as length-prefixed strings, so the next byte is binary).
    RE.get_or_init(|| Regex::new(r"amdgcn-amd-amdhsa--(gfx[0-9a-f]+)").expect("static regex"))
}

/// Bundle entries per bare GPU name in a library's bytes (pure).
pub fn scan(bytes: &[u8]) -> (BTreeMap<String, usize>, bool) {
    let mut counts = BTreeMap::new();
    for c in entry_re().captures_iter(bytes) {
        let name = String::from_utf8_lossy(&c[1]).into_owned();
        *counts.entry(name).or_insert(0) += 1;
    }
    // Only asked when nothing was readable: a 70 MB library need not be scanned twice.
    let compressed = counts.is_empty() && bytes.windows(4).any(|w| w == b"CCOB");
    (counts, compressed)
}

/// The HIP backend library of a build tree: `libggml-hip.so*` (ggml's shared build), else its
/// static archive, searched a few levels deep (ggml puts it under `bin/` or `ggml/src/...`).
fn find_library(tree: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = Vec::new();
    let mut stack = vec![(tree.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            let name = e.file_name().to_string_lossy().into_owned();
            if ft.is_dir() && depth < 6 && !name.starts_with('.') && name != "CMakeFiles" {
                stack.push((p, depth + 1));
            } else if ft.is_file() && name.starts_with("libggml-hip") {
                found.push(p);
            }
        }
    }
    // The shared library first (what the reproducer loads), then the archive.
    found.sort_by_key(|p| (!p.to_string_lossy().contains(".so"), p.clone()));
    found.into_iter().next()
}

/// Reads the HIP library of `tree`; `None` when the build made none (not a HIP build, or a
/// build that failed before linking it).
pub fn read_build(tree: &Path) -> Option<OffloadTargets> {
    let lib = find_library(tree)?;
    let bytes = std::fs::read(&lib).ok()?;
    let (counts, compressed) = scan(&bytes);
    Some(OffloadTargets {
        file: lib.file_name()?.to_string_lossy().into_owned(),
        counts,
        compressed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout clang writes: magic, count, then per entry offset, size, id length and id.
    fn bundle(ids: &[&str]) -> Vec<u8> {
        let mut b = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
        b.extend((ids.len() as u64).to_le_bytes());
        for id in ids {
            b.extend(0u64.to_le_bytes());
            b.extend(0u64.to_le_bytes());
            b.extend((id.len() as u64).to_le_bytes());
            b.extend(id.as_bytes());
        }
        b
    }

    #[test]
    fn entries_are_counted_per_bare_target() {
        let mut lib = b"\x7fELF....".to_vec();
        lib.extend(bundle(&[
            "host-x86_64-unknown-linux-gnu-",
            "hipv4-amdgcn-amd-amdhsa--gfx1151",
        ]));
        lib.extend(bundle(&[
            "hipv4-amdgcn-amd-amdhsa--gfx1151:xnack-",
            "hipv4-amdgcn-amd-amdhsa--gfx1100",
        ]));
        let (counts, compressed) = scan(&lib);
        assert_eq!(counts.get("gfx1151"), Some(&2));
        assert_eq!(counts.get("gfx1100"), Some(&1));
        assert!(!compressed);
        let t = OffloadTargets {
            file: "libggml-hip.so".into(),
            counts,
            compressed,
        };
        assert_eq!(t.carries("gfx1151"), Some(true));
        assert_eq!(t.carries("gfx90a"), Some(false));
        assert_eq!(t.summary(), "gfx1100 x1, gfx1151 x2 (libggml-hip.so)");
    }

    #[test]
    fn compressed_bundles_do_not_claim_a_target_either_way() {
        let (counts, compressed) = scan(b"\x7fELF..CCOB\x01\x00compressed");
        assert!(counts.is_empty() && compressed);
        let t = OffloadTargets {
            file: "libggml-hip.so".into(),
            counts,
            compressed,
        };
        assert_eq!(t.carries("gfx1151"), None);
        assert!(t.summary().starts_with("compressed offload bundles"));
    }

    #[test]
    fn the_shared_library_is_found_in_a_build_tree() {
        let d = tempfile::tempdir().unwrap();
        let deep = d.path().join("ggml/src/ggml-hip");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(
            deep.join("libggml-hip.a"),
            bundle(&["hipv4-amdgcn-amd-amdhsa--gfx1100"]),
        )
        .unwrap();
        std::fs::create_dir_all(d.path().join("bin")).unwrap();
        std::fs::write(
            d.path().join("bin/libggml-hip.so"),
            bundle(&["hipv4-amdgcn-amd-amdhsa--gfx1151"]),
        )
        .unwrap();
        let t = read_build(d.path()).unwrap();
        assert_eq!(t.file, "libggml-hip.so");
        assert_eq!(t.carries("gfx1151"), Some(true));
        assert!(read_build(&d.path().join("ggml/src/none")).is_none());
    }
}
