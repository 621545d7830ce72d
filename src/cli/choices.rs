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

/// `--backend`, in the order the help has always listed them.
impl clap::ValueEnum for crate::core::build::Backend {
    fn value_variants<'a>() -> &'a [Self] {
        use crate::core::build::Backend::*;
        &[Cpu, Cuda, Hip]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.as_str()))
    }
}

/// `--memory`: the core's own words, so a configuration and the flag cannot spell it apart.
impl clap::ValueEnum for crate::core::build::Memory {
    fn value_variants<'a>() -> &'a [Self] {
        &crate::core::build::Memory::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.as_str()))
    }
}

/// `--wave-size`: the two widths a HIP build of the replay compiles in; any other number would
/// reach CMake and fail there, minutes later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WaveSize {
    #[value(name = "32")]
    W32,
    #[value(name = "64")]
    W64,
}

impl WaveSize {
    pub fn lanes(self) -> u32 {
        match self {
            WaveSize::W32 => 32,
            WaveSize::W64 => 64,
        }
    }
}

/// `--graphs`: a flag that is off unless asked could not say "off" over a configuration's "on".
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    On,
    Off,
}

impl Switch {
    pub fn is_on(self) -> bool {
        self == Switch::On
    }
}

/// `--graph`: a replay graph by the name users know, standing for the built-in matrix's
/// `[params.NAME]` that holds its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Graph {
    // No doc comments here: clap would print them under --graph in --help, which --graph's
    // own text already covers.
    DecodeReuse,
    Ds4,
}

impl Graph {
    /// The `[params.NAME]` of the built-in matrix that holds this graph's arguments.
    pub const fn params(self) -> &'static str {
        match self {
            Graph::DecodeReuse => "decode-reuse",
            Graph::Ds4 => "decode-ds4",
        }
    }
}

/// As typed on the command line, so a message quotes the flag the way the user wrote it.
impl std::fmt::Display for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = clap::ValueEnum::to_possible_value(self).expect("no variant is skipped");
        f.write_str(name.get_name())
    }
}
