//! The decode probe's settings in a configuration (`core::settings`): flags applied over a
//! configuration's values, and the one rule for when they are refused.

use super::{Flags, ProbeSpec, Resolved};
use crate::core::settings::Setting;

impl Resolved {
    /// The bundled program's arguments before the recipe's own (`--memory`): for the decode
    /// probe its settings' options first, so a `--repro-arg` of the same option, later, wins.
    /// The one rule for what runs and for what the result says ran.
    pub fn reproducer_args(&self) -> Vec<String> {
        let mut args = match self.probe {
            ProbeSpec::Decode => self.settings.probe_args(),
            _ => Vec::new(),
        };
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
    /// they can): a setting given to a probe that is not the decode probe (the replay and a
    /// script have no llama.cpp context to give it to, and a key holding it would answer no
    /// question), or values that cannot go together. Refused before any work, as bad input.
    pub fn settings_refused(&self, f: &Flags) -> Option<String> {
        if let Some((s, v)) = f.settings.first() {
            let flag = s.flag;
            match &self.probe {
                ProbeSpec::Decode => {}
                ProbeSpec::Script { .. } => {
                    return Some(format!(
                        "{flag} {v} is a setting of the decode probe (--probe-kind decode); --script runs your own test, which takes its settings in its command: drop {flag} or --script"
                    ))
                }
                ProbeSpec::Replay => {
                    return Some(format!(
                        "{flag} {v} is a setting of the decode probe: add --probe-kind decode (llama.cpp trees), or drop {flag} for the replay"
                    ))
                }
            }
        }
        if self.probe != ProbeSpec::Decode && !self.settings.is_empty() {
            // a configuration's own values under a probe kind a flag chose
            return Some(format!(
                "--config {}: its decode settings ({}) are for the decode probe; drop --script or use --probe-kind decode",
                self.id.as_deref().unwrap_or("(unnamed)"),
                self.settings.labels().join(" ")
            ));
        }
        self.settings.conflict().map(|(_, why)| why)
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
            script: Some("true".into()),
            ..given(&[("--cache-type-k", "f16")])
        };
        script.apply(&f);
        let why = script.settings_refused(&f).unwrap();
        assert!(
            why.contains("--cache-type-k f16") && why.contains("--script"),
            "{why}"
        );
        let mut decode = Resolved::for_backend(crate::core::build::Backend::Cpu);
        let f = Flags {
            decode: true,
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
            decode: true,
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
