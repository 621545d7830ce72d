//! What a person watching the terminal sees while a bisect runs: steps left, which commit is in
//! which phase (checkout / build / test), elapsed time. On a terminal this is an indicatif bar
//! per job slot; when stderr is not a terminal (CI logs, `2>file`) it is one plain line per
//! event instead, so logs stay readable. `Progress::quiet()` shows nothing (library callers).

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

enum Mode {
    Bars {
        _multi: MultiProgress,
        header: ProgressBar,
        slots: Vec<ProgressBar>,
    },
    Lines,
    Quiet,
}

pub struct Progress {
    mode: Mode,
    started: Instant,
    steps_left: Mutex<u32>,
}

impl Progress {
    /// Bars on a terminal, plain lines otherwise.
    pub fn for_stderr(slots: usize) -> Self {
        if std::io::stderr().is_terminal() {
            Self::bars(slots)
        } else {
            Self::with_mode(Mode::Lines)
        }
    }

    pub fn quiet() -> Self {
        Self::with_mode(Mode::Quiet)
    }

    fn with_mode(mode: Mode) -> Self {
        Progress {
            mode,
            started: Instant::now(),
            steps_left: Mutex::new(0),
        }
    }

    fn bars(slots: usize) -> Self {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let header = multi.add(ProgressBar::new_spinner());
        header.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        header.enable_steady_tick(Duration::from_millis(200));
        let slots = (0..slots.max(1))
            .map(|_| {
                let b = multi.add(ProgressBar::new_spinner());
                b.set_style(
                    ProgressStyle::with_template("  {msg}")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                b
            })
            .collect();
        Self::with_mode(Mode::Bars {
            _multi: multi,
            header,
            slots,
        })
    }

    fn elapsed(&self) -> String {
        let s = self.started.elapsed().as_secs();
        format!("{:02}:{:02}", s / 60, s % 60)
    }

    /// The search's estimate of probes still needed and how far it got.
    pub fn steps(&self, steps_left: u32, probes_done: usize, range: &str) {
        if let Ok(mut s) = self.steps_left.lock() {
            *s = steps_left;
        }
        let msg = format!("{range}: ~{steps_left} steps left, {probes_done} probes done");
        match &self.mode {
            Mode::Bars { header, .. } => header.set_message(msg),
            Mode::Lines => errln!("[{}] {msg}", self.elapsed()),
            Mode::Quiet => {}
        }
    }

    /// Slot `slot` moved to `phase` on commit `short` ("title").
    pub fn phase(&self, slot: usize, short: &str, title: &str, phase: &str) {
        let title: String = title.chars().take(60).collect();
        let msg = format!("{phase:<8} {short} {title}");
        match &self.mode {
            Mode::Bars { slots, .. } => {
                if let Some(b) = slots.get(slot) {
                    b.set_message(msg);
                }
            }
            Mode::Lines => errln!("[{}] job {slot}: {msg}", self.elapsed()),
            Mode::Quiet => {}
        }
    }

    /// A finished probe, or any message that should stay in the scrollback.
    pub fn line(&self, msg: &str) {
        match &self.mode {
            Mode::Bars { header, .. } => header.println(msg),
            Mode::Lines => errln!("[{}] {msg}", self.elapsed()),
            Mode::Quiet => {}
        }
    }

    pub fn finish(&self) {
        if let Mode::Bars { header, slots, .. } = &self.mode {
            for b in slots {
                b.finish_and_clear();
            }
            header.finish_and_clear();
        }
    }
}
