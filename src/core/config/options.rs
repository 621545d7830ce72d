//! The bundled programs' own options (issue 37 item 2; the lists live in each kind's definition,
//! `core::kinds::replay` and `core::kinds::decode`): THE list in Rust of what
//! `repro-kernels/setrows-replay/setrows-replay.cpp` and `repro-kernels/decode-probe/decode-probe.cpp`
//! accept (a test reads both sources and compares, so the lists cannot drift), how a user's
//! `--repro-arg`s are checked against them before the first build, and how they are added to a
//! configuration's arguments: the defaults stay unless the user names the same option, and each
//! default replaced is said.

use super::{ProbeSpec, Resolved};

pub use crate::core::kinds::decode::DECODE_OPTIONS;
pub use crate::core::kinds::replay::REPLAY_OPTIONS;
pub use crate::core::kinds::ReproOption;

/// The options of the program `kind` runs (`None`: a program whose arguments are no
/// `--repro-arg`s, or a script, which has no bundled program).
pub fn options_of(kind: &ProbeSpec) -> Option<(&'static str, &'static [ReproOption])> {
    kind.def().program().zip(kind.def().options())
}

/// Arguments as (option, its value) groups; `Err`: the first word that is no option of the
/// program, or an option missing its value.
fn groups<'a>(
    args: &'a [String],
    table: &[ReproOption],
) -> Result<Vec<(&'a str, Option<&'a str>)>, String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let name = args[i].as_str();
        // `--steps=5` is one word to clap but two to the programs, which do not split it.
        let Some(o) = table.iter().find(|o| o.name == name) else {
            return Err(name.to_string());
        };
        if o.takes_value {
            let v = args
                .get(i + 1)
                .ok_or_else(|| format!("{name} (no value)"))?;
            out.push((name, Some(v.as_str())));
            i += 2;
        } else {
            out.push((name, None));
            i += 1;
        }
    }
    Ok(out)
}

/// Whether `a` and `b` name the same setting of the program (the same option, or two that
/// exclude each other).
fn same(table: &[ReproOption], a: &str, b: &str) -> bool {
    a == b || table.iter().any(|o| o.name == a && o.replaces.contains(&b))
}

/// `user` added to `defaults`: every default group stays unless a user option names the same
/// setting; returns the arguments and one line per default replaced. Unknown words were refused
/// before (`repro_args_refused`); here they only keep their place.
pub fn merge(
    defaults: &[String],
    user: &[String],
    table: &[ReproOption],
) -> (Vec<String>, Vec<String>) {
    let (Ok(base), Ok(given)) = (groups(defaults, table), groups(user, table)) else {
        return (user.to_vec(), Vec::new());
    };
    let mut out = Vec::new();
    let mut replaced = Vec::new();
    for (name, value) in &base {
        let by = given.iter().find(|(u, _)| same(table, u, name));
        let words = std::iter::once(*name).chain(*value).collect::<Vec<_>>();
        match by {
            Some((u, uv)) => {
                let with = std::iter::once(*u).chain(*uv).collect::<Vec<_>>().join(" ");
                if with != words.join(" ") {
                    replaced.push(format!(
                        "--repro-arg {with} replaces the default {}",
                        words.join(" ")
                    ));
                }
            }
            None => out.extend(words.iter().map(|w| w.to_string())),
        }
    }
    out.extend(user.iter().cloned());
    (out, replaced)
}

impl Resolved {
    /// Why the user's `--repro-arg`s cannot be given to the program this configuration runs
    /// (one line naming the argument; `None`: they can): a word that is not one of its options
    /// (checked here, before the first build, not by the program after it), an option the tool
    /// sets itself, or one a decode setting's own flag gives too.
    pub fn repro_args_refused(&self, user: &[String]) -> Option<String> {
        let (program, table) = options_of(&self.probe)?;
        if user.is_empty() {
            return None;
        }
        let given = match groups(user, table) {
            Ok(g) => g,
            Err(word) => {
                let names: Vec<&str> = table.iter().map(|o| o.name).collect();
                let typed = word.split(' ').next().unwrap_or("");
                let close = crate::core::spelling::closest(typed, names.iter().copied())
                    .map(|n| format!(" (did you mean {n}?)"))
                    .unwrap_or_default();
                return Some(format!(
                    "--repro-arg {word}: not an option of {program}{close}; its options: {}",
                    names.join(" ")
                ));
            }
        };
        for (name, value) in &given {
            let o = table.iter().find(|o| o.name == *name)?;
            if let Some(hint) = o.owned_by {
                return Some(format!(
                    "--repro-arg {name} {}: {hint}",
                    value.unwrap_or("")
                ));
            }
            if self.probe.def().takes_decode_settings() {
                let axis = crate::core::settings::SETTINGS
                    .iter()
                    .find(|s| s.flag == *name || (s.flag == "--ctx-size" && *name == "--cells"));
                if let Some(s) = axis.filter(|s| self.settings.get(s.axis).is_some()) {
                    return Some(format!(
                        "--repro-arg {name} and {} {} both set {}: give it once, as {}",
                        s.flag,
                        self.settings.get(s.axis).unwrap_or(""),
                        s.axis,
                        s.flag
                    ));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn user_arguments_add_to_the_defaults_and_replace_only_the_same_option() {
        let d = s(&["--mode", "reuse", "--steps", "100000", "--check-every", "1"]);
        let (args, replaced) = merge(&d, &s(&["--seed", "7"]), REPLAY_OPTIONS);
        assert_eq!(
            args,
            s(&[
                "--mode",
                "reuse",
                "--steps",
                "100000",
                "--check-every",
                "1",
                "--seed",
                "7"
            ])
        );
        assert!(replaced.is_empty());
        let (args, replaced) = merge(&d, &s(&["--wraps", "3"]), REPLAY_OPTIONS);
        assert_eq!(
            args,
            s(&["--mode", "reuse", "--check-every", "1", "--wraps", "3"])
        );
        assert_eq!(
            replaced,
            ["--repro-arg --wraps 3 replaces the default --steps 100000"]
        );
    }
}
