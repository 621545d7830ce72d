//! Which settings mean something for which backend and probe: THE rule for flags and for a
//! `--config`'s own values (GPU targets, graphs, wave sizes; a memory placement by
//! `core::build::Memory::meaningless`, the rule matrix cells use too). A setting that means
//! nothing would be stored in the key, answer no question and never be found again, so it is
//! refused (exit 2) before anything runs.

use super::{Flags, ProbeSpec, Resolved};
use crate::core::build::Backend;

/// A setting that means nothing for the backend the probes build for: stored in the key it
/// would answer no question and never be found again, so it is refused (exit 2) whether a flag
/// or a `--config` gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meaningless {
    /// The setting as its flag spells it (`--graphs`).
    pub flag: &'static str,
    pub value: String,
    /// Which backends it is for, in words.
    pub for_: &'static str,
}

/// THE rule of which settings mean something for which backend (one for flags and
/// configurations): GPU targets and graphs are GPU settings, the wave size is HIP's.
pub fn meaningless(
    backend: Backend,
    gpu_target: Option<&str>,
    graphs: Option<bool>,
    wave_size: Option<u32>,
) -> Option<Meaningless> {
    let m = |flag, value: String, for_| Some(Meaningless { flag, value, for_ });
    if backend == Backend::Cpu {
        if let Some(t) = gpu_target {
            return m("--gpu-target", t.to_string(), "a GPU build: hip or cuda");
        }
        if let Some(g) = graphs {
            let onoff = if g { "on" } else { "off" };
            return m(
                "--graphs",
                onoff.to_string(),
                "HIP/CUDA graphs: hip or cuda",
            );
        }
    }
    match (wave_size, backend) {
        (Some(w), Backend::Cpu | Backend::Cuda) => {
            m("--wave-size", w.to_string(), "a HIP wave size: hip")
        }
        _ => None,
    }
}

impl Resolved {
    /// A setting of this configuration that means nothing for its backend (`meaningless`).
    pub fn meaningless(&self) -> Option<Meaningless> {
        let r = &self.recipe;
        meaningless(self.backend, r.gpu_target.as_deref(), r.graphs, r.wave_size)
    }

    /// Why this configuration, flags applied, cannot be probed as it stands (one line naming
    /// the setting; `None`: it can). What is left after the flags' own check is a
    /// `--config`'s value under a backend a flag chose (a HIP configuration's graphs with
    /// `--backend cpu`), or a memory placement the backend cannot have.
    pub fn refused(&self) -> Option<String> {
        if let Some(m) = self.meaningless() {
            let b = self.backend.as_str();
            return Some(format!(
                "--config {}: its {} {} means nothing for --backend {b} ({}); drop --backend {b} or pick a configuration of that backend",
                self.id.as_deref().unwrap_or("(unnamed)"),
                m.flag,
                m.value,
                m.for_
            ));
        }
        self.memory_refused()
    }
}

impl Resolved {
    /// A placement this configuration cannot have (`memory_meaningless`), as one line naming
    /// the flag (bad input: exit 2 before any probe).
    pub fn memory_refused(&self) -> Option<String> {
        let memory = self.recipe.memory;
        let why = memory.meaningless(self.backend, self.probe.def().no_host_memory())?;
        let instead = match (self.backend, self.probe.kind()) {
            (Backend::Cpu, _) => "use --memory device, or --backend hip|cuda",
            _ => "use --memory device or unified with --probe-kind decode, or --probe-kind replay for host",
        };
        Some(format!("--memory {}: {why}; {instead}", memory.as_str()))
    }
}

impl Flags {
    /// Why these flags mean nothing for `backend`, the one the probes build for (a
    /// `--config`'s unless `--backend` overrides it): one line naming the flag, or `None`.
    pub fn refused(&self, backend: Backend) -> Option<String> {
        let script = self.probe.as_ref().and_then(ProbeSpec::script);
        if script.is_some_and(|(_, s)| !s.is_empty()) && !self.repro_args.is_empty() {
            return Some("--repro-arg is for the bundled reproducer; a --script probe gets its arguments in CMD (drop --repro-arg)".into());
        }
        if let Some(t) = self.gpu_target.as_deref().filter(|t| !cuda_target(t)) {
            if backend == Backend::Cuda {
                return Some(format!(
                    "--gpu-target {t}: a CUDA target is an sm number such as 90 or 90a (CMAKE_CUDA_ARCHITECTURES; several: 89;90)"
                ));
            }
        }
        let m = meaningless(
            backend,
            self.gpu_target.as_deref(),
            self.graphs,
            self.wave_size,
        )?;
        Some(format!(
            "{} {} means nothing for --backend {} ({}); drop it or pick that backend",
            m.flag,
            m.value,
            backend.as_str(),
            m.for_
        ))
    }
}

/// `CMAKE_CUDA_ARCHITECTURES`: sm numbers (`90`, `90a`, `100f`, `90-real`), `;`- or
/// `,`-separated, or one of CMake's words.
fn cuda_target(t: &str) -> bool {
    if ["native", "all", "all-major"].contains(&t) {
        return true;
    }
    t.split([';', ',']).all(|one| {
        let one = one
            .strip_suffix("-real")
            .or_else(|| one.strip_suffix("-virtual"))
            .unwrap_or(one);
        let digits = one.trim_end_matches(['a', 'f']);
        !digits.is_empty()
            && digits.bytes().all(|d| d.is_ascii_digit())
            && one.len() - digits.len() <= 1
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_targets_are_sm_numbers() {
        for ok in ["90", "90a", "100f", "89;90", "86,89", "90-real", "native"] {
            assert!(cuda_target(ok), "{ok}");
        }
        for bad in ["banana", "gfx1151", "", "90aa", "sm_90", "9 0"] {
            assert!(!cuda_target(bad), "{bad}");
        }
    }
}
