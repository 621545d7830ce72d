//! Comments of earlier key layouts: where the results a key names were posted before that key
//! existed, and when such a comment may be taken over.

use super::body;
use super::client::{Publisher, RawComment};
use super::GithubError;

/// A comment an earlier version posted for the same results under another key (a bisection's
/// key before its configuration was hashed in). Found when nothing carries the new key, and
/// adopted (edited, and so given the new marker) only if its state holds no other
/// configuration's results: under the old key two configurations bisected over one range
/// shared a comment, and the later one's results must not be taken for this one's.
#[derive(Debug, Clone, Copy)]
pub struct Former<'a> {
    pub key: &'a str,
    pub configuration: &'a str,
}

impl Former<'_> {
    /// Whether the old comment's state is this configuration's: every result in it that names
    /// a configuration names this one. A state that cannot be read is not adopted (the
    /// comment stays as it is; the new key gets a comment of its own).
    fn owns(&self, body_text: &str) -> bool {
        let Ok(state) = body::parse_state(body_text) else {
            return false;
        };
        let results = state
            .as_ref()
            .and_then(|s| s.get("results"))
            .and_then(|r| r.as_array())
            .cloned()
            .unwrap_or_default();
        results.iter().all(|r| {
            r.pointer("/configuration/id")
                .and_then(|id| id.as_str())
                .is_none_or(|id| id == self.configuration)
        })
    }
}

impl Publisher {
    /// Our comment for `key`, else the one under `former`'s key that is this configuration's.
    pub(super) async fn find_former(
        &self,
        key: &str,
        former: Option<Former<'_>>,
    ) -> Result<Option<RawComment>, GithubError> {
        if let Some(c) = self.find(key).await? {
            return Ok(Some(c));
        }
        let Some(f) = former else { return Ok(None) };
        Ok(self
            .find(f.key)
            .await?
            .filter(|c| f.owns(c.body.as_deref().unwrap_or(""))))
    }
}
