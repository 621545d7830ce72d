//! The containers this process started, so an interrupt (Ctrl-C, SIGTERM) can stop them: a
//! container outlives its killed client, and a GPU test left running holds the device.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Containers started recently (engine program, name), for the interrupt handler: the last
/// `LIVE_KEEP` are enough, since steps run one per slot and finished ones are already gone.
static LIVE: std::sync::Mutex<Vec<(PathBuf, String)>> = std::sync::Mutex::new(Vec::new());
const LIVE_KEEP: usize = 16;

pub(super) fn remember(program: &Path, name: String) {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| crate::probe::exec::on_interrupt(stop_live_containers));
    if let Ok(mut live) = LIVE.lock() {
        live.retain(|(_, n)| *n != name);
        live.push((program.to_path_buf(), name));
        let excess = live.len().saturating_sub(LIVE_KEEP);
        live.drain(..excess);
    }
}

/// Stops and removes one container at once: `kill` (SIGKILL, no grace: the step is being
/// abandoned) then `rm -f`. One name per call: podman 4 stops at the first unknown name.
pub(super) fn force_remove(program: &Path, name: &str) {
    for args in [["kill", name].as_slice(), ["rm", "-f", name].as_slice()] {
        let _ = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Force-removes every remembered container, concurrently (the interrupt handler waits).
pub fn stop_live_containers() {
    let live: Vec<(PathBuf, String)> = match LIVE.lock() {
        Ok(l) => l.clone(),
        Err(_) => return,
    };
    std::thread::scope(|s| {
        for (program, name) in &live {
            s.spawn(move || force_remove(program, name));
        }
    });
}
