//! The failures of the container engine itself (engine missing or gone, image missing, a
//! runtime that could not start the command) told apart from the test's own, so a step that
//! failed because of them becomes `InfraError` and never a verdict. A full disk is not here:
//! `probe::step_infra_failure` asks `exec::out_of_space` first, for every launcher alike.

use super::*;

/// Whether a finished step failed because of the engine rather than the test: the engine's
/// own exit code (125, shared with `git bisect`'s skip, so the text decides) with its error
/// text, or a daemon that went away.
pub fn engine_failure(kind: EngineKind, exit_code: Option<i32>, output: &str) -> Option<String> {
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
