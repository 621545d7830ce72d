//! Where `bisect` runs its probes (`--engine`, `--image`) and the bundled reproducer's per-tree
//! CMake spellings.
//!
//! The default engine for `bisect` is `none` (unlike `matrix`, whose configurations name their
//! images): a bisect is usually of the user's own machine, and a container only makes sense
//! with an image to run in, so both flags go together or not at all.

use crate::core::build::{Recipe, TreeFacts};
use crate::error::CliError;
use crate::probe::container::{ContainerLauncher, Engine, EngineChoice, GpuAccess};
use crate::probe::repro::{ReproOptions, ReproProber};
use crate::probe::{Phase, ProbeReport, ProbeRequest, Prober};
use std::path::Path;

/// `--image` without an engine, or an engine without `--image`: one-line usage errors (exit 2),
/// checked before anything touches git or the engine.
pub fn check_flags(engine: EngineChoice, image: Option<&str>) -> anyhow::Result<()> {
    match (engine, image) {
        (EngineChoice::None, Some(i)) => Err(CliError::usage(format!(
            "--image {i} needs --engine podman, docker or auto (the default, none, runs probes on the host)"
        ))),
        (EngineChoice::None, None) | (_, Some(_)) => Ok(()),
        (e, None) => Err(CliError::usage(format!(
            "--engine {} needs --image IMAGE, the build image probes run in (e.g. localhost/setrows-cpu:bookworm, see containers/README.md)",
            engine_name(e)
        ))),
    }
}

fn engine_name(e: EngineChoice) -> &'static str {
    match e {
        EngineChoice::Auto => "auto",
        EngineChoice::Podman => "podman",
        EngineChoice::Docker => "docker",
        EngineChoice::None => "none",
    }
}

/// The container launcher for `--engine/--image` (`None`: the host), built as `matrix` builds
/// one: the engine answers and the image is present (never pulled), or this is an
/// infrastructure error (exit 3). ccache lives under the work dir, one per image.
pub fn container(
    choice: EngineChoice,
    image: Option<&str>,
    gpu: GpuAccess,
    work_dir: &Path,
) -> anyhow::Result<Option<ContainerLauncher>> {
    let Some(image) = image else {
        return Ok(None);
    };
    let Some(engine) = Engine::detect(choice).map_err(|e| CliError::infra(e.to_string()))? else {
        return Ok(None);
    };
    let ccache = work_dir
        .join("ccache")
        .join(crate::run::store::bisect_id(&[engine.kind.as_str(), image]));
    ContainerLauncher::new(engine, image, gpu, &ccache)
        .map(Some)
        .map_err(|e| CliError::infra(e.to_string()))
}

/// The bundled reproducer with the CMake option spellings of each probed tree
/// (`probe::tree_facts` on the checkout), so a range across a rename such as
/// `GGML_HIPBLAS` -> `GGML_HIP` or `AMDGPU_TARGETS` -> `GPU_TARGETS` builds the backend on both
/// sides. The spellings follow from the tree, which is already part of the store key, so the
/// identity names the recipe rather than one tree's spellings.
pub struct PerTreeRepro {
    opts: ReproOptions,
    recipe: Recipe,
    /// For a checkout whose CMake files cannot be read (it then fails to build anyway).
    fallback: TreeFacts,
    identity: String,
}

impl PerTreeRepro {
    pub fn new(opts: ReproOptions, recipe: Recipe, fallback: TreeFacts) -> Self {
        let mut named = opts.clone();
        named.cmake_args = recipe.cmake_args(&TreeFacts::default());
        let identity = format!(
            "{} cmake_spellings=per-tree recipe={}",
            ReproProber::new(named).identity(),
            recipe.identity()
        );
        PerTreeRepro {
            opts,
            recipe,
            fallback,
            identity,
        }
    }

    /// The reproducer as configured for the tree checked out at `checkout`.
    pub fn for_tree(&self, checkout: &Path) -> ReproProber {
        let facts = crate::probe::tree_facts(checkout).unwrap_or_else(|_| self.fallback.clone());
        let mut opts = self.opts.clone();
        opts.cmake_args = self.recipe.cmake_args(&facts);
        ReproProber::new(opts)
    }
}

impl Prober for PerTreeRepro {
    fn identity(&self) -> String {
        self.identity.clone()
    }

    fn probe(&self, req: &ProbeRequest<'_>, phase: &dyn Fn(Phase)) -> ProbeReport {
        self.for_tree(req.checkout).probe(req, phase)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::build::Backend;

    #[test]
    fn engine_and_image_go_together() {
        assert!(check_flags(EngineChoice::None, None).is_ok());
        assert!(check_flags(EngineChoice::Podman, Some("img")).is_ok());
        assert!(check_flags(EngineChoice::Auto, Some("img")).is_ok());
        for (e, i) in [
            (EngineChoice::None, Some("img")),
            (EngineChoice::Podman, None),
            (EngineChoice::Auto, None),
        ] {
            let err = check_flags(e, i).unwrap_err();
            assert_eq!(crate::error::exit_code(&err), 2, "{e:?} {i:?}: {err}");
        }
    }

    fn tree(dir: &Path, cmake: &str) {
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("CMakeLists.txt"), cmake).unwrap();
    }

    #[test]
    fn spellings_follow_each_checkout() {
        let d = tempfile::tempdir().unwrap();
        let (old, new) = (d.path().join("old"), d.path().join("new"));
        tree(
            &old,
            "option(GGML_HIPBLAS \"hip\" OFF)\nset(AMDGPU_TARGETS \"\")\n",
        );
        tree(
            &new,
            "option(GGML_HIP \"hip\" OFF)\nset(GPU_TARGETS \"\")\n",
        );
        let mut recipe = Recipe::new(Backend::Hip);
        recipe.gpu_target = Some("gfx1151".into());
        let opts = ReproOptions::new(std::sync::Arc::new(crate::probe::launch::HostLauncher));
        let p = PerTreeRepro::new(opts, recipe, TreeFacts::default());
        let args = |dir: &Path| format!("{:?}", p.for_tree(dir));
        let (a_old, a_new) = (args(&old), args(&new));
        assert!(a_old.contains("-DGGML_HIPBLAS=ON"), "{a_old}");
        assert!(a_old.contains("-DAMDGPU_TARGETS=gfx1151"), "{a_old}");
        assert!(
            a_new.contains("-DGGML_HIP=ON") && !a_new.contains("HIPBLAS"),
            "{a_new}"
        );
        assert!(
            a_new.contains("-DGPU_TARGETS=gfx1151") && !a_new.contains("AMDGPU"),
            "{a_new}"
        );
        // One identity for the whole range: the tree is already in the store key.
        assert!(p.identity().contains("cmake_spellings=per-tree"));
    }
}
