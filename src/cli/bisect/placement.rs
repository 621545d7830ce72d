//! `--engine` and `--image`, the flags of where `bisect` runs its probes (the container itself
//! is `run::bisect`'s).
//!
//! The default engine for `bisect` is `none` (unlike `matrix`, whose configurations name their
//! images): a bisect is usually of the user's own machine, and a container only makes sense
//! with an image to run in, so both flags go together or not at all.

use crate::error::CliError;
use crate::probe::container::EngineChoice;

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
            assert_eq!(
                crate::error::Exit::of_error(&err),
                crate::error::Exit::Usage,
                "{e:?} {i:?}: {err}"
            );
        }
    }
}
