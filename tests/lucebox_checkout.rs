//! Checkouts for a prober that reads only ggml (issue 26): on a lucebox-shaped history, a
//! checkout moved through every commit (forwards, backwards, jumping) holds exactly the
//! vendored ggml directory and its `VENDOR.md` of a whole-tree checkout of the same commit,
//! byte for byte and mode for mode, and nothing else; files that did not change keep their
//! mtimes (the build stays incremental); a blob missing outside ggml stops a whole-tree
//! checkout but not this one; and the same directory switches between the two kinds.

mod common;
mod lucebox_history;

use lucebox_history::{build, History, Step, DATA, GGML, NOTE};
use setrows_bisect::probe::Reads;
use setrows_bisect::run::git::Checkout;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const STEPS: [Step; 9] = [
    Step::Start,
    Step::Vendor,
    Step::App,
    Step::Ggml,
    Step::GgmlTypechange,
    Step::App,
    Step::GgmlAndNote,
    Step::GgmlTypechange,
    Step::Fault,
];

/// A ggml directory as `ggml_subdir` recognises one, with files that change at each step, an
/// executable script and a symlink.
fn fake_ggml(dir: &Path, n: usize, fault: bool) {
    let w = |rel: &str, text: &str| {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    w("CMakeLists.txt", "project(ggml C)\n");
    w("include/ggml.h", "#pragma once\n");
    w("src/ggml.c", &format!("int ggml_step = {n};\n"));
    w("src/stable.c", "int stable = 1;\n");
    w("scripts/sync.sh", "#!/bin/sh\necho sync\n");
    std::fs::set_permissions(
        dir.join("scripts/sync.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let link = dir.join("include/ggml-link.h");
    if std::fs::symlink_metadata(&link).is_err() {
        std::os::unix::fs::symlink("ggml.h", &link).unwrap();
    }
    if fault {
        w("src/fault.cpp", "// fault\n");
    }
}

fn history(root: &Path) -> History {
    build(&root.join("repo"), &STEPS, &fake_ggml)
}

/// Every file under `dir` (relative path -> (mode bits, content or link target)).
fn files(dir: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            if m.is_dir() {
                stack.push(p);
            } else if m.file_type().is_symlink() {
                let t = std::fs::read_link(&p).unwrap();
                out.insert(rel, (0, t.to_string_lossy().as_bytes().to_vec()));
            } else {
                out.insert(
                    rel,
                    (m.permissions().mode() & 0o777, std::fs::read(&p).unwrap()),
                );
            }
        }
    }
    out
}

/// What a ggml-only checkout must hold, taken from a whole-tree checkout of the same commit.
fn ggml_part(whole: &BTreeMap<String, (u32, Vec<u8>)>) -> BTreeMap<String, (u32, Vec<u8>)> {
    whole
        .iter()
        .filter(|(k, _)| k.starts_with(&format!("{GGML}/")) || k.as_str() == NOTE)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[test]
fn a_ggml_checkout_holds_exactly_the_vendored_ggml_of_a_whole_checkout_along_any_walk() {
    let tmp = tempfile::tempdir().unwrap();
    let h = history(tmp.path());
    let repo = git2::Repository::open(&h.repo).unwrap();
    let part = Checkout::new(tmp.path().join("part"), tmp.path().join("part.state"));
    let n = h.shas.len();
    // Forwards, backwards, then jumps across the vendoring and the type changes.
    let walk: Vec<usize> = (0..n)
        .chain((0..n).rev())
        .chain([1, 8, 0, 4, 7, 2, 6, 3, 5, 8])
        .collect();
    for i in walk {
        let whole_dir = tmp.path().join(format!("whole-{i}"));
        if !whole_dir.exists() {
            Checkout::new(
                whole_dir.clone(),
                tmp.path().join(format!("whole-{i}.state")),
            )
            .checkout(&repo, &h.shas[i])
            .unwrap();
        }
        part.checkout_reading(&repo, &h.shas[i], Reads::Ggml, None)
            .unwrap();
        let whole = files(&whole_dir);
        let got = files(&part.dir);
        assert_eq!(got, ggml_part(&whole), "commit {i} ({:?})", STEPS[i]);
        if i == 0 {
            assert!(got.is_empty(), "no vendored ggml yet: nothing written");
            assert!(whole.contains_key(DATA));
        } else {
            assert!(got.contains_key(&format!("{GGML}/CMakeLists.txt")));
            assert!(got.contains_key(NOTE), "the note beside ggml is written");
        }
    }
}

#[test]
fn files_that_did_not_change_keep_their_mtimes() {
    let tmp = tempfile::tempdir().unwrap();
    let h = history(tmp.path());
    let repo = git2::Repository::open(&h.repo).unwrap();
    let part = Checkout::new(tmp.path().join("part"), tmp.path().join("part.state"));
    part.checkout_reading(&repo, &h.shas[2], Reads::Ggml, None)
        .unwrap();
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    for rel in ["src/stable.c", "src/ggml.c"] {
        let f = std::fs::File::options()
            .write(true)
            .open(part.dir.join(GGML).join(rel))
            .unwrap();
        f.set_modified(old).unwrap();
    }
    // Step 3 changes src/ggml.c only.
    part.checkout_reading(&repo, &h.shas[3], Reads::Ggml, None)
        .unwrap();
    let mtime = |rel: &str| {
        std::fs::metadata(part.dir.join(GGML).join(rel))
            .unwrap()
            .modified()
            .unwrap()
    };
    assert_eq!(mtime("src/stable.c"), old, "unchanged: not rewritten");
    assert_ne!(mtime("src/ggml.c"), old, "changed: rewritten");
}

#[test]
fn a_blob_missing_outside_ggml_stops_a_whole_checkout_but_not_a_ggml_one() {
    let tmp = tempfile::tempdir().unwrap();
    let h = history(tmp.path());
    h.delete_data_blob();
    let repo = git2::Repository::open(&h.repo).unwrap();
    let last = h.shas.last().unwrap();
    let whole = Checkout::new(tmp.path().join("whole"), tmp.path().join("whole.state"));
    let err = whole.checkout(&repo, last).unwrap_err().to_string();
    assert!(
        err.contains(&format!("{DATA} (blob {})", h.data_blob)),
        "{err}"
    );
    // The same directory, asked for what the bundled reproducer reads, gets it.
    whole
        .checkout_reading(&repo, last, Reads::Ggml, None)
        .unwrap();
    let got = files(&whole.dir);
    assert!(got.contains_key(&format!("{GGML}/src/fault.cpp")));
    assert!(!got.keys().any(|k| k.starts_with("server/eval")), "{got:?}");
    // Moving along the range stays on ggml's blobs.
    for sha in h.shas.iter().rev() {
        whole
            .checkout_reading(&repo, sha, Reads::Ggml, None)
            .unwrap();
    }
}

/// A whole tree tested at ggml (`--path`, or the detected layout): the data file is left out, and
/// the state remembers under which scope, so the same commit asked for whole is no no-op.
#[test]
fn a_blob_missing_outside_the_tested_tree_is_left_out_of_a_whole_checkout() {
    let tmp = tempfile::tempdir().unwrap();
    let h = history(tmp.path());
    h.delete_data_blob();
    let repo = git2::Repository::open(&h.repo).unwrap();
    let co = Checkout::new(tmp.path().join("c"), tmp.path().join("c.state"));
    for sha in &h.shas {
        co.checkout_reading(&repo, sha, Reads::Tree, Some(GGML))
            .unwrap();
    }
    let got = files(&co.dir);
    assert!(got.contains_key("README.md") && got.contains_key(&format!("{GGML}/src/ggml.c")));
    assert!(!got.contains_key(DATA), "{got:?}");
    let err = co.checkout(&repo, h.shas.last().unwrap()).unwrap_err();
    assert!(err.to_string().contains(DATA), "{err}");
}

#[test]
fn one_directory_switches_between_whole_and_ggml_checkouts() {
    let tmp = tempfile::tempdir().unwrap();
    let h = history(tmp.path());
    let repo = git2::Repository::open(&h.repo).unwrap();
    let dir = Checkout::new(tmp.path().join("c"), tmp.path().join("c.state"));
    let sha = &h.shas[6];
    dir.checkout_reading(&repo, sha, Reads::Ggml, None).unwrap();
    assert!(!dir.dir.join(DATA).exists());
    // The same commit, now whole: the state names what was written, so this is no no-op.
    dir.checkout(&repo, sha).unwrap();
    let whole = files(&dir.dir);
    assert!(whole.contains_key(DATA), "whole again");
    dir.checkout_reading(&repo, sha, Reads::Ggml, None).unwrap();
    assert_eq!(files(&dir.dir), ggml_part(&whole));
}
