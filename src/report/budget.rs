//! An undecided `--confidence` bisection, said as what it is: the run budget was spent, here is
//! where the first bad commit most likely is, and roughly what settling it would cost. (Saying
//! "could not be tested" here would send people hunting for build failures that never happened.)

use super::escape;
use crate::core::result::BisectResult;

/// The paragraph and list for a bisection that `--max-runs` stopped; empty when it did not.
pub fn render(b: &BisectResult, term: &str, link: &dyn Fn(&str, usize) -> String) -> String {
    let Some(g) = &b.budget else {
        return String::new();
    };
    let mut md = format!(
        "The run budget was spent (`--max-runs {}`: {} runs) before the answer held at {:.1}% \
         confidence. The {term} is most likely one of these (posterior probability{}):\n\n",
        g.max_runs,
        g.runs,
        100.0 * g.confidence,
        g.rate
            .map(|p| format!(
                "; the fault showed in about {:.0}% of runs of bad commits",
                100.0 * p
            ))
            .unwrap_or_default()
    );
    for c in &g.candidates {
        let title = b
            .info(&c.sha)
            .map(|i| format!(" {}", escape::inline_short(&i.title, 100)))
            .unwrap_or_default();
        md.push_str(&format!(
            "- {} {:.1}%{title}\n",
            link(&c.sha, 12),
            100.0 * c.probability
        ));
    }
    md.push('\n');
    if let Some(n) = g.more_runs {
        md.push_str(&format!(
            "About {n} more runs would likely settle it: re-run the same command with \
             `--max-runs {}` (every run so far is stored and reused).\n\n",
            g.runs + n
        ));
    }
    md
}
