//! The probe kinds, one definition each (issue 57): what `--probe-kind` and `[probe] kind`
//! name, the tree a kind needs, the program it runs and its argument lines, the options its
//! program takes, what it refuses, and its line in the store identity (full and build-only).
//! The registry (`ProbeKind::def`) is the one place that maps a kind to its definition; every
//! branch on the kind elsewhere asks the definition, as `core::settings::SETTINGS` serves the
//! decode settings. A new kind is a file here, a row in `ProbeKind`, and its prober (the
//! prober table, `run::probers`).
//!
//! Also THE rule of what only one kind takes: the decode probe's llama.cpp settings
//! (`core::settings`) mean nothing to the other kinds, so a setting given to another kind is
//! refused before any work, in one wording whether a flag, a `--config`'s own values or a
//! matrix axis gave it.
//!
//! Pure, and below `core::config` and `core::matrix` (both read it; it reads neither).

use crate::core::settings::DecodeSettings;

pub mod backend_ops;
pub mod ctest;
pub mod decode;
pub mod replay;
pub mod script;

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
    /// The tree's own CTest suite, for the tests `--ctest REGEX` names: the failing test and
    /// its first error line are the signature.
    Ctest,
}

/// What is probed, with what each kind's probe takes: the bundled replay, llama.cpp's own
/// decode (the bundled decode-probe on the tool's tiny model; llama.cpp trees only), a user's
/// build + test script, or the tree's own test-backend-ops.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ProbeSpec {
    #[default]
    Replay,
    Decode,
    Script {
        build: Option<String>,
        script: String,
    },
    /// The tree's own `test-backend-ops test -o OP -b DEVICE` for each op, `-p` when given.
    BackendOps {
        ops: Vec<String>,
        op_params: Option<String>,
    },
    /// The tree's tests built, and `ctest -R REGEX` run in its build tree.
    Ctest {
        regex: String,
    },
}

/// The tree a kind needs at the `--bad` commit, checked before any probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// A ggml tree (ggml, llama.cpp, or a tree that vendors ggml): the replay.
    Ggml,
    /// A llama.cpp tree: the decode probe.
    Llama,
    /// The tree's own test-backend-ops, knowing every `--op`.
    TestBackendOps,
    /// Nothing this tool can check: a user's script.
    Nothing,
}

/// The `[probe]` table's values a kind may take (a matrix file's, or a command line's).
#[derive(Debug, Clone, Copy, Default)]
pub struct Table<'a> {
    pub build: Option<&'a str>,
    pub script: Option<&'a str>,
    pub ops: &'a [String],
    pub op_params: Option<&'a str>,
    /// `ctest`: the test regex (`--ctest`).
    pub ctest: Option<&'a str>,
}

/// One option of a bundled program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReproOption {
    pub name: &'static str,
    /// It is followed by a value (`--steps 100000`); else a switch (`--verbose`).
    pub takes_value: bool,
    /// The tool sets it itself: a user's `--repro-arg` of it is refused with this hint.
    pub owned_by: Option<&'static str>,
    /// Options this one excludes in the program (`--wraps` and `--steps`): naming it replaces
    /// them too.
    pub replaces: &'static [&'static str],
}

pub(crate) const fn opt(name: &'static str) -> ReproOption {
    ReproOption {
        name,
        takes_value: true,
        owned_by: None,
        replaces: &[],
    }
}

pub(crate) const fn owned(name: &'static str, by: &'static str) -> ReproOption {
    ReproOption {
        name,
        takes_value: true,
        owned_by: Some(by),
        replaces: &[],
    }
}

pub(crate) const MEMORY_HINT: &str = "the placement is the tool's --memory device|unified|host (it also sets ggml's switch per tree); drop --repro-arg --memory";

/// One probe kind's definition: every question the rest of the tool asks about a kind.
pub trait Kind: Sync {
    /// The spelling of `[probe] kind` and `--probe-kind`.
    fn name(&self) -> &'static str;
    /// The tree it needs at the `--bad` commit.
    fn needs(&self) -> Needs;
    /// It builds and runs the whole tree, so `--path` is not guessed from the layout (the
    /// decode probe's llama.cpp, test-backend-ops under llama.cpp's tests/).
    fn whole_tree(&self) -> bool {
        false
    }
    /// A probe whose build this tool makes (its bundled programs, or the tree's own
    /// `test-backend-ops`), so it knows what the build reads; not the user's script.
    fn is_bundled(&self) -> bool {
        true
    }
    /// The program every probe runs, as the report names it (`None`: a script).
    fn program(&self) -> Option<&'static str>;
    /// The options of that program, which `--repro-arg` is checked against (`None`: a
    /// program whose arguments are not `--repro-arg`s).
    fn options(&self) -> Option<&'static [ReproOption]> {
        None
    }
    /// It reads the decode settings (`core::settings`); every other kind refuses them.
    fn takes_decode_settings(&self) -> bool {
        false
    }
    /// Its program has no host memory placement (`--memory host`): llama.cpp keeps no
    /// buffer where a GPU's host placement would put it.
    fn no_host_memory(&self) -> bool {
        false
    }
    /// What a `[probe]` table of this kind lacks: the key and why (`probe.script`).
    fn table_lacks(&self, _t: &Table) -> Option<(&'static str, &'static str)> {
        None
    }
    /// It takes the replay's `--graph` (a preset of its arguments).
    fn takes_graph(&self) -> bool {
        false
    }
    /// It compares with the `--good` commit's logits (`--compare-good`).
    fn compares_logits(&self) -> bool {
        false
    }
    /// A build-only run (`--regress build`, `matrix --build-only`) of this spec has nothing
    /// to build (a script without its build command).
    fn nothing_to_build(&self, _spec: &ProbeSpec) -> bool {
        false
    }
    /// Flags that mean nothing to it when `--probe-kind` chose it: the flag and the one line
    /// that refuses it (exit 2, before any work).
    fn refuses_flags(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }
    /// Where its arguments come from when no configuration or flag gave any: the program's
    /// own defaults, in words (`None`: the built-in matrix's parameters).
    fn own_args(&self, _settings: &DecodeSettings) -> Option<String> {
        None
    }
    /// It takes the reproducer's arguments (`--repro-arg`, a matrix's `[params.*]`).
    fn takes_repro_args(&self) -> bool {
        true
    }
    /// The spec of a `[probe]` table of this kind.
    fn spec(&self, t: &Table) -> ProbeSpec;
    /// Its line in the configuration's store identity (`probe=...`): `build_only` leaves out
    /// what only the test reads.
    fn identity(&self, spec: &ProbeSpec, build_only: bool) -> String;
    /// The program's arguments before the recipe's own, ahead of the configuration's
    /// reproducer arguments (the decode probe's settings).
    fn leading_args(&self, _settings: &DecodeSettings) -> Vec<String> {
        Vec::new()
    }
    /// The argument lines every probe runs the program with, one per run, from the
    /// configuration's arguments (`args`, the recipe's included) and the device ggml names:
    /// what the probe runs and what the report prints.
    fn runs(&self, _spec: &ProbeSpec, args: &[String], _device: &str) -> Vec<Vec<String>> {
        vec![args.to_vec()]
    }
    /// What the report says every probe ran, and what a pass covered (`None`: the bundled
    /// reproducer, described from its arguments).
    fn ran(&self) -> Option<(&'static str, &'static str)> {
        None
    }
    /// How a flag that chose this kind over a configuration's probe is said in the report
    /// (`--probe-kind decode`).
    fn flag_line(&self, spec: &ProbeSpec) -> String;
}

impl ProbeKind {
    pub const ALL: [ProbeKind; 5] = [
        ProbeKind::Replay,
        ProbeKind::Decode,
        ProbeKind::Script,
        ProbeKind::BackendOps,
        ProbeKind::Ctest,
    ];

    /// THE registry: the definition of each kind.
    pub fn def(self) -> &'static dyn Kind {
        match self {
            ProbeKind::Replay => &replay::Replay,
            ProbeKind::Decode => &decode::Decode,
            ProbeKind::Script => &script::Script,
            ProbeKind::BackendOps => &backend_ops::BackendOps,
            ProbeKind::Ctest => &ctest::Ctest,
        }
    }

    /// The spelling of `[probe] kind` and `--probe-kind`.
    pub fn name(self) -> &'static str {
        self.def().name()
    }

    pub fn parse(s: &str) -> Option<ProbeKind> {
        ProbeKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// A probe whose build this tool makes (its bundled programs, or the tree's own
    /// `test-backend-ops`), so it knows what the build reads; not the user's script.
    pub fn is_bundled(self) -> bool {
        self.def().is_bundled()
    }
}

impl ProbeSpec {
    pub fn kind(&self) -> ProbeKind {
        match self {
            ProbeSpec::Replay => ProbeKind::Replay,
            ProbeSpec::Decode => ProbeKind::Decode,
            ProbeSpec::Script { .. } => ProbeKind::Script,
            ProbeSpec::BackendOps { .. } => ProbeKind::BackendOps,
            ProbeSpec::Ctest { .. } => ProbeKind::Ctest,
        }
    }

    /// Its kind's definition.
    pub fn def(&self) -> &'static dyn Kind {
        self.kind().def()
    }

    /// The spelling of `[probe] kind` and `--probe-kind`.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// The spec of a `[probe]` table of kind `kind`.
    pub fn of(kind: ProbeKind, t: &Table) -> ProbeSpec {
        kind.def().spec(t)
    }

    /// Its line in the store identity (`Kind::identity`).
    pub fn identity(&self, build_only: bool) -> String {
        self.def().identity(self, build_only)
    }

    /// The ops and `-p` of test-backend-ops (`None`: another kind).
    pub fn backend_ops(&self) -> Option<(&[String], Option<&str>)> {
        match self {
            ProbeSpec::BackendOps { ops, op_params } => Some((ops, op_params.as_deref())),
            _ => None,
        }
    }

    /// ctest's test regex (`None`: another kind).
    pub fn ctest(&self) -> Option<&str> {
        match self {
            ProbeSpec::Ctest { regex } => Some(regex),
            _ => None,
        }
    }

    /// A user's script and its build (`None`: another kind).
    pub fn script(&self) -> Option<(Option<&str>, &str)> {
        match self {
            ProbeSpec::Script { build, script } => Some((build.as_deref(), script)),
            _ => None,
        }
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
        if self.def().takes_decode_settings() {
            return None;
        }
        let given = match from {
            Flag { flag, value } => format!("{flag} {value} is a setting"),
            Config { id, settings } => format!("--config {id} sets {settings}, settings"),
            Axis(axis) => format!("`{axis}` is a setting"),
        };
        let bundled = self.is_bundled();
        let probe = match (from, bundled) {
            (Axis(_), _) => format!("[probe] kind is \"{}\"", self.name()),
            (_, false) => {
                "--script runs your own test, which takes its settings in its command".to_string()
            }
            (_, true) => format!("the probe is the {}", self.name()),
        };
        let change = match (from, bundled) {
            (Axis(_), _) => "set kind = \"decode\" (llama.cpp trees) or drop the axis".to_string(),
            (Flag { flag, .. }, false) => format!("drop {flag} or --script"),
            (Flag { flag, .. }, true) => {
                format!("add --probe-kind decode (llama.cpp trees), or drop {flag}")
            }
            (Config { .. }, false) => "drop --script or use --probe-kind decode".to_string(),
            (Config { .. }, true) => "use --probe-kind decode (llama.cpp trees)".to_string(),
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

    /// Every kind's definition answers to its own name, and a spec to its kind.
    #[test]
    fn the_registry_is_one_row_per_kind() {
        for k in ProbeKind::ALL {
            assert_eq!(ProbeKind::parse(k.name()), Some(k));
            let spec = ProbeSpec::of(
                k,
                &Table {
                    script: Some("true"),
                    ..Table::default()
                },
            );
            assert_eq!(spec.kind(), k);
        }
    }
}
