//! Reading what the engine and the image say: provenance printed inside the image, and the
//! failures of the machinery itself (engine missing, image missing, disk full) told apart from
//! the test's own, so they become `InfraError` and never a verdict.

use super::*;

pub use crate::probe::launch::parse_provenance;
/// Facts printed from inside the image: the same script as on the host.
pub(super) use crate::probe::launch::ENVIRONMENT_SCRIPT as PROVENANCE_SCRIPT;

/// A full disk: the one rule of `exec`, for the host and containers alike.
pub use crate::probe::exec::disk_full;

/// Whether a finished step failed because of the engine rather than the test: the engine's
/// own exit code (125, shared with `git bisect`'s skip, so the text decides) with its error
/// text, a daemon that went away, or a full disk.
pub fn engine_failure(kind: EngineKind, exit_code: Option<i32>, output: &str) -> Option<String> {
    if disk_full(output) {
        return Some("disk full: no space left on device".into());
    }
    let last = output
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    let engine_said = match kind {
        EngineKind::Podman => last.starts_with("Error: "),
        EngineKind::Docker => {
            last.contains("Error response from daemon")
                || last.contains("Cannot connect to the Docker daemon")
        }
    };
    // 125: the engine failed; 126/127: the runtime could not start the command (an OCI error
    // says so; a script's own "command not found" does not).
    let engine_code = match exit_code {
        Some(125) => true,
        Some(126 | 127) => last.contains("OCI") || last.contains("runc") || last.contains("crun"),
        _ => false,
    };
    (engine_code && engine_said).then(|| format!("{}: {}", kind.as_str(), last.trim()))
}
