//! `--jobs K` or `--jobs auto`: how many probes build at once. Pure: the measured build use and
//! the core count come in from `run::jobs`.
//!
//! Concurrent probes pay off only where one build leaves cores idle: a build that keeps `u`
//! cores busy on average (user + system CPU seconds over wall seconds) lets about
//! `cores / u` builds share the host without slowing each other. The GPU tests are serialised
//! anyway (`run::jobs::GpuTurn`), so more slots than that only queue. On 2 cores every build
//! measured so far (ggml 1.61, llama.cpp 0.91) leaves no second build room worth its checkout,
//! so `auto` stays at 1 there. On the 16-core H200 a CUDA decode-probe build keeps 12.2 busy
//! (BENCHMARKS "`--jobs auto`"), and `--jobs 2` made each of two cold builds take 350 s where
//! one alone takes 159 s: `auto` stays at 1 there too, as this rule says.

use std::fmt;

/// What the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jobs {
    Fixed(usize),
    /// Chosen from the measured build use and the host's cores (`choose`).
    Auto,
}

impl Jobs {
    /// `auto` or a whole number 1 to 256; the error is one line.
    pub fn parse(s: &str) -> Result<Jobs, String> {
        if s.trim().eq_ignore_ascii_case("auto") {
            return Ok(Jobs::Auto);
        }
        let v: i128 = s
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is neither `auto` nor a whole number (1 to {MAX_JOBS})"))?;
        if v < 1 || v > MAX_JOBS as i128 {
            return Err(format!("{s} is out of range (1 to {MAX_JOBS}, or `auto`)"));
        }
        Ok(Jobs::Fixed(v as usize))
    }
}

impl fmt::Display for Jobs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Jobs::Fixed(k) => write!(f, "{k}"),
            Jobs::Auto => f.write_str("auto"),
        }
    }
}

pub const MAX_JOBS: usize = 256;

/// The most slots `auto` picks: each is a checkout and a build dir on disk, and with the GPU
/// tests taking turns the rounds fall only as log(K + 1) (BENCHMARKS "Rounds with K").
pub const AUTO_CAP: usize = 4;

/// Builds measured on this work dir: CPU seconds (user + system of the build's processes) and
/// wall seconds, summed, so a long cold build weighs more than a one-file rebuild.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct BuildUse {
    pub cpu_s: f64,
    pub wall_s: f64,
    pub builds: u32,
}

impl BuildUse {
    /// Cores a build keeps busy on average.
    pub fn parallelism(&self) -> Option<f64> {
        (self.wall_s > 0.0 && self.builds > 0).then(|| self.cpu_s / self.wall_s)
    }

    pub fn add(&mut self, cpu_s: f64, wall_s: f64) {
        self.cpu_s += cpu_s;
        self.wall_s += wall_s;
        self.builds += 1;
    }
}

/// The K a run uses, and why, in one line (the dry run and the progress line print it).
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub k: usize,
    pub why: String,
}

/// Resolves `jobs` on a host of `cores` cores with the builds measured so far.
pub fn choose(jobs: Jobs, cores: usize, measured: Option<BuildUse>) -> Choice {
    let cores = cores.max(1);
    match jobs {
        Jobs::Fixed(k) => Choice {
            k,
            why: format!("--jobs {k}"),
        },
        Jobs::Auto if cores <= 2 => Choice {
            k: 1,
            why: format!("--jobs auto: 1 on {cores} core(s) (a second build has no core of its own)"),
        },
        Jobs::Auto => match measured.and_then(|m| Some((m, m.parallelism()?))) {
            None => Choice {
                k: 1,
                why: format!(
                    "--jobs auto: 1 on {cores} cores until a build is measured (this run measures its builds)"
                ),
            },
            Some((m, u)) => {
                let k = ((cores as f64 / u.max(1.0)).floor() as usize).clamp(1, AUTO_CAP);
                Choice {
                    k,
                    why: format!(
                        "--jobs auto: {k} on {cores} cores, a build keeps {u:.2} busy ({} build(s) measured, cap {AUTO_CAP})",
                        m.builds
                    ),
                }
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn used(u: f64) -> Option<BuildUse> {
        Some(BuildUse {
            cpu_s: 100.0 * u,
            wall_s: 100.0,
            builds: 1,
        })
    }

    #[test]
    fn two_cores_stay_at_one_whatever_was_measured() {
        for m in [None, used(0.91), used(1.61), used(0.2)] {
            assert_eq!(choose(Jobs::Auto, 2, m).k, 1, "{m:?}");
        }
        assert_eq!(choose(Jobs::Auto, 1, used(0.5)).k, 1);
    }

    /// The figures `<work>/build-use` held after case 18's `--jobs 1` run on the H200 (3 CUDA
    /// builds, one cold) and the one build its `--jobs 2` run measured alone.
    #[test]
    fn the_measured_cuda_build_on_16_cores_leaves_no_room() {
        let k1 = BuildUse {
            cpu_s: 3149.62,
            wall_s: 257.71,
            builds: 3,
        };
        let c = choose(Jobs::Auto, 16, Some(k1));
        assert_eq!(c.k, 1, "{}", c.why);
        assert!(c.why.contains("12.22 busy"), "{}", c.why);
        let alone = BuildUse {
            cpu_s: 773.10,
            wall_s: 69.76,
            builds: 1,
        };
        assert_eq!(choose(Jobs::Auto, 16, Some(alone)).k, 1);
    }

    #[test]
    fn k_times_the_measured_use_fills_the_cores() {
        assert_eq!(choose(Jobs::Auto, 16, used(5.0)).k, 3);
        assert_eq!(choose(Jobs::Auto, 16, used(8.0)).k, 2);
        assert_eq!(choose(Jobs::Auto, 16, used(14.0)).k, 1);
        // A serial build does not make the cap meaningless.
        assert_eq!(choose(Jobs::Auto, 16, used(0.9)).k, AUTO_CAP);
        // Unmeasured: the safe default.
        let c = choose(Jobs::Auto, 16, None);
        assert_eq!(c.k, 1);
        assert!(c.why.contains("until a build is measured"), "{}", c.why);
        assert!(!c.why.contains('\n'));
    }

    #[test]
    fn a_fixed_k_is_kept() {
        assert_eq!(choose(Jobs::Fixed(3), 2, used(1.6)).k, 3);
    }

    #[test]
    fn parse_takes_auto_and_whole_numbers_only() {
        assert_eq!(Jobs::parse("auto"), Ok(Jobs::Auto));
        assert_eq!(Jobs::parse("4"), Ok(Jobs::Fixed(4)));
        for bad in ["0", "-1", "abc", "257", "2.5", ""] {
            let e = Jobs::parse(bad).unwrap_err();
            assert!(!e.contains('\n'), "{bad}: {e}");
        }
    }
}
