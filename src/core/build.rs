//! Build recipes: the one place that turns (backend, GPU target, wave size, options, ggml
//! revision) into the exact CMake command lines, and a configuration's runtime launch settings
//! into environment variables.
//!
//! Everything here is pure: the only fact taken from the probed tree (`TreeFacts::detect`) is how
//! that revision spells its CMake options, because ggml renamed them over time (`AMDGPU_TARGETS`
//! became `GPU_TARGETS` in October 2025, `GGML_HIPBLAS` became `GGML_HIP` in 2024). Passing both
//! spellings blindly would let an old tree silently ignore the target and build for the wrong GPU,
//! so we read the tree and pass the one it understands. Golden tests pin every command line.

use serde::{Deserialize, Serialize};

mod memory;
pub mod sanitize;
pub use memory::{Memory, UnifiedKnob, DECODE_MEMORY, UNIFIED_FILES};

#[derive(
    Debug,
    Clone,
    Copy,
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
pub enum Backend {
    /// The subject: ROCm/HIP on gfx1151.
    Hip,
    /// NVIDIA control: the same set-rows.cu compiled by nvcc.
    Cuda,
    /// CPU control.
    Cpu,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Hip => "hip",
            Backend::Cuda => "cuda",
            Backend::Cpu => "cpu",
        }
    }

    pub fn parse(s: &str) -> Option<Backend> {
        match s {
            "hip" => Some(Backend::Hip),
            "cuda" => Some(Backend::Cuda),
            "cpu" => Some(Backend::Cpu),
            _ => None,
        }
    }
}

/// How one ggml revision spells the CMake options we set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeFacts {
    /// `GGML_HIP` (current) or `GGML_HIPBLAS` (before late 2024).
    pub hip_option: String,
    /// `GPU_TARGETS` (since October 2025) or `AMDGPU_TARGETS`.
    pub hip_targets_var: String,
    /// `GGML_CUDA` (current) or `GGML_CUBLAS`.
    pub cuda_option: String,
    /// How HIP's unified memory is asked for here (left out of the stored text when it is
    /// today's env, so facts stored before the axis read the same).
    #[serde(default, skip_serializing_if = "UnifiedKnob::is_env")]
    pub hip_unified: UnifiedKnob,
    #[serde(default, skip_serializing_if = "UnifiedKnob::is_env")]
    pub cuda_unified: UnifiedKnob,
}

impl Default for TreeFacts {
    /// Today's spelling, for trees we cannot read.
    fn default() -> Self {
        TreeFacts {
            hip_option: "GGML_HIP".into(),
            hip_targets_var: "GPU_TARGETS".into(),
            cuda_option: "GGML_CUDA".into(),
            hip_unified: UnifiedKnob::Env,
            cuda_unified: UnifiedKnob::Env,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{path}: not a ggml source tree (no CMakeLists.txt at its root, nor under ggml/)")]
    NotGgml { path: String },
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
}

/// CMake files that define the backend options, relative to a ggml root.
pub const CMAKE_FILES: [&str; 4] = [
    "CMakeLists.txt",
    "src/CMakeLists.txt",
    "src/ggml-hip/CMakeLists.txt",
    "src/ggml-cuda/CMakeLists.txt",
];

impl TreeFacts {
    /// The decision itself, on the concatenated CMake text (pure, unit-tested on real excerpts).
    pub fn from_cmake_text(text: &str) -> TreeFacts {
        let has_word = |w: &str| {
            text.match_indices(w).any(|(i, _)| {
                let before = text[..i].chars().next_back();
                let after = text[i + w.len()..].chars().next();
                let ident =
                    |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
                !ident(before) && !ident(after)
            })
        };
        let hip_option = if !has_word("GGML_HIP") && has_word("GGML_HIPBLAS") {
            "GGML_HIPBLAS"
        } else {
            "GGML_HIP"
        };
        // A tree that reads plain GPU_TARGETS understands it; one that only knows
        // AMDGPU_TARGETS would ignore GPU_TARGETS and build for the default architectures.
        let hip_targets_var = if has_word("GPU_TARGETS") || !has_word("AMDGPU_TARGETS") {
            "GPU_TARGETS"
        } else {
            "AMDGPU_TARGETS"
        };
        let cuda_option = if !has_word("GGML_CUDA") && has_word("GGML_CUBLAS") {
            "GGML_CUBLAS"
        } else {
            "GGML_CUDA"
        };
        TreeFacts {
            hip_option: hip_option.into(),
            hip_targets_var: hip_targets_var.into(),
            cuda_option: cuda_option.into(),
            hip_unified: if has_word("GGML_HIP_UMA") {
                UnifiedKnob::CmakeOption
            } else {
                UnifiedKnob::Env
            },
            cuda_unified: UnifiedKnob::Env,
        }
    }
}

/// The build half of a configuration. `None` options are left to ggml's defaults (not passed),
/// so a recipe only says what it means to pin.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Recipe {
    pub backend: Backend,
    /// HIP: `gfx1151`; CUDA: `CMAKE_CUDA_ARCHITECTURES` (`90`); CPU: unused.
    pub gpu_target: Option<String>,
    /// HIP: compiled in as `-DDFLASH_WAVE_SIZE=N` through `CMAKE_HIP_FLAGS`.
    pub wave_size: Option<u32>,
    /// `GGML_HIP_GRAPHS` / `GGML_CUDA_GRAPHS`.
    pub graphs: Option<bool>,
    pub hip_no_vmm: Option<bool>,
    pub rocwmma_fattn: Option<bool>,
    /// Placement of the replay's buffers; out of the identity when it is `device`.
    #[serde(default, skip_serializing_if = "Memory::is_device")]
    pub memory: Memory,
    pub build_type: String,
    /// Compile through ccache (the images carry it; on the host only when it is on PATH).
    pub ccache: bool,
    /// Further `-D...` arguments, verbatim, last (they win).
    pub extra_cmake_args: Vec<String>,
}

impl Recipe {
    pub fn new(backend: Backend) -> Recipe {
        Recipe {
            backend,
            gpu_target: None,
            wave_size: None,
            graphs: None,
            hip_no_vmm: None,
            rocwmma_fattn: None,
            memory: Memory::Device,
            build_type: "Release".into(),
            ccache: true,
            extra_cmake_args: Vec::new(),
        }
    }

    /// The backend's `-D` arguments for ggml (what the reproducer's CMake passes down to ggml).
    pub fn cmake_args(&self, facts: &TreeFacts) -> Vec<String> {
        let mut a = vec![format!("-DCMAKE_BUILD_TYPE={}", self.build_type)];
        let onoff = |b: bool| if b { "ON" } else { "OFF" };
        let launcher = |a: &mut Vec<String>, lang: &str| {
            if self.ccache {
                a.push(format!("-DCMAKE_{lang}_COMPILER_LAUNCHER=ccache"));
            }
        };
        launcher(&mut a, "C");
        launcher(&mut a, "CXX");
        if self.ccache {
            // ggml would wrap the compiler in ccache a second time on older revisions.
            a.push("-DGGML_CCACHE=OFF".into());
        }
        match self.backend {
            Backend::Hip => {
                launcher(&mut a, "HIP");
                a.push(format!("-D{}=ON", facts.hip_option));
                if let Some(t) = &self.gpu_target {
                    a.push(format!("-D{}={t}", facts.hip_targets_var));
                }
                if let Some(w) = self.wave_size {
                    a.push(format!("-DCMAKE_HIP_FLAGS=-DDFLASH_WAVE_SIZE={w}"));
                }
                if let Some(g) = self.graphs {
                    a.push(format!("-DGGML_HIP_GRAPHS={}", onoff(g)));
                }
                if let Some(v) = self.hip_no_vmm {
                    a.push(format!("-DGGML_HIP_NO_VMM={}", onoff(v)));
                }
                if let Some(v) = self.rocwmma_fattn {
                    a.push(format!("-DGGML_HIP_ROCWMMA_FATTN={}", onoff(v)));
                }
                if self.memory == Memory::Unified && facts.hip_unified == UnifiedKnob::CmakeOption {
                    a.push("-DGGML_HIP_UMA=ON".into());
                }
            }
            Backend::Cuda => {
                launcher(&mut a, "CUDA");
                a.push(format!("-D{}=ON", facts.cuda_option));
                if let Some(t) = &self.gpu_target {
                    a.push(format!("-DCMAKE_CUDA_ARCHITECTURES={t}"));
                }
                if let Some(g) = self.graphs {
                    a.push(format!("-DGGML_CUDA_GRAPHS={}", onoff(g)));
                }
            }
            Backend::Cpu => {}
        }
        a.extend(self.extra_cmake_args.iter().cloned());
        a
    }

    /// Shell lines run before configuring: HIP takes its compiler and ROCm root from the image
    /// (`hipconfig`), so one recipe works across ROCm versions and install layouts.
    pub fn env_preamble(&self) -> &'static str {
        match self.backend {
            Backend::Hip => "HIPCXX=\"$(hipconfig -l)/clang\"; HIP_PATH=\"$(hipconfig -R)\"; export HIPCXX HIP_PATH",
            Backend::Cuda | Backend::Cpu => "",
        }
    }

    /// `cmake -S source -B build -G Ninja <args> <defines>`.
    pub fn configure_argv(
        &self,
        facts: &TreeFacts,
        source: &str,
        build: &str,
        defines: &[String],
    ) -> Vec<String> {
        let mut v: Vec<String> = ["cmake", "-S", source, "-B", build, "-G", "Ninja"]
            .map(String::from)
            .to_vec();
        v.extend(defines.iter().cloned());
        v.extend(self.cmake_args(facts));
        v
    }

    /// `cmake --build build --target t1 t2`: only what the reproducer needs, never `all`.
    pub fn build_argv(&self, build: &str, targets: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = ["cmake", "--build", build].map(String::from).to_vec();
        if !targets.is_empty() {
            v.push("--target".into());
            v.extend(targets.iter().map(|t| t.to_string()));
        }
        v
    }

    /// The whole build step as one `sh -c` script (preamble, configure, build).
    pub fn build_script(
        &self,
        facts: &TreeFacts,
        source: &str,
        build: &str,
        defines: &[String],
        targets: &[&str],
    ) -> String {
        let conf = crate::core::shell::line(&self.configure_argv(facts, source, build, defines));
        let bld = crate::core::shell::line(&self.build_argv(build, targets));
        let pre = self.env_preamble();
        if pre.is_empty() {
            format!("set -e\n{conf}\n{bld}\n")
        } else {
            format!("set -e\n{pre}\n{conf}\n{bld}\n")
        }
    }

    /// Stable text for store keys and build-dir names.
    pub fn identity(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| format!("{self:?}"))
    }
}

/// Runtime launch settings: part of a configuration, passed as environment to the reproducer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Launch {
    pub hip_launch_blocking: Option<bool>,
    pub amd_serialize_kernel: Option<u8>,
    pub cuda_disable_graphs: Option<bool>,
    pub cuda_disable_fusion: Option<bool>,
    pub hsa_override_gfx_version: Option<String>,
    /// lucebox's fork moves large allocations on integrated GPUs to managed memory by itself;
    /// `DFLASH_HIP_NO_AUTO_UMA=1` turns that off (its ggml-cuda.cu:155 at lucebox 53859c26).
    pub dflash_hip_no_auto_uma: Option<bool>,
}

impl Launch {
    /// The variables, in a fixed order (the store key and the golden tests depend on it).
    pub fn env(&self) -> Vec<(String, String)> {
        let b = |v: bool| if v { "1" } else { "0" }.to_string();
        let mut e = Vec::new();
        if let Some(v) = self.hip_launch_blocking {
            e.push(("HIP_LAUNCH_BLOCKING".into(), b(v)));
        }
        if let Some(v) = self.amd_serialize_kernel {
            e.push(("AMD_SERIALIZE_KERNEL".into(), v.to_string()));
        }
        if let Some(v) = self.cuda_disable_graphs {
            e.push(("GGML_CUDA_DISABLE_GRAPHS".into(), b(v)));
        }
        if let Some(v) = self.cuda_disable_fusion {
            e.push(("GGML_CUDA_DISABLE_FUSION".into(), b(v)));
        }
        if let Some(v) = &self.hsa_override_gfx_version {
            e.push(("HSA_OVERRIDE_GFX_VERSION".into(), v.clone()));
        }
        // The fork tests `getenv(...) != nullptr`: any value turns auto-UMA off, so `false`
        // leaves the variable unset.
        if self.dflash_hip_no_auto_uma == Some(true) {
            e.push(("DFLASH_HIP_NO_AUTO_UMA".into(), "1".into()));
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hip() -> Recipe {
        Recipe {
            gpu_target: Some("gfx1151".into()),
            wave_size: Some(32),
            graphs: Some(true),
            hip_no_vmm: Some(true),
            rocwmma_fattn: Some(false),
            ..Recipe::new(Backend::Hip)
        }
    }

    #[test]
    fn golden_hip_command_lines() {
        let facts = TreeFacts::default();
        let script = hip().build_script(
            &facts,
            "/repro",
            "/work/build",
            &["-DGGML_SOURCE_DIR=/src".into()],
            &["setrows-replay"],
        );
        assert_eq!(
            script,
            "set -e\n\
             HIPCXX=\"$(hipconfig -l)/clang\"; HIP_PATH=\"$(hipconfig -R)\"; export HIPCXX HIP_PATH\n\
             cmake -S /repro -B /work/build -G Ninja -DGGML_SOURCE_DIR=/src -DCMAKE_BUILD_TYPE=Release \
             -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DGGML_CCACHE=OFF \
             -DCMAKE_HIP_COMPILER_LAUNCHER=ccache -DGGML_HIP=ON -DGPU_TARGETS=gfx1151 \
             -DCMAKE_HIP_FLAGS=-DDFLASH_WAVE_SIZE=32 -DGGML_HIP_GRAPHS=ON -DGGML_HIP_NO_VMM=ON \
             -DGGML_HIP_ROCWMMA_FATTN=OFF\n\
             cmake --build /work/build --target setrows-replay\n"
        );
    }

    #[test]
    fn golden_hip_old_spelling() {
        let facts = TreeFacts {
            hip_targets_var: "AMDGPU_TARGETS".into(),
            ..TreeFacts::default()
        };
        let args = hip().cmake_args(&facts);
        assert!(args.contains(&"-DAMDGPU_TARGETS=gfx1151".to_string()));
        assert!(!args.iter().any(|a| a.starts_with("-DGPU_TARGETS")));
    }

    #[test]
    fn golden_cuda_and_cpu() {
        let cuda = Recipe {
            gpu_target: Some("90".into()),
            graphs: Some(false),
            ..Recipe::new(Backend::Cuda)
        };
        assert_eq!(
            cuda.cmake_args(&TreeFacts::default()).join(" "),
            "-DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER_LAUNCHER=ccache \
             -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DGGML_CCACHE=OFF \
             -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
             -DGGML_CUDA_GRAPHS=OFF"
        );
        let cpu = Recipe {
            ccache: false,
            extra_cmake_args: vec!["-DGGML_NATIVE=OFF".into()],
            ..Recipe::new(Backend::Cpu)
        };
        assert_eq!(
            cpu.build_script(&TreeFacts::default(), "/s", "/b", &[], &["a", "b"]),
            "set -e\ncmake -S /s -B /b -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF\n\
             cmake --build /b --target a b\n"
        );
    }

    #[test]
    fn golden_launch_env() {
        let l = Launch {
            hip_launch_blocking: Some(true),
            amd_serialize_kernel: Some(3),
            cuda_disable_graphs: Some(true),
            cuda_disable_fusion: Some(false),
            hsa_override_gfx_version: Some("11.5.1".into()),
            dflash_hip_no_auto_uma: Some(true),
        };
        let env: Vec<String> = l.env().iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(
            env,
            [
                "HIP_LAUNCH_BLOCKING=1",
                "AMD_SERIALIZE_KERNEL=3",
                "GGML_CUDA_DISABLE_GRAPHS=1",
                "GGML_CUDA_DISABLE_FUSION=0",
                "HSA_OVERRIDE_GFX_VERSION=11.5.1",
                "DFLASH_HIP_NO_AUTO_UMA=1"
            ]
        );
        assert!(Launch::default().env().is_empty());
    }

    // Excerpts of src/ggml-hip/CMakeLists.txt at real ggml-org/ggml revisions.
    const BEFORE_A3FDE8DF: &str = "    # Forward AMDGPU_TARGETS to CMAKE_HIP_ARCHITECTURES.\n    \
        if (AMDGPU_TARGETS AND NOT CMAKE_HIP_ARCHITECTURES)\n        \
        set(CMAKE_HIP_ARCHITECTURES ${AMDGPU_TARGETS})\noption(GGML_HIP \"ggml: use HIP\" OFF)";
    const AT_006482F4: &str = "    # Forward (AMD)GPU_TARGETS to CMAKE_HIP_ARCHITECTURES.\n    \
        if(AMDGPU_TARGETS AND NOT GPU_TARGETS)\n        set(GPU_TARGETS ${AMDGPU_TARGETS})\n    \
        if(GPU_TARGETS AND NOT CMAKE_HIP_ARCHITECTURES)\noption(GGML_HIP \"ggml: use HIP\" OFF)";
    const OLD_HIPBLAS: &str = "option(GGML_HIPBLAS \"ggml: use hipBLAS\" OFF)\n\
        if (GGML_HIPBLAS)\n if(AMDGPU_TARGETS AND NOT CMAKE_HIP_ARCHITECTURES)\noption(GGML_CUBLAS \"\" OFF)";

    #[test]
    fn spelling_follows_the_tree() {
        let f = TreeFacts::from_cmake_text(BEFORE_A3FDE8DF);
        assert_eq!(
            (f.hip_option.as_str(), f.hip_targets_var.as_str()),
            ("GGML_HIP", "AMDGPU_TARGETS")
        );
        let f = TreeFacts::from_cmake_text(AT_006482F4);
        assert_eq!(f.hip_targets_var, "GPU_TARGETS");
        let f = TreeFacts::from_cmake_text(OLD_HIPBLAS);
        assert_eq!(
            (
                f.hip_option.as_str(),
                f.hip_targets_var.as_str(),
                f.cuda_option.as_str()
            ),
            ("GGML_HIPBLAS", "AMDGPU_TARGETS", "GGML_CUBLAS")
        );
    }
}
