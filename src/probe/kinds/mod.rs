//! The probers of the kinds whose program is the probed tree's own (issue 57), one file per
//! kind as `core::kinds` defines it; the prober table (`run::probers`) makes each from a
//! configuration. The bundled reproducers' prober is `probe::repro`, a script's
//! `probe::script`.

pub mod backend_ops;
pub mod ctest;

/// Each kind's own section of a bisection's result, read back from its probes' logs (a
/// probe answered by the store has its log too): test-backend-ops' cases per probe.
pub fn add_sections(
    result: &mut crate::core::result::BisectResult,
    probe: &crate::core::kinds::ProbeSpec,
) {
    if let Some((ops, op_params)) = probe.backend_ops() {
        result.backend_ops = Some(backend_ops::section(result, ops, op_params));
    }
}
