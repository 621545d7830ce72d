//! `--sanitize`: a sanitizer build spelled as the user would otherwise type it (the CMake flags
//! for every C and C++ compile, the probe's included, and the runtime options that make a report
//! a failed run), so the result, the store key and the reproducer line are those of the long
//! spelling. The choices follow llama.cpp's own sanitizer CI (`build-sanitize.yml`: ThreadSanitizer
//! with `GGML_OPENMP=OFF`, libgomp not being instrumented).

/// The sanitizers `--sanitize` takes, as `-fsanitize=` names them.
pub const KINDS: [&str; 3] = ["address", "undefined", "thread"];

/// What `--sanitize k...` adds: CMake arguments and launch environment (`K=V`).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Sanitize {
    pub cmake_args: Vec<String>,
    pub launch_env: Vec<(String, String)>,
}

/// The build and run settings of `kinds` (deduplicated, in `KINDS` order), or the one-line
/// reason they cannot be: address and thread in one binary is refused by both compilers.
pub fn sanitize(kinds: &[String]) -> Result<Sanitize, String> {
    let on: Vec<&str> = KINDS
        .iter()
        .copied()
        .filter(|k| kinds.iter().any(|g| g == k))
        .collect();
    if let Some(bad) = kinds.iter().find(|k| !KINDS.contains(&k.as_str())) {
        return Err(format!(
            "--sanitize {bad}: expected one of {}",
            KINDS.join(", ")
        ));
    }
    if on.contains(&"address") && on.contains(&"thread") {
        return Err(
            "--sanitize address and thread cannot share a build (the compilers refuse it): bisect with one, then the other"
                .into(),
        );
    }
    if on.is_empty() {
        return Ok(Sanitize::default());
    }
    let flag = format!("-fsanitize={}", on.join(","));
    let mut s = Sanitize {
        cmake_args: vec![
            format!("-DCMAKE_C_FLAGS={flag}"),
            format!("-DCMAKE_CXX_FLAGS={flag}"),
        ],
        launch_env: Vec::new(),
    };
    for k in on {
        match k {
            // stack-use-after-return is off by default in GCC's runtime; llama.cpp #14960's
            // report was one
            "address" => s.launch_env.push((
                "ASAN_OPTIONS".into(),
                "detect_stack_use_after_return=1".into(),
            )),
            // without these a report is printed and the run goes on to exit 0: not a verdict
            "undefined" => s.launch_env.push((
                "UBSAN_OPTIONS".into(),
                "halt_on_error=1:print_stacktrace=1".into(),
            )),
            _ => s.cmake_args.push("-DGGML_OPENMP=OFF".into()),
        }
    }
    Ok(s)
}

/// The CMake variables `--sanitize` sets: a `--cmake-arg` setting one of them too would be
/// overridden silently by whichever comes last.
pub const SETS: [&str; 2] = ["CMAKE_C_FLAGS", "CMAKE_CXX_FLAGS"];

#[cfg(test)]
mod tests {
    use super::*;

    fn s(k: &[&str]) -> Result<Sanitize, String> {
        sanitize(&k.iter().map(|k| k.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn address_is_the_long_spelling_of_case_23() {
        let a = s(&["address"]).unwrap();
        assert_eq!(
            a.cmake_args,
            [
                "-DCMAKE_C_FLAGS=-fsanitize=address",
                "-DCMAKE_CXX_FLAGS=-fsanitize=address"
            ]
        );
        assert_eq!(
            a.launch_env,
            [(
                "ASAN_OPTIONS".to_string(),
                "detect_stack_use_after_return=1".to_string()
            )]
        );
    }

    #[test]
    fn kinds_combine_in_one_flag_and_thread_turns_openmp_off() {
        let au = s(&["undefined", "address", "undefined"]).unwrap();
        assert_eq!(
            au.cmake_args[0],
            "-DCMAKE_C_FLAGS=-fsanitize=address,undefined"
        );
        assert_eq!(au.launch_env.len(), 2);
        let t = s(&["thread"]).unwrap();
        assert_eq!(
            t.cmake_args,
            [
                "-DCMAKE_C_FLAGS=-fsanitize=thread",
                "-DCMAKE_CXX_FLAGS=-fsanitize=thread",
                "-DGGML_OPENMP=OFF"
            ]
        );
        assert!(t.launch_env.is_empty());
        assert_eq!(s(&[]).unwrap(), Sanitize::default());
    }

    #[test]
    fn address_with_thread_or_an_unknown_kind_is_one_line_refused() {
        assert!(s(&["address", "thread"])
            .unwrap_err()
            .contains("cannot share a build"));
        assert_eq!(
            s(&["memory"]).unwrap_err(),
            "--sanitize memory: expected one of address, undefined, thread"
        );
    }
}
