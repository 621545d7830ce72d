//! THE renderer of progress events (`core::progress::Event`): what a person or a workflow
//! watching stderr sees while probes run. run emits, this module words.
//!
//! `SETROWS_PROGRESS` chooses (read once per process):
//! - `auto` (default): an indicatif bar per job slot when stderr is a terminal (the build's
//!   own `[n/N]` as a bar, the estimate in the header), plain lines otherwise (CI logs, `2>file`);
//! - `bar`, `lines`: that, whatever stderr is;
//! - `json`: one JSON object per line and event (`{"event": "verdict", ..., "elapsed_s": 12.5}`),
//!   for workflows and scripts;
//! - `none`: nothing.
//!
//! Plain lines and JSON show a build's progress throttled (`core::progress::Throttle`: each new
//! tenth, else at most one every 10 s); the bar shows every count.

use crate::core::progress::{BuildTool, Estimate, Event, Sink, Throttle};
use crate::core::range::short_sha;
use crate::error::CliError;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The variable that picks the rendering.
pub const ENV: &str = "SETROWS_PROGRESS";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Bar,
    Lines,
    Json,
    Quiet,
}

impl Mode {
    /// `SETROWS_PROGRESS`'s value (unset or empty: `auto`); `terminal`: stderr is one.
    pub fn parse(value: Option<&str>, terminal: bool) -> Result<Mode, String> {
        match value.map(str::trim).unwrap_or("") {
            "" | "auto" if terminal => Ok(Mode::Bar),
            "" | "auto" | "lines" => Ok(Mode::Lines),
            "bar" => Ok(Mode::Bar),
            "json" => Ok(Mode::Json),
            "none" => Ok(Mode::Quiet),
            other => Err(format!(
                "{ENV}={other:?}: expected auto, bar, lines, json or none"
            )),
        }
    }
}

/// The process's renderer on stderr (`SETROWS_PROGRESS`), also receiving run's deep
/// warnings (`run::events::note`). A bad value is a usage error (exit 2).
pub fn stderr() -> anyhow::Result<&'static Renderer> {
    static RENDERER: OnceLock<Renderer> = OnceLock::new();
    let value = std::env::var(ENV).ok();
    let mode =
        Mode::parse(value.as_deref(), std::io::stderr().is_terminal()).map_err(CliError::usage)?;
    let r = RENDERER.get_or_init(|| Renderer::new(mode));
    crate::run::events::install_notes(r);
    Ok(r)
}

struct Bars {
    multi: MultiProgress,
    header: ProgressBar,
    slots: Vec<ProgressBar>,
}

#[derive(Default)]
struct State {
    bars: Option<Bars>,
    /// Per slot: the build count shown last (plain lines, JSON).
    throttles: HashMap<usize, Throttle>,
    /// The header's round line and the latest estimate (bars).
    round: String,
    estimate: Option<Estimate>,
}

pub struct Renderer {
    mode: Mode,
    started: Instant,
    state: Mutex<State>,
}

impl Sink for Renderer {
    fn emit(&self, event: Event) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        match self.mode {
            Mode::Quiet => {}
            Mode::Json => self.json(&event, &mut st),
            Mode::Lines => {
                if let Some(l) = self.line(&event, &mut st) {
                    errln!("{l}");
                }
            }
            Mode::Bar => self.bar(&event, &mut st),
        }
    }
}

impl Renderer {
    pub fn new(mode: Mode) -> Self {
        Renderer {
            mode,
            started: Instant::now(),
            state: Mutex::new(State::default()),
        }
    }

    fn elapsed(&self) -> String {
        let s = self.started.elapsed().as_secs();
        format!("[{:02}:{:02}]", s / 60, s % 60)
    }

    /// Whether a build count is shown (plain lines and JSON); other events always are.
    fn admit(&self, event: &Event, st: &mut State) -> bool {
        match event {
            Event::BuildProgress { slot, count, .. } => st
                .throttles
                .entry(*slot)
                .or_default()
                .admit(*count, self.started.elapsed().as_secs_f64()),
            Event::Building { slot, .. } => {
                st.throttles.remove(slot);
                true
            }
            _ => true,
        }
    }

    fn json(&self, event: &Event, st: &mut State) {
        if !self.admit(event, st) {
            return;
        }
        if let Ok(serde_json::Value::Object(mut m)) = serde_json::to_value(event) {
            m.insert(
                "elapsed_s".into(),
                serde_json::json!((self.started.elapsed().as_secs_f64() * 10.0).round() / 10.0),
            );
            errln!("{}", serde_json::Value::Object(m));
        }
    }

    /// The event as one plain line (`None`: nothing to show, or throttled).
    fn line(&self, event: &Event, st: &mut State) -> Option<String> {
        if !self.admit(event, st) {
            return None;
        }
        let t = self.elapsed();
        let job = |slot: &usize, what: &str, sha: &str, rest: &str| {
            format!("{t} job {slot}: {what:<8} {} {rest}", short_sha(sha))
        };
        Some(match event {
            Event::Started {
                commits,
                candidates,
                work_dir,
                journal,
            } => format!(
                "setrows-bisect: {commits} commits, {candidates} candidates; work dir {work_dir}; journal {journal}"
            ),
            Event::Note { text } => format!("setrows-bisect: {text}"),
            Event::Answer {
                first_bad,
                title,
                checking,
                check_s,
                ..
            } => format!("{t} {}", answer_text(first_bad, title, checking, *check_s)),
            Event::AnswerWithdrawn { which, got } => format!(
                "{t} ANSWER WITHDRAWN: {} showed {got}, so the answer above does not hold",
                endpoint_flag(*which)
            ),
            Event::Grouped { candidates, groups } => format!(
                "{t} build-aware: {candidates} candidates -> {groups} (commits that change nothing the build reads are joined)"
            ),
            Event::Round {
                range,
                steps_left,
                probes_done,
            } => format!("{t} {}", round_text(range, *steps_left, *probes_done)),
            Event::ProbeStarted { slot, sha, title } => job(slot, "checkout", sha, &cut(title)),
            Event::Building { slot, sha, title } => job(slot, "build", sha, &cut(title)),
            Event::BuildProgress { slot, sha, count } => {
                job(slot, "build", sha, &count_text(count))
            }
            Event::Built { slot, sha, seconds } => {
                job(slot, "built", sha, &format!("in {seconds:.1}s"))
            }
            Event::Testing { slot, sha, title } => job(slot, "test", sha, &cut(title)),
            Event::Verdict {
                sha,
                outcome,
                verdict,
                duration_s,
                cached,
                reused_from,
                signature,
                ..
            } => format!(
                "{t} {} {outcome} -> {verdict}{}  ({duration_s:.1}s){}",
                short_sha(sha),
                match (reused_from, cached) {
                    (Some(from), _) => format!(
                        " [test skipped: artifacts identical to {}]",
                        short_sha(from)
                    ),
                    (None, true) => " [stored]".to_string(),
                    (None, false) => String::new(),
                },
                signature
                    .as_deref()
                    .map(|s| format!("  {s}"))
                    .unwrap_or_default()
            ),
            Event::Estimate(e) => format!("{t} {}", estimate_text(e)),
            Event::Retry {
                sha,
                attempt,
                attempts,
                message,
            } => format!(
                "{t} {}: infrastructure error (attempt {attempt}/{attempts}): {message}",
                short_sha(sha)
            ),
            Event::Cell {
                position,
                id,
                label,
                sha,
                outcome,
                verdict,
                signature,
                cached,
            } => {
                let (pos, at) = match (position, id) {
                    (Some((i, n)), Some(id)) => {
                        (format!("[{i}/{n}] {id} "), format!(" @ {}", short_sha(sha)))
                    }
                    _ => (String::new(), String::new()),
                };
                format!(
                    "{t} {pos}{label}{at}: {outcome}{}{}{}",
                    verdict.map(|v| format!(" -> {v}")).unwrap_or_default(),
                    signature
                        .as_deref()
                        .map(|s| format!(" ({s})"))
                        .unwrap_or_default(),
                    if *cached { " [stored]" } else { "" }
                )
            }
            Event::Finished => {
                st.throttles.clear();
                return None;
            }
        })
    }

    fn bar(&self, event: &Event, st: &mut State) {
        let moves = matches!(
            event,
            Event::Round { .. }
                | Event::Estimate(_)
                | Event::ProbeStarted { .. }
                | Event::Building { .. }
                | Event::BuildProgress { .. }
                | Event::Testing { .. }
        );
        if !moves && st.bars.is_none() {
            // No bar is up (before the first probe, or after `Finished`: validation's notes,
            // the flaky assessment): a plain line, and no spinner left ticking over the report.
            if let Some(l) = self.line(event, st) {
                errln!("{l}");
            }
            return;
        }
        let bars = st.bars.get_or_insert_with(new_bars);
        let slot_bar = |bars: &mut Bars, slot: usize| -> ProgressBar {
            while bars.slots.len() <= slot {
                let b = bars.multi.add(ProgressBar::new_spinner());
                b.set_style(message_style());
                bars.slots.push(b);
            }
            bars.slots[slot].clone()
        };
        let phase = |bars: &mut Bars, slot: usize, what: &str, sha: &str, title: &str| {
            let b = slot_bar(bars, slot);
            b.set_style(message_style());
            b.set_message(format!("{what:<8} {} {}", short_sha(sha), cut(title)));
        };
        match event {
            Event::Round {
                range,
                steps_left,
                probes_done,
            } => {
                st.round = round_text(range, *steps_left, *probes_done);
                let msg = header_text(&st.round, st.estimate.as_ref());
                if let Some(b) = &st.bars {
                    b.header.set_message(msg);
                }
            }
            Event::Estimate(e) => {
                st.estimate = Some(*e);
                let msg = header_text(&st.round, st.estimate.as_ref());
                bars.header.set_message(msg);
            }
            Event::ProbeStarted { slot, sha, title } => phase(bars, *slot, "checkout", sha, title),
            Event::Building { slot, sha, title } => phase(bars, *slot, "build", sha, title),
            Event::Testing { slot, sha, title } => phase(bars, *slot, "test", sha, title),
            Event::BuildProgress { slot, sha, count } => {
                let b = slot_bar(bars, *slot);
                b.set_style(build_style());
                b.set_message(format!("build    {}", short_sha(sha)));
                b.set_length(u64::from(count.total));
                b.set_position(u64::from(count.done));
            }
            Event::Built { .. } => {}
            Event::Finished => {
                if let Some(b) = st.bars.take() {
                    for s in &b.slots {
                        s.finish_and_clear();
                    }
                    b.header.finish_and_clear();
                }
                st.round.clear();
                st.estimate = None;
            }
            other => {
                // Everything else stays in the scrollback, above the bars.
                if let Some(l) = self.line(other, st) {
                    if let Some(b) = &st.bars {
                        b.header.println(l);
                    }
                }
            }
        }
    }
}

/// `ANSWER: first bad commit abc1234 "title", if --good is good; checking --good now (about 40 s)`.
fn answer_text(
    first_bad: &[String],
    title: &str,
    checking: &[crate::core::search::Endpoint],
    check_s: Option<f64>,
) -> String {
    use crate::core::search::Endpoint;
    let what = match first_bad {
        [one] => format!("first bad commit {} \"{}\"", short_sha(one), cut(title)),
        many => format!(
            "the first bad commit is one of {}: {}",
            many.len(),
            many.iter()
                .map(|s| short_sha(s))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    };
    let condition = checking
        .iter()
        .map(|e| match e {
            Endpoint::Good => "--good is good",
            Endpoint::Bad => "--bad is bad",
        })
        .collect::<Vec<_>>()
        .join(" and ");
    let flags: Vec<&str> = checking.iter().map(|e| endpoint_flag(*e)).collect();
    let about = check_s
        .map(|s| format!(" (about {})", crate::report::secs(s)))
        .unwrap_or_default();
    format!(
        "ANSWER: {what}, if {condition}; checking {} now{about}",
        flags.join(" and ")
    )
}

fn endpoint_flag(e: crate::core::search::Endpoint) -> &'static str {
    match e {
        crate::core::search::Endpoint::Good => "--good",
        crate::core::search::Endpoint::Bad => "--bad",
    }
}

fn new_bars() -> Bars {
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
    let header = multi.add(ProgressBar::new_spinner());
    header.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    header.enable_steady_tick(Duration::from_millis(200));
    Bars {
        multi,
        header,
        slots: Vec::new(),
    }
}

fn message_style() -> ProgressStyle {
    ProgressStyle::with_template("  {msg}").unwrap_or_else(|_| ProgressStyle::default_spinner())
}

fn build_style() -> ProgressStyle {
    ProgressStyle::with_template("  {msg} [{bar:30}] {pos}/{len}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

fn cut(title: &str) -> String {
    title.chars().take(60).collect()
}

/// `steps_left` is the search's worst case, endpoints included, so a round never says 0
/// before a step; `~` because a skip, or a cut off-centre to save a rebuild, may add one.
fn round_text(range: &str, steps_left: u32, probes_done: usize) -> String {
    let left = match steps_left {
        0 => "no steps left".to_string(),
        1 => "~1 step left".to_string(),
        n => format!("~{n} steps left"),
    };
    format!("{range}: {left}, {probes_done} probes done")
}

fn header_text(round: &str, estimate: Option<&Estimate>) -> String {
    match estimate {
        Some(e) => format!("{round}; {}", estimate_text(e)),
        None => round.to_string(),
    }
}

/// `[3/10] 30%` (Ninja) or `45%` (Make).
fn count_text(c: &crate::core::progress::BuildCount) -> String {
    match c.tool {
        BuildTool::Ninja => format!("[{}/{}] {}%", c.done, c.total, c.percent()),
        BuildTool::Make => format!("{}%", c.percent()),
    }
}

/// `about 5 probes left, ~12 min` (`, in 3 rounds` when slots probe at once).
pub fn estimate_text(e: &Estimate) -> String {
    let n = e.probes_left;
    let mut s = format!("about {n} probe{} left", if n == 1 { "" } else { "s" });
    if e.rounds_left != e.probes_left {
        s.push_str(&format!(" in {} rounds", e.rounds_left));
    }
    if let Some(secs) = e.seconds_left {
        s.push_str(&format!(", ~{}", duration_text(secs)));
    }
    s
}

/// `40 s`, `12 min`, `2 h 5 min`.
fn duration_text(secs: f64) -> String {
    let secs = secs.max(0.0).round() as u64;
    if secs < 60 {
        return format!("{secs} s");
    }
    let min = (secs + 30) / 60;
    if min < 120 {
        return format!("{min} min");
    }
    format!("{} h {} min", min / 60, min % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_from_the_variable_and_the_terminal() {
        assert_eq!(Mode::parse(None, true), Ok(Mode::Bar));
        assert_eq!(Mode::parse(None, false), Ok(Mode::Lines));
        assert_eq!(Mode::parse(Some("auto"), false), Ok(Mode::Lines));
        assert_eq!(Mode::parse(Some("lines"), true), Ok(Mode::Lines));
        assert_eq!(Mode::parse(Some("json"), true), Ok(Mode::Json));
        assert_eq!(Mode::parse(Some("none"), false), Ok(Mode::Quiet));
        assert!(Mode::parse(Some("jsno"), false).is_err());
    }

    #[test]
    fn estimate_wording() {
        let e = |probes_left, rounds_left, seconds_left| Estimate {
            probes_left,
            rounds_left,
            seconds_left,
        };
        assert_eq!(
            estimate_text(&e(5, 5, Some(720.0))),
            "about 5 probes left, ~12 min"
        );
        assert_eq!(
            estimate_text(&e(1, 1, Some(40.0))),
            "about 1 probe left, ~40 s"
        );
        assert_eq!(estimate_text(&e(4, 4, None)), "about 4 probes left");
        assert_eq!(
            estimate_text(&e(8, 4, Some(3.0 * 3600.0))),
            "about 8 probes left in 4 rounds, ~3 h 0 min"
        );
    }
}
