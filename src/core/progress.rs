//! Progress as events: what a running bisection tells whoever watches it, as typed data.
//!
//! `run` emits [`Event`]s into a [`Sink`] it is handed and prints nothing; the command line
//! renders them (`cli::progress`: a bar on a terminal, plain lines otherwise, JSON lines on
//! request). The arithmetic a renderer needs is here, pure and tested: what a build's own
//! status line says ([`build_count`]), when a plain log shows the next one ([`Throttle`]), and
//! the time left ([`estimate`]). Seconds come in as numbers: this module reads no clock.

use crate::core::outcome::{Outcome, Verdict};
use serde::Serialize;

/// Where a probe is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Checkout,
    Build,
    /// The build's own count, read from its output while it runs.
    BuildStep(BuildCount),
    Test,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Checkout => "checkout",
            Phase::Build | Phase::BuildStep(_) => "build",
            Phase::Test => "test",
        }
    }
}

/// Which build tool printed a count: Ninja's `[n/N]` or CMake's Makefiles' `[ NN%]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BuildTool {
    Ninja,
    Make,
}

/// How far a build is: `done` of `total` steps (Ninja), or `done` percent of 100 (Make).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BuildCount {
    pub done: u32,
    pub total: u32,
    pub tool: BuildTool,
}

impl BuildCount {
    /// Whole percent done (0..=100).
    pub fn percent(&self) -> u32 {
        if self.total == 0 {
            return 0;
        }
        ((u64::from(self.done.min(self.total)) * 100) / u64::from(self.total)) as u32
    }
}

/// The count a build tool's status line starts with: Ninja's `[3/10] Building C object ...`
/// (its default `NINJA_STATUS`, also under `cmake --build`) or a CMake Makefile's
/// `[ 45%] Building C object ...`. Anything else, including a count of zero steps, is `None`.
pub fn build_count(line: &str) -> Option<BuildCount> {
    let rest = line.trim_start().strip_prefix('[')?;
    let (inside, _) = rest.split_once(']')?;
    if let Some((done, total)) = inside.split_once('/') {
        let done: u32 = done.trim().parse().ok()?;
        let total: u32 = total.trim().parse().ok()?;
        return (total > 0 && done <= total).then_some(BuildCount {
            done,
            total,
            tool: BuildTool::Ninja,
        });
    }
    let pct: u32 = inside.strip_suffix('%')?.trim().parse().ok()?;
    (pct <= 100).then_some(BuildCount {
        done: pct,
        total: 100,
        tool: BuildTool::Make,
    })
}

/// When a log shows a build's next count: the first one, the last one (`n/n`), each new tenth
/// of the build, and otherwise at most one every `every_s` seconds. A bar needs none of this.
#[derive(Debug, Clone, Default)]
pub struct Throttle {
    shown: Option<(u32, f64)>,
}

/// Seconds between two plain build-progress lines inside the same tenth of a build.
pub const THROTTLE_S: f64 = 10.0;

impl Throttle {
    /// Whether `count`, seen `at_s` seconds into the run, is shown; remembers it if so.
    pub fn admit(&mut self, count: BuildCount, at_s: f64) -> bool {
        let pct = count.percent();
        let show = match self.shown {
            None => true,
            Some((last_pct, last_s)) => {
                (pct == 100 && last_pct < 100)
                    || pct / 10 > last_pct / 10
                    || (pct != last_pct && at_s - last_s >= THROTTLE_S)
            }
        };
        if show {
            self.shown = Some((pct, at_s));
        }
        show
    }
}

/// What is left of a bisection: probes, and wall time when a probe's cost is known.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    /// Probes an exact search still needs in the worst case (`Search::steps_left`).
    pub probes_left: u32,
    /// Rounds those take on `slots` job slots (one round = `slots` probes at once).
    pub rounds_left: u32,
    /// `rounds_left` times the typical probe's measured cost; `None` before any was measured.
    pub seconds_left: Option<f64>,
}

/// Rounds `probes_left` bisection probes take when each round probes `slots` commits at once:
/// a round of K probes cuts the range K+1 ways (log2(K+1) halvings), one slot is one probe.
pub fn rounds_left(probes_left: u32, slots: usize) -> u32 {
    let halvings = ((slots.max(1) + 1) as f64).log2();
    (f64::from(probes_left) / halvings - 1e-9).ceil().max(0.0) as u32
}

/// The typical cost of one probe from the durations measured so far (seconds): their median,
/// so one full first build among incremental ones does not dominate once there are three.
pub fn typical_cost(measured: &[f64]) -> Option<f64> {
    let mut m: Vec<f64> = measured
        .iter()
        .copied()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .collect();
    if m.is_empty() {
        return None;
    }
    m.sort_by(f64::total_cmp);
    let mid = m.len() / 2;
    Some(if m.len() % 2 == 1 {
        m[mid]
    } else {
        (m[mid - 1] + m[mid]) / 2.0
    })
}

/// The estimate after a verdict: `probes_left` from the search, taking `rounds` rounds
/// ([`rounds_left`]; a `--confidence` session counts its waves), `measured` the durations of
/// the probes seen so far (run now, or stored with the time they took when they ran).
pub fn estimate(probes_left: u32, rounds: u32, measured: &[f64]) -> Estimate {
    Estimate {
        probes_left,
        rounds_left: rounds,
        seconds_left: typical_cost(measured).map(|c| c * f64::from(rounds)),
    }
}

/// One thing worth telling about a running bisection (or matrix, or validation). Serialized
/// as one JSON object per event, `"event"` naming the variant (`--progress json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The bisection starts: its size and where it keeps things.
    Started {
        commits: usize,
        candidates: usize,
        work_dir: String,
        journal: String,
    },
    /// Build-aware grouping joined candidates whose differences the build never reads.
    Grouped { candidates: usize, groups: usize },
    /// A round of the search begins: worst-case probes left, probes seen so far.
    Round {
        range: String,
        steps_left: u32,
        probes_done: usize,
    },
    /// Slot `slot` starts probing `sha` (its checkout).
    ProbeStarted {
        slot: usize,
        sha: String,
        title: String,
    },
    /// The probe's build step starts.
    Building {
        slot: usize,
        sha: String,
        title: String,
    },
    /// The build's own count (Ninja's `[n/N]`, Make's `[ NN%]`), as its output shows it.
    BuildProgress {
        slot: usize,
        sha: String,
        #[serde(flatten)]
        count: BuildCount,
    },
    /// The build succeeded in `seconds`; the test comes next.
    Built {
        slot: usize,
        sha: String,
        seconds: f64,
    },
    /// The probe's test starts.
    Testing {
        slot: usize,
        sha: String,
        title: String,
    },
    /// One run of a candidate, judged: run now, or read from the store (`cached`). A skip (a
    /// failed build, an untestable commit) is a verdict event whose verdict is `skip`.
    Verdict {
        sha: String,
        title: String,
        outcome: Outcome,
        verdict: Verdict,
        duration_s: f64,
        cached: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        reused_from: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// What is left after a verdict.
    Estimate(Estimate),
    /// Our machinery failed on `sha`; the probe is retried up to `attempts` times.
    Retry {
        sha: String,
        attempt: u32,
        attempts: u32,
        message: String,
    },
    /// A matrix cell (`position` of all, configuration `id`) or a `bisect-config` value
    /// (`verdict`) done: what `label` (the configuration, or axis=value) showed at `sha`.
    Cell {
        #[serde(skip_serializing_if = "Option::is_none")]
        position: Option<(usize, usize)>,
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        label: String,
        sha: String,
        outcome: Outcome,
        #[serde(skip_serializing_if = "Option::is_none")]
        verdict: Option<Verdict>,
        #[serde(skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
        cached: bool,
    },
    /// The walk has its answer and only the endpoint check it rests on is left: the answer is
    /// told now, with its condition, then `checking` is probed (about `check_s` seconds when a
    /// probe's cost is known). `first_bad` holds one commit, or the N a skip leaves.
    Answer {
        first_bad: Vec<String>,
        title: String,
        checking: Vec<crate::core::search::Endpoint>,
        elapsed_s: f64,
        #[serde(skip_serializing_if = "Option::is_none")]
        check_s: Option<f64>,
    },
    /// The endpoint check contradicted the answer told before it: that answer does not hold.
    AnswerWithdrawn {
        which: crate::core::search::Endpoint,
        got: Verdict,
    },
    /// Anything else worth a line: a detected layout, validation's runs, a warning.
    Note { text: String },
    /// Nothing more will come (bars are cleared).
    Finished,
}

/// Where events go. `emit` must not block for long: it runs on the probing threads.
pub trait Sink: Sync {
    fn emit(&self, event: Event);
}

/// Drops every event (library callers and tests that watch nothing).
pub struct Quiet;

impl Sink for Quiet {
    fn emit(&self, _: Event) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ninja(done: u32, total: u32) -> BuildCount {
        BuildCount {
            done,
            total,
            tool: BuildTool::Ninja,
        }
    }

    #[test]
    fn reads_ninja_and_make_status_lines() {
        assert_eq!(
            build_count("[3/10] Building C object CMakeFiles/x.dir/x.c.o"),
            Some(ninja(3, 10))
        );
        assert_eq!(
            build_count("  [120/977] Linking CXX shared library"),
            Some(ninja(120, 977))
        );
        assert_eq!(
            build_count("[ 45%] Building C object src/CMakeFiles/ggml.dir/ggml.c.o"),
            Some(BuildCount {
                done: 45,
                total: 100,
                tool: BuildTool::Make
            })
        );
        assert_eq!(
            build_count("[100%] Built target ggml").map(|c| c.percent()),
            Some(100)
        );
        for no in [
            "",
            "-- Configuring done",
            "[0/0] nothing",
            "[11/10] more than all",
            "[x/10] words",
            "[ 145%] no",
            "error: [3/10] not at the start",
            "[3/10",
        ] {
            assert_eq!(build_count(no), None, "{no:?}");
        }
    }

    #[test]
    fn throttle_shows_first_last_each_tenth_and_every_ten_seconds() {
        let mut t = Throttle::default();
        assert!(t.admit(ninja(1, 1000), 0.0), "first");
        assert!(!t.admit(ninja(50, 1000), 1.0), "same tenth, soon");
        assert!(t.admit(ninja(100, 1000), 2.0), "a new tenth");
        assert!(!t.admit(ninja(150, 1000), 11.0), "same tenth, 9 s later");
        assert!(t.admit(ninja(160, 1000), 12.0), "same tenth, 10 s later");
        assert!(!t.admit(ninja(160, 1000), 40.0), "no change is never news");
        assert!(t.admit(ninja(1000, 1000), 41.0), "the end");
        assert!(!t.admit(ninja(1000, 1000), 60.0), "the end once");
        // A ten-step build shows every step: each is a new tenth.
        let mut t = Throttle::default();
        assert!((1..=10).all(|n| t.admit(ninja(n, 10), 0.0)));
    }

    #[test]
    fn rounds_left_divides_by_the_halvings_a_round_makes() {
        assert_eq!(rounds_left(0, 1), 0);
        assert_eq!(rounds_left(7, 1), 7);
        assert_eq!(rounds_left(7, 0), 7, "no slot counts as one");
        // Three slots cut four ways: two halvings a round.
        assert_eq!(rounds_left(8, 3), 4);
        assert_eq!(rounds_left(9, 3), 5);
        // Two slots: log2(3) = 1.58 halvings a round.
        assert_eq!(rounds_left(8, 2), 6);
    }

    #[test]
    fn typical_cost_is_the_median_of_what_was_measured() {
        assert_eq!(typical_cost(&[]), None);
        assert_eq!(typical_cost(&[f64::NAN, -1.0]), None);
        assert_eq!(typical_cost(&[600.0]), Some(600.0));
        assert_eq!(typical_cost(&[600.0, 40.0]), Some(320.0));
        // A full first build among incremental ones.
        assert_eq!(typical_cost(&[600.0, 40.0, 60.0]), Some(60.0));
    }

    #[test]
    fn estimate_is_rounds_times_the_typical_probe() {
        assert_eq!(
            estimate(5, rounds_left(5, 1), &[120.0, 60.0, 90.0]),
            Estimate {
                probes_left: 5,
                rounds_left: 5,
                seconds_left: Some(450.0)
            }
        );
        assert_eq!(estimate(5, 1, &[]).seconds_left, None);
        assert_eq!(
            estimate(8, rounds_left(8, 3), &[30.0]).seconds_left,
            Some(120.0)
        );
        assert_eq!(estimate(0, 0, &[30.0]).seconds_left, Some(0.0));
    }

    #[test]
    fn events_serialize_as_one_tagged_object() {
        let e = Event::BuildProgress {
            slot: 0,
            sha: "abc".into(),
            count: ninja(3, 10),
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"event": "build_progress", "slot": 0, "sha": "abc",
                "done": 3, "total": 10, "tool": "ninja"})
        );
        let v = serde_json::to_value(Event::Estimate(estimate(4, 4, &[30.0]))).unwrap();
        assert_eq!(v["event"], "estimate");
        assert_eq!(v["probes_left"], 4);
        assert_eq!(v["seconds_left"], 120.0);
    }
}
