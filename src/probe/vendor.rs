//! A vendored ggml fork names its origin in a note beside it (lucebox's
//! `server/deps/llama.cpp/VENDOR.md`: source repository, base branch and commit, the PRs picked
//! on top). The tested tree id says *which* ggml ran, not *what it is*; the note says that in
//! its maintainers' words, so a result can name the fork ("lucebox-ggml luce-dflash@6fbe72d6 +
//! PRs #35, #37") where a reader would otherwise see a subtree hash. It is the note's claim:
//! lucebox changed its vendored ggml twice after 453427de without touching the note.

use crate::core::layout::Layout;
use std::path::Path;

/// The note's name, in the directory that holds the vendored ggml directory. A checkout that
/// writes only ggml's directory writes this file too (`run::git::checkout`).
pub const NOTE: &str = "VENDOR.md";

/// Where the note of a ggml directory at `ggml_subdir` sits in the tree; `None` where ggml is
/// the root of the tree (nothing vendors it).
pub fn note_path(ggml_subdir: &str) -> Option<String> {
    if ggml_subdir.is_empty() {
        return None;
    }
    Some(match Path::new(ggml_subdir).parent() {
        Some(p) if !p.as_os_str().is_empty() => format!("{}/{NOTE}", p.display()),
        _ => NOTE.to_string(),
    })
}

/// The fork a checkout's vendoring note names, if the checkout vendors ggml and has one.
pub fn of_checkout(checkout: &Path) -> Option<String> {
    let sub = Layout::of(|p| checkout.join(p).exists()).ggml_dir();
    let text = std::fs::read_to_string(checkout.join(note_path(sub)?)).ok()?;
    describe(&text)
}

/// `<repository> <branch>@<commit, 8> + PRs #a, #b` from a note's `- Key: value` lines;
/// `None` unless it names a source repository (a README that happens to be called VENDOR.md
/// names nothing).
pub fn describe(text: &str) -> Option<String> {
    let field = |key: &str| {
        text.lines().find_map(|l| {
            let v = l.trim().trim_start_matches('-').trim().strip_prefix(key)?;
            Some(v.trim().trim_matches('`').trim().to_string())
        })
    };
    let repo = field("Source repository:")?;
    let repo = repo
        .trim_end_matches('/')
        .trim_end_matches(".git")
        .rsplit('/')
        .next()
        .filter(|r| !r.is_empty())?
        .to_string();
    let mut out = repo;
    let branch = field("Source base branch:").filter(|b| !b.is_empty());
    let commit = field("Source base commit:").map(|c| c.chars().take(8).collect::<String>());
    match (branch, commit) {
        (Some(b), Some(c)) => out.push_str(&format!(" {b}@{c}")),
        (Some(b), None) => out.push_str(&format!(" {b}")),
        (None, Some(c)) => out.push_str(&format!(" @{c}")),
        (None, None) => {}
    }
    let prs: Vec<String> = text
        .lines()
        .filter(|l| {
            l.trim()
                .trim_start_matches('-')
                .trim()
                .starts_with("Included")
        })
        .filter_map(|l| {
            let at = l.find('#')?;
            let digits: String = l[at + 1..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            (!digits.is_empty()).then(|| format!("#{digits}"))
        })
        .collect();
    match prs.len() {
        0 => {}
        1 => out.push_str(&format!(" + PR {}", prs[0])),
        _ => out.push_str(&format!(" + PRs {}", prs.join(", "))),
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The fields of lucebox 53859c26's server/deps/llama.cpp/VENDOR.md (and of ad69d12d's,
    // which listed one PR), as written there.
    const AT_53859C26: &str = "# Vendored llama.cpp/ggml snapshot\n\n\
        - Source repository: https://github.com/Luce-Org/lucebox-ggml\n\
        - Source base branch: `luce-dflash`\n\
        - Source base commit: `6fbe72d67069136bbd370be703e1d4f441b5e942`\n\
        - Included merged PR: `#35` (`0fe65d9354b7c5da52a7741d2e37ba85f0d0c925`)\n\
        - Included test PR: `#37` (`0699be81480428f01b9b7ac49a09a2d51c77f8df`)\n\
        - Reconstruction: `luce-dflash@6fbe72d67069136bbd370be703e1d4f441b5e942` plus cherry-picked PRs `#35` and `#37`\n";

    #[test]
    fn names_the_fork_its_base_and_the_prs_on_top() {
        assert_eq!(
            describe(AT_53859C26).as_deref(),
            Some("lucebox-ggml luce-dflash@6fbe72d6 + PRs #35, #37")
        );
        let one = AT_53859C26.replace(
            "- Included test PR: `#37` (`0699be81480428f01b9b7ac49a09a2d51c77f8df`)\n",
            "",
        );
        assert_eq!(
            describe(&one).as_deref(),
            Some("lucebox-ggml luce-dflash@6fbe72d6 + PR #35")
        );
    }

    #[test]
    fn a_note_without_a_source_repository_names_nothing() {
        assert_eq!(describe("# Vendored\n\nSome text about #12.\n"), None);
    }

    #[test]
    fn the_note_sits_beside_the_vendored_directory() {
        assert_eq!(
            note_path("server/deps/llama.cpp/ggml").as_deref(),
            Some("server/deps/llama.cpp/VENDOR.md")
        );
        assert_eq!(note_path("ggml").as_deref(), Some("VENDOR.md"));
        assert_eq!(note_path(""), None);
    }
}
