//! ReproProber end to end on the CPU, through its real code path: embedded sources written to
//! the build dir, the configure script with `-DGGML_SOURCE_DIR=$SRC/<subdir>`, a build of only the
//! reproducer target, the run, and the classification, all through `exec` and a `HostLauncher`.
//!
//! CI has no ggml source tree, so the "checkout" here is a tiny ggml tree whose CMakeLists.txt
//! hands over the prebuilt libggml-python ggml (its real headers and libraries). Everything on the
//! prober's side of `add_subdirectory` is exactly what a real probe runs.

mod tools;

use setrows_bisect::core::outcome::Outcome;
use setrows_bisect::probe::artifacts::{ArtifactHit, ArtifactIndex};
use setrows_bisect::probe::launch::HostLauncher;
use setrows_bisect::probe::repro::{ReproOptions, ReproProber};
use setrows_bisect::probe::{ProbeRequest, Prober};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn ggml_dir() -> Option<PathBuf> {
    tools::require(
        std::env::var_os("SETROWS_GGML_DIR").map(PathBuf::from),
        "libggml-python (SETROWS_GGML_DIR)",
        "scripts/setup.d/20-ggml.sh",
    )
}

/// A ggml "source tree" at `root/subdir` backed by the installed ggml.
fn shim_tree(root: &Path, subdir: &str, ggml_cmake_dir: &Path) {
    let tree = root.join(subdir);
    let include = ggml_cmake_dir
        .ancestors()
        .nth(3)
        .expect("<prefix>/lib64/cmake/ggml")
        .join("include");
    std::fs::create_dir_all(tree.join("include")).expect("mkdir");
    for e in std::fs::read_dir(&include).expect("wheel include dir") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), tree.join("include").join(e.file_name())).expect("copy header");
    }
    std::fs::write(
        tree.join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.14)\nproject(ggml_shim C CXX)\n\
         set(CMAKE_FIND_PACKAGE_TARGETS_GLOBAL ON)\nfind_package(ggml REQUIRED)\n\
         add_library(ggml INTERFACE)\ntarget_link_libraries(ggml INTERFACE ggml::ggml)\n",
    )
    .expect("write shim");
}

struct Fixture {
    _tmp: tempfile::TempDir,
    checkout: PathBuf,
    work: PathBuf,
    logs: PathBuf,
    ggml: PathBuf,
}

fn fixture(subdir: &str) -> Option<Fixture> {
    let ggml = ggml_dir()?;
    let tmp = tempfile::tempdir().expect("tempdir");
    let checkout = tmp.path().join("checkout");
    shim_tree(&checkout, subdir, &ggml);
    Some(Fixture {
        checkout,
        work: tmp.path().join("work"),
        logs: tmp.path().join("logs"),
        ggml,
        _tmp: tmp,
    })
}

fn prober(f: &Fixture, subdir: &str, args: &[&str]) -> ReproProber {
    let mut o = ReproOptions::new(Arc::new(HostLauncher));
    o.ggml_subdir = subdir.into();
    o.cmake_args = vec![format!("-Dggml_DIR={}", f.ggml.display())];
    o.repro_args = args.iter().map(|s| s.to_string()).collect();
    o.jobs = Some(2);
    ReproProber::new(o)
}

fn probe(p: &ReproProber, f: &Fixture, name: &str) -> setrows_bisect::probe::ProbeReport {
    let log = f.logs.join(format!("{name}.log"));
    let req = ProbeRequest {
        commit: "0123456789abcdef0123456789abcdef01234567",
        checkout: &f.checkout,
        build_dir: &f.work,
        log_path: &log,
        run_name: name,
        artifacts: None,
    };
    p.probe(&req, &|_| {})
}

#[test]
fn pass_then_injected_mismatch_through_the_prober() {
    let Some(f) = fixture("") else { return };
    let p = prober(&f, "", &["--backend", "CPU", "--steps", "1500"]);
    let r = probe(&p, &f, "pass");
    assert_eq!(
        r.outcome,
        Outcome::Pass,
        "{:?}\n{}",
        r.signature,
        r.output_tail
    );
    assert_eq!(r.exit_code, Some(0));
    assert!(r.build_s > 0.0 && r.test_s > 0.0);
    assert_eq!(r.provenance.get("backend").map(String::as_str), Some("CPU"));
    let log = std::fs::read_to_string(&r.log_path).expect("probe log");
    assert!(
        log.contains("-DGGML_SOURCE_DIR="),
        "the configure step is logged"
    );

    // same build dir, different reproducer args: the build is reused, the fault is caught
    let p = prober(
        &f,
        "",
        &[
            "--backend",
            "CPU",
            "--steps",
            "1500",
            "--inject",
            "skip-write",
        ],
    );
    let r = probe(&p, &f, "inject");
    assert_eq!(r.outcome, Outcome::WrongResult, "{}", r.output_tail);
    let sig = r.signature.unwrap_or_default();
    assert!(sig.contains("buffer=raw_kv written-row"), "{sig}");
}

/// The bundled reproducer's build counts its own ccache use (a private cache): a cold build
/// misses, the same sources rebuilt from scratch at the same paths hit.
#[test]
fn the_reproducer_build_says_whether_ccache_hit() {
    use setrows_bisect::core::ccache::Ccache;
    let Some(f) = fixture("") else { return };
    let found = setrows_bisect::probe::exec::which("ccache");
    if tools::require(found, "ccache", "scripts/setup.d/00-base.sh").is_none() {
        return;
    }
    let cache = f.work.with_file_name("ccache");
    let mut o = ReproOptions::new(Arc::new(HostLauncher));
    o.cmake_args = vec![format!("-Dggml_DIR={}", f.ggml.display())];
    o.repro_args = ["--backend", "CPU", "--steps", "50"]
        .map(String::from)
        .to_vec();
    o.jobs = Some(2);
    o.build_env = vec![("CCACHE_DIR".into(), cache.to_string_lossy().into_owned())];
    let cold = probe(&ReproProber::new(o.clone()), &f, "cold");
    assert_eq!(cold.outcome, Outcome::Pass, "{}", cold.output_tail);
    let Some(Ccache::Used { hits: 0, misses }) = cold.ccache else {
        panic!("{:?}\n{}", cold.ccache, cold.output_tail)
    };
    assert!(misses > 0, "{:?}", cold.ccache);
    for e in std::fs::read_dir(&f.work).expect("work dir").flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        assert!(
            !name.starts_with(".setrows-ccache-"),
            "stats log left: {name}"
        );
        if name.starts_with("setrows-repro-build-") {
            std::fs::remove_dir_all(e.path()).expect("remove the build tree");
        }
    }
    let warm = probe(&ReproProber::new(o), &f, "warm");
    let Some(Ccache::Used { hits, .. }) = warm.ccache else {
        panic!("{:?}", warm.ccache)
    };
    assert!(hits > 0, "{:?}\n{}", warm.ccache, warm.output_tail);
}

#[test]
fn llama_cpp_layout_and_usage_errors() {
    let Some(f) = fixture("ggml") else { return };
    let r = probe(
        &prober(
            &f,
            "ggml",
            &["--backend", "CPU", "--steps", "200", "--mode", "rebuild"],
        ),
        &f,
        "sub",
    );
    assert_eq!(
        r.outcome,
        Outcome::Pass,
        "{:?}\n{}",
        r.signature,
        r.output_tail
    );
    let r = probe(&prober(&f, "ggml", &["--dst-type", "q9_9"]), &f, "usage");
    assert_eq!(r.outcome, Outcome::Untestable);
    assert!(r
        .signature
        .unwrap_or_default()
        .starts_with("usage error: --dst-type 'q9_9'"));
    // wrong subdir: no ggml there, a skip that says how to fix it
    let r = probe(&prober(&f, "", &["--steps", "10"]), &f, "nosub");
    assert_eq!(r.outcome, Outcome::Untestable);
    assert!(r.signature.unwrap_or_default().contains("ggml_subdir"));
}

/// Earlier outcomes by digest, as the run layer's store would answer them.
#[derive(Debug, Default)]
struct Index(std::sync::Mutex<std::collections::BTreeMap<String, ArtifactHit>>);

impl ArtifactIndex for Index {
    fn lookup(&self, digest: &str) -> Option<ArtifactHit> {
        self.0.lock().ok()?.get(digest).cloned()
    }
}

/// Issue 13 for the bundled reproducer: a build whose reproducer (and the ggml it loads from
/// its build tree) is byte-identical to one already run answers with that run's outcome, and
/// the reproducer does not run; other arguments are another test, which runs.
#[test]
fn identical_reproducer_artifacts_reuse_the_earlier_outcome() {
    let Some(f) = fixture("") else { return };
    let index = Index::default();
    let run = |p: &ReproProber, name: &str| {
        let log = f.logs.join(format!("{name}.log"));
        let req = ProbeRequest {
            commit: "0123456789abcdef0123456789abcdef01234567",
            checkout: &f.checkout,
            build_dir: &f.work,
            log_path: &log,
            run_name: name,
            artifacts: Some(&index),
        };
        p.probe(&req, &|_| {})
    };
    let p = prober(&f, "", &["--backend", "CPU", "--steps", "200"]);
    let first = run(&p, "first");
    assert_eq!(first.outcome, Outcome::Pass, "{}", first.output_tail);
    assert_eq!(first.reused_from, None);
    let digest = first
        .artifact_digest
        .clone()
        .expect("a digest of the built reproducer");
    // An earlier commit with these artifacts crashed (a stand-in for the store).
    let mut earlier = first.clone();
    earlier.outcome = Outcome::Crash;
    earlier.signature = Some("earlier crash".into());
    index.0.lock().unwrap().insert(
        digest.clone(),
        ArtifactHit {
            commit: "c0ffee".into(),
            report: earlier,
        },
    );
    let second = run(&p, "second");
    assert_eq!(second.outcome, Outcome::Crash);
    assert_eq!(second.signature.as_deref(), Some("earlier crash"));
    assert_eq!(second.reused_from.as_deref(), Some("c0ffee"));
    assert_eq!(second.artifact_digest.as_deref(), Some(digest.as_str()));
    assert_eq!(second.test_s, 0.0);
    let log = std::fs::read_to_string(&second.log_path).expect("probe log");
    assert!(
        log.contains("test skipped: artifacts identical to c0ffee"),
        "{log}"
    );
    let other = run(
        &prober(&f, "", &["--backend", "CPU", "--steps", "201"]),
        "other",
    );
    assert_eq!(other.outcome, Outcome::Pass, "{}", other.output_tail);
    assert_eq!(other.reused_from, None);
    assert_ne!(other.artifact_digest.as_deref(), Some(digest.as_str()));
}

#[test]
fn a_revision_that_does_not_configure_is_build_failed() {
    let Some(f) = fixture("") else { return };
    std::fs::write(
        f.checkout.join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.14)\nproject(broken C)\nmessage(FATAL_ERROR \"this revision does not build\")\n",
    )
    .expect("break the tree");
    let r = probe(&prober(&f, "", &["--steps", "10"]), &f, "broken");
    assert_eq!(r.outcome, Outcome::BuildFailed, "{}", r.output_tail);
    assert!(r.signature.unwrap_or_default().contains("CMake Error"));
}

/// The prober on a REAL ggml source tree (not run by default: CI has none). Used for the
/// evidence in repro-kernels/README.md:
/// `SETROWS_TEST_GGML_SRC=<tree> SETROWS_TEST_EXPECT=<outcome> [SETROWS_TEST_CMAKE_ARGS="-DGGML_CUDA=ON ..."]
///  [SETROWS_TEST_REPRO_ARGS="--steps 3000"] [SETROWS_TEST_RUN_ENV="K=V ..."] [SETROWS_TEST_REPRODUCER=kernel]
///  [SETROWS_TEST_BUILD_DIR=<dir to share between runs>] cargo test --test repro_prober -- --ignored --nocapture`
#[test]
#[ignore = "needs a ggml source tree in SETROWS_TEST_GGML_SRC"]
fn real_ggml_tree_from_env() {
    let src =
        PathBuf::from(std::env::var_os("SETROWS_TEST_GGML_SRC").expect("SETROWS_TEST_GGML_SRC"));
    let expect = std::env::var("SETROWS_TEST_EXPECT").unwrap_or_else(|_| "pass".into());
    let words = |k: &str| -> Vec<String> {
        std::env::var(k)
            .unwrap_or_default()
            .split_whitespace()
            .map(String::from)
            .collect()
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let build_dir = std::env::var_os("SETROWS_TEST_BUILD_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| tmp.path().to_path_buf());
    let mut o = ReproOptions::new(Arc::new(HostLauncher));
    o.cmake_args = words("SETROWS_TEST_CMAKE_ARGS");
    o.repro_args = words("SETROWS_TEST_REPRO_ARGS");
    o.run_env = words("SETROWS_TEST_RUN_ENV")
        .into_iter()
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    if std::env::var("SETROWS_TEST_REPRODUCER").as_deref() == Ok("kernel") {
        o.reproducer = setrows_bisect::probe::repro::Reproducer::Kernel;
    }
    let p = ReproProber::new(o);
    let log = tmp.path().join("probe.log");
    let req = ProbeRequest {
        commit: "from-env",
        checkout: &src,
        build_dir: &build_dir,
        log_path: &log,
        run_name: "real",
        artifacts: None,
    };
    let r = p.probe(&req, &|ph| eprintln!("phase: {}", ph.as_str()));
    println!("identity: {}", p.identity());
    println!(
        "outcome={} signature={:?} exit={:?} signal={:?} build_s={:.1} test_s={:.1} provenance={:?}",
        r.outcome, r.signature, r.exit_code, r.signal, r.build_s, r.test_s, r.provenance
    );
    println!("output tail:\n{}", tail_lines(&r.output_tail, 6));
    assert_eq!(r.outcome.as_str(), expect, "{}", r.output_tail);
}

fn tail_lines(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The vacuous-pass guard through the real reproducer: the same CPU build and run is a pass when
/// nothing is asked, and `untestable` (with the reason) when the configuration asks for graphs
/// the CPU backend does not have.
#[test]
fn graphs_asked_on_the_cpu_come_out_untestable() {
    use setrows_bisect::core::build::Backend;
    use setrows_bisect::probe::repro::Expectations;
    let Some(f) = fixture("") else { return };
    let args = ["--backend", "CPU", "--steps", "300"];
    let plain = prober(&f, "", &args);
    let r = probe(&plain, &f, "plain");
    assert_eq!(
        r.outcome,
        Outcome::Pass,
        "{:?}\n{}",
        r.signature,
        r.output_tail
    );
    assert!(
        r.provenance
            .get("repro_features")
            .is_some_and(|v| !v.contains("USE_GRAPHS")),
        "the run's own features are recorded: {:?}",
        r.provenance
    );

    let mut o = ReproOptions::new(Arc::new(HostLauncher));
    o.cmake_args = vec![format!("-Dggml_DIR={}", f.ggml.display())];
    o.repro_args = args.iter().map(|s| s.to_string()).collect();
    o.jobs = Some(2);
    o.expect = Expectations {
        backend: Some(Backend::Cpu),
        ..Expectations::default()
    };
    let r = probe(&ReproProber::new(o.clone()), &f, "cpu-asked");
    assert_eq!(
        r.outcome,
        Outcome::Pass,
        "asking for the CPU on the CPU holds"
    );

    o.expect.graphs = Some(true);
    let guarded = ReproProber::new(o.clone());
    assert_ne!(
        guarded.identity(),
        plain.identity(),
        "what is asked is in the key"
    );
    let r = probe(&guarded, &f, "graphs");
    assert_eq!(r.outcome, Outcome::Untestable, "{}", r.output_tail);
    let sig = r.signature.clone().unwrap_or_default();
    assert!(sig.contains("CPU backend has no graphs"), "{sig}");
    assert_eq!(
        r.exit_code,
        Some(0),
        "the reproducer itself passed: the guard decided"
    );

    assert!(
        r.is_systematic(),
        "no commit builds graphs into the CPU backend"
    );

    // Asking for HIP on a machine without an AMD GPU (CI, hosted runners): the build runs and is
    // kept and reported, the reproducer does not run, and the reason is the machine's. Where
    // /dev/kfd exists the run happens and the guard sees it ran on the CPU: the same kind of skip.
    o.expect = Expectations {
        backend: Some(Backend::Hip),
        ..Expectations::default()
    };
    let r = probe(&ReproProber::new(o), &f, "hip-asked");
    assert_eq!(r.outcome, Outcome::Untestable, "{}", r.output_tail);
    assert!(r.is_systematic(), "{:?}", r.signature);
    let sig = r.signature.clone().unwrap_or_default();
    if Path::new(setrows_bisect::probe::device::AMD_KFD).exists() {
        assert!(sig.contains("ran on cpu"), "{sig}");
    } else {
        assert!(sig.starts_with("no AMD GPU (/dev/kfd is missing"), "{sig}");
        assert!(r.build_s > 0.0, "the build phase ran");
        assert_eq!(r.test_s, 0.0, "the reproducer did not run");
        let log = std::fs::read_to_string(&r.log_path).expect("probe log");
        assert!(
            log.contains("-DGGML_SOURCE_DIR="),
            "the build is in the log"
        );
        assert!(!log.contains("SETROWS_RESULT"), "no run: {log}");
    }
}
