//! Memory placement (issue 26): the `memory` axis, how each ggml tree asks for unified memory,
//! and what a recipe adds to the build, the launch and the replay's arguments for it.

use super::{Backend, Recipe, TreeFacts};
use serde::{Deserialize, Serialize};

/// Where the replay's persistent buffers and downstream outputs live (issue 26). On an APU
/// (Strix Halo) ggml may keep tensors in host memory the GPU uses in place, or make every device
/// allocation managed; a tool that cannot vary this cannot ask what the gfx1151 regressions
/// users bisected were about (llama.cpp #25992, #27506).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    PartialOrd,
    Ord,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Memory {
    /// ggml's device buffers (hipMalloc/cudaMalloc): what every configuration ran before.
    #[default]
    Device,
    /// ggml's own switch makes its device allocations managed: the env
    /// `GGML_CUDA_ENABLE_UNIFIED_MEMORY` where the tree reads it, the CMake option
    /// `GGML_HIP_UMA` on HIP trees before ff0c43e3.
    Unified,
    /// The device's host buffer type, used in place by the GPU (the replay's `--memory host`).
    Host,
}

impl Memory {
    pub const ALL: [Memory; 3] = [Memory::Device, Memory::Unified, Memory::Host];

    pub fn as_str(self) -> &'static str {
        match self {
            Memory::Device => "device",
            Memory::Unified => "unified",
            Memory::Host => "host",
        }
    }

    pub fn parse(s: &str) -> Option<Memory> {
        Memory::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// The default is left out of identities, so every stored result from before the axis
    /// keeps its key.
    pub fn is_device(&self) -> bool {
        *self == Memory::Device
    }

    /// THE rule of which placements mean something (one for flags and matrix cells): why this
    /// placement would test nothing with `backend` and the probe (`decode`: the decode probe;
    /// `None`: it tests something). On the CPU backend host memory is the same buffer as device
    /// memory, and ggml's unified switch acts on CUDA/HIP allocations only: both would pass
    /// without testing anything (`device` on the CPU is the CPU buffer, what every CPU run did).
    /// The decode probe takes unified memory (the same per-tree knob as the replay) and proves
    /// it; it has no host placement.
    pub fn meaningless(self, backend: Backend, decode: bool) -> Option<&'static str> {
        match (backend, self) {
            (Backend::Cpu, Memory::Host) => Some("the CPU backend's buffers are host memory already (the same buffer as device)"),
            (Backend::Cpu, Memory::Unified) => Some("ggml's unified-memory switch (GGML_CUDA_ENABLE_UNIFIED_MEMORY, GGML_HIP_UMA) acts on CUDA/HIP allocations only"),
            (_, Memory::Host) if decode => Some(DECODE_MEMORY),
            _ => None,
        }
    }

    /// What the replay's result line must say of each persistent buffer's pointer
    /// (`cudaPointerGetAttributes`/`hipPointerGetAttributes`) for this placement to have
    /// taken effect.
    pub fn pointer_kind(self) -> &'static str {
        match self {
            Memory::Device => "device",
            Memory::Unified => "managed",
            Memory::Host => "host",
        }
    }
}

/// Why the decode probe has no host placement: llama.cpp keeps no buffer where a GPU's host
/// placement would put it.
pub const DECODE_MEMORY: &str = "llama.cpp keeps its KV cache on the device or the CPU (offload_kqv), never in the GPU's host buffer, and weights overridden into that buffer (tensor_buft_overrides) are computed by the CPU unless the GPU is integrated, so the decode probe has no host placement to test";

/// How a tree turns ggml's device allocations into managed memory (ggml history, D's notes in
/// LEAD-NOTES: one commit, ff0c43e3 (2025-04-15), swaps the HIP CMake option for the env; the
/// option exists from 5378ea0d (2024-06-26); CUDA reads the env since 0edb8d80 (2024-08-01)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnifiedKnob {
    /// `GGML_CUDA_ENABLE_UNIFIED_MEMORY=1` at launch (today's trees).
    #[default]
    Env,
    /// `-DGGML_HIP_UMA=ON` at configure (HIP trees 5378ea0d..ff0c43e3^).
    CmakeOption,
    /// Neither: the tree cannot be asked for unified memory (a commit skip, never a pass).
    Neither,
}

impl UnifiedKnob {
    pub fn is_env(&self) -> bool {
        *self == UnifiedKnob::Env
    }
}

/// Files that say whether a tree reads `GGML_CUDA_ENABLE_UNIFIED_MEMORY`, relative to a ggml
/// root: HIP reads it where hip.h maps cudaMallocManaged (ff0c43e3 on), CUDA where ggml-cuda.cu
/// names it (0edb8d80 on; ggml-cuda.cu sat at src/ before 813a12ce).
pub const UNIFIED_FILES: [&str; 3] = [
    "src/ggml-cuda/vendors/hip.h",
    "src/ggml-cuda/ggml-cuda.cu",
    "src/ggml-cuda.cu",
];

impl TreeFacts {
    /// The unified-memory knobs, once `UNIFIED_FILES` were read (`hip_h`: vendors/hip.h;
    /// `cuda_cu`: ggml-cuda.cu wherever it sits). A tree none of whose files can be read keeps
    /// today's env (as every other fact of an unreadable tree keeps today's spelling).
    pub fn with_unified(mut self, hip_h: Option<&str>, cuda_cu: Option<&str>) -> TreeFacts {
        if hip_h.is_none() && cuda_cu.is_none() {
            return self;
        }
        let env = cuda_cu.is_some_and(|t| t.contains("GGML_CUDA_ENABLE_UNIFIED_MEMORY"));
        if self.hip_unified != UnifiedKnob::CmakeOption {
            self.hip_unified = if hip_h.is_some_and(|t| t.contains("cudaMallocManaged")) {
                UnifiedKnob::Env
            } else {
                UnifiedKnob::Neither
            };
        }
        self.cuda_unified = if env {
            UnifiedKnob::Env
        } else {
            UnifiedKnob::Neither
        };
        self
    }

    /// The knob of `backend` (the CPU has none: refused before any probe).
    pub fn unified(&self, backend: Backend) -> UnifiedKnob {
        match backend {
            Backend::Hip => self.hip_unified,
            Backend::Cuda => self.cuda_unified,
            Backend::Cpu => UnifiedKnob::Neither,
        }
    }
}

impl Recipe {
    /// THE environment a configuration's program runs with in a tree: its launch settings, then
    /// what the placement needs there (`memory_env`). The probes, a script's environment and the
    /// configuration a result names all read it here, so a pasted command runs what was probed.
    pub fn run_env(&self, launch: &[(String, String)], facts: &TreeFacts) -> Vec<(String, String)> {
        let mut env = launch.to_vec();
        env.extend(self.memory_env(facts));
        env
    }

    /// The launch environment a placement needs in this tree: unified memory through the env
    /// where the tree reads it (the CMake option is in `cmake_args`).
    fn memory_env(&self, facts: &TreeFacts) -> Option<(String, String)> {
        (self.memory == Memory::Unified && facts.unified(self.backend) == UnifiedKnob::Env)
            .then(|| ("GGML_CUDA_ENABLE_UNIFIED_MEMORY".into(), "1".into()))
    }

    /// Why this tree cannot have the asked placement (a commit skip: other commits may).
    pub fn memory_unavailable(&self, facts: &TreeFacts) -> Option<String> {
        (self.memory == Memory::Unified && facts.unified(self.backend) == UnifiedKnob::Neither)
            .then(|| {
                format!(
                    "unified memory asked for, but this tree has neither knob: no GGML_HIP_UMA option (ggml 5378ea0d..ff0c43e3^) and {} does not read GGML_CUDA_ENABLE_UNIFIED_MEMORY (HIP from ff0c43e3, CUDA from 0edb8d80)",
                    match self.backend {
                        Backend::Hip => "src/ggml-cuda/vendors/hip.h",
                        _ => "ggml-cuda.cu",
                    }
                )
            })
    }

    /// The placement's switches in a tree, in words, for a plan (`None`: device memory, which
    /// has none): the environment or CMake option this tree reads, the reproducer's own
    /// argument, and how other trees spell it (or that a tree with neither knob is a skip).
    pub fn memory_plan(&self, facts: &TreeFacts, tree: &str) -> Option<String> {
        let arg = format!("reproducer argument --memory {}", self.memory.as_str());
        match self.memory {
            Memory::Device => None,
            Memory::Host => Some(format!(
                "memory: host: {arg} (ggml's host buffer type, used in place by the GPU); no environment or CMake switch"
            )),
            Memory::Unified => {
                let here = match facts.unified(self.backend) {
                    UnifiedKnob::Env => "environment GGML_CUDA_ENABLE_UNIFIED_MEMORY=1".to_string(),
                    UnifiedKnob::CmakeOption => "CMake option -DGGML_HIP_UMA=ON".to_string(),
                    UnifiedKnob::Neither => "neither knob: this tree is a skip".to_string(),
                };
                Some(format!(
                    "memory: unified: at {tree} {here}, and {arg}; per probed tree: -DGGML_HIP_UMA=ON on HIP trees before ff0c43e3, GGML_CUDA_ENABLE_UNIFIED_MEMORY=1 where the tree reads it (HIP from ff0c43e3, CUDA from 0edb8d80), a skip where it has neither"
                ))
            }
        }
    }

    /// The replay's own flag for the placement (`--memory host|unified`; nothing for device, so
    /// the argument list of every configuration from before the axis is unchanged).
    pub fn memory_args(&self) -> Vec<String> {
        if self.memory.is_device() {
            Vec::new()
        } else {
            vec!["--memory".into(), self.memory.as_str().into()]
        }
    }

    /// What the reproducer is started with under this recipe: the configured arguments, then
    /// the placement's. THE list for the bundled replay, a script's `SETROWS_REPRO_ARGS` and
    /// what a matrix lists, so a script or a listed cell never runs with another placement
    /// than the one its key names.
    pub fn reproducer_args(&self, configured: &[String]) -> Vec<String> {
        let mut args = configured.to_vec();
        args.extend(self.memory_args());
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Excerpts of the real trees (ggml ff0c43e3^, ff0c43e3, 5378ea0d^ layouts).
    const HIP_H_ENV: &str =
        "#define cudaMallocManaged hipMallocManaged\n#define cudaMemAdvise hipMemAdvise";
    const CU_ENV: &str = "if (getenv(\"GGML_CUDA_ENABLE_UNIFIED_MEMORY\") != nullptr) {";
    const CMAKE_UMA: &str =
        "option(GGML_HIP_UMA \"ggml: use HIP unified memory architecture\" OFF)";

    #[test]
    fn each_tree_spells_unified_memory_its_own_way() {
        let today = TreeFacts::from_cmake_text("option(GGML_HIP \"\" OFF)")
            .with_unified(Some(HIP_H_ENV), Some(CU_ENV));
        assert_eq!(today.unified(Backend::Hip), UnifiedKnob::Env);
        assert_eq!(today.unified(Backend::Cuda), UnifiedKnob::Env);
        // before ff0c43e3: the CMake option on HIP, the env (under a CUDA-only #if) on CUDA
        let old =
            TreeFacts::from_cmake_text(CMAKE_UMA).with_unified(Some("// no managed"), Some(CU_ENV));
        assert_eq!(old.unified(Backend::Hip), UnifiedKnob::CmakeOption);
        assert_eq!(old.unified(Backend::Cuda), UnifiedKnob::Env);
        // before 5378ea0d (and before 0edb8d80 on CUDA): neither
        let older = TreeFacts::from_cmake_text("option(GGML_HIPBLAS \"\" OFF)")
            .with_unified(None, Some("cudaMalloc"));
        assert_eq!(older.unified(Backend::Hip), UnifiedKnob::Neither);
        assert_eq!(older.unified(Backend::Cuda), UnifiedKnob::Neither);
        assert_eq!(older.unified(Backend::Cpu), UnifiedKnob::Neither);

        let mut r = Recipe::new(Backend::Hip);
        r.memory = Memory::Unified;
        assert_eq!(
            r.memory_env(&today),
            Some(("GGML_CUDA_ENABLE_UNIFIED_MEMORY".into(), "1".into()))
        );
        assert!(!r
            .cmake_args(&today)
            .contains(&"-DGGML_HIP_UMA=ON".to_string()));
        assert_eq!(r.memory_env(&old), None);
        assert!(r
            .cmake_args(&old)
            .contains(&"-DGGML_HIP_UMA=ON".to_string()));
        assert_eq!(r.memory_unavailable(&today), None);
        assert_eq!(r.memory_unavailable(&old), None);
        let why = r.memory_unavailable(&older).expect("a commit skip");
        assert!(why.contains("neither knob"), "{why}");
        assert_eq!(r.memory_args(), ["--memory", "unified"]);
        // host placement is the replay's own: nothing in the build or the launch
        r.memory = Memory::Host;
        assert_eq!(r.memory_env(&today), None);
        assert_eq!(r.memory_unavailable(&older), None);
        assert_eq!(r.memory_args(), ["--memory", "host"]);
    }

    #[test]
    fn the_default_placement_changes_no_identity() {
        let r = Recipe::new(Backend::Hip);
        assert!(!r.identity().contains("memory"), "{}", r.identity());
        assert!(r.memory_args().is_empty());
        let mut u = r.clone();
        u.memory = Memory::Unified;
        assert!(
            u.identity().contains("\"memory\":\"unified\""),
            "{}",
            u.identity()
        );
        // facts stored before the knobs read the same
        let f = TreeFacts::default();
        let text = serde_json::to_string(&f).unwrap();
        assert!(!text.contains("unified"), "{text}");
        let back: TreeFacts = serde_json::from_str(&text).unwrap();
        assert_eq!(back, f);
        assert_eq!(Memory::parse("host"), Some(Memory::Host));
        assert_eq!(Memory::parse("managed"), None);
    }
}
