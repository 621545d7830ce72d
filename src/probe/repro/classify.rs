//! Pure classification of one reproducer run: (exit code, signal, timed out, output) → outcome
//! and a short signature, plus parsing of the `SETROWS_RESULT {json}` line both bundled
//! reproducers print last.
//!
//! The reproducers keep faults what they are (signals, runtime error text), so the order of the
//! rules matters: a hang beats everything (the output is incomplete), GPU runtime error text beats
//! a plain signal (a fault usually ends in abort()), and only then do exit codes speak.

use crate::core::outcome::{Outcome, SkipScope};
use serde::{Deserialize, Serialize};

/// Exit codes shared by `setrows-replay` and `setrows-kernel`.
pub mod code {
    pub const PASS: i32 = 0;
    pub const MISMATCH: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const UNSUPPORTED: i32 = 3;
}

/// The reproducer's own summary (`SETROWS_RESULT {json}`), as far as a probe needs it. Unknown
/// fields are ignored so newer reproducers stay readable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct ReproSummary {
    pub tool: String,
    pub status: String,
    pub exit_code: i32,
    pub message: String,
    pub backend: String,
    pub device: String,
    pub ggml_version: String,
    pub ggml_commit: String,
    pub steps_run: i64,
    pub first_failing_step: Option<i64>,
    pub timings: Option<Timings>,
    // Format 2 (`repro-kernels/README.md`): what really ran, from the backend or the device code.
    // All optional: a format-1 line has none of them, and null means "not reported".
    pub format: Option<i64>,
    /// `setrows-kernel`: `cuda` or `hip`.
    pub api: Option<String>,
    /// The backend's feature flags (`ggml_backend_get_features`), e.g. CUDA `USE_GRAPHS`.
    pub features: Option<std::collections::BTreeMap<String, serde_json::Value>>,
    pub features_source: Option<String>,
    pub backend_reg: Option<String>,
    pub device_name: Option<String>,
    pub device_description: Option<String>,
    /// CUDA: the archs the library was compiled for (`900`).
    pub compiled_archs: Option<String>,
    /// Target and wave size of the device code that ran (the kernel reports them; the replay
    /// cannot: null).
    pub arch: Option<String>,
    pub wave_size: Option<u32>,
    /// The kernel's compile-time `DFLASH_WAVE_SIZE`.
    pub dflash_wave_size: Option<u32>,
    pub device_arch: Option<String>,
    /// Where the replay's buffers were placed (issue 26): ggml's buffer type and the GPU
    /// runtime's word on each pointer; null before the placement proof existed.
    pub memory: Option<MemoryFacts>,
    /// The decode probe's effective llama.cpp settings (`core::settings` axes; null where
    /// unknown), so a run proves the configuration it was asked for.
    pub settings: Option<std::collections::BTreeMap<String, serde_json::Value>>,
}

/// The replay's `memory` object (`repro-kernels/README.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct MemoryFacts {
    pub requested: String,
    /// `cudaPointerGetAttributes` / `hipPointerGetAttributes`; null on CPU builds.
    pub pointer_api: Option<String>,
    pub buffers: Vec<BufferFacts>,
}

impl MemoryFacts {
    /// `requested=unified via cudaPointerGetAttributes: kv_cache:cache_k_l0=CUDA0/managed ...`:
    /// where every reported buffer was, in one line, so a result names its placement beside
    /// its verdict (the replay's buffers, or the decode probe's KV cache and weights).
    pub fn summary(&self) -> String {
        let bufs: Vec<String> = self
            .buffers
            .iter()
            .map(|b| {
                format!(
                    "{}={}/{}",
                    b.name,
                    b.buft,
                    b.pointer
                        .as_deref()
                        .unwrap_or(if b.is_host { "host-buffer" } else { "-" })
                )
            })
            .collect();
        format!(
            "requested={} via {}: {}",
            self.requested,
            self.pointer_api.as_deref().unwrap_or("no GPU runtime"),
            bufs.join(" ")
        )
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct BufferFacts {
    pub name: String,
    /// `persistent` (the replay's buffers; the decode probe's KV cache and weights), `output`
    /// or `input`.
    pub role: String,
    pub buft: String,
    pub is_host: bool,
    /// `device`, `managed`, `host`, `unregistered`, `error`; null without a runtime to ask.
    pub pointer: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct Timings {
    pub total_s: f64,
    pub build_s: f64,
    pub compute_s: f64,
    pub check_s: f64,
    pub steps_per_s: f64,
}

const RESULT_PREFIX: &str = "SETROWS_RESULT ";

/// The last `SETROWS_RESULT` line of `output`, parsed. `None` when there is none or it is not
/// valid JSON (a run killed mid-line).
pub fn parse_result(output: &str) -> Option<ReproSummary> {
    output
        .lines()
        .rev()
        .filter_map(|l| l.trim_start().strip_prefix(RESULT_PREFIX))
        .find_map(|json| serde_json::from_str(json.trim()).ok())
}

/// What one run of a reproducer means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified {
    pub outcome: Outcome,
    /// Short text identifying the failure (or the reason for a skip); `None` for a pass.
    pub signature: Option<String>,
    /// For `Untestable`: whether the reason is the commit's or the configuration's here.
    pub scope: SkipScope,
}

impl Classified {
    fn new(outcome: Outcome, signature: impl Into<String>) -> Self {
        Classified {
            outcome,
            signature: Some(strip_dirs(&signature.into())),
            scope: SkipScope::Commit,
        }
    }

    /// `Untestable` for a reason no other commit can change.
    fn systematic(signature: impl Into<String>) -> Self {
        Classified {
            scope: SkipScope::Systematic,
            ..Classified::new(Outcome::Untestable, signature)
        }
    }
}

/// `/any/where/src/ggml.c:3410:` → `ggml.c:3410:`: the same failure must give the same signature
/// whether the checkout sits in a worktree on the host or at a container's mount point.
fn strip_dirs(s: &str) -> String {
    static RE: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    match RE.get_or_init(|| regex::Regex::new(r"(?:[A-Za-z0-9_.+-]*/)+([A-Za-z0-9_.+-]+:\d+)").ok())
    {
        Some(re) => re.replace_all(s, "$1").into_owned(),
        None => s.to_string(),
    }
}

/// Text that GPU runtimes print on a device fault. HIP's "Memory access fault by GPU node-N" and
/// HSA errors, CUDA's "illegal memory access" and ggml's "CUDA error" / the reproducers'
/// "cudaError"/"hipError" lines.
pub const GPU_FAULT_PATTERNS: [&str; 8] = [
    "Memory access fault by GPU",
    "illegal memory access",
    "hipError",
    "cudaError",
    "HSA_STATUS_ERROR",
    "CUDA error",
    "HIP error",
    "unspecified launch failure",
];

/// Text of a binary with no code for the GPU it runs on, or a runtime library (rocBLAS/Tensile)
/// without kernels for it: the configuration cannot run there, which is no fault of the code
/// under test (`untestable`, not `gpu_fault`/`crash`).
pub const NO_CODE_PATTERNS: [&str; 7] = [
    "hipErrorNoBinaryForGpu",
    "no kernel image is available for execution on the device",
    "cudaErrorNoKernelImageForDevice",
    "hipErrorInvalidDeviceFunction",
    "TensileLibrary",
    "No paths matched",
    "no library for gfx",
];

/// The first line saying the binary has no code for this GPU (`NO_CODE_PATTERNS`; Tensile lines
/// only when they say something is missing).
pub fn no_code_for_gpu(output: &str) -> Option<String> {
    first_line_with(output, |l| {
        NO_CODE_PATTERNS.iter().any(|p| l.contains(p))
            && (!l.contains("TensileLibrary")
                || ["Cannot", "cannot", "No such file", "not found"]
                    .iter()
                    .any(|w| l.contains(w)))
    })
    .map(clip)
}

/// The first line of a build saying the toolchain cannot target the asked GPU (clang's
/// "unsupported HIP gpu architecture: gfx1151" and "invalid target ID 'gfx1151'", nvcc's
/// "Unsupported gpu architecture 'compute_90'", LLVM's "unknown target CPU 'gfx1151'").
pub fn toolchain_cannot_target(output: &str) -> Option<String> {
    let lower = |l: &str| l.to_ascii_lowercase();
    first_line_with(output, |l| {
        let l = lower(l);
        (l.contains("unsupported") && l.contains("gpu architecture"))
            || l.contains("invalid offload arch")
            || l.contains("invalid target id '")
            || l.contains("unknown target cpu 'gfx")
            || (l.contains("offload") && l.contains("not supported") && l.contains("gfx"))
    })
    .map(clip)
}

/// What a build says when the toolchain it needs is not there at all: CMake finding no CUDA or
/// HIP (or C/C++) compiler, `FindCUDAToolkit` without nvcc, the shell without cmake. The same
/// for every commit, unlike a compile error in the tree.
pub fn missing_toolchain(output: &str) -> Option<String> {
    const PATTERNS: [&str; 6] = [
        "No CMAKE_CUDA_COMPILER could be found",
        "No CMAKE_HIP_COMPILER could be found",
        "No CMAKE_CXX_COMPILER could be found",
        "No CMAKE_C_COMPILER could be found",
        "Failed to find nvcc",
        "cmake: not found",
    ];
    first_line_with(output, |l| {
        PATTERNS.iter().any(|p| l.contains(p)) || l.ends_with("cmake: command not found")
    })
    .map(clip)
}

/// Whether `output` carries any of the device-fault texts (also used by the `--script` prober).
pub fn is_gpu_fault(output: &str) -> bool {
    GPU_FAULT_PATTERNS.iter().any(|p| output.contains(p))
}

fn first_line_with(output: &str, pred: impl Fn(&str) -> bool) -> Option<&str> {
    output.lines().map(str::trim).find(|l| pred(l))
}

fn clip(s: &str) -> String {
    const MAX: usize = 300;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// The assert/abort text ggml prints before abort(): `GGML_ASSERT(x) failed`, or the
/// `file:line: message` line of GGML_ABORT.
fn abort_text(output: &str) -> Option<String> {
    if let Some(l) = first_line_with(output, |l| l.contains("GGML_ASSERT(")) {
        return Some(clip(l));
    }
    let abort_line = regex::Regex::new(r"^\S+\.(c|cpp|cu|cuh|h|m):\d+: .+").ok()?;
    first_line_with(output, |l| abort_line.is_match(l)).map(clip)
}

/// The sanitizers whose report names a memory or thread fault, as their reports spell them.
const SANITIZERS: [&str; 3] = ["AddressSanitizer:", "LeakSanitizer:", "ThreadSanitizer:"];

/// The first line of a sanitizer's report (`==1693==ERROR: AddressSanitizer: stack-use-after-return
/// on address 0x...`, UBSan's `file:line: runtime error: ...`) from the sanitizer's name on, without
/// the pid, addresses and paths, which differ from run to run: the signature must name the same
/// fault the same way at every commit.
fn sanitizer_report(output: &str) -> Option<String> {
    let line = first_line_with(output, |l| {
        SANITIZERS.iter().any(|s| l.contains(s)) || l.contains(": runtime error: ")
    })?;
    if let Some((_, what)) = line.split_once(": runtime error: ") {
        return Some(clip(&format!(
            "UndefinedBehaviorSanitizer: runtime error: {what}"
        )));
    }
    let from = SANITIZERS.iter().filter_map(|s| line.find(s)).min()?;
    let rest = &line[from..];
    let end = [" on address ", " on unknown address", " (pid="]
        .iter()
        .filter_map(|cut| rest.find(cut))
        .min()
        .unwrap_or(rest.len());
    let kind = rest[..end].trim();
    // The function, from the report's SUMMARY line (its path is the checkout's, so left out).
    let function = first_line_with(output, |l| l.starts_with("SUMMARY: "))
        .and_then(|l| l.rsplit_once(" in "))
        .map(|(_, f)| f.trim())
        .filter(|f| !f.is_empty());
    Some(clip(&match function {
        Some(f) => format!("{kind} in {f}"),
        None => kind.to_string(),
    }))
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGABRT => "SIGABRT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

/// Classifies one run. `exit_code`/`signal` as from `std::process::ExitStatus` (a shell that
/// reports a killed child as 128+N is treated as signal N).
///
/// Exit 2 (usage error) is `Untestable`, not `InfraError`: the flags are the same for every
/// probe, so retrying cannot help, and a skip keeps a misconfigured run from ever producing a
/// verdict while the signature (`usage error: ...`) tells the user which flag to fix.
pub fn classify(
    exit_code: Option<i32>,
    signal: Option<i32>,
    timed_out: bool,
    output: &str,
) -> Classified {
    let result = parse_result(output);
    if timed_out {
        let steps = result
            .as_ref()
            .map(|r| format!(" after {} steps", r.steps_run))
            .unwrap_or_default();
        return Classified::new(Outcome::Hang, format!("hang: killed at the timeout{steps}"));
    }
    let signal = signal.or(match exit_code {
        Some(c) if c > 128 && c < 160 => Some(c - 128),
        _ => None,
    });
    if let Some(line) = no_code_for_gpu(output) {
        if signal.is_some() || exit_code != Some(code::PASS) {
            return Classified::systematic(format!("no code for this GPU: {line}"));
        }
    }
    let fault = first_line_with(output, |l| GPU_FAULT_PATTERNS.iter().any(|p| l.contains(p)));
    if let Some(line) = fault {
        if signal.is_some() || exit_code != Some(code::PASS) {
            return Classified::new(Outcome::GpuFault, clip(line));
        }
    }
    // A sanitizer's report in a failed run is a memory fault: ASan exits 1 by default, which
    // would otherwise read as the probe's "wrong result".
    if let Some(report) = sanitizer_report(output) {
        if signal.is_some() || exit_code != Some(code::PASS) {
            return Classified::new(Outcome::Crash, report);
        }
    }
    if let Some(sig) = signal {
        let text =
            abort_text(output).unwrap_or_else(|| format!("killed by {} ({sig})", signal_name(sig)));
        return Classified::new(Outcome::Crash, text);
    }
    match exit_code {
        Some(code::PASS) => match result {
            Some(r) if r.status == "pass" => Classified {
                outcome: Outcome::Pass,
                signature: None,
                scope: SkipScope::Commit,
            },
            // The replay's bare loop (`--check-every 0`) is a timing baseline: it ran and checked
            // nothing, so it is no verdict, and the same flags give the same answer at every commit.
            Some(r) if r.status == "unchecked" => {
                Classified::systematic(clip(&format!("unchecked: {}", r.message)))
            }
            // A wrapper that exits 0 without running the checks must not count as a pass.
            Some(r) => Classified::new(
                Outcome::InfraError,
                format!("reproducer exited 0 but reported status '{}'", r.status),
            ),
            None => Classified::new(
                Outcome::InfraError,
                "reproducer exited 0 without a SETROWS_RESULT line (did it run?)",
            ),
        },
        Some(code::MISMATCH) => {
            let sig = first_line_with(output, |l| l.starts_with("SETROWS_MISMATCH "))
                .map(|l| l.trim_start_matches("SETROWS_MISMATCH ").to_string())
                .or_else(|| result.as_ref().map(|r| r.message.clone()))
                .unwrap_or_else(|| "wrong result (exit 1)".into());
            Classified::new(Outcome::WrongResult, clip(&sig))
        }
        Some(code::UNSUPPORTED) => {
            let why = result
                .map(|r| r.message)
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| "reproducer reported unsupported (exit 3)".into());
            Classified::new(Outcome::Untestable, clip(&format!("unsupported: {why}")))
        }
        Some(code::USAGE) => {
            let why = result
                .map(|r| r.message)
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| "bad reproducer arguments (exit 2)".into());
            // The same arguments go to every commit's reproducer: none of them can do better.
            Classified::systematic(clip(&format!("usage error: {why}")))
        }
        Some(c @ (126 | 127)) => Classified::new(
            Outcome::InfraError,
            format!("the reproducer could not be started (exit {c})"),
        ),
        Some(c) => Classified::new(Outcome::WrongResult, format!("exit code {c}")),
        None => Classified::new(Outcome::InfraError, "no exit status and no signal"),
    }
}

/// `classify`, then the vacuous-pass guard: a run whose facts (or build) show it did not run what
/// `exp` asked for is `untestable` with the reason, whatever it would otherwise have been.
/// Skips and machinery failures stay what they are. With `Expectations::default()` this is
/// `classify`. `tree`: what the probed tree's CMake files offer (`expect::TreeOptions`), which
/// decides whether a reason is this commit's or the configuration's.
pub fn classify_expected(
    exit_code: Option<i32>,
    signal: Option<i32>,
    timed_out: bool,
    output: &str,
    exp: &super::Expectations,
    defs: Option<&super::CompileDefs>,
    tree: &super::expect::TreeOptions,
) -> Classified {
    let c = classify(exit_code, signal, timed_out, output);
    if matches!(
        c.outcome,
        Outcome::Untestable | Outcome::BuildFailed | Outcome::InfraError
    ) {
        return c;
    }
    match super::expect::mismatch_in(exp, parse_result(output).as_ref(), defs, tree) {
        Some(m) => Classified {
            scope: m.scope,
            ..Classified::new(
                Outcome::Untestable,
                clip(&format!("not as asked: {}", m.reason)),
            )
        },
        None => c,
    }
}

#[cfg(test)]
mod tests;
