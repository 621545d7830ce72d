//! `--probe-kind backend-ops` (issue 46): the probed tree's own `test-backend-ops`, built
//! alone and run once per requested op (`--op`, `-p` from `--op-params`) on the
//! configuration's device; what it prints is read in `cases`.

use super::{Kind, Needs, ProbeSpec, Table};

mod cases;
pub use cases::*;

/// The CMake target and program name.
pub const PROGRAM: &str = "test-backend-ops";

pub struct BackendOps;

/// The arguments of one run of the program: `test -o OP [-p RE] -b DEVICE`. THE line the
/// probe runs and the report prints.
pub fn run_args(op: &str, op_params: Option<&str>, device: &str) -> Vec<String> {
    let mut a = vec!["test".to_string(), "-o".into(), op.to_string()];
    if let Some(p) = op_params {
        a.extend(["-p".to_string(), p.to_string()]);
    }
    a.extend(["-b".to_string(), device.to_string()]);
    a
}

impl Kind for BackendOps {
    fn name(&self) -> &'static str {
        "backend-ops"
    }
    fn needs(&self) -> Needs {
        Needs::TestBackendOps
    }
    // test-backend-ops is llama.cpp's tests/, outside ggml/ of a llama.cpp tree; what it reads
    // is learned from its build (`named_inputs`), not assumed.
    fn whole_tree(&self) -> bool {
        true
    }
    fn program(&self) -> Option<&'static str> {
        Some(PROGRAM)
    }
    // The replay's arguments (`[params.*]`, `--repro-arg`) mean nothing to test-backend-ops.
    fn takes_repro_args(&self) -> bool {
        false
    }
    fn table_lacks(&self, t: &Table) -> Option<(&'static str, &'static str)> {
        t.ops.is_empty().then_some((
            "probe.ops",
            "probe kind `backend-ops` needs `ops` (e.g. ops = [\"SET_ROWS\"])",
        ))
    }
    fn refuses_flags(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("--graph", "--graph and --probe-kind backend-ops: --graph is the replay's graph, test-backend-ops runs its own cases of --op; drop one"),
            ("--repro-arg", "--repro-arg and --probe-kind backend-ops: --repro-arg is the bundled reproducer's, test-backend-ops takes --op and --op-params; drop --repro-arg"),
        ]
    }
    fn spec(&self, t: &Table) -> ProbeSpec {
        ProbeSpec::BackendOps {
            ops: t.ops.to_vec(),
            op_params: t.op_params.map(str::to_string),
        }
    }
    // Which ops run is the test's; a build-only probe builds the same program.
    fn identity(&self, spec: &ProbeSpec, build_only: bool) -> String {
        match spec.backend_ops() {
            Some((ops, op_params)) if !build_only => {
                format!("backend-ops ops={ops:?} op_params={op_params:?}")
            }
            _ => self.name().to_string(),
        }
    }
    // One run per op.
    fn runs(&self, spec: &ProbeSpec, _args: &[String], device: &str) -> Vec<Vec<String>> {
        let (ops, op_params) = spec.backend_ops().unwrap_or((&[], None));
        ops.iter()
            .map(|op| run_args(op, op_params, device))
            .collect()
    }
    fn ran(&self) -> Option<(&'static str, &'static str)> {
        Some((
            "the tree's own test-backend-ops, built alone, in the built tree",
            "every case of the op compared with the CPU, as the tree's own tolerances say",
        ))
    }
    fn flag_line(&self, spec: &ProbeSpec) -> String {
        let ops = spec.backend_ops().map(|(o, _)| o).unwrap_or(&[]);
        format!("--probe-kind backend-ops --op {}", ops.join(" --op "))
    }
}
