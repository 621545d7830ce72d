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
    let shown = b.probes.iter().rev().find(|p| p.verdict == got);
    let seen = shown
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
        next: next(b, which, got, shown.and_then(|p| p.signature.as_deref())),
    })
}

/// What every probe ran: the reproducer with its extent, or the script; the configuration.
fn ran(b: &BisectResult) -> String {
    let probe = match &b.reproducer {
        // One line: a program run once per op (test-backend-ops) is its runs joined.
        Some(r) => format!(
            "{} ({}; arguments: {})",
            r.command().replace('\n', "; "),
            r.extent(),
            r.source
        ),
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
fn next(b: &BisectResult, which: Endpoint, got: Verdict, signature: Option<&str>) -> Vec<String> {
    let mut v = Vec::new();
    let repeat = "an intermittent fault: --repeat N (N runs per commit) or --confidence 0.95 (runs until the answer holds)".to_string();
    match (which, got) {
        (_, Verdict::Skip) => {
            v.push("read the probe's log (its reason is above); a build or setup problem of this commit is not the question's".into());
        }
        (Endpoint::Bad, _) => {
            // A longer run is advised in the program's own arguments, for a kind that takes
            // them (`Kind::takes_repro_args`): test-backend-ops and ctest refuse --repro-arg.
            let takes_args =
                |r: &&super::ReproducerInfo| r.kind().is_none_or(|k| k.def().takes_repro_args());
            if let Some(r) = b.reproducer.as_ref().filter(takes_args) {
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
            v.extend(signature.and_then(looser_tolerance));
            v.push("an older --good, from before the fault appeared".into());
            v.push("a failure that is another bug: --match REGEX (only its signature counts) or --regress crash".into());
            v.push(repeat);
        }
    }
    v.push("check the endpoints, --regress and --match".into());
    v
}

/// Below this NMSE a decode probe's logits mismatch reads as two backends' rounding drifting
/// apart, not as a wrong kernel: the faults bisected on real trees were 0.4 to 1.5 (cases 3 and
/// 18 on the H200), the good ends' drift 1.4e-4 (case 18's, against the CPU's 1e-4).
const DRIFT_NMSE: f64 = 1e-2;

/// A `--good` whose decode probe missed a reference's tolerance by a little: the option that
/// sets that tolerance, at the next power of ten above what it showed. `None` for a bit-exact
/// reference (`same`) or an error too large to be drift.
fn looser_tolerance(signature: &str) -> Option<String> {
    let field = |k: &str| signature.split_whitespace().find_map(|w| w.strip_prefix(k));
    let option = match field("reference=")? {
        "cpu" => "--cpu-nmse",
        "path" => "--path-nmse",
        "good" => "--good-nmse",
        _ => return None,
    };
    let nmse: f64 = field("nmse=")?.parse().ok()?;
    if !(nmse > 0.0 && nmse < DRIFT_NMSE) {
        return None;
    }
    let looser = format!("1e{}", nmse.log10().floor() as i32 + 1);
    Some(format!(
        "a tolerance above the good end's drift (nmse {nmse} against {option}'s): --repro-arg={option} --repro-arg={looser}, \
         if the bad end's probes are far above it (their lines name their nmse)"
    ))
}

#[cfg(test)]
mod tests {
    use super::looser_tolerance;

    #[test]
    fn a_good_end_that_drifted_past_a_tolerance_is_told_which_option_sets_it() {
        // case 18's good end on the H200: CUDA flash attention against the CPU
        let sig = "token=3272 pos=3272 kv_cell=200 reference=cpu what=logits index=0 expected=0.600387454 got=0.622042894 nmse=0.000142";
        let a = looser_tolerance(sig).unwrap();
        assert!(
            a.contains("--repro-arg=--cpu-nmse --repro-arg=1e-3") && a.contains("nmse 0.000142"),
            "{a}"
        );
        let path = sig.replace("reference=cpu", "reference=path");
        assert!(looser_tolerance(&path).unwrap().contains("--path-nmse"));
        // a wrong kernel, a bit-exact reference, or no nmse: no such advice
        assert_eq!(
            looser_tolerance(&sig.replace("nmse=0.000142", "nmse=0.841")),
            None
        );
        assert_eq!(
            looser_tolerance(&sig.replace("reference=cpu", "reference=same")),
            None
        );
        assert_eq!(
            looser_tolerance("SETROWS_MISMATCH row=3 expected=1 got=2"),
            None
        );
    }
}
