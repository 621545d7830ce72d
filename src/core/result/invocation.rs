//! The `argv`, `tool`, `repo_url`, `id` and `provenance` fields every result document
//! carries (flattened): how to ask the same question again, and where the answer came from.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Who asked and how: the command line that reproduces a result, the tool that wrote it, the
/// repository's web address (for commit and compare links) and the probe environment.
/// Flattened into the result documents; every field is optional, so documents written before
/// it existed still read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Invocation {
    /// The exact command line (`argv[0]` included) that produced this result.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<String>,
    /// The setrows-bisect build that wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<Tool>,
    /// The repository's web address (`https://github.com/OWNER/REPO`), from `git remote
    /// get-url origin` of `--repo` or `report --repo-url`; commits and ranges link to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo_url: Option<String>,
    /// The id of this run in its work dir (`setrows-bisect show ID`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Facts of the environment the answer's probe ran in (GPU, architecture, ROCm/CUDA
    /// version, driver, kernel, image digest), as the prober recorded them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub provenance: BTreeMap<String, String>,
}

/// A build of setrows-bisect: the package version and the git commit it was built from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Tool {
    pub version: String,
    /// `git rev-parse HEAD` at build time (`unknown` when built outside a git checkout),
    /// with `-dirty` when the tree had changes.
    pub commit: String,
}

impl Tool {
    /// This binary: the version from Cargo.toml, the commit build.rs recorded.
    pub fn this() -> Tool {
        Tool {
            version: env!("CARGO_PKG_VERSION").to_string(),
            commit: option_env!("SETROWS_BISECT_COMMIT")
                .unwrap_or("unknown")
                .to_string(),
        }
    }

    /// `setrows-bisect 0.1.0 (abc123def456)`.
    pub fn line(&self) -> String {
        let commit = &self.commit[..self.commit.len().min(12)];
        format!("setrows-bisect {} ({commit})", self.version)
    }
}

impl Invocation {
    /// The invocation of this process: `argv` as given, this build of the tool.
    pub fn new(argv: Vec<String>) -> Invocation {
        Invocation {
            argv,
            tool: Some(Tool::this()),
            ..Invocation::default()
        }
    }
}

/// `https://github.com/OWNER/REPO` (or another forge's https address of the same shape) when
/// `url` is one; anything else is not linked to (the result file is untrusted).
pub fn web_url(url: Option<&str>) -> Option<&str> {
    let url = url?.trim_end_matches('/');
    let rest = url.strip_prefix("https://")?;
    let parts: Vec<&str> = rest.split('/').collect();
    let ok_host = |h: &str| {
        !h.is_empty()
            && h.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == ':')
    };
    let ok_seg = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_')
    };
    (parts.len() == 3 && ok_host(parts[0]) && ok_seg(parts[1]) && ok_seg(parts[2])).then_some(url)
}
