//! The words of the choice flags. A choice is a clap value enum, so clap refuses a word outside
//! the set (with its suggestion), `-h` and completion list the words, and nothing parses the
//! string again further down. Where the vocabulary lives in the pure core, which does not know
//! clap, the command line spells it here.

/// `--regress`: each word says what counts as new, since that decides which commit is found.
impl clap::ValueEnum for crate::core::outcome::Regress {
    fn value_variants<'a>() -> &'a [Self] {
        use crate::core::outcome::Regress::*;
        &[Error, Success, Crash, Build]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        use crate::core::outcome::Regress::*;
        use clap::builder::PossibleValue;
        Some(match self {
            Error => PossibleValue::new("error").help(
                "New = any failure (wrong result, fault, crash, hang). Finds the first bad commit",
            ),
            Success => PossibleValue::new("success")
                .help("New = success; old = failing. Finds the commit that fixed it"),
            Crash => PossibleValue::new("crash").help(
                "New = a crash or GPU fault (signals/aborts) only; wrong results and hangs count as old",
            ),
            Build => PossibleValue::new("build").help(
                "New = the build fails; old = it builds. No test runs. Finds the first commit whose build breaks",
            ),
        })
    }
}
