//! The decode probe's settings as bisect flags: one field per entry of
//! `core::settings::SETTINGS` (names, values and defaults live there; a test checks that the
//! flags are exactly that table).

use super::args::heading::DECODE;
use crate::core::settings::{Setting, SETTINGS};
use clap::Args;

/// A flag's value checked by its entry of the table (one line naming the flag when bad).
fn setting<const I: usize>(raw: &str) -> Result<String, String> {
    SETTINGS[I].parse(raw)
}

/// llama.cpp's own settings for `--probe-kind decode` (names as in llama.cpp's common
/// arguments); refused with the replay or a script. A default value is the same configuration
/// (and store key) as leaving the flag out.
#[derive(Debug, Default, Args)]
pub struct SettingsFlags {
    /// Flash attention (`llama_context_params`), default: the tree's own.
    #[arg(long, value_name = "off|on|auto", value_parser = setting::<0>, help_heading = DECODE)]
    pub flash_attn: Option<String>,
    /// K cache type: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl [default: f16].
    #[arg(long, value_name = "TYPE", value_parser = setting::<1>, help_heading = DECODE)]
    pub cache_type_k: Option<String>,
    /// V cache type, as --cache-type-k [default: f16].
    #[arg(long, value_name = "TYPE", value_parser = setting::<2>, help_heading = DECODE)]
    pub cache_type_v: Option<String>,
    /// KV cache cells [default: 256].
    #[arg(long, value_name = "N", value_parser = setting::<3>, help_heading = DECODE)]
    pub ctx_size: Option<String>,
    /// Tokens per llama_decode: more than 1 is prompt processing, checked against token by
    /// token [default: 1].
    #[arg(long, value_name = "N", value_parser = setting::<4>, help_heading = DECODE)]
    pub batch_size: Option<String>,
    /// Micro-batch llama.cpp splits a batch into (at most --batch-size) [default: 1].
    #[arg(long, value_name = "N", value_parser = setting::<5>, help_heading = DECODE)]
    pub ubatch_size: Option<String>,
    /// Sequences decoded together, one token each per step [default: 1].
    #[arg(long, value_name = "N", value_parser = setting::<6>, help_heading = DECODE)]
    pub parallel: Option<String>,
    /// Layers offloaded to the GPU: a number or all [default: all].
    #[arg(long, value_name = "N|all", value_parser = setting::<7>, help_heading = DECODE)]
    pub n_gpu_layers: Option<String>,
    /// The tiny model's weight type: f32 f16 q8_0 q4_0 (ggml's block formats; norms stay f32)
    /// [default: f16].
    #[arg(long, value_name = "TYPE", value_parser = setting::<8>, help_heading = DECODE)]
    pub weight_type: Option<String>,
    /// The tiny model's head size: 64 128 256 [default: 128].
    #[arg(long, value_name = "N", value_parser = setting::<9>, help_heading = DECODE)]
    pub head_dim: Option<String>,
    /// The tiny model's GQA ratio n_head / n_head_kv: 1 to 8 [default: 1].
    #[arg(long, value_name = "N", value_parser = setting::<10>, help_heading = DECODE)]
    pub gqa: Option<String>,
    /// The tiny model's K/V heads (n_head = --gqa x N): several tell apart a kernel that pairs
    /// a query head with another group's K/V head; auto: what the 256-dim width holds, one
    /// when the ratio fills it [default: auto].
    #[arg(long, value_name = "N|auto", value_parser = setting::<11>, help_heading = DECODE)]
    pub n_head_kv: Option<String>,
    /// An interleaved sliding-window model (gpt-oss, Gemma 2/3: layer 0 sees the last N
    /// positions, layer 1 all), written as a gemma2 file; 0: none [default: 0].
    #[arg(long, value_name = "N", value_parser = setting::<12>, help_heading = DECODE)]
    pub sliding_window: Option<String>,
}

impl SettingsFlags {
    /// The settings given, in `SETTINGS` order.
    pub fn given(&self) -> Vec<(&'static Setting, String)> {
        let fields = [
            &self.flash_attn,
            &self.cache_type_k,
            &self.cache_type_v,
            &self.ctx_size,
            &self.batch_size,
            &self.ubatch_size,
            &self.parallel,
            &self.n_gpu_layers,
            &self.weight_type,
            &self.head_dim,
            &self.gqa,
            &self.n_head_kv,
            &self.sliding_window,
        ];
        SETTINGS
            .iter()
            .zip(fields)
            .filter_map(|(s, v)| v.clone().map(|v| (s, v)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::cli::bisect::BisectArgs;
    use crate::core::settings::SETTINGS;
    use clap::{Args, FromArgMatches};

    /// Each flag is its table entry: the flag's name and `given` pair the same setting, so a
    /// value reaches the axis its flag names.
    #[test]
    fn the_flags_are_the_table() {
        let bisect = BisectArgs::augment_args(clap::Command::new("bisect"));
        for (i, s) in SETTINGS.iter().enumerate() {
            let mut argv = vec!["bisect", "--good", "a", "--bad", "b"];
            let v = s.default.unwrap_or("on");
            argv.extend([s.flag, v]);
            let b = bisect
                .clone()
                .try_get_matches_from(&argv)
                .and_then(|m| BisectArgs::from_arg_matches(&m))
                .unwrap_or_else(|e| panic!("{}: {e}", s.flag));
            let given = b.cfg.settings.given();
            assert_eq!(given.len(), 1, "{}", s.flag);
            assert_eq!(given[0].0, &SETTINGS[i], "{}", s.flag);
            assert_eq!(given[0].1, v);
        }
        let declared = bisect
            .get_arguments()
            .filter(|a| a.get_help_heading() == Some(super::super::args::heading::DECODE))
            .count();
        assert_eq!(declared, SETTINGS.len());
    }
}
