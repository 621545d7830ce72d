//! The decode probe's llama.cpp settings (flash attention, K/V cache types, context, batch,
//! ubatch, parallel sequences, offloaded layers) and the tiny model's weight type and attention
//! shape: declared once in `SETTINGS`, which the bisect flags, the matrix and `bisect-config`
//! axes, the store identity, the decode-probe command line and the report all read. The names
//! are llama.cpp's own (common/arg.cpp): the flag is the decode-probe option, the axis its
//! snake_case.
//!
//! Only values other than the default are held, so a configuration that sets nothing, or sets a
//! default, has the identity (store key, matrix id) it had before these settings existed.

use crate::core::gguf::tiny_llama::{self, Shape};
use crate::core::gguf::DType;
use std::collections::BTreeMap;

/// What values a setting takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Values {
    /// One of these words.
    Words(&'static [&'static str]),
    /// An integer at least this.
    AtLeast(i64),
    /// An integer at least this, or this word (`all` layers, `auto` K/V heads).
    AtLeastOr(i64, &'static str),
    /// One of these integers.
    Ints(&'static [i64]),
}

/// Where a setting acts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acts {
    /// A decode-probe option, passed on its command line.
    Probe,
    /// A property of the tiny model's file.
    Model,
}

/// One setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// The matrix and `bisect-config` axis, and the key in the identity and the report.
    pub axis: &'static str,
    /// The setrows-bisect flag and (for `Acts::Probe`) the decode-probe option.
    pub flag: &'static str,
    pub values: Values,
    /// `None`: not set, the tree's own default (flash attention).
    pub default: Option<&'static str>,
    pub acts: Acts,
}

/// ggml type names llama.cpp takes for its K and V caches (common/arg.cpp kv_cache_types).
pub const CACHE_TYPES: &[&str] = &[
    "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl",
];
const WEIGHT_TYPES: &[&str] = &["f32", "f16", "q8_0", "q4_0"];
const HEAD_DIMS: &[i64] = &[64, 128, 256];
const GQA_RATIOS: &[i64] = &[1, 2, 3, 4, 5, 6, 7, 8];

/// Every setting, in the order the report and the command line list them.
pub const SETTINGS: [Setting; 13] = [
    Setting {
        axis: "flash_attn",
        flag: "--flash-attn",
        values: Values::Words(&["off", "on", "auto"]),
        default: None,
        acts: Acts::Probe,
    },
    Setting {
        axis: "cache_type_k",
        flag: "--cache-type-k",
        values: Values::Words(CACHE_TYPES),
        default: Some("f16"),
        acts: Acts::Probe,
    },
    Setting {
        axis: "cache_type_v",
        flag: "--cache-type-v",
        values: Values::Words(CACHE_TYPES),
        default: Some("f16"),
        acts: Acts::Probe,
    },
    Setting {
        axis: "ctx_size",
        flag: "--ctx-size",
        values: Values::AtLeast(2),
        default: Some("256"),
        acts: Acts::Probe,
    },
    Setting {
        axis: "batch_size",
        flag: "--batch-size",
        values: Values::AtLeast(1),
        default: Some("1"),
        acts: Acts::Probe,
    },
    Setting {
        axis: "ubatch_size",
        flag: "--ubatch-size",
        values: Values::AtLeast(1),
        default: Some("1"),
        acts: Acts::Probe,
    },
    Setting {
        axis: "parallel",
        flag: "--parallel",
        values: Values::AtLeast(1),
        default: Some("1"),
        acts: Acts::Probe,
    },
    Setting {
        axis: "n_gpu_layers",
        flag: "--n-gpu-layers",
        values: Values::AtLeastOr(0, "all"),
        default: Some("all"),
        acts: Acts::Probe,
    },
    Setting {
        axis: "weight_type",
        flag: "--weight-type",
        values: Values::Words(WEIGHT_TYPES),
        default: Some("f16"),
        acts: Acts::Model,
    },
    Setting {
        axis: "head_dim",
        flag: "--head-dim",
        values: Values::Ints(HEAD_DIMS),
        default: Some("128"),
        acts: Acts::Model,
    },
    Setting {
        axis: "gqa",
        flag: "--gqa",
        values: Values::Ints(GQA_RATIOS),
        default: Some("1"),
        acts: Acts::Model,
    },
    // llama.cpp's `n_head_kv` (`<arch>.attention.head_count_kv`); n_head = gqa x this. `auto`:
    // the K/V heads the 256-dim width holds (`Shape::auto_kv_heads`), the shapes of before.
    Setting {
        axis: "n_head_kv",
        flag: "--n-head-kv",
        values: Values::AtLeastOr(1, "auto"),
        default: Some("auto"),
        acts: Acts::Model,
    },
    // An interleaved sliding-window model (gpt-oss, Gemma 2/3): `tiny_llama`'s gemma2 file.
    Setting {
        axis: "sliding_window",
        flag: "--sliding-window",
        values: Values::AtLeast(0),
        default: Some("0"),
        acts: Acts::Model,
    },
];

/// The setting an axis names.
pub fn by_axis(axis: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.axis == axis)
}

/// The setting a flag names.
pub fn by_flag(flag: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.flag == flag)
}

impl Setting {
    /// The value in its one spelling (integers without sign or leading zeros), or why it is
    /// not one: a phrase for after the value (`expected off, on or auto`).
    pub fn parse(&self, raw: &str) -> Result<String, String> {
        let int = || raw.parse::<i64>().ok();
        let words = |w: &[String]| match w {
            [one] => one.clone(),
            [init @ .., last] => format!("{} or {last}", init.join(", ")),
            [] => String::new(),
        };
        match self.values {
            Values::Words(w) if w.contains(&raw) => Ok(raw.to_string()),
            Values::Words(w) => Err(format!(
                "expected {}",
                words(&w.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            )),
            Values::AtLeast(lo) => match int() {
                Some(n) if n >= lo => Ok(n.to_string()),
                _ => Err(format!("expected an integer >= {lo}")),
            },
            Values::AtLeastOr(_, word) if raw == word => Ok(raw.into()),
            Values::AtLeastOr(lo, word) => match int() {
                Some(n) if n >= lo => Ok(n.to_string()),
                _ => Err(format!("expected an integer >= {lo} or {word}")),
            },
            Values::Ints(v) => match int() {
                Some(n) if v.contains(&n) => Ok(n.to_string()),
                _ => Err(format!(
                    "expected {}",
                    words(&v.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                )),
            },
        }
    }

    /// Whether an axis's values are written as TOML integers (`n_gpu_layers` also takes `all`,
    /// `n_head_kv` `auto`: `word`).
    pub fn integer(&self) -> bool {
        !matches!(self.values, Values::Words(_))
    }

    /// The one word an integer axis also takes (`all`, `auto`).
    pub fn word(&self) -> Option<&'static str> {
        match self.values {
            Values::AtLeastOr(_, w) => Some(w),
            _ => None,
        }
    }

    pub fn is_default(&self, value: &str) -> bool {
        self.default == Some(value)
    }
}

/// The settings a configuration gives: axis -> value, only values other than the default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct DecodeSettings(BTreeMap<String, String>);

impl DecodeSettings {
    /// Sets `axis` (a valid value, `Setting::parse`d); a default value removes it.
    pub fn set(&mut self, s: &Setting, value: String) {
        if s.is_default(&value) {
            self.0.remove(s.axis);
        } else {
            self.0.insert(s.axis.to_string(), value);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value in effect (the default where none is set; `None`: flash attention left to the
    /// tree).
    pub fn get(&self, axis: &str) -> Option<&str> {
        self.0
            .get(axis)
            .map(String::as_str)
            .or_else(|| by_axis(axis).and_then(|s| s.default))
    }

    /// (axis, value) of the values other than the default, in `SETTINGS` order.
    pub fn set_values(&self) -> Vec<(&'static Setting, &str)> {
        SETTINGS
            .iter()
            .filter_map(|s| self.0.get(s.axis).map(|v| (s, v.as_str())))
            .collect()
    }

    /// Why these values cannot go together: the axis to blame and one line naming the flags,
    /// or `None`.
    pub fn conflict(&self) -> Option<(&'static str, String)> {
        let n = |a: &str| self.get(a).and_then(|v| v.parse::<i64>().ok()).unwrap_or(1);
        let (batch, ubatch) = (n("batch_size"), n("ubatch_size"));
        if ubatch > batch {
            return Some(("ubatch_size", format!("--ubatch-size {ubatch} is more than --batch-size {batch}: a micro-batch splits a batch (give --batch-size {ubatch} or more)")));
        }
        self.shape().err().map(|why| ("n_head_kv", why))
    }

    /// Why a run whose result reports `effective` (decode-probe's `settings` object: the values
    /// llama.cpp used, read from its graph and model where it can) did not run these settings:
    /// the first asked value it contradicts, or `None`. A value reported as null is unknown and
    /// proves nothing either way; `auto` asks llama.cpp to choose; the context is at least what
    /// was asked (llama.cpp may pad it).
    pub fn contradicted_by(
        &self,
        effective: &BTreeMap<String, serde_json::Value>,
    ) -> Option<String> {
        for (s, want) in self.set_values() {
            if s.axis == "flash_attn" && want == "auto" {
                continue;
            }
            let got = match effective.get(s.axis) {
                None | Some(serde_json::Value::Null) => continue,
                Some(serde_json::Value::String(v)) => v.clone(),
                Some(serde_json::Value::Bool(b)) => if *b { "on" } else { "off" }.to_string(),
                Some(other) => other.to_string(),
            };
            let same = match (s.axis, want.parse::<i64>(), got.parse::<i64>()) {
                ("ctx_size", Ok(w), Ok(g)) => g >= w,
                _ => got == want,
            };
            if !same {
                return Some(format!(
                    "{} {want} asked for, but the run reports {}={got}",
                    s.flag, s.axis
                ));
            }
        }
        None
    }

    /// The decode-probe options for the values other than the default (`--flash-attn on`).
    pub fn probe_args(&self) -> Vec<String> {
        self.set_values()
            .into_iter()
            .filter(|(s, _)| s.acts == Acts::Probe)
            .flat_map(|(s, v)| [s.flag.to_string(), v.to_string()])
            .collect()
    }

    /// The tiny model these settings name: its weight type and shape.
    pub fn model(&self) -> (DType, Shape) {
        let dtype = self
            .get("weight_type")
            .and_then(DType::parse)
            .unwrap_or(DType::F16);
        let n_swa = self.int("sliding_window").unwrap_or(0);
        (
            dtype,
            Shape {
                n_swa,
                ..self.shape().unwrap_or_default()
            },
        )
    }

    fn int(&self, axis: &str) -> Option<u32> {
        self.get(axis).and_then(|v| v.parse().ok())
    }

    /// The model's heads (`Shape::with_kv_heads`): `Err` says why these values make none
    /// (`conflict` refuses them before any work).
    fn shape(&self) -> Result<Shape, String> {
        Shape::with_kv_heads(
            self.int("head_dim").unwrap_or(tiny_llama::DEFAULT_HEAD_DIM),
            self.int("gqa").unwrap_or(tiny_llama::DEFAULT_GQA),
            self.int("n_head_kv"),
        )
    }

    /// `axis=value` for each value other than the default: the report's Configuration line,
    /// the dry run, and the identity's `decode` line.
    pub fn labels(&self) -> Vec<String> {
        self.set_values()
            .into_iter()
            .map(|(s, v)| format!("{}={v}", s.axis))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_agrees_with_the_model_and_the_names_with_llama_cpp() {
        for s in &SETTINGS {
            assert_eq!(s.flag[2..].replace('-', "_"), s.axis, "{}", s.flag);
            if let Some(d) = s.default {
                assert_eq!(s.parse(d).as_deref(), Ok(d), "{}", s.axis);
            }
        }
        let dtypes: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
        assert_eq!(WEIGHT_TYPES, dtypes.as_slice());
        let heads: Vec<i64> = tiny_llama::HEAD_DIMS.iter().map(|&h| h.into()).collect();
        assert_eq!(HEAD_DIMS, heads.as_slice());
        let gqa: Vec<i64> = tiny_llama::GQA_RATIOS.iter().map(|&g| g.into()).collect();
        assert_eq!(GQA_RATIOS, gqa.as_slice());
        assert_eq!(
            DecodeSettings::default().model(),
            (DType::F16, Shape::default())
        );
    }

    #[test]
    fn defaults_are_not_held_and_values_are_spelled_one_way() {
        let mut d = DecodeSettings::default();
        let s = by_axis("cache_type_k").unwrap();
        d.set(s, s.parse("f16").unwrap());
        assert!(d.is_empty());
        let ctx = by_flag("--ctx-size").unwrap();
        d.set(ctx, ctx.parse("0512").unwrap());
        d.set(s, s.parse("q8_0").unwrap());
        assert_eq!(d.labels(), ["cache_type_k=q8_0", "ctx_size=512"]);
        assert_eq!(
            d.probe_args(),
            ["--cache-type-k", "q8_0", "--ctx-size", "512"]
        );
        assert_eq!(
            by_axis("flash_attn").unwrap().parse("yes"),
            Err("expected off, on or auto".to_string())
        );
        let ngl = by_axis("n_gpu_layers").unwrap();
        assert_eq!(ngl.parse("all").as_deref(), Ok("all"));
        assert_eq!(ngl.parse("3").as_deref(), Ok("3"));
        assert!(ngl.parse("-1").is_err());
        assert!(by_axis("head_dim").unwrap().parse("96").is_err());
    }

    #[test]
    fn a_reported_value_other_than_the_asked_one_contradicts_it() {
        let mut d = DecodeSettings::default();
        for (a, v) in [
            ("flash_attn", "on"),
            ("ctx_size", "512"),
            ("weight_type", "q4_0"),
        ] {
            let s = by_axis(a).unwrap();
            d.set(s, s.parse(v).unwrap());
        }
        let report = |j: serde_json::Value| -> BTreeMap<String, serde_json::Value> {
            serde_json::from_value(j).unwrap()
        };
        let ok = report(
            serde_json::json!({"flash_attn": "on", "ctx_size": 512, "weight_type": "q4_0", "head_dim": 128}),
        );
        assert_eq!(d.contradicted_by(&ok), None);
        // unknown (null or absent) proves nothing; a padded context is still the asked one
        let unknown = report(serde_json::json!({"flash_attn": null, "ctx_size": 768}));
        assert_eq!(d.contradicted_by(&unknown), None);
        let off = report(serde_json::json!({"flash_attn": "off", "ctx_size": 512}));
        assert_eq!(
            d.contradicted_by(&off).as_deref(),
            Some("--flash-attn on asked for, but the run reports flash_attn=off")
        );
        let small = report(serde_json::json!({"ctx_size": 256}));
        assert!(d
            .contradicted_by(&small)
            .unwrap()
            .starts_with("--ctx-size 512"));
        let f16 = report(serde_json::json!({"weight_type": "f16"}));
        assert!(d.contradicted_by(&f16).unwrap().contains("weight_type=f16"));
    }

    #[test]
    fn the_model_settings_are_not_probe_options_and_ubatch_fits_in_batch() {
        let mut d = DecodeSettings::default();
        for (a, v) in [("weight_type", "q4_0"), ("head_dim", "64"), ("gqa", "4")] {
            let s = by_axis(a).unwrap();
            d.set(s, s.parse(v).unwrap());
        }
        assert!(d.probe_args().is_empty());
        let (dtype, shape) = d.model();
        assert_eq!(dtype, DType::Q4_0);
        assert_eq!((shape.head_dim(), shape.gqa(), shape.n_swa), (64, 4, 0));
        let w = by_flag("--sliding-window").unwrap();
        d.set(w, w.parse("128").unwrap());
        assert!(d.probe_args().is_empty());
        assert_eq!(d.model().1.n_swa, 128);
        assert_eq!(d.labels().last().unwrap(), "sliding_window=128");
        d.set(w, w.parse("0").unwrap());
        assert_eq!(d.model().1, shape, "0 is the default: no window");
        let ub = by_axis("ubatch_size").unwrap();
        d.set(ub, "4".into());
        let (axis, why) = d.conflict().unwrap();
        assert_eq!(axis, "ubatch_size");
        assert!(why.starts_with("--ubatch-size 4 is more than --batch-size 1"));
        let b = by_axis("batch_size").unwrap();
        d.set(b, "8".into());
        assert_eq!(d.conflict(), None);
    }

    /// `--gqa` takes every ratio 1..=8; `--n-head-kv` gives several K/V heads (the model is
    /// gqa x that many heads), `auto` (its default, not held) the heads the shapes always had,
    /// and a count that makes the model wider than it may be is refused naming the flags.
    #[test]
    fn k_v_heads_are_asked_for_and_a_shape_too_wide_is_refused() {
        let set = |pairs: &[(&str, &str)]| {
            let mut d = DecodeSettings::default();
            for (a, v) in pairs {
                let s = by_axis(a).unwrap();
                d.set(s, s.parse(v).unwrap());
            }
            d
        };
        let kv = by_axis("n_head_kv").unwrap();
        assert_eq!(kv.parse("auto").as_deref(), Ok("auto"));
        assert_eq!(kv.parse("02").as_deref(), Ok("2"));
        assert_eq!(
            kv.parse("0"),
            Err("expected an integer >= 1 or auto".to_string())
        );
        assert!(by_axis("gqa").unwrap().parse("9").is_err());
        assert!(set(&[("n_head_kv", "auto")]).is_empty());
        for g in 1..=8 {
            let d = set(&[("gqa", &g.to_string())]);
            assert_eq!(d.conflict(), None, "{g}");
            assert_eq!(d.model().1.gqa(), g, "{g}");
        }
        let d = set(&[("gqa", "3"), ("n_head_kv", "2")]);
        assert_eq!(d.conflict(), None);
        assert!(d.probe_args().is_empty(), "a model setting");
        assert_eq!(d.labels(), ["gqa=3", "n_head_kv=2"]);
        let s = d.model().1;
        assert_eq!((s.n_head, s.n_head_kv, s.n_embd), (6, 2, 768));
        let wide = set(&[("gqa", "6"), ("n_head_kv", "4")]);
        let (axis, why) = wide.conflict().unwrap();
        assert_eq!(axis, "n_head_kv");
        assert_eq!(
            why,
            "--n-head-kv 4 with --gqa 6 and --head-dim 128 makes 24 heads, 3072 wide: the tiny model takes 1 to 2 K/V heads of this ratio and head size (at most 2048 wide)"
        );
        // what the probe reports of the file proves the asked heads
        let report: BTreeMap<String, serde_json::Value> =
            serde_json::from_value(serde_json::json!({"gqa": 3, "n_head_kv": 1})).unwrap();
        assert_eq!(
            d.contradicted_by(&report).as_deref(),
            Some("--n-head-kv 2 asked for, but the run reports n_head_kv=1")
        );
    }
}
