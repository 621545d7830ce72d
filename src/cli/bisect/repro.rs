//! `--backend` without `--script`: the bundled set_rows replay reproducer, built against each
//! probed ggml revision, on the host or in a container.

use super::*;

/// The bundled set_rows replay reproducer (`repro::ReproProber`), built against each probed
/// ggml revision with the `--backend` recipe, on the host or in `container`. CMake option
/// spellings are read from each probed tree (`placement::PerTreeRepro`); the `--bad` commit's
/// stand in for a tree whose CMake files cannot be read.
pub(super) fn repro_prober(
    args: &BisectArgs,
    repo: &git2::Repository,
    bad: git::Oid,
    work_dir: &std::path::Path,
    timeout: Option<Duration>,
    container: Option<ContainerLauncher>,
) -> anyhow::Result<Box<dyn Prober>> {
    use crate::core::build::{Backend, Recipe, TreeFacts};
    use crate::probe::launch::Launcher;
    use crate::probe::repro::ReproOptions;
    let tree = repo
        .find_commit(bad)
        .and_then(|c| c.tree())
        .map_err(|e| CliError::infra(format!("reading bad commit {bad}: {e}")))?;
    let has = |p: &str| tree.get_path(std::path::Path::new(p)).is_ok();
    let subdir = if has("ggml/CMakeLists.txt") {
        "ggml"
    } else {
        ""
    };
    let prefix = if subdir.is_empty() {
        String::new()
    } else {
        format!("{subdir}/")
    };
    if !has(&format!("{prefix}include/ggml.h")) {
        return Err(CliError::usage(format!(
            "no --script given, and bad commit {bad} is not a ggml (or llama.cpp) tree for the bundled reproducer (no {prefix}include/ggml.h); pass --script CMD"
        )));
    }
    // The files `probe::tree_facts` reads, taken from the commit instead of a checkout.
    let mut text = String::new();
    for rel in [
        "CMakeLists.txt",
        "src/CMakeLists.txt",
        "src/ggml-hip/CMakeLists.txt",
        "src/ggml-cuda/CMakeLists.txt",
    ] {
        if let Ok(entry) = tree.get_path(std::path::Path::new(&format!("{prefix}{rel}"))) {
            if let Ok(blob) = repo.find_blob(entry.id()) {
                text.push_str(&String::from_utf8_lossy(blob.content()));
                text.push('\n');
            }
        }
    }
    let facts = TreeFacts::from_cmake_text(&text);
    let backend = match args.backend.as_deref() {
        None => Backend::Cpu,
        Some(b) => Backend::parse(b)
            .ok_or_else(|| CliError::usage(format!("--backend {b}: expected cpu, cuda or hip")))?,
    };
    let mut recipe = Recipe::new(backend);
    let in_container = container.is_some();
    // Build images carry ccache, and the container launcher mounts its cache directory.
    recipe.ccache = in_container || crate::probe::script::which("ccache").is_some();
    let launcher: std::sync::Arc<dyn Launcher> = match container {
        Some(c) => std::sync::Arc::new(c),
        None => std::sync::Arc::new(HostLauncher),
    };
    let mut opts = ReproOptions::new(launcher.clone());
    opts.ggml_subdir = subdir.into();
    if backend == Backend::Hip {
        // Where this ROCm keeps clang differs between versions: ask hipconfig where it runs.
        let env = crate::run::matrix::hipconfig_env(launcher.as_ref())
            .map_err(|e| CliError::infra(format!("--backend hip needs a ROCm toolchain: {e}")))?;
        opts.build_env.extend(env);
    }
    if recipe.ccache && !in_container {
        opts.build_env.push((
            "CCACHE_DIR".into(),
            work_dir.join("ccache").to_string_lossy().into_owned(),
        ));
    }
    opts.run_env.push(("GGML_NO_BACKTRACE".into(), "1".into()));
    opts.repro_args = args.repro_args.clone();
    if timeout.is_some() {
        opts.run_timeout = timeout;
    }
    Ok(Box::new(placement::PerTreeRepro::new(opts, recipe, facts)))
}
