//! setrows-bisect: find which ggml commit and which configuration makes a GPU kernel fail.
//!
//! The folders are the data flow (DESIGN.md): `cli` turns flags into a plan; `run` executes it
//! (git, the store, the one slot loop) through `probe` (one checked-out tree -> a report);
//! `report` renders the one result schema of `core`; `github` keeps the living comment.
//! `core` is pure and imports nothing else of the crate.

/// Console output that a closed pipe cannot turn into a lost result. Rust ignores SIGPIPE, so
/// `println!` panics when the reader is gone (`setrows-bisect ... | head -1`) and the panic
/// would skip whatever was left to write. Every line goes through here instead: once a stream
/// reports a broken pipe nothing more is written to it, the run goes on and ends as it would,
/// with its named outputs (`--json`, `--report`, the store, the comment) written: git goes
/// quietly when its reader quits, and so does this, but only after the results are safe.
/// Other write errors are dropped the same way: nothing printed is the only copy of a result.
#[doc(hidden)]
pub fn console(to_stderr: bool, args: std::fmt::Arguments) {
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering};
    static CLOSED: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];
    let closed = &CLOSED[usize::from(to_stderr)];
    if closed.load(Ordering::Relaxed) {
        return;
    }
    let r = if to_stderr {
        let mut e = std::io::stderr().lock();
        e.write_fmt(args).and_then(|()| e.flush())
    } else {
        let mut o = std::io::stdout().lock();
        o.write_fmt(args).and_then(|()| o.flush())
    };
    if r.is_err() {
        closed.store(true, Ordering::Relaxed);
    }
}

/// `println!` that survives a closed standard output (see [`console`]).
#[macro_export]
macro_rules! outln {
    () => { $crate::console(false, format_args!("\n")) };
    ($($t:tt)*) => { $crate::console(false, format_args!("{}\n", format_args!($($t)*))) };
}

/// `print!` that survives a closed standard output (see [`console`]).
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => { $crate::console(false, format_args!($($t)*)) };
}

/// `eprintln!` that survives a closed standard error (see [`console`]).
#[macro_export]
macro_rules! errln {
    () => { $crate::console(true, format_args!("\n")) };
    ($($t:tt)*) => { $crate::console(true, format_args!("{}\n", format_args!($($t)*))) };
}

pub mod cli;
pub mod core;
pub mod error;
pub mod github;
pub mod probe;
pub mod report;
pub mod run;
