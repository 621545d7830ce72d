//! Where `bisect` runs its probes (`--engine`, `--image`).
//!
//! The default engine for `bisect` is `none` (unlike `matrix`, whose configurations name their
//! images): a bisect is usually of the user's own machine, and a container only makes sense
//! with an image to run in, so both flags go together or not at all.

use crate::error::CliError;
use crate::probe::container::{ContainerLauncher, Engine, EngineChoice};
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
/// one (`run::probers::container_launcher`): the engine answers and the image is present
/// (never pulled), or this is an infrastructure error (exit 3).
pub fn container(
    choice: EngineChoice,
    cfg: &crate::core::config::Resolved,
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
