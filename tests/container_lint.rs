//! The build images in containers/: what every probe needs is in each of them, each can be
//! built from a local base (`ARG BASE_IMAGE`), and hadolint passes (HADOLINT from
//! scripts/setup.d/31-hadolint.sh; missing under CI is a failure).

mod tools;

use std::path::{Path, PathBuf};
use std::process::Command;

fn dockerfiles() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("containers");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".Dockerfile"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_image_has_the_build_tools_and_a_base_image_argument() {
    let files = dockerfiles();
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "cpu.Dockerfile",
            "cuda.Dockerfile",
            "rocm-debian.Dockerfile",
            "rocm.Dockerfile"
        ]
    );
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let from = text
            .find("\nFROM ${BASE_IMAGE}")
            .unwrap_or_else(|| panic!("{f:?}: FROM ${{BASE_IMAGE}}"));
        assert!(
            text[..from].contains("ARG BASE_IMAGE="),
            "{f:?}: ARG BASE_IMAGE before FROM"
        );
        for tool in ["cmake", "ninja-build", "ccache", "git"] {
            assert!(text.contains(&format!(" {tool} ")), "{f:?} lacks {tool}");
        }
    }
    let rocm = std::fs::read_to_string(&files[3]).unwrap();
    assert!(rocm.contains("ARG ROCM_VERSION="));
    assert!(rocm.contains("docker.io/rocm/dev-ubuntu-${UBUNTU_VERSION}:${ROCM_VERSION}"));
    // Debian's own ROCm: the image refuses a HIP other than its tag's, and carries the paths
    // Debian's clang needs to compile HIP at all.
    let debian = std::fs::read_to_string(&files[2]).unwrap();
    for needed in [
        "hipcc libamdhip64-dev libhipblas-dev librocblas-dev",
        "case \"$hip\" in \"${ROCM_VERSION%.*}\".*)",
        "HIP_DEVICE_LIB_PATH=${HIP_DEVICE_LIB_PATH}",
        "HIP_CLANG_PATH=${HIP_CLANG_PATH}",
        "--offload-arch=gfx1151",
        "io.setrows.rocm-version=\"${ROCM_VERSION}\"",
    ] {
        assert!(
            debian.contains(needed),
            "rocm-debian.Dockerfile lacks {needed}"
        );
    }
}

fn hadolint() -> Option<PathBuf> {
    let found = std::env::var_os("HADOLINT").map(PathBuf::from).or_else(|| {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|d| d.join("hadolint"))
            .find(|p| p.is_file())
    });
    tools::require(found, "hadolint", "scripts/setup.d/31-hadolint.sh")
}

#[test]
fn hadolint_passes_on_every_dockerfile_and_catches_a_bad_one() {
    let Some(h) = hadolint() else { return };
    for f in dockerfiles() {
        let out = Command::new(&h).arg(&f).output().unwrap();
        assert!(
            out.status.success(),
            "{f:?}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let d = tempfile::tempdir().unwrap();
    let bad = d.path().join("bad.Dockerfile");
    std::fs::write(&bad, "FROM debian\nRUN apt-get install curl\n").unwrap();
    let out = Command::new(&h).arg(&bad).output().unwrap();
    assert!(
        !out.status.success(),
        "hadolint accepted an unpinned, unversioned image"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("DL3006"));
}
