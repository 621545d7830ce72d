//! Where a bisect's probes run (`run::probers::Place`): the launcher, ccache, the ROCm
//! toolchain's `hipconfig` answer, and what the `--bad` commit says about the tree (where ggml
//! lives, its CMake spellings) for a checkout that cannot say it itself.

use super::*;
use crate::core::build::{TreeFacts, CMAKE_FILES};
use crate::core::config::{ProbeKind, Resolved};
use crate::core::layout::Layout;
use crate::probe::launch::Launcher;
use crate::run::probers::Place;
use std::sync::Arc;

/// The place of `cfg`'s probes. For the bundled reproducer, `bad` must be a ggml tree (ggml,
/// llama.cpp or lucebox layout), and a HIP build asks `hipconfig` where it runs
/// (`ask_toolchain`; a `--dry-run` asks nothing).
pub(super) fn place(
    cfg: &Resolved,
    repo: &git2::Repository,
    bad: git::Oid,
    container: Option<ContainerLauncher>,
    ask_toolchain: bool,
) -> anyhow::Result<Place> {
    let tree = repo
        .find_commit(bad)
        .and_then(|c| c.tree())
        .map_err(|e| CliError::infra(format!("reading bad commit {bad}: {e}")))?;
    let has = |p: &str| tree.get_path(std::path::Path::new(p)).is_ok();
    let replay = matches!(cfg.probe, ProbeKind::Replay | ProbeKind::Decode);
    let layout = Layout::of(has);
    if replay && !layout.has_ggml_header(has) {
        return Err(CliError::usage(format!(
            "no --script given, and bad commit {bad} is not a ggml, llama.cpp or lucebox tree for the bundled reproducer (no include/ggml.h at the root, under ggml/ or under server/deps/llama.cpp/ggml/); pass --script CMD"
        )));
    }
    let subdir = layout.ggml_dir();
    // The files `probe::tree_facts` reads, taken from the commit instead of a checkout.
    let mut text = String::new();
    for rel in CMAKE_FILES {
        let path = layout.path(rel);
        if let Ok(entry) = tree.get_path(std::path::Path::new(&path)) {
            if let Ok(blob) = repo.find_blob(entry.id()) {
                text.push_str(&String::from_utf8_lossy(blob.content()));
                text.push('\n');
            }
        }
    }
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
    Ok(Place {
        launcher,
        in_container,
        hip_env,
        fallback_facts: TreeFacts::from_cmake_text(&text),
        fallback_subdir: subdir.to_string(),
    })
}
