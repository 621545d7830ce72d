//! setrows-bisect: find which ggml commit and which configuration makes a GPU kernel fail.
//!
//! The folders are the data flow (DESIGN.md): `cli` turns flags into a plan; `run` executes it
//! (git, the store, the one slot loop) through `probe` (one checked-out tree -> a report);
//! `report` renders the one result schema of `core`; `github` keeps the living comment.
//! `core` is pure and imports nothing else of the crate.
pub mod cli;
pub mod core;
pub mod error;
pub mod github;
pub mod probe;
pub mod report;
pub mod run;
