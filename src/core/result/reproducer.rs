//! What a bisection's probes ran, and what a contradicted endpoint means for the next try.
//!
//! A pass only says as much as the run that produced it: a fault "after many reuses" of a cached
//! decode graph does not show in a short replay, and an endpoint that contradicts the question is
//! most often that. So the result names the reproducer's arguments (how many steps, how often
//! checked), and a wrong endpoint comes with what ran there and what to try.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The bundled decode probe's program name (`repro-kernels/decode-probe`): its arguments mean
/// tokens, not replay steps, and leave other defaults.
pub const DECODE_PROGRAM: &str = crate::core::kinds::decode::PROGRAM;

/// How a decode probe's command names the model the tool writes for it (`probe::decode`).
pub const DECODE_MODEL: &str = "MODEL.gguf";

/// What a bundled program does where its arguments say nothing: a pass is described by what ran,
/// and a decode run is neither 2000 steps nor checked "every step".
struct Defaults {
    steps: u64,
    unit: &'static str,
    whose: &'static str,
}

/// `repro-kernels/setrows-replay`'s defaults.
const REPLAY: Defaults = Defaults {
    steps: 2000,
    unit: "steps",
    whose: "the replay's default",
};
const REPLAY_DEFAULT_CHECK_EVERY: &str = "1";

/// `repro-kernels/decode-probe`'s defaults (`Args` there).
const DECODE: Defaults = Defaults {
    steps: 10_000,
    unit: "tokens",
    whose: "decode-probe's default",
};

/// `ReproducerInfo::source` when the user's `--repro-arg` gave the arguments.
pub const FROM_REPRO_ARG: &str = "--repro-arg";

/// The bundled reproducer of a bisection (absent for a `--script` probe).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReproducerInfo {
    /// `setrows-replay`.
    pub program: String,
    /// Its arguments, exactly as every probe passed them.
    pub args: Vec<String>,
    /// Where they came from: the default (the built-in matrix's decode-reuse parameters), the
    /// configuration, or `--repro-arg`.
    pub source: String,
    /// `K=V`: the environment every probe's test step had beyond the machine's (launch settings,
    /// `--launch-env`): a hand-run of `command` without it is not the run that was judged
    /// (`LLAMA_SET_ROWS=1` decides whether some llama.cpp trees reuse graphs at all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// CMake arguments every probe's build added to the tool's own (`--cmake-arg`, the
    /// configuration's): a sanitizer build, a backend switch.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub build_args: Vec<String>,
    /// The further runs of the program every probe made after the first (`args`), one
    /// argument list each: test-backend-ops runs once per op (`core::kinds::Kind::runs`, the
    /// lines the probe runs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more_runs: Vec<Vec<String>>,
}

impl ReproducerInfo {
    /// The value after `flag` in the arguments (the last one wins, as in the replay).
    pub fn arg(&self, flag: &str) -> Option<&str> {
        self.args
            .windows(2)
            .rev()
            .find(|w| w[0] == flag)
            .map(|w| w[1].as_str())
    }

    /// `[K=V ...] setrows-replay --mode reuse --steps 100000 ...`, quoted where a word needs it. The decode probe's `--model` is the
    /// tool's own file, added at every probe (`DECODE_MODEL` names it), not an argument to give
    /// (the plan says the tool writes it).
    /// One line a run: test-backend-ops' run of each op on its own line, as the probe ran them.
    pub fn command(&self) -> String {
        let model = if self.is_decode() {
            &["--model", DECODE_MODEL][..]
        } else {
            &[]
        };
        std::iter::once(&self.args)
            .chain(&self.more_runs)
            .map(|args| {
                let argv: Vec<&str> = std::iter::once(self.program.as_str())
                    .chain(model.iter().copied())
                    .chain(args.iter().map(String::as_str))
                    .collect();
                self.env
                    .iter()
                    .map(|kv| crate::core::shell::assignment(kv))
                    .chain(std::iter::once(crate::core::shell::line(&argv)))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn defaults(&self) -> &'static Defaults {
        if self.is_decode() {
            &DECODE
        } else {
            &REPLAY
        }
    }

    /// Whether the program is the decode probe (the advice names other runs for it).
    pub fn is_decode(&self) -> bool {
        self.program == DECODE_PROGRAM
    }

    /// The kind whose program this is (`None`: no kind runs it now).
    pub fn kind(&self) -> Option<crate::core::kinds::ProbeKind> {
        crate::core::kinds::ProbeKind::ALL
            .into_iter()
            .find(|k| k.def().program() == Some(self.program.as_str()))
    }

    /// What every probe ran, in words: its kind's (`Kind::ran`), else the bundled reproducer.
    pub fn what_ran(&self) -> &'static str {
        self.kind()
            .and_then(|k| k.def().ran())
            .map_or("the bundled reproducer", |(what, _)| what)
    }

    /// `100000 steps, checked every step`: what a pass covered.
    pub fn extent(&self) -> String {
        if let Some((_, extent)) = self.kind().and_then(|k| k.def().ran()) {
            return extent.into();
        }
        let d = self.defaults();
        let steps = match (self.arg("--steps"), self.arg("--wraps")) {
            (_, Some(w)) if !self.is_decode() => format!("{w} wraps of the ring"),
            (Some(s), _) => format!("{s} {}", d.unit),
            (None, _) => format!("{} {} ({})", d.steps, d.unit, d.whose),
        };
        format!("{steps}, {}", self.checked())
    }

    /// How often, and against what, a run compared its results.
    fn checked(&self) -> String {
        if self.is_decode() {
            return match (self.arg("--check"), self.arg("--cpu-reference")) {
                (Some("none"), _) => "unchecked (--check none)".to_string(),
                (_, Some("off")) => "every token checked against a decode without graph reuse".to_string(),
                _ => "every token checked against a decode without graph reuse (and the CPU, on a GPU)"
                    .to_string(),
            };
        }
        let every = self
            .arg("--check-every")
            .unwrap_or(REPLAY_DEFAULT_CHECK_EVERY);
        if every == "1" {
            "checked every step".to_string()
        } else {
            format!("checked every {every} steps")
        }
    }

    /// The arguments with `--steps` multiplied by `factor` (appended when absent): the longer
    /// run to suggest. `--repro-arg` replaces the whole list, so the suggestion is all of it.
    pub fn with_more_steps(&self, factor: u64) -> Vec<String> {
        let now = self
            .arg("--steps")
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(self.defaults().steps);
        // A `--repro-arg` adds to the run's arguments and replaces only the same option
        // (`core::config::options::merge`): the steps alone say it (`--wraps` gives way).
        vec![
            "--steps".to_string(),
            now.saturating_mul(factor).to_string(),
        ]
    }

    /// The run without `--repro-arg`, in words.
    pub fn default_run(&self) -> String {
        if self.is_decode() {
            ReproducerInfo {
                args: Vec::new(),
                ..self.clone()
            }
            .extent()
        } else {
            "the built-in matrix's decode-reuse pattern, a reused graph checked every step"
                .to_string()
        }
    }
}

/// Why an endpoint contradicts the question, what ran there, and what to try.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EndpointAdvice {
    /// `--bad 1234abcd shows the old behaviour (pass), but it must show the new behaviour`.
    pub problem: String,
    /// The probe that ran there: reproducer, steps, check interval, configuration.
    pub ran: String,
    /// What to try, most likely first.
    pub next: Vec<String>,
}

impl EndpointAdvice {
    /// One line for the terminal.
    pub fn line(&self) -> String {
        format!(
            "{}. Ran: {}. Try: {}",
            self.problem,
            self.ran,
            self.next.join("; ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(args: &[&str]) -> ReproducerInfo {
        ReproducerInfo {
            program: "setrows-replay".into(),
            args: args.iter().map(|s| s.to_string()).collect(),
            source: "test".into(),
            env: Vec::new(),
            build_args: Vec::new(),
            more_runs: Vec::new(),
        }
    }

    #[test]
    fn extent_reads_the_arguments_and_the_replays_defaults() {
        let r = info(&["--mode", "reuse", "--steps", "100000", "--check-every", "1"]);
        assert_eq!(r.extent(), "100000 steps, checked every step");
        assert_eq!(
            info(&["--check-every", "100"]).extent(),
            "2000 steps (the replay's default), checked every 100 steps"
        );
        assert_eq!(r.with_more_steps(4), ["--steps", "400000"]);
        assert_eq!(info(&[]).with_more_steps(4), ["--steps", "8000"]);
        let decode_set = ReproducerInfo {
            program: DECODE_PROGRAM.into(),
            ..info(&["--flash-attn", "on", "--steps", "600"])
        };
        assert_eq!(decode_set.with_more_steps(4), ["--steps", "2400"]);
        let decode = |args: &[&str]| ReproducerInfo {
            program: DECODE_PROGRAM.into(),
            ..info(args)
        };
        assert_eq!(
            decode(&["--steps", "600"]).command(),
            "decode-probe --model MODEL.gguf --steps 600"
        );
        let with_env = ReproducerInfo {
            env: vec![
                "LLAMA_SET_ROWS=1".into(),
                "ASAN_OPTIONS=detect_leaks=0 verbosity=1".into(),
            ],
            ..decode(&["--prompt", "a b"])
        };
        assert_eq!(
            with_env.command(),
            "LLAMA_SET_ROWS=1 ASAN_OPTIONS='detect_leaks=0 verbosity=1' decode-probe --model MODEL.gguf --prompt 'a b'"
        );
        assert_eq!(
            decode(&[]).extent(),
            "10000 tokens (decode-probe's default), every token checked against a decode without graph reuse (and the CPU, on a GPU)"
        );
        assert_eq!(
            decode(&["--steps", "600", "--check", "none"]).extent(),
            "600 tokens, unchecked (--check none)"
        );
        assert_eq!(decode(&[]).with_more_steps(4), ["--steps", "40000"]);
        assert_eq!(
            r.command(),
            "setrows-replay --mode reuse --steps 100000 --check-every 1"
        );
    }
}
