//! `--probe-kind decode`: the bundled `decode-probe` on the tool's tiny model, built with the
//! probed llama.cpp (llama.cpp trees only); the one kind that takes the decode settings
//! (`core::settings`).

use super::{opt, owned, Kind, Needs, ProbeSpec, ReproOption, Table, MEMORY_HINT};
use crate::core::settings::DecodeSettings;

/// The program, as the report names it and its CMake target.
pub const PROGRAM: &str = "decode-probe";

pub struct Decode;

impl Kind for Decode {
    fn name(&self) -> &'static str {
        "decode"
    }
    fn needs(&self) -> Needs {
        Needs::Llama
    }
    // The decode probe builds and runs all of llama.cpp, not only its ggml/.
    fn whole_tree(&self) -> bool {
        true
    }
    fn program(&self) -> Option<&'static str> {
        Some(PROGRAM)
    }
    fn options(&self) -> Option<&'static [ReproOption]> {
        Some(DECODE_OPTIONS)
    }
    fn takes_decode_settings(&self) -> bool {
        true
    }
    fn no_host_memory(&self) -> bool {
        true
    }
    fn compares_logits(&self) -> bool {
        true
    }
    fn refuses_flags(&self) -> &'static [(&'static str, &'static str)] {
        &[("--graph", "--graph and --probe-kind decode: --graph is the replay's graph, the decode probe runs llama.cpp's own; drop one")]
    }
    // The cells are a setting (--ctx-size): the text says the one in effect.
    fn own_args(&self, settings: &DecodeSettings) -> Option<String> {
        Some(format!(
            "default: decode-probe's own (10,000 tokens, {} KV cells)",
            settings.get("ctx_size").unwrap_or("256")
        ))
    }
    fn spec(&self, _: &Table) -> ProbeSpec {
        ProbeSpec::Decode
    }
    fn identity(&self, _: &ProbeSpec, _build_only: bool) -> String {
        self.name().to_string()
    }
    // Its settings' options first, so a `--repro-arg` of the same option, later, wins.
    fn leading_args(&self, settings: &DecodeSettings) -> Vec<String> {
        settings.probe_args()
    }
    fn flag_line(&self, _: &ProbeSpec) -> String {
        "--probe-kind decode".into()
    }
}

/// `decode-probe`'s options (`parse_args` there).
pub const DECODE_OPTIONS: &[ReproOption] = &[
    owned(
        "--model",
        "the model is written by the tool (MODEL.gguf; --weight-type, --head-dim, --gqa, --n-head-kv, --sliding-window shape it); drop --repro-arg --model",
    ),
    opt("--backend"),
    opt("--steps"),
    ReproOption {
        replaces: &["--cells"],
        ..opt("--ctx-size")
    },
    ReproOption {
        replaces: &["--ctx-size"],
        ..opt("--cells")
    },
    opt("--chunk"),
    opt("--threads"),
    opt("--ref-workers"),
    opt("--seed"),
    opt("--cpu-nmse"),
    opt("--path-nmse"),
    opt("--batch-size"),
    opt("--ubatch-size"),
    opt("--parallel"),
    opt("--n-gpu-layers"),
    opt("--flash-attn"),
    opt("--cache-type-k"),
    opt("--cache-type-v"),
    opt("--check"),
    opt("--cpu-reference"),
    owned("--memory", MEMORY_HINT),
    opt("--good-nmse"),
    owned(
        "--logits-out",
        "the tool records the --good commit's logits itself with --compare-good; drop --repro-arg --logits-out",
    ),
    owned(
        "--logits-ref",
        "the tool compares with the --good commit's logits with --compare-good; drop --repro-arg --logits-ref",
    ),
    ReproOption {
        takes_value: false,
        ..opt("--verbose")
    },
];
