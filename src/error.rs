//! The two kinds of failure the command line distinguishes by exit code (see README, "Exit
//! codes"): bad input from the user (2) and failures of the machinery (3). Anything else that
//! reaches `main` is treated as infrastructure.

/// Exit codes, in one place.
pub mod exit {
    pub const FOUND: i32 = 0;
    pub const INCONCLUSIVE: i32 = 1;
    /// `matrix --build-only`: at least one cell's build failed, the finding a compile check
    /// exists to report (results are written first).
    pub const BUILD_FAILED: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const INFRA: i32 = 3;
}

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad flag, file, key or ref: the message names it.
    #[error("{0}")]
    Usage(String),
    /// The machinery failed (git, disk, container engine, network) after retries.
    #[error("{0}")]
    Infra(String),
}

impl CliError {
    pub fn usage(msg: impl Into<String>) -> anyhow::Error {
        CliError::Usage(msg.into()).into()
    }
    pub fn infra(msg: impl Into<String>) -> anyhow::Error {
        CliError::Infra(msg.into()).into()
    }
}

/// The exit code for an error that reached `main`.
pub fn exit_code(err: &anyhow::Error) -> i32 {
    for cause in err.chain() {
        if let Some(e) = cause.downcast_ref::<CliError>() {
            return match e {
                CliError::Usage(_) => exit::USAGE,
                CliError::Infra(_) => exit::INFRA,
            };
        }
    }
    exit::INFRA
}
