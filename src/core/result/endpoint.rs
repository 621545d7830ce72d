//! What a bisection's answer hinges on, and the advice when it is an endpoint that contradicts
//! the question: which one, what it showed, what ran there, and what to try. "Check the
//! endpoints" alone sends a user who met a fault that needs many reuses back to the same short
//! run; naming the run's length and the heavier runs at hand does not. Pure over the result, so
//! the run that writes it and the report that reads an older one say the same.

use crate::core::outcome::Verdict;
use crate::core::result::{BisectResult, Conclusion, EndpointAdvice, FROM_REPRO_ARG};
use crate::core::search::Endpoint;

impl BisectResult {
    /// The commit the answer hinges on: the culprit, the last suspect, or the wrong endpoint.
    pub fn target(&self) -> Option<&str> {
        match &self.conclusion {
            Conclusion::Found { .. } | Conclusion::Ambiguous { .. } => {
                self.candidates.last().map(String::as_str)
            }
            Conclusion::BadEndpoint {
                which: Endpoint::Good,
                ..
            } => Some(&self.range.good),
            Conclusion::BadEndpoint {
                which: Endpoint::Bad,
                ..
            } => Some(&self.range.bad),
        }
    }

    /// The result's own advice, or the advice rebuilt from it (results written before it
    /// existed).
    pub fn endpoint_advice(&self) -> Option<EndpointAdvice> {
        self.endpoint.clone().or_else(|| advice(self))
    }
}

/// The advice for a bisection that stopped at a wrong endpoint (`None` otherwise).
pub(super) fn advice(b: &BisectResult) -> Option<EndpointAdvice> {
    let Conclusion::BadEndpoint { which, got } = b.conclusion else {
        return None;
    };
    let (flag, sha, claimed) = match which {
        Endpoint::Good => ("--good", &b.range.good, "old"),
        Endpoint::Bad => ("--bad", &b.range.bad, "new"),
    };
    let seen = b
        .probes
        .iter()
        .rev()
        .find(|p| p.verdict == got)
        .map(|p| match &p.signature {
            Some(s) => format!("{}: {s}", p.outcome),
            None => p.outcome.to_string(),
        })
        .unwrap_or_else(|| "?".into());
    let what = match got {
        Verdict::Skip => "could not be tested".to_string(),
        Verdict::Old => "shows the old behaviour".to_string(),
        Verdict::New => "shows the new behaviour".to_string(),
    };
    let problem = format!(
        "{flag} {} {what} ({seen}), but it must show the {claimed} behaviour",
        &sha[..sha.len().min(12)]
    );
    Some(EndpointAdvice {
        problem,
        ran: ran(b),
        next: next(b, which, got),
    })
}

/// What every probe ran: the reproducer with its extent, or the script; the configuration.
fn ran(b: &BisectResult) -> String {
    let probe = match &b.reproducer {
        Some(r) => format!("{} ({}; arguments: {})", r.command(), r.extent(), r.source),
        None => "the --script probe (see Reproduce)".to_string(),
    };
    match (&b.configuration, &b.reproducer) {
        (Some(c), _) => format!(
            "{probe}, configuration {} ({}) in {}",
            c.id.as_deref().unwrap_or("from flags"),
            c.settings.join(" "),
            c.image.as_deref().unwrap_or("the host")
        ),
        // No configuration flag: the bundled reproducer's default, the CPU on the host.
        (None, Some(_)) => format!("{probe}, the default configuration (backend=cpu) on the host"),
        (None, None) => probe,
    }
}

/// What to try, most likely first for this contradiction.
fn next(b: &BisectResult, which: Endpoint, got: Verdict) -> Vec<String> {
    let mut v = Vec::new();
    let repeat = "an intermittent fault: --repeat N (N runs per commit) or --confidence 0.95 (runs until the answer holds)".to_string();
    match (which, got) {
        (_, Verdict::Skip) => {
            v.push("read the probe's log (its reason is above); a build or setup problem of this commit is not the question's".into());
        }
        (Endpoint::Bad, _) => {
            if let Some(r) = &b.reproducer {
                let more: Vec<String> = r
                    .with_more_steps(4)
                    .iter()
                    .map(|a| format!("--repro-arg={a}"))
                    .collect();
                if r.source == FROM_REPRO_ARG {
                    v.push(format!(
                        "the default run: no --repro-arg ({})",
                        r.default_run()
                    ));
                }
                v.push(format!(
                    "a longer run: {} (4x the steps; the other arguments stay)",
                    more.join(" ")
                ));
            }
            let other = b
                .configuration
                .as_ref()
                .and_then(|c| c.id.as_deref())
                .map(|id| format!(" than {id}"))
                .unwrap_or_default();
            let presets = match &b.reproducer {
                Some(r) if r.is_decode() => "",
                _ => "; the decode-reuse ones run the pattern of the upstream report",
            };
            v.push(format!(
                "another configuration{other}: --config ID (setrows-bisect matrix --list lists them{presets})"
            ));
            v.push(repeat);
        }
        (Endpoint::Good, _) => {
            v.push("an older --good, from before the fault appeared".into());
            v.push("a failure that is another bug: --match REGEX (only its signature counts) or --regress crash".into());
            v.push(repeat);
        }
    }
    v.push("check the endpoints, --regress and --match".into());
    v
}
