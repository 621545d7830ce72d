//! HIP compiled for real, without an AMD GPU: scripts/hip-compile.sh compiles the standalone
//! set-rows kernel for gfx1151 in wave32 and wave64 (clang -x hip --offload-arch=gfx1151
//! --cuda-device-only -S) and checks the AMDGPU assembly. Here the proof lines are asserted, and
//! the assembly itself is read back. The toolchain comes from scripts/setup.d/40-hip.sh
//! (`HIP_CLANG`, `HIP_INCLUDE`); under CI a missing toolchain fails (`tools::require`).

mod tools;

use std::path::{Path, PathBuf};
use std::process::Command;

fn toolchain() -> Option<(String, String)> {
    let clang = std::env::var("HIP_CLANG")
        .ok()
        .filter(|c| Path::new(c).is_file());
    let inc = std::env::var("HIP_INCLUDE").unwrap_or_else(|_| "/usr/include".into());
    tools::require(
        clang.map(|c| (c, inc)),
        "HIP device compiler (HIP_CLANG, HIP_INCLUDE)",
        "scripts/setup.d/40-hip.sh",
    )
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/hip-compile.sh")
}

/// `key=a/b` → (a, b) from a proof line.
fn ratio(line: &str, key: &str) -> (u32, u32) {
    let rest = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix(key))
        .unwrap_or_else(|| panic!("no {key} in {line}"));
    let (a, b) = rest.split_once('/').expect("a/b");
    (a.parse().unwrap(), b.parse().unwrap())
}

fn field(line: &str, key: &str) -> u32 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key))
        .unwrap_or_else(|| panic!("no {key} in {line}"))
        .parse()
        .unwrap()
}

#[test]
fn setrows_kernel_compiles_for_gfx1151_wave32_and_wave64() {
    let Some((clang, inc)) = toolchain() else {
        return;
    };
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hip-compile");
    let _ = std::fs::remove_dir_all(&out);
    let r = Command::new("bash")
        .arg(script())
        .env("HIP_CLANG", &clang)
        .env("HIP_INCLUDE", &inc)
        .env("HIP_COMPILE_OUT", &out)
        .output()
        .expect("run scripts/hip-compile.sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&r.stdout),
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(r.status.success(), "hip-compile.sh failed:\n{text}");
    assert!(text.contains("target gfx1151"), "{text}");
    assert!(text.contains("hip-compile: all checks passed"), "{text}");
    for (w, w32) in [(32, 1), (64, 0)] {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("PASS setrows-kernel.cu wave{w}: ")))
            .unwrap_or_else(|| panic!("no wave{w} proof line:\n{text}"));
        let kernels = field(line, "kernels=");
        assert!(kernels >= 2, "{line}");
        assert_eq!(field(line, "target="), 1, "{line}");
        assert_eq!(
            ratio(line, &format!("wavefront_size:{w}=")),
            (kernels, kernels),
            "every kernel carries wave {w}: {line}"
        );
        // `amdhsa_wavefront_size32=1 9/9`: the descriptor's flag, then how many kernels carry it
        let after = line
            .split(&format!("amdhsa_wavefront_size32={w32} "))
            .nth(1)
            .unwrap_or_else(|| panic!("descriptor flag {w32} missing: {line}"));
        assert_eq!(ratio(after, ""), (kernels, kernels), "{line}");
        assert!(field(line, "k_set_rows*=") >= 1, "{line}");
        // and the assembly says it itself
        let asm = std::fs::read_to_string(out.join(format!("setrows-kernel-w{w}.s")))
            .expect("assembly kept");
        assert!(asm.contains(".amdgcn_target \"amdgcn-amd-amdhsa--gfx1151\""));
        assert!(asm.contains(&format!(".wavefront_size: {w}")));
        assert!(!asm.contains(&format!(".wavefront_size: {}", 96 - w)));
    }
}

/// Negative control: with no compiler the script fails and says why (no silent pass).
#[test]
fn without_a_toolchain_the_script_fails() {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hip-compile-none");
    let r = Command::new("bash")
        .arg(script())
        .env("HIP_CLANG", "/nonexistent/clang++")
        .env("HIP_COMPILE_OUT", &out)
        .output()
        .expect("run scripts/hip-compile.sh");
    assert_eq!(r.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&r.stdout).contains("FAIL no HIP toolchain"));
}
