//! What a finished HIP build proves before anything runs. On a machine without an AMD GPU (CI,
//! hosted runners, a build bisect) the build is the only evidence there is, so the guard asks it
//! directly: the compile commands say whether `GGML_HIP_GRAPHS` is really defined, and the
//! library's offload bundles say which GPUs it carries code for. Both are recorded in the
//! probe's provenance, so a report shows the proof beside every HIP verdict, and a build that
//! contradicts its configuration is `untestable` with the reason before a test could pretend.

use super::expect::{self, CompileDefs, Expectations, Mismatch, TreeOptions};
use super::offload::{self, OffloadTargets};
use crate::core::build::Backend;
use crate::core::outcome::SkipScope;
use std::collections::BTreeMap;
use std::path::Path;

/// The proof of one build: what `tree` (the CMake build tree) and its compile definitions
/// (`defs`, read when graphs were asked) say, recorded into `provenance`, and the first
/// contradiction with `exp`, if any. Only HIP builds are read (CUDA proves its configuration at
/// run time through ggml's feature list).
pub(super) fn hip_build(
    exp: &Expectations,
    tree: &Path,
    defs: Option<&CompileDefs>,
    options: &TreeOptions,
    provenance: &mut BTreeMap<String, String>,
) -> Option<Mismatch> {
    if exp.backend != Some(Backend::Hip) {
        return None;
    }
    let targets = offload::read_build(tree);
    if let Some(t) = &targets {
        provenance.insert("offload_targets".into(), t.summary());
    }
    if let Some(d) = defs.filter(|d| d.backend_commands > 0) {
        provenance.insert(
            "graphs_build".into(),
            format!(
                "GGML_HIP_GRAPHS defined in {} of {} ggml GPU compile commands",
                d.hip_graphs, d.backend_commands
            ),
        );
    }
    expect::mismatch_in(exp, None, defs, options).or_else(|| target_mismatch(exp, targets.as_ref()))
}

/// The asked GPU missing from the library: the configuration and toolchain decide the targets
/// (the recipe passes the spelling each tree reads), so no other commit would do better.
fn target_mismatch(exp: &Expectations, targets: Option<&OffloadTargets>) -> Option<Mismatch> {
    let want = exp.gpu_target.as_deref()?;
    let t = targets?;
    (t.carries(want) == Some(false)).then(|| Mismatch {
        reason: format!(
            "GPU target {want} asked for, but the build carries {}",
            t.summary()
        ),
        scope: SkipScope::Systematic,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hip(graphs: Option<bool>) -> Expectations {
        Expectations {
            backend: Some(Backend::Hip),
            graphs,
            wave_size: Some(32),
            gpu_target: Some("gfx1151".into()),
            memory: None,
            settings: Default::default(),
        }
    }

    fn lib(dir: &Path, ids: &[&str]) {
        let mut b = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
        for id in ids {
            b.extend((id.len() as u64).to_le_bytes());
            b.extend(id.as_bytes());
        }
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::write(dir.join("bin/libggml-hip.so"), b).unwrap();
    }

    fn defs(total: usize, graphs: usize) -> CompileDefs {
        CompileDefs {
            source: "compile_commands.json".into(),
            backend_commands: total,
            hip_graphs: graphs,
            cuda_graphs: 0,
        }
    }

    const DECLARED: TreeOptions = TreeOptions {
        graphs_option: true,
    };

    #[test]
    fn a_gfx1151_build_with_graphs_is_proven_and_recorded() {
        let d = tempfile::tempdir().unwrap();
        lib(d.path(), &["hipv4-amdgcn-amd-amdhsa--gfx1151"; 3]);
        let mut p = BTreeMap::new();
        let m = hip_build(
            &hip(Some(true)),
            d.path(),
            Some(&defs(140, 140)),
            &DECLARED,
            &mut p,
        );
        assert_eq!(m, None);
        assert_eq!(p["offload_targets"], "gfx1151 x3 (libggml-hip.so)");
        assert_eq!(
            p["graphs_build"],
            "GGML_HIP_GRAPHS defined in 140 of 140 ggml GPU compile commands"
        );
    }

    #[test]
    fn a_build_for_another_gpu_is_untestable_for_every_commit() {
        let d = tempfile::tempdir().unwrap();
        lib(d.path(), &["hipv4-amdgcn-amd-amdhsa--gfx1100"]);
        let mut p = BTreeMap::new();
        let m = hip_build(&hip(None), d.path(), None, &DECLARED, &mut p).unwrap();
        assert_eq!(m.scope, SkipScope::Systematic);
        assert!(
            m.reason.contains("gfx1151 asked for") && m.reason.contains("gfx1100 x1"),
            "{}",
            m.reason
        );
    }

    #[test]
    fn graphs_asked_and_not_built_is_caught_from_the_build() {
        let d = tempfile::tempdir().unwrap();
        lib(d.path(), &["hipv4-amdgcn-amd-amdhsa--gfx1151"]);
        let mut p = BTreeMap::new();
        let m = hip_build(
            &hip(Some(true)),
            d.path(),
            Some(&defs(140, 0)),
            &DECLARED,
            &mut p,
        )
        .unwrap();
        assert!(m.reason.contains("GGML_HIP_GRAPHS"), "{}", m.reason);
        assert_eq!(m.scope, SkipScope::Systematic);
        // graphs off asked, and off built: proven, not a mismatch
        let m = hip_build(
            &hip(Some(false)),
            d.path(),
            Some(&defs(140, 0)),
            &DECLARED,
            &mut p,
        );
        assert_eq!(m, None);
        assert_eq!(
            p["graphs_build"],
            "GGML_HIP_GRAPHS defined in 0 of 140 ggml GPU compile commands"
        );
    }

    #[test]
    fn other_backends_are_not_read() {
        let d = tempfile::tempdir().unwrap();
        let mut p = BTreeMap::new();
        let cuda = Expectations {
            backend: Some(Backend::Cuda),
            ..hip(Some(true))
        };
        assert_eq!(hip_build(&cuda, d.path(), None, &DECLARED, &mut p), None);
        assert!(p.is_empty());
    }
}
