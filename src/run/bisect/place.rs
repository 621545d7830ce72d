//! Where a bisect's probes run (`run::probers::Place`): the container of `--engine/--image`
//! (or the host), ccache, the ROCm toolchain's `hipconfig` answer, and what the `--bad` commit
//! says about the tree (where ggml lives, its CMake spellings) for a checkout that cannot say
//! it itself.

use crate::core::build::{TreeFacts, CMAKE_FILES};
use crate::core::config::Resolved;
use crate::core::layout::Layout;
use crate::error::CliError;
use crate::probe::container::{ContainerLauncher, Engine, EngineChoice};
use crate::probe::launch::{HostLauncher, Launcher};
use crate::run::git::Oid;
use crate::run::probers::Place;
use std::path::Path;
use std::sync::Arc;

/// The container launcher for `--engine/--image` (`None`: the host), built as `matrix` builds
/// one (`run::probers::container_launcher`): the engine answers and the image is present
/// (never pulled), or this is an infrastructure error (exit 3).
pub(super) fn container(
    choice: EngineChoice,
    cfg: &Resolved,
    work_dir: &Path,
) -> anyhow::Result<Option<ContainerLauncher>> {
    let Some(image) = cfg.image.as_deref() else {
        return Ok(None);
    };
    let Some(engine) = Engine::detect(choice).map_err(|e| CliError::infra(e.to_string()))? else {
        return Ok(None);
    };
    crate::run::probers::container_launcher(engine, image, cfg.backend, cfg.build_only, work_dir)
        .map(Some)
        .map_err(|e| CliError::infra(e.to_string()))
}

/// The place of `cfg`'s probes. `bad` was checked to be a ggml tree where the bundled
/// reproducer needs one (`cli::bisect`); a HIP build asks `hipconfig` where it runs
/// (`ask_toolchain`; a `--dry-run` asks nothing).
pub(super) fn place(
    cfg: &Resolved,
    repo: &git2::Repository,
    bad: Oid,
    container: Option<ContainerLauncher>,
    ask_toolchain: bool,
) -> anyhow::Result<Place> {
    let (layout, facts) = facts_at(repo, bad)?;
    let in_container = container.is_some();
    let launcher: Arc<dyn Launcher> = match container {
        Some(c) => Arc::new(c),
        None => Arc::new(HostLauncher),
    };
    let hip_env = if ask_toolchain && crate::run::probers::needs_hipconfig(cfg) {
        // Where this ROCm keeps clang differs between versions: ask hipconfig where it runs.
        crate::run::probers::hipconfig_env(launcher.as_ref())
            .map_err(|e| CliError::infra(format!("--backend hip needs a ROCm toolchain: {e}")))?
    } else {
        Vec::new()
    };
    Ok(Place::new(launcher, in_container, hip_env).with_fallback(layout, facts))
}

/// Where ggml sits in `commit` and its spellings (CMake options, the unified-memory knobs),
/// read from the commit as `probe::tree_facts` reads a checkout: what a plan shows for a tree
/// before anything is checked out (the bisect's `--bad`, each `matrix --rev`).
pub fn facts_at(repo: &git2::Repository, commit: Oid) -> anyhow::Result<(Layout, TreeFacts)> {
    let tree = repo
        .find_commit(commit)
        .and_then(|c| c.tree())
        .map_err(|e| CliError::infra(format!("reading commit {commit}: {e}")))?;
    let has = |p: &str| tree.get_path(Path::new(p)).is_ok();
    let layout = Layout::of(has);
    let read = |rel: &str| -> Option<String> {
        let entry = tree.get_path(Path::new(&layout.path(rel))).ok()?;
        let blob = repo.find_blob(entry.id()).ok()?;
        Some(String::from_utf8_lossy(blob.content()).into_owned())
    };
    let mut text = String::new();
    for rel in CMAKE_FILES {
        if let Some(t) = read(rel) {
            text.push_str(&t);
            text.push('\n');
        }
    }
    let [hip_h, cu, old_cu] = crate::core::build::UNIFIED_FILES;
    let facts = TreeFacts::from_cmake_text(&text).with_unified(
        read(hip_h).as_deref(),
        read(cu).or_else(|| read(old_cu)).as_deref(),
    );
    Ok((layout, facts))
}
