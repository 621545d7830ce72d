//! The matrix's side of prober construction: configurations whose prober cannot be made.
//! The construction itself is `run::probers` (one path for matrix cells and commit bisects).

use crate::probe::{Phase, ProbeReport, ProbeRequest, Prober};
pub use crate::run::probers::{hipconfig_env, parse_hip_env, ConfiguredProber};

/// A configuration whose prober could not be made (no image, engine unusable): every attempt
/// is an infrastructure error naming the cause, so the cell is retried and reported like any
/// other machinery failure instead of being special-cased.
pub(super) struct Unavailable(pub(super) String);

impl Prober for Unavailable {
    fn identity(&self) -> String {
        format!("unavailable: {}", self.0)
    }

    fn probe(&self, req: &ProbeRequest<'_>, _phase: &dyn Fn(Phase)) -> ProbeReport {
        ProbeReport::infra(self.0.clone(), req.log_path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::launch::HostLauncher;

    #[test]
    fn hipconfig_answer_or_a_clear_error() {
        match crate::probe::exec::which("hipconfig") {
            Some(_) => {
                let env = hipconfig_env(&HostLauncher).expect("hipconfig on PATH answers");
                assert_eq!(env.len(), 2, "{env:?}");
            }
            None => {
                let err = hipconfig_env(&HostLauncher).unwrap_err();
                assert!(err.contains("did not give HIPCXX and HIP_PATH"), "{err}");
            }
        }
        assert_eq!(
            parse_hip_env("HIPCXX=/opt/rocm/llvm/bin/clang\nHIP_PATH=/opt/rocm\nnoise\n"),
            vec![
                ("HIPCXX".to_string(), "/opt/rocm/llvm/bin/clang".to_string()),
                ("HIP_PATH".to_string(), "/opt/rocm".to_string())
            ]
        );
        assert!(parse_hip_env("HIPCXX=/clang\nHIP_PATH=\n").is_empty());
    }
}
