//! The bisection as a picture: every probed commit in range order (good endpoint first), with
//! the probes that ran it, its verdict and the answer marked. Mermaid's `gitGraph` draws it in
//! the comment and the job summary (commits on a line, crossed when new, highlighted when the
//! answer); the terminal gets the same picture as text, plus a scale bar that shows where each
//! probe landed in the range.

use super::icon;
use crate::core::outcome::{Outcome, Verdict};
use crate::core::result::{BisectResult, Conclusion};

/// One probed position of the range and the runs it got.
struct Point {
    index: usize,
    sha: String,
    /// (probe number from 1, outcome, verdict), in probe order.
    runs: Vec<(usize, Outcome, Verdict)>,
    /// The commit whose byte-identical artifacts answered a run here: the test never ran on
    /// this commit, which a reader weighing the answer needs to see next to the verdict.
    reused: Option<String>,
}

fn points(b: &BisectResult) -> Option<Vec<Point>> {
    let mut pts: Vec<Point> = Vec::new();
    for (n, p) in b.probes.iter().enumerate() {
        let index = p.candidate?;
        match pts.iter_mut().find(|q| q.index == index) {
            Some(q) => {
                q.runs.push((n + 1, p.outcome, p.verdict));
                q.reused = p.reused_from.clone().or(q.reused.take());
            }
            None => pts.push(Point {
                index,
                sha: p.sha.clone(),
                runs: vec![(n + 1, p.outcome, p.verdict)],
                reused: p.reused_from.clone(),
            }),
        }
    }
    pts.sort_by_key(|p| p.index);
    (!pts.is_empty()).then_some(pts)
}

/// What decided a position: the first new run if any (one new run decides new), else the last.
fn decided(p: &Point) -> (Outcome, Verdict) {
    p.runs
        .iter()
        .find(|r| r.2 == Verdict::New)
        .or(p.runs.last())
        .map(|r| (r.1, r.2))
        .unwrap_or((Outcome::Pass, Verdict::Old))
}

fn probes_list(p: &Point) -> String {
    let ns: Vec<String> = p.runs.iter().map(|r| r.0.to_string()).collect();
    format!(
        "probe{} {}",
        if ns.len() > 1 { "s" } else { "" },
        ns.join(",")
    )
}

/// The short mark of a position whose test was skipped (same artifacts as `reused`).
fn reused_mark(p: &Point) -> String {
    p.reused
        .as_deref()
        .map(|sha| format!(" same artifacts as {}", hex(sha, 10)))
        .unwrap_or_default()
}

fn role(b: &BisectResult, p: &Point) -> Option<&'static str> {
    let last = b.range.candidates.saturating_sub(1);
    match &b.conclusion {
        Conclusion::Found { index } if *index == p.index => Some("answer"),
        Conclusion::Ambiguous { indices } if indices.contains(&p.index) => Some("suspect"),
        _ if p.index == 0 => Some("good"),
        _ if p.index == last => Some("bad"),
        _ => None,
    }
}

/// Untrusted words as they may appear inside a mermaid string: letters, digits, spaces.
fn plain(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == ' ')
        .take(40)
        .collect()
}

fn hex(sha: &str, n: usize) -> String {
    sha.chars()
        .filter(char::is_ascii_hexdigit)
        .take(n)
        .collect()
}

/// The mermaid source and the plain-text drawing, or `None` when the result does not say where
/// its probes were (results written before positions were recorded).
pub fn render(b: &BisectResult) -> Option<(String, String)> {
    let pts = points(b)?;
    Some((mermaid(b, &pts), text(b, &pts)))
}

fn mermaid(b: &BisectResult, pts: &[Point]) -> String {
    let mut m = String::from(
        "%%{init: {'gitGraph': {'showBranches': false, 'rotateCommitLabel': true}}}%%\ngitGraph\n",
    );
    let mut prev: Option<usize> = None;
    for p in pts {
        if let Some(q) = prev {
            let gap = p.index - q - 1;
            if gap > 0 {
                m.push_str(&format!(
                    "  commit id: \"{gap} not probed ({}-{})\" type: NORMAL\n",
                    q + 1,
                    p.index - 1
                ));
            }
        }
        prev = Some(p.index);
        let (outcome, verdict) = decided(p);
        let role = role(b, p);
        let kind = match (role, verdict) {
            (Some("answer"), _) | (Some("suspect"), _) => "HIGHLIGHT",
            (_, Verdict::New) => "REVERSE",
            _ => "NORMAL",
        };
        let label = match role {
            Some("answer") => format!(" {}", plain(&b.term)),
            Some(r) => format!(" {r}"),
            None => String::new(),
        };
        m.push_str(&format!(
            "  commit id: \"{}{label}\" type: {kind} tag: \"{} {} {}{}\"\n",
            hex(&p.sha, 10),
            probes_list(p),
            icon(outcome),
            verdict.as_str(),
            reused_mark(p)
        ));
    }
    m
}

const BAR: usize = 48;

fn text(b: &BisectResult, pts: &[Point]) -> String {
    let n = b.range.candidates.max(1);
    // scale bar: where in the range each probe landed (the probe number, last one wins)
    let mut bar = vec!['-'; BAR];
    for p in pts {
        let col = if n <= 1 {
            0
        } else {
            p.index * (BAR - 1) / (n - 1)
        };
        let first = p.runs[0].0;
        bar[col] = if first < 10 {
            char::from_digit(first as u32, 10).unwrap_or('*')
        } else {
            '*'
        };
    }
    let mut t = format!(
        "good |{}| bad   (digits: probe number, * for 10 and later)\n\n",
        bar.into_iter().collect::<String>()
    );
    let width = (n.saturating_sub(1)).to_string().len();
    let mut prev: Option<usize> = None;
    for p in pts {
        if let Some(q) = prev {
            let gap = p.index - q - 1;
            if gap > 0 {
                t.push_str(&format!(
                    "{:w$}   ·  {gap} candidate(s) not probed\n",
                    "",
                    w = width + 2
                ));
            }
        }
        prev = Some(p.index);
        let (outcome, verdict) = decided(p);
        let role = match role(b, p) {
            Some("answer") => format!("  <- {}", plain(&b.term)),
            Some(r) => format!("  ({r})"),
            None => String::new(),
        };
        t.push_str(&format!(
            "[{:>width$}] {}  {} {:<4} {:<12} {}{role}{}\n",
            p.index,
            hex(&p.sha, 10),
            icon(outcome),
            verdict.as_str(),
            outcome.as_str(),
            probes_list(p),
            p.reused
                .as_deref()
                .map(|sha| format!("  (test skipped: artifacts = {})", hex(sha, 10)))
                .unwrap_or_default(),
        ));
    }
    t
}
