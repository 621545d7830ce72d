//! How run tells what it does: `core::progress::Event`s into the `Sink` its caller passed
//! down (`run::bisect::prepare`/`execute`, the driver, validation, `--probe`, matrix cells).
//! Nothing under run prints (tests/layout.rs); the command line renders (`cli::progress`).
//!
//! `Probe` turns one probe's `Phase`s into events and times its build. `note` is the one
//! exception to passing the sink down: a few warnings come from deep inside shared machinery
//! (a stored result that cannot be read, files left out of a checkout, processes a dead run
//! left in a slot) whose callers have no sink to hand; they go to the sink the command
//! installed with `install_notes` (none installed: dropped, as a library caller wants).

use crate::core::progress::{Event, Phase, Sink};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

pub use crate::core::progress::Quiet;

/// The events of one probe on one slot: checkout, build (with its own count), built, test.
pub struct Probe<'a> {
    sink: &'a dyn Sink,
    slot: usize,
    sha: String,
    title: String,
    build_started: Mutex<Option<Instant>>,
}

impl<'a> Probe<'a> {
    pub fn new(sink: &'a dyn Sink, slot: usize, sha: &str, title: &str) -> Self {
        Probe {
            sink,
            slot,
            sha: sha.to_string(),
            title: title.to_string(),
            build_started: Mutex::new(None),
        }
    }

    /// The probe reached `phase`.
    pub fn phase(&self, phase: Phase) {
        let (slot, sha, title) = (self.slot, self.sha.clone(), self.title.clone());
        let event = match phase {
            Phase::Checkout => Event::ProbeStarted { slot, sha, title },
            Phase::Build => {
                if let Ok(mut b) = self.build_started.lock() {
                    *b = Some(Instant::now());
                }
                Event::Building { slot, sha, title }
            }
            Phase::BuildStep(count) => Event::BuildProgress { slot, sha, count },
            Phase::Test => {
                let built = self.build_started.lock().ok().and_then(|mut b| b.take());
                if let Some(at) = built {
                    self.sink.emit(Event::Built {
                        slot,
                        sha: sha.clone(),
                        seconds: at.elapsed().as_secs_f64(),
                    });
                }
                Event::Testing { slot, sha, title }
            }
        };
        self.sink.emit(event);
    }
}

static NOTES: OnceLock<&'static dyn Sink> = OnceLock::new();

/// Makes `sink` the receiver of `note`s for the rest of the process (the command's renderer;
/// the first one installed stays).
pub fn install_notes(sink: &'static dyn Sink) {
    let _ = NOTES.set(sink);
}

/// A warning from deep inside shared machinery (see the module doc).
pub fn note(text: String) {
    if let Some(s) = NOTES.get() {
        s.emit(Event::Note { text });
    }
}
