//! setrows-bisect: find which ggml commit and which configuration makes a GPU kernel fail.
//!
//! Functional core (`search`, `outcome`, matrix expansion, report rendering) and imperative
//! shell (git, processes and containers, the result store, GitHub, progress). See DESIGN.md.
pub mod bisect;
pub mod build;
pub mod container;
pub mod cli;
pub mod demo;
pub mod error;
pub mod evidence;
pub mod exec;
pub mod flaky;
pub mod launch;
pub mod matrix_cmd;
pub mod outcome;
pub mod probe;
pub mod report_cmd;
pub mod search;
