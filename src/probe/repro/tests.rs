use super::*;
use crate::probe::launch::HostLauncher;
use std::sync::Arc;

#[test]
fn sources_are_embedded_and_hashed_stably() {
    assert!(SOURCES.iter().all(|(_, t)| !t.is_empty()));
    assert_eq!(sources_hash(), sources_hash());
    assert_eq!(sources_hash().len(), 64);
}

#[test]
fn materialize_writes_once_and_completely() {
    let d = tempfile::tempdir().expect("tempdir");
    let a = materialize_sources(d.path()).expect("write");
    let b = materialize_sources(d.path()).expect("reuse");
    assert_eq!(a, b);
    for (path, text) in SOURCES {
        let got = std::fs::read_to_string(d.path().join(&a).join(path)).expect("read back");
        assert_eq!(got, text);
    }
    // a half-written copy (no .complete marker) is replaced, not trusted
    std::fs::remove_file(d.path().join(&a).join(".complete")).expect("unmark");
    std::fs::write(d.path().join(&a).join(SOURCES[0].0), "garbage").expect("damage");
    assert_eq!(materialize_sources(d.path()).expect("rewrite"), a);
    let got = std::fs::read_to_string(d.path().join(&a).join(SOURCES[0].0)).expect("read");
    assert_eq!(got, SOURCES[0].1);
}

#[test]
fn identity_names_args_sources_and_launcher() {
    let mut o = ReproOptions::new(Arc::new(HostLauncher));
    o.repro_args = vec!["--steps".into(), "10".into()];
    let a = ReproProber::new(o.clone()).identity();
    assert!(
        a.contains(&sources_hash()[..16]) && a.contains("launcher=host") && a.contains("\"10\""),
        "{a}"
    );
    o.repro_args = vec!["--steps".into(), "11".into()];
    assert_ne!(a, ReproProber::new(o.clone()).identity());
    // Where ccache keeps its files is not part of what is tested; the build env otherwise is.
    let before = ReproProber::new(o.clone()).identity();
    o.build_env = vec![("CCACHE_DIR".into(), "/elsewhere/ccache".into())];
    assert_eq!(before, ReproProber::new(o.clone()).identity());
    o.build_env.push(("CXXFLAGS".into(), "-O0".into()));
    assert_ne!(before, ReproProber::new(o.clone()).identity());
    o.cmake_args = vec!["-DGGML_CUDA=ON".into()];
    let b = ReproProber::new(o);
    assert!(b.build_script("s").contains("-DGGML_CUDA=ON"));
    assert!(b.build_script("s").contains("--target setrows-replay"));
}

#[test]
fn scripts_quote_user_arguments() {
    let mut o = ReproOptions::new(Arc::new(HostLauncher));
    o.repro_args = vec!["--backend".into(), "CUDA0; rm -rf /".into()];
    o.ggml_subdir = "ggml".into();
    let p = ReproProber::new(o);
    assert!(
        p.run_script().contains("'CUDA0; rm -rf /'"),
        "{}",
        p.run_script()
    );
    assert!(p.build_script("s").contains("-DGGML_SOURCE_DIR=$SRC/ggml"));
}
