//! Whether one probe's build hit ccache, counted from ccache's own per-build stats log.
//!
//! Slots build concurrently against one shared cache, so the difference of two `ccache -s`
//! snapshots mixes every slot's compiles; the stats log (`CCACHE_STATSLOG`, one file per probe)
//! holds exactly this build's. Its format (ccache 4.x): for each compiler call a `# <input>`
//! line, then one counter name per line (`direct_cache_hit`, `cache_miss`, ...). Counting the
//! counter lines, not the entries, stays right when parallel compiles interleave whole lines.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What ccache did for one probe's build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Ccache {
    /// The build's compiles went through ccache: `hits` (direct and preprocessed) and `misses`
    /// of this build alone. Both 0: nothing was compiled (an up-to-date build tree).
    Used { hits: usize, misses: usize },
    /// ccache is not installed where the build ran, so every compile was paid in full.
    NotInstalled,
}

impl Ccache {
    /// Counts of a stats log's text; calls ccache could not cache (linking, preprocessor
    /// errors) are neither, as in `ccache --show-log-stats`.
    pub fn from_stats_log(text: &str) -> Ccache {
        let (mut hits, mut misses) = (0, 0);
        for line in text.lines().map(str::trim) {
            match line {
                "direct_cache_hit" | "preprocessed_cache_hit" => hits += 1,
                "cache_miss" => misses += 1,
                _ => {}
            }
        }
        Ccache::Used { hits, misses }
    }
}

/// The probes run now, taken together (stored probes built in an earlier run and count there).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Total {
    pub hits: usize,
    pub misses: usize,
    /// Builds that went through ccache.
    pub used: usize,
    /// Builds that ran without it (not installed).
    pub without: usize,
}

impl Total {
    pub fn of<'a>(builds: impl IntoIterator<Item = &'a Ccache>) -> Total {
        let mut t = Total::default();
        for c in builds {
            match c {
                Ccache::Used { hits, misses } => {
                    t.hits += hits;
                    t.misses += misses;
                    t.used += 1;
                }
                Ccache::NotInstalled => t.without += 1,
            }
        }
        t
    }

    /// Hits among cacheable compiles, in percent (`None` when nothing was compiled).
    pub fn hit_percent(&self) -> Option<usize> {
        let all = self.hits + self.misses;
        (all > 0).then(|| (self.hits * 100 + all / 2) / all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written by ccache 4.7.5 (`CCACHE_STATSLOG`): two misses, a direct hit, a link, a call
    /// without an input file, then a preprocessed hit (`CCACHE_NODIRECT=1`).
    /// `ccache --show-log-stats` on it: Hits 2 / 4 (1 direct, 1 preprocessed), Misses 2 / 4.
    const CAPTURED: &str = "# a.c\ncache_miss\ndirect_cache_miss\nlocal_storage_miss\n\
        local_storage_read_miss\nlocal_storage_read_miss\nlocal_storage_write\nlocal_storage_write\n\
        preprocessed_cache_miss\n# b.c\ncache_miss\ndirect_cache_miss\nlocal_storage_miss\n\
        local_storage_read_miss\nlocal_storage_read_miss\nlocal_storage_write\nlocal_storage_write\n\
        preprocessed_cache_miss\n# a.c\ndirect_cache_hit\nlocal_storage_hit\nlocal_storage_read_hit\n\
        local_storage_read_hit\n# a.o\ncalled_for_link\n# \nno_input_file\n# b.c\nlocal_storage_hit\n\
        local_storage_read_hit\npreprocessed_cache_hit\n";

    #[test]
    fn stats_log_counts_match_ccache_show_log_stats() {
        assert_eq!(
            Ccache::from_stats_log(CAPTURED),
            Ccache::Used { hits: 2, misses: 2 }
        );
        // `direct_cache_miss` / `preprocessed_cache_miss` are lookups, not misses of the call.
        assert_eq!(
            Ccache::from_stats_log("# x.c\ndirect_cache_miss\npreprocessed_cache_hit\n"),
            Ccache::Used { hits: 1, misses: 0 }
        );
        assert_eq!(
            Ccache::from_stats_log(""),
            Ccache::Used { hits: 0, misses: 0 }
        );
    }

    #[test]
    fn total_adds_builds_and_rounds_the_rate() {
        let t = Total::of(&[
            Ccache::Used { hits: 2, misses: 1 },
            Ccache::NotInstalled,
            Ccache::Used { hits: 0, misses: 0 },
        ]);
        assert_eq!((t.hits, t.misses, t.used, t.without), (2, 1, 2, 1));
        assert_eq!(t.hit_percent(), Some(67));
        assert_eq!(Total::default().hit_percent(), None);
    }

    #[test]
    fn json_names_the_state() {
        let used = serde_json::to_string(&Ccache::Used { hits: 3, misses: 1 }).unwrap();
        assert_eq!(used, r#"{"state":"used","hits":3,"misses":1}"#);
        let absent = serde_json::to_string(&Ccache::NotInstalled).unwrap();
        assert_eq!(absent, r#"{"state":"not_installed"}"#);
    }
}
