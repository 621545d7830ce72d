//! `--probe-kind replay` (the default): the bundled `setrows-replay` reproducer, built against
//! the probed tree's ggml (ggml trees and the trees that vendor ggml).

use super::{opt, owned, Kind, Needs, ProbeSpec, ReproOption, Table, MEMORY_HINT};

/// The program, as the report names it and its CMake target.
pub const PROGRAM: &str = "setrows-replay";

pub struct Replay;

impl Kind for Replay {
    fn name(&self) -> &'static str {
        "replay"
    }
    fn needs(&self) -> Needs {
        Needs::Ggml
    }
    fn program(&self) -> Option<&'static str> {
        Some(PROGRAM)
    }
    fn options(&self) -> Option<&'static [ReproOption]> {
        Some(REPLAY_OPTIONS)
    }
    fn takes_graph(&self) -> bool {
        true
    }
    fn spec(&self, _: &Table) -> ProbeSpec {
        ProbeSpec::Replay
    }
    fn identity(&self, _: &ProbeSpec, _build_only: bool) -> String {
        self.name().to_string()
    }
    fn flag_line(&self, _: &ProbeSpec) -> String {
        "--probe-kind replay".into()
    }
}

/// `setrows-replay`'s options (`parse_args` there).
pub const REPLAY_OPTIONS: &[ReproOption] = &[
    opt("--mode"),
    opt("--backend"),
    ReproOption {
        replaces: &["--wraps"],
        ..opt("--steps")
    },
    ReproOption {
        replaces: &["--steps"],
        ..opt("--wraps")
    },
    opt("--ring-rows"),
    opt("--width"),
    opt("--dst-type"),
    opt("--index-type"),
    opt("--start-row"),
    opt("--buffers"),
    opt("--seed"),
    opt("--check-every"),
    opt("--read-via"),
    opt("--inject"),
    opt("--inject-step"),
    owned(
        "--engine",
        "the replay's graph is the tool's --graph decode-reuse|ds4 (it keeps the default steps and checks); drop --repro-arg --engine",
    ),
    owned("--memory", MEMORY_HINT),
    opt("--cpu-threads"),
    opt("--comp-rows"),
];
