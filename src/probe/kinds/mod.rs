//! The probers of the kinds whose program is the probed tree's own (issue 57), one file per
//! kind as `core::kinds` defines it; the prober table (`run::probers`) makes each from a
//! configuration. The bundled reproducers' prober is `probe::repro`, a script's
//! `probe::script`.

pub mod backend_ops;
pub mod ctest;
