//! Flag value parsers with ranges, shared by the subcommands: a value outside the range is a
//! one-line usage error naming the flag, never a panic further down (`--timeout 1e20` overflowed
//! `Duration`).

/// Longest accepted timeout: the same week a matrix file may set.
pub const MAX_SECS: f64 = crate::core::matrix::MAX_TIMEOUT_S as f64;

/// `--engine`: the container engine. `ds4` and `generic` are the replay's graphs (its own
/// `--engine` option), which this tool names `--graph`: the error says so.
pub fn engine(s: &str) -> Result<crate::probe::container::EngineChoice, String> {
    use crate::probe::container::EngineChoice;
    match s {
        "auto" => Ok(EngineChoice::Auto),
        "podman" => Ok(EngineChoice::Podman),
        "docker" => Ok(EngineChoice::Docker),
        "none" => Ok(EngineChoice::None),
        "ds4" | "generic" | "decode-reuse" => Err(format!(
            "{s:?} is a graph of the replay, not a container engine: use --graph {} (--engine takes auto, podman, docker or none)",
            match s {
                "ds4" => crate::cli::choices::Graph::Ds4,
                _ => crate::cli::choices::Graph::DecodeReuse,
            }
        )),
        _ => Err(format!(
            "{s:?} is not a container engine: auto, podman, docker or none"
        )),
    }
}

/// Seconds, finite, > 0 and at most a week.
pub fn secs(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !v.is_finite() || v <= 0.0 || v > MAX_SECS {
        return Err(format!(
            "{s} is out of range (more than 0, at most {MAX_SECS} seconds)"
        ));
    }
    Ok(v)
}

/// THE rule for `--confidence` (bisect and bisect-config): at least 0.5 and below 1. Below
/// one half "bad" would be believed on less than a coin toss; 1 is never reached by runs.
pub fn confidence(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number"))?;
    if !(0.5..1.0).contains(&v) {
        return Err(format!(
            "{s} is out of range (at least 0.5 and below 1, e.g. 0.95)"
        ));
    }
    Ok(v)
}

/// Parallel probes: 1 to 256, or `auto`.
pub fn jobs(s: &str) -> Result<crate::core::jobs::Jobs, String> {
    crate::core::jobs::Jobs::parse(s)
}

/// An integer in `lo..=hi`.
/// Read as a signed number first, so `-1` is "out of range", not "not a number" (and the
/// flags that take one accept a leading `-`, so clap names the flag, not an "unexpected
/// argument '-1'").
pub fn int(s: &str, lo: u64, hi: u64) -> Result<u64, String> {
    let v: i128 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a whole number ({lo} to {hi})"))?;
    if v < lo as i128 || v > hi as i128 {
        return Err(format!("{s} is out of range ({lo} to {hi})"));
    }
    Ok(v as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_reject_what_would_panic_or_mean_nothing() {
        assert_eq!(secs("2.5"), Ok(2.5));
        for bad in ["0", "-1", "1e20", "NaN", "inf", "x"] {
            assert!(secs(bad).is_err(), "{bad}");
        }
        assert!(confidence("0.95").is_ok());
        assert!(confidence("1").is_err() && confidence("0").is_err());
        assert!(confidence("0.3").is_err() && confidence("0.5").is_ok());
        assert_eq!(jobs("4"), Ok(crate::core::jobs::Jobs::Fixed(4)));
        assert_eq!(jobs("auto"), Ok(crate::core::jobs::Jobs::Auto));
        assert!(jobs("0").is_err() && jobs("257").is_err());
    }
}
