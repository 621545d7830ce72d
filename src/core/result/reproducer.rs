//! What a bisection's probes ran, and what a contradicted endpoint means for the next try.
//!
//! A pass only says as much as the run that produced it: a fault "after many reuses" of a cached
//! decode graph does not show in a short replay, and an endpoint that contradicts the question is
//! most often that. So the result names the reproducer's arguments (how many steps, how often
//! checked), and a wrong endpoint comes with what ran there and what to try.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The replay's own defaults (`repro-kernels/setrows-replay`), for arguments that leave them.
const REPLAY_DEFAULT_STEPS: &str = "2000";
const REPLAY_DEFAULT_CHECK_EVERY: &str = "1";

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

    /// `setrows-replay --mode reuse --steps 100000 ...`.
    pub fn command(&self) -> String {
        std::iter::once(self.program.as_str())
            .chain(self.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// `100000 steps, checked every step`: what a pass covered.
    pub fn extent(&self) -> String {
        let steps = match (self.arg("--steps"), self.arg("--wraps")) {
            (_, Some(w)) => format!("{w} wraps of the ring"),
            (Some(s), None) => format!("{s} steps"),
            (None, None) => format!("{REPLAY_DEFAULT_STEPS} steps (the replay's default)"),
        };
        let every = self
            .arg("--check-every")
            .unwrap_or(REPLAY_DEFAULT_CHECK_EVERY);
        let checked = if every == "1" {
            "checked every step".to_string()
        } else {
            format!("checked every {every} steps")
        };
        format!("{steps}, {checked}")
    }

    /// The arguments with `--steps` multiplied by `factor` (appended when absent): the longer
    /// run to suggest. `--repro-arg` replaces the whole list, so the suggestion is all of it.
    pub fn with_more_steps(&self, factor: u64) -> Vec<String> {
        let now = self
            .arg("--steps")
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(2000);
        let more = now.saturating_mul(factor).to_string();
        let mut args = self.args.clone();
        match args.iter().rposition(|a| a == "--steps") {
            Some(i) if i + 1 < args.len() => args[i + 1] = more,
            _ => args.extend(["--steps".to_string(), more]),
        }
        args
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
        assert_eq!(
            r.with_more_steps(4),
            ["--mode", "reuse", "--steps", "400000", "--check-every", "1"]
        );
        assert_eq!(info(&[]).with_more_steps(4), ["--steps", "8000"]);
        assert_eq!(
            r.command(),
            "setrows-replay --mode reuse --steps 100000 --check-every 1"
        );
    }
}
