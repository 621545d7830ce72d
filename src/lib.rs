//! setrows-bisect: find which ggml commit and which configuration makes a GPU kernel fail.
//!
//! Functional core (`search`, `outcome`, matrix expansion, report rendering) and imperative
//! shell (git, processes and containers, the result store, GitHub, progress). See DESIGN.md.
pub mod bisect;
pub mod build;
pub mod cli;
pub mod container;
pub mod demo;
pub mod driver;
pub mod error;
pub mod evidence;
pub mod exec;
pub mod flaky;
pub mod git;
pub mod github;
pub mod junit;
pub mod launch;
pub mod matrix;
pub mod matrix_cmd;
pub mod matrix_report;
pub mod matrix_run;
pub mod outcome;
pub mod probe;
pub mod progress;
pub mod report;
pub mod report_cmd;
pub mod repro;
pub mod script;
pub mod search;
pub mod sim;
pub mod store;
pub mod summary;
pub mod validate;
