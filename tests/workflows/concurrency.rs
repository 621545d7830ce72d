//! GitHub's concurrency rule, for runs queued while others hold their groups: per group at
//! most one running and one pending; a newly queued run (or job) waits, and one already
//! pending in that group is cancelled in its favour (`cancel-in-progress: false`; with `true`
//! the running one would be cancelled too, which no workflow here asks for).

use std::collections::BTreeMap;

/// The state of every group while the queued runs arrive, none of them finished yet.
#[derive(Default)]
pub struct Groups<K> {
    running: BTreeMap<String, K>,
    pending: BTreeMap<String, K>,
}

impl<K: Clone> Groups<K> {
    /// `who` queues in `group`: it runs if the group is free, else it is pending; returns the
    /// pending one it cancelled, if any.
    pub fn arrive(&mut self, who: K, group: &str) -> Option<K> {
        if !self.running.contains_key(group) {
            self.running.insert(group.to_string(), who);
            return None;
        }
        self.pending.insert(group.to_string(), who)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_running_one_pending_and_the_newer_pending_wins() {
        let mut g = Groups::default();
        assert_eq!(g.arrive(1, "a"), None); // runs
        assert_eq!(g.arrive(2, "a"), None); // pending
        assert_eq!(g.arrive(3, "b"), None); // another group runs
        assert_eq!(g.arrive(4, "a"), Some(2)); // replaces the pending one
        assert_eq!(g.arrive(5, "a"), Some(4));
    }
}
