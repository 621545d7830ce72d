//! Reading what the engine and the image say: provenance printed inside the image, and the
//! failures of the machinery itself (engine missing, image missing, disk full) told apart from
//! the test's own, so they become `InfraError` and never a verdict.

use super::*;

/// Facts printed from inside the image, one `@@key` header per section.
pub(super) const PROVENANCE_SCRIPT: &str = r#"echo @@kernel; uname -r
echo @@hip; hipconfig --version 2>/dev/null; echo
echo @@nvcc; nvcc --version 2>/dev/null | grep -i release
echo @@compiler; (c++ --version || cc --version) 2>/dev/null | head -n 1
echo @@gpu; { rocminfo 2>/dev/null | awk '/^ *Name:/{n=$2} /Marketing Name:/{sub(/^ *Marketing Name: */,""); m=$0} /Device Type: *GPU/{print n " (" m ")"; exit}'; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1; }
true"#;

/// Parses the `@@key` sections; empty sections (tool absent) are left out.
pub fn parse_provenance(output: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut key: Option<String> = None;
    let mut val: Vec<&str> = Vec::new();
    let mut flush = |key: &Option<String>, val: &mut Vec<&str>| {
        if let Some(k) = key {
            let v = val.join("; ").trim().to_string();
            if !v.is_empty() {
                out.insert(k.clone(), v);
            }
        }
        val.clear();
    };
    for line in output.lines() {
        if let Some(k) = line.strip_prefix("@@") {
            flush(&key, &mut val);
            key = Some(k.trim().to_string());
        } else if !line.trim().is_empty() {
            val.push(line.trim());
        }
    }
    flush(&key, &mut val);
    out
}

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
