//! The one way the integration tests make a commit: everything in the work tree, on top of HEAD
//! (or as the root commit), so every generated history is built the same way.

/// Commits the whole work tree of `repo` to HEAD with message `msg`; returns the full sha.
pub fn commit_all(repo: &git2::Repository, msg: &str) -> String {
    let sig = git2::Signature::now("T", "t@example.com").unwrap();
    let mut index = repo.index().unwrap();
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    let parents: Vec<&git2::Commit> = parent.iter().collect();
    repo.commit(Some("HEAD"), &sig, &sig, msg, &tree, &parents)
        .unwrap()
        .to_string()
}
