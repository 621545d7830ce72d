//! Which probe runs (`ProbeKind`), and THE rule of what only one kind takes: the decode
//! probe's llama.cpp settings (`core::settings`) mean nothing to the replay or a script, so a
//! setting given to another kind is refused before any work, in one wording whether a flag, a
//! `--config`'s own values or a matrix axis gave it.

/// Which probe runs: THE typed spelling of `--probe-kind` and `[probe] kind` (`script` is
/// chosen by `--script` on the command line); compared as this type everywhere, never as text.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum ProbeKind {
    /// The bundled replay reproducer (ggml trees and the trees that vendor ggml).
    #[default]
    Replay,
    /// The bundled decode-probe on the tool's tiny model (llama.cpp trees only).
    Decode,
    /// A user's build + test script.
    Script,
    /// ggml's own `test-backend-ops` of the probed tree, for the ops asked (`--op`): the test
    /// ggml maintainers ask a reporter for, each failing case its own signature.
    BackendOps,
}

impl ProbeKind {
    pub const ALL: [ProbeKind; 4] = [
        ProbeKind::Replay,
        ProbeKind::Decode,
        ProbeKind::Script,
        ProbeKind::BackendOps,
    ];

    /// The spelling of `[probe] kind` and `--probe-kind`.
    pub fn name(self) -> &'static str {
        match self {
            ProbeKind::Replay => "replay",
            ProbeKind::Decode => "decode",
            ProbeKind::Script => "script",
            ProbeKind::BackendOps => "backend-ops",
        }
    }

    pub fn parse(s: &str) -> Option<ProbeKind> {
        ProbeKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// A probe whose build this tool makes (its bundled programs, or the tree's own
    /// `test-backend-ops`), so it knows what the build reads; not the user's script.
    pub fn is_bundled(self) -> bool {
        self != ProbeKind::Script
    }
}

/// Where decode settings were given to a probe: what a refusal names and what it suggests.
#[derive(Debug, Clone, Copy)]
pub enum DecodeSettingsFrom<'a> {
    /// A flag and its value (`--flash-attn on`).
    Flag { flag: &'a str, value: &'a str },
    /// A `--config`'s own values (`flash_attn=on`), under a probe a flag chose.
    Config { id: &'a str, settings: &'a str },
    /// A matrix axis (`flash_attn`), under the file's `[probe] kind`.
    Axis(&'a str),
}

impl ProbeKind {
    /// THE rule that decode settings mean something to the decode probe alone: the replay and a
    /// script have no llama.cpp context to give them to, and a store key holding them would
    /// answer no question. `None` for the decode probe; else the one line that refuses them
    /// (exit 2 on the command line, file:line:key in a matrix), naming the setting as it was
    /// given and the change that makes it mean something.
    pub fn refuses_decode_settings(self, from: DecodeSettingsFrom) -> Option<String> {
        use DecodeSettingsFrom::{Axis, Config, Flag};
        if self == ProbeKind::Decode {
            return None;
        }
        let given = match from {
            Flag { flag, value } => format!("{flag} {value} is a setting"),
            Config { id, settings } => format!("--config {id} sets {settings}, settings"),
            Axis(axis) => format!("`{axis}` is a setting"),
        };
        let probe = match (from, self) {
            (Axis(_), kind) => format!("[probe] kind is \"{}\"", kind.name()),
            (_, ProbeKind::Script) => {
                "--script runs your own test, which takes its settings in its command".to_string()
            }
            (_, kind) => format!("the probe is the {}", kind.name()),
        };
        let change = match (from, self) {
            (Axis(_), _) => "set kind = \"decode\" (llama.cpp trees) or drop the axis".to_string(),
            (Flag { flag, .. }, ProbeKind::Script) => format!("drop {flag} or --script"),
            (Flag { flag, .. }, _) => {
                format!("add --probe-kind decode (llama.cpp trees), or drop {flag}")
            }
            (Config { .. }, ProbeKind::Script) => {
                "drop --script or use --probe-kind decode".to_string()
            }
            (Config { .. }, _) => "use --probe-kind decode (llama.cpp trees)".to_string(),
        };
        Some(format!(
            "{given} of the decode probe, and {probe}: {change}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One sentence for every way a decode setting reaches another probe, naming the setting
    /// as it was given and what to change; nothing for the decode probe.
    #[test]
    fn decode_settings_are_refused_for_every_other_kind_in_one_wording() {
        let froms = [
            DecodeSettingsFrom::Flag {
                flag: "--flash-attn",
                value: "on",
            },
            DecodeSettingsFrom::Config {
                id: "c1",
                settings: "flash_attn=on",
            },
            DecodeSettingsFrom::Axis("flash_attn"),
        ];
        for from in froms {
            assert_eq!(ProbeKind::Decode.refuses_decode_settings(from), None);
            for kind in [ProbeKind::Replay, ProbeKind::Script, ProbeKind::BackendOps] {
                let why = kind.refuses_decode_settings(from).unwrap();
                assert!(why.contains("of the decode probe, and "), "{why}");
                assert!(why.contains("flash"), "{why}");
                assert!(why.contains("decode"), "{why}");
            }
        }
        let axis = ProbeKind::Replay
            .refuses_decode_settings(DecodeSettingsFrom::Axis("ctx_size"))
            .unwrap();
        assert_eq!(
            axis,
            "`ctx_size` is a setting of the decode probe, and [probe] kind is \"replay\": set kind = \"decode\" (llama.cpp trees) or drop the axis"
        );
    }
}
