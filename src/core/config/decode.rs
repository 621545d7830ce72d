//! The decode probe's settings in a configuration (`core::settings`): flags applied over a
//! configuration's values, and when they are refused (for another probe kind by THE rule of
//! `core::kinds::ProbeKind::refuses_decode_settings`, which matrix axes follow too).

use super::{Flags, Resolved};
use crate::core::kinds::DecodeSettingsFrom;
use crate::core::settings::Setting;

impl Resolved {
    /// The bundled program's arguments before the recipe's own (`--memory`): for the decode
    /// probe its settings' options first, so a `--repro-arg` of the same option, later, wins.
    /// The one rule for what runs and for what the result says ran.
    pub fn reproducer_args(&self) -> Vec<String> {
        let mut args = self.probe.def().leading_args(&self.settings);
        args.extend(self.repro_args.iter().cloned());
        args
    }

    /// Sets each setting a flag gave; one override line per value it changed, as `apply`.
    pub(super) fn apply_settings(&mut self, given: &[(&'static Setting, String)]) -> Vec<String> {
        let mut changed = Vec::new();
        for (s, v) in given {
            let old = self.settings.get(s.axis).map(str::to_string);
            if old.as_deref() == Some(v.as_str()) {
                continue;
            }
            changed.push(format!(
                "{} {v} (configuration: {})",
                s.flag,
                old.as_deref().unwrap_or("unset")
            ));
            self.settings.set(s, v.clone());
        }
        changed
    }

    /// Why the decode settings cannot be probed as given (one line naming the flags; `None`:
    /// they can): a setting a flag gave, or a configuration's own under a probe kind a flag
    /// chose, for a probe that is not the decode probe (THE rule and its wording:
    /// `ProbeKind::refuses_decode_settings`), or values that cannot go together. Refused
    /// before any work, as bad input.
    pub fn settings_refused(&self, f: &Flags) -> Option<String> {
        let kind = self.probe.kind();
        let flag = f.settings.first().and_then(|(s, v)| {
            kind.refuses_decode_settings(DecodeSettingsFrom::Flag {
                flag: s.flag,
                value: v,
            })
        });
        let labels = self.settings.labels().join(" ");
        let config = (!self.settings.is_empty())
            .then(|| {
                kind.refuses_decode_settings(DecodeSettingsFrom::Config {
                    id: self.id.as_deref().unwrap_or("(unnamed)"),
                    settings: &labels,
                })
            })
            .flatten();
        flag.or(config)
            .or_else(|| self.settings.conflict().map(|(_, why)| why))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{hip, M};
    use super::super::*;
    use crate::core::build::Memory;
    use crate::core::settings::by_flag;

    fn given(pairs: &[(&str, &str)]) -> Flags {
        Flags {
            settings: pairs
                .iter()
                .map(|(f, v)| (by_flag(f).unwrap(), by_flag(f).unwrap().parse(v).unwrap()))
                .collect(),
            ..Flags::default()
        }
    }

    /// A store written before the settings is still read: the default values, given or not,
    /// leave the key as it was (the literal is the identity of the stored results' configuration);
    /// any other value is another key.
    #[test]
    fn default_settings_keep_the_stored_key_and_others_change_it() {
        let mut cfg = Resolved::for_backend(crate::core::build::Backend::Cpu);
        cfg.probe = ProbeSpec::Decode;
        let before = cfg.identity();
        assert_eq!(
            before,
            "configuration v1\nbackend=cpu\nimage=host\nrecipe={\"backend\":\"cpu\",\"gpu_target\":null,\"wave_size\":null,\"graphs\":null,\"hip_no_vmm\":null,\"rocwmma_fattn\":null,\"build_type\":\"Release\",\"ccache\":false,\"extra_cmake_args\":[]}\nlaunch=[]\nrepro_args=[]\nprobe=decode\n"
        );
        let defaults = given(&[
            ("--cache-type-k", "f16"),
            ("--ctx-size", "256"),
            ("--batch-size", "1"),
            ("--n-gpu-layers", "all"),
            ("--weight-type", "f16"),
            ("--head-dim", "128"),
            ("--gqa", "1"),
        ]);
        assert!(cfg.apply(&defaults).is_empty());
        assert_eq!(cfg.settings_refused(&defaults), None);
        assert_eq!(cfg.identity(), before);
        let fa = given(&[("--flash-attn", "on"), ("--weight-type", "q4_0")]);
        assert_eq!(
            cfg.apply(&fa),
            [
                "--flash-attn on (configuration: unset)",
                "--weight-type q4_0 (configuration: f16)"
            ]
        );
        assert_eq!(
            cfg.identity(),
            format!("{before}decode=flash_attn=on weight_type=q4_0\n")
        );
        let info = cfg.info(Vec::new());
        assert!(info.settings.contains(&"flash_attn=on".to_string()));
        assert!(info.settings.contains(&"weight_type=q4_0".to_string()));
    }

    #[test]
    fn decode_settings_for_another_probe_are_refused_naming_both_flags() {
        let fa = given(&[("--flash-attn", "on")]);
        let mut replay = Resolved::for_backend(crate::core::build::Backend::Cpu);
        replay.apply(&fa);
        let why = replay.settings_refused(&fa).unwrap();
        assert!(
            why.starts_with("--flash-attn on is a setting of the decode probe"),
            "{why}"
        );
        assert!(why.contains("--probe-kind decode"), "{why}");
        let mut script = Resolved::for_backend(crate::core::build::Backend::Cpu);
        let f = Flags {
            probe: Some(ProbeSpec::Script {
                build: None,
                script: "true".into(),
            }),
            ..given(&[("--cache-type-k", "f16")])
        };
        script.apply(&f);
        let why = script.settings_refused(&f).unwrap();
        assert!(
            why.contains("--cache-type-k f16") && why.contains("--script"),
            "{why}"
        );
        // a configuration's own settings under the probe a flag chose: the same rule, worded once
        let m = crate::core::matrix::parse(
            "m.toml",
            "[probe]\nkind = \"decode\"\n[matrix]\nbackend = [\"cpu\"]\nflash_attn = [\"on\"]\n",
        )
        .unwrap();
        let mut named = Resolved::from_matrix(&m.configs[0], &m.probe, &m.file);
        let f = Flags {
            probe: Some(ProbeSpec::Script {
                build: None,
                script: "true".into(),
            }),
            ..Flags::default()
        };
        named.apply(&f);
        let why = named.settings_refused(&f).unwrap();
        let id = &m.configs[0].id;
        assert!(
            why.starts_with(&format!(
                "--config {id} sets flash_attn=on, settings of the decode probe, and --script"
            )) && why.contains("drop --script"),
            "{why}"
        );
        let mut decode = Resolved::for_backend(crate::core::build::Backend::Cpu);
        let f = Flags {
            probe: Some(ProbeSpec::Decode),
            ..given(&[("--ubatch-size", "8")])
        };
        decode.apply(&f);
        assert!(decode
            .settings_refused(&f)
            .unwrap()
            .starts_with("--ubatch-size 8 is more than --batch-size 1"));
    }

    #[test]
    fn decode_is_its_own_probe_kind_and_drops_another_kinds_arguments() {
        let m = crate::core::matrix::parse(
            "m.toml",
            &M.replace("kind = \"replay\"", "kind = \"decode\""),
        )
        .unwrap();
        let from_matrix = Resolved::from_matrix(&m.configs[0], &m.probe, &m.file);
        assert_eq!(from_matrix.probe, ProbeSpec::Decode);
        let mut r = hip();
        assert_eq!(r.repro_args, ["--steps", "7"]);
        let replay_identity = r.identity();
        let changed = r.apply(&Flags {
            probe: Some(ProbeSpec::Decode),
            ..Flags::default()
        });
        assert_eq!(changed, ["--probe-kind decode (configuration: replay)"]);
        assert_eq!(r.probe, ProbeSpec::Decode);
        assert!(
            r.repro_args.is_empty(),
            "the replay's arguments mean nothing to decode-probe"
        );
        assert_ne!(
            r.identity(),
            replay_identity,
            "decode results never answer replay questions"
        );
        assert!(r.identity().contains("probe=decode"));
        // unified is the replay's per-tree knob and decode-probe proves it; llama.cpp has no
        // host placement: refused through the flag and in a matrix
        assert_eq!(r.memory_refused(), None);
        r.apply(&Flags {
            memory: Some(Memory::Unified),
            ..Flags::default()
        });
        assert_eq!(r.memory_refused(), None);
        r.apply(&Flags {
            memory: Some(Memory::Host),
            ..Flags::default()
        });
        assert!(r.memory_refused().unwrap().starts_with("--memory host: "));
        let decode = M.replace("kind = \"replay\"", "kind = \"decode\"");
        let with = |m: &str| decode.replace("[matrix]", &format!("[matrix]\nmemory = [\"{m}\"]"));
        assert!(crate::core::matrix::parse("m.toml", &with("unified")).is_ok());
        let err = crate::core::matrix::parse("m.toml", &with("host")).unwrap_err();
        assert!(
            err.to_string().contains("[probe] kind = \"decode\""),
            "{err}"
        );
    }
}
