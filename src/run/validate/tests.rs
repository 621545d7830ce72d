//! Unit tests of `validate`: path classes, verdicts from the evidence, the scratch revert, run limits.
use super::*;

fn ev(old: u32, new: u32) -> Evidence {
    Evidence { old, new, skip: 0 }
}

#[test]
fn classify_ggml_paths_for_hip() {
    let c = |p| classify(p, "hip");
    assert_eq!(c("src/ggml-cuda/set-rows.cu"), PathClass::Relevant);
    assert_eq!(c("src/ggml-hip/CMakeLists.txt"), PathClass::Relevant);
    assert_eq!(c("src/ggml.c"), PathClass::Relevant);
    assert_eq!(c("include/ggml.h"), PathClass::Relevant);
    assert_eq!(c("CMakeLists.txt"), PathClass::Relevant);
    assert_eq!(c("src/ggml-cpu/ops.cpp"), PathClass::Relevant);
    assert_eq!(
        c("src/ggml-vulkan/ggml-vulkan.cpp"),
        PathClass::OtherBackend
    );
    assert_eq!(c("src/ggml-metal/ggml-metal.m"), PathClass::OtherBackend);
    assert_eq!(c("src/ggml-sycl/x.cpp"), PathClass::OtherBackend);
    assert_eq!(c("docs/build.md"), PathClass::Docs);
    assert_eq!(c("README.md"), PathClass::Docs);
    assert_eq!(c("tests/test-backend-ops.cpp"), PathClass::Tests);
    assert_eq!(c("examples/simple/simple.cpp"), PathClass::Examples);
    assert_eq!(c(".github/workflows/ci.yml"), PathClass::Tooling);
    // llama.cpp's vendored copy.
    assert_eq!(c("ggml/src/ggml-cuda/cpy.cu"), PathClass::Relevant);
    assert_eq!(c("ggml/src/ggml-vulkan/v.cpp"), PathClass::OtherBackend);
}

#[test]
fn cuda_sources_are_other_backend_for_vulkan_but_not_for_cuda() {
    assert_eq!(
        classify("src/ggml-cuda/set-rows.cu", "vulkan"),
        PathClass::OtherBackend
    );
    assert_eq!(
        classify("src/ggml-cuda/set-rows.cu", "cuda"),
        PathClass::Relevant
    );
    assert_eq!(
        classify("src/ggml-hip/CMakeLists.txt", "cuda"),
        PathClass::OtherBackend
    );
}

fn obs(culprit: Evidence, parent: Evidence) -> Observations {
    Observations {
        culprit,
        parent,
        paths: vec![("src/ggml-cuda/set-rows.cu".into(), PathClass::Relevant)],
        backend: Some("hip".into()),
        ..Default::default()
    }
}

#[test]
fn clean_validation_confirms() {
    let mut o = obs(ev(1, 2), ev(3, 0));
    o.reverted = Some(ev(3, 0));
    o.revert = Some(Revert::Clean {
        commit: "abc".into(),
    });
    o.identical_build = Some(false);
    let v = judge(&o, Beta { a: 9.0, b: 9.0 });
    assert!(v.confirmed, "{v:?}");
    assert!(matches!(
        v.findings[..],
        [Finding::RevertFixes { runs: 3, .. }]
    ));
}

#[test]
fn failing_parent_refutes() {
    let v = judge(&obs(ev(0, 3), ev(2, 1)), Beta::UNIFORM);
    assert!(!v.confirmed);
    assert_eq!(
        v.findings,
        vec![Finding::ParentFailed {
            failures: 1,
            runs: 3
        }]
    );
}

#[test]
fn silent_culprit_is_doubted_with_the_chance_of_silence() {
    let v = judge(&obs(ev(3, 0), ev(3, 0)), Beta { a: 2.0, b: 1.0 });
    assert!(!v.confirmed);
    match &v.findings[0] {
        Finding::CulpritDidNotReproduce { runs, chance } => {
            assert_eq!(*runs, 3);
            assert!((chance - 0.1).abs() < 1e-9, "{chance}"); // 2/((3+1)(3+2))
        }
        f => panic!("{f:?}"),
    }
}

#[test]
fn revert_that_still_fails_and_noop_builds_and_docs_are_suspicious() {
    let mut o = obs(ev(0, 3), ev(3, 0));
    o.reverted = Some(ev(2, 1));
    o.identical_build = Some(true);
    o.paths = vec![
        ("docs/a.md".into(), PathClass::Docs),
        ("src/ggml-vulkan/v.cpp".into(), PathClass::OtherBackend),
    ];
    let v = judge(&o, Beta::UNIFORM);
    assert!(!v.confirmed);
    let kinds: Vec<String> = v.findings.iter().map(|f| f.to_string()).collect();
    assert_eq!(v.findings.len(), 3, "{kinds:?}");
    assert!(kinds[0].contains("still failed 1 of 3"));
    assert!(kinds[1].contains("byte-identical"));
    assert!(kinds[2].contains("docs/a.md, src/ggml-vulkan/v.cpp"));
}

#[test]
fn hash_outputs_sees_libraries_and_programs_only() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::create_dir_all(p.join("lib")).unwrap();
    std::fs::create_dir_all(p.join("CMakeFiles")).unwrap();
    std::fs::write(p.join("lib/libggml.so"), b"lib v1").unwrap();
    std::fs::write(p.join("CMakeFiles/x.o"), b"obj").unwrap();
    std::fs::write(p.join("build.log"), b"log").unwrap();
    std::fs::write(p.join("repro"), b"exe").unwrap();
    std::fs::set_permissions(p.join("repro"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let a = hash_outputs(p).unwrap();
    assert_eq!(
        a.keys().cloned().collect::<Vec<_>>(),
        vec!["lib/libggml.so", "repro"]
    );
    std::fs::write(p.join("build.log"), b"other log").unwrap();
    assert_eq!(hash_outputs(p).unwrap(), a, "logs do not count");
    std::fs::write(p.join("lib/libggml.so"), b"lib v2").unwrap();
    assert_ne!(hash_outputs(p).unwrap(), a);
    assert!(hash_outputs(&p.join("missing")).is_err());
}

/// A repository: c0 writes a.txt and b.txt; c1 changes a.txt (the culprit); c2 changes b.txt;
/// c3 rewrites a.txt on top of c1's change (so reverting c1 onto c3 conflicts).
fn repo() -> (tempfile::TempDir, Vec<String>) {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("r");
    let r = git2::Repository::init(&path).unwrap();
    let sig = git2::Signature::now("t", "t@example.invalid").unwrap();
    let steps: [(&str, &str); 4] = [
        ("a.txt", "one\ntwo\nthree\n"),
        ("a.txt", "one\nTWO\nthree\n"),
        ("b.txt", "b2\n"),
        ("a.txt", "one\nTWO!\nthree\n"),
    ];
    let mut shas: Vec<String> = Vec::new();
    std::fs::write(path.join("b.txt"), "b1\n").unwrap();
    for (i, (f, content)) in steps.iter().enumerate() {
        std::fs::write(path.join(f), content).unwrap();
        let mut idx = r.index().unwrap();
        idx.add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        idx.write().unwrap();
        let tree = r.find_tree(idx.write_tree().unwrap()).unwrap();
        let parent = shas
            .last()
            .map(|s| r.find_commit(git2::Oid::from_str(s).unwrap()).unwrap());
        let parents: Vec<&git2::Commit> = parent.iter().collect();
        let id = r
            .commit(Some("HEAD"), &sig, &sig, &format!("c{i}"), &tree, &parents)
            .unwrap();
        shas.push(id.to_string());
    }
    (d, shas)
}

#[test]
fn revert_onto_bad_endpoint_in_scratch_leaves_user_repo_alone() {
    let (d, shas) = repo();
    let user = d.path().join("r");
    let count_objects = || walk_count(&user.join(".git/objects"));
    let before = count_objects();
    let scratch = d.path().join("scratch");
    let (s, rev) = revert_in_scratch(&user, &shas[1], &shas[2], &scratch).unwrap();
    let Revert::Clean { commit } = rev else {
        panic!("{rev:?}")
    };
    let c = s
        .find_commit(git2::Oid::from_str(&commit).unwrap())
        .unwrap();
    assert_eq!(c.parent_id(0).unwrap().to_string(), shas[2]);
    let blob = c
        .tree()
        .unwrap()
        .get_path(Path::new("a.txt"))
        .unwrap()
        .to_object(&s)
        .unwrap()
        .peel_to_blob()
        .unwrap();
    assert_eq!(blob.content(), b"one\ntwo\nthree\n");
    assert_eq!(count_objects(), before, "the user's repository was written");
    // A second validation reuses the scratch repository.
    let (_, again) = revert_in_scratch(&user, &shas[1], &shas[2], &scratch).unwrap();
    assert!(matches!(again, Revert::Clean { .. }));
}

#[test]
fn conflicting_revert_is_reported() {
    let (d, shas) = repo();
    let (_, rev) =
        revert_in_scratch(&d.path().join("r"), &shas[1], &shas[3], &d.path().join("s")).unwrap();
    assert_eq!(
        rev,
        Revert::Conflicts {
            paths: vec!["a.txt".into()]
        }
    );
}

#[test]
fn changed_paths_of_a_commit() {
    let (d, shas) = repo();
    let r = git2::Repository::open(d.path().join("r")).unwrap();
    let p = changed_paths(&r, git2::Oid::from_str(&shas[2]).unwrap()).unwrap();
    assert_eq!(p, vec!["b.txt"]);
    let root = changed_paths(&r, git2::Oid::from_str(&shas[0]).unwrap()).unwrap();
    assert_eq!(root, vec!["a.txt", "b.txt"]);
}

fn walk_count(dir: &Path) -> usize {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                n += walk_count(&p);
            } else {
                n += 1;
            }
        }
    }
    n
}

#[test]
fn run_limit_grows_for_rare_faults_and_is_capped() {
    // A fault seen failing 20 times in 20 runs: 3 runs are plenty.
    assert_eq!(run_limit(3, Beta { a: 21.0, b: 1.0 }), 3);
    // About one in three: 3 passes happen 30% of the time, so more are needed.
    let k = run_limit(3, Beta { a: 12.0, b: 22.0 });
    assert!(
        k > 3 && Beta { a: 12.0, b: 22.0 }.pass_streak(k) <= 0.05,
        "{k}"
    );
    // Nothing known: capped.
    assert_eq!(run_limit(3, Beta::UNIFORM), 20);
}

#[test]
fn an_unknown_backend_judges_no_backend_dir_irrelevant_and_says_so() {
    let vulkan = "ggml/src/ggml-vulkan/set-rows.comp";
    assert_eq!(classify_for(vulkan, Some("hip")), PathClass::OtherBackend);
    assert_eq!(classify_for(vulkan, None), PathClass::Relevant);
    assert_eq!(classify_for("docs/x.md", None), PathClass::Docs);
    let mut o = obs(ev(1, 2), ev(3, 0));
    o.paths = vec![(vulkan.into(), classify_for(vulkan, None))];
    o.backend = None;
    let v = judge(&o, Beta::UNIFORM);
    assert!(v.confirmed, "{v:?}");
    assert_eq!(v.findings.last(), Some(&Finding::BackendUnknown));
    o.backend = Some("hip".into());
    o.paths = vec![(vulkan.into(), classify_for(vulkan, Some("hip")))];
    assert!(!judge(&o, Beta::UNIFORM).confirmed);
}
