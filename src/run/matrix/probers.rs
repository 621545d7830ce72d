//! The matrix's side of prober construction: the construction itself is `run::probers` (one
//! path for matrix cells and commit bisects); a cell whose prober cannot be made (no image, no
//! engine) is one infrastructure line, not retried (`Runner::run_cell`).

pub use crate::run::probers::{hipconfig_env, parse_hip_env, ConfiguredProber};

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
