//! What `--dry-run` learns without making anything: no work dir, no container, no ccache dir,
//! no toolchain query. Facts only; `cli::bisect::dry_run` says them in English (one renderer).

use super::Chosen;
use crate::core::config::Resolved;
use crate::probe::container::{Engine, EngineChoice};
use crate::run::probers::Place;
use std::path::{Path, PathBuf};

/// Where the steps would run.
pub enum Where {
    /// On the host, with the user's own ccache when one is installed.
    Host { ccache: bool },
    /// In `image`, but no container engine answers here: a run would stop before its first probe.
    NoEngine { image: String },
    /// In `image` with `engine`; `digest` is `None` when the image is missing here.
    Image {
        image: String,
        engine: &'static str,
        digest: Option<String>,
        ccache_dir: PathBuf,
    },
}

pub struct Planned {
    pub place: Where,
    /// A HIP build asks `hipconfig` where the steps run when a run starts.
    pub asks_toolchain: bool,
    /// The bundled reproducer's CMake line, spelled for the `--bad` tree (`None`: a script).
    pub build: Option<Vec<String>>,
    /// The memory placement's switches at `--bad` and per tree (`None`: device memory).
    pub memory: Option<String>,
    /// What the user's `--repro-arg`s replaced of the default arguments, one line each.
    pub replaced: Vec<String>,
    /// `--compare-good`: a run first probes `--good` to record its logits.
    pub records_good: bool,
}

impl Planned {
    pub(super) fn new(chosen: &Chosen, work_dir: &Path) -> Planned {
        let place = match (chosen.engine, chosen.cfg.image.as_deref()) {
            (EngineChoice::None, _) | (_, None) => Where::Host {
                ccache: crate::probe::ccache::used(false),
            },
            (choice, Some(image)) => match Engine::detect(choice) {
                Ok(Some(engine)) => {
                    let kind = engine.kind.as_str();
                    Where::Image {
                        image: image.to_string(),
                        engine: kind,
                        digest: engine.image_digest(image).ok(),
                        ccache_dir: crate::run::probers::ccache_dir(work_dir, kind, image),
                    }
                }
                Ok(None) | Err(_) => Where::NoEngine {
                    image: image.to_string(),
                },
            },
        };
        Planned {
            place,
            asks_toolchain: crate::run::probers::needs_hipconfig(&chosen.cfg),
            build: None,
            memory: None,
            replaced: chosen.cfg.replaced.clone(),
            records_good: false,
        }
    }

    /// The build line the probes run (the bundled reproducer's; a script builds itself).
    pub(super) fn with_build(mut self, cfg: &Resolved, place: &Place) -> Planned {
        if cfg.probe.def().is_bundled() {
            self.build =
                Some(crate::run::probers::recipe_at(cfg, place).cmake_args(&place.fallback_facts));
        }
        self.memory = cfg.recipe.memory_plan(&place.fallback_facts, "--bad");
        self
    }

    /// The image, when the steps would run in one.
    pub fn image(&self) -> Option<&str> {
        match &self.place {
            Where::Host { .. } => None,
            Where::NoEngine { image } | Where::Image { image, .. } => Some(image),
        }
    }

    /// Whether the store key is known before a run starts: it names the container and HIP's
    /// clang, which only a started run learns.
    pub fn key_known(&self) -> bool {
        matches!(self.place, Where::Host { .. }) && !self.asks_toolchain && !self.records_good
    }
}
