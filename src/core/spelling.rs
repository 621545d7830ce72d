//! "Did you mean": the one rule for naming the closest of a set of names to a word a user
//! mistyped (an op, a reproducer option). Case is ignored, because ggml spells ops in capitals
//! and people type them in lower case.

/// Edits (insert, delete, substitute, swap two neighbours) from `a` to `b`, case ignored.
pub fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    // d[i][j]: the distance between a[..i] and b[..j] (optimal string alignment).
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let sub = d[i - 1][j - 1] + usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = sub.min(d[i - 1][j] + 1).min(d[i][j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

/// The name closest to `word`, if it is close enough to be what was meant: at most one edit
/// in three characters (at least one), so `set_rows` finds `SET_ROWS` and `stpes` finds
/// `steps`, while an unrelated word finds nothing rather than a random name.
pub fn closest<'a>(word: &str, names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1);
    names
        .into_iter()
        .map(|n| (distance(word, n), n))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_closest_name_or_none() {
        let ops = ["ADD", "SET_ROWS", "GET_ROWS", "MUL_MAT", "SOFT_MAX"];
        assert_eq!(closest("set_rows", ops), Some("SET_ROWS"));
        assert_eq!(closest("SETROWS", ops), Some("SET_ROWS"));
        assert_eq!(closest("mulmat", ops), Some("MUL_MAT"));
        assert_eq!(closest("SOFTMAX", ops), Some("SOFT_MAX"));
        assert_eq!(closest("CONV_2D", ops), None);
        assert_eq!(closest("--stpes", ["--steps", "--seed"]), Some("--steps"));
        assert_eq!(closest("--step", ["--steps", "--seed"]), Some("--steps"));
        assert_eq!(closest("--sed", ["--steps", "--seed"]), Some("--seed"));
        assert_eq!(distance("ab", "ba"), 1);
        assert_eq!(distance("", "abc"), 3);
    }
}
