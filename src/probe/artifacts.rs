//! Artifact identity (issue 13): when a build leaves byte-identical artifacts to those of a
//! commit already tested, the earlier outcome is reused and the test is not run, as syzbot
//! reuses results for identical kernel images. A GPU probe's test takes minutes; a commit that
//! only touches a comment, a test of another backend or a code path compiled out still pays
//! its (incremental, ccached) build, but not the test.
//!
//! The digest must cover *everything the test executes or reads*, or a reuse would be a lie.
//! What a digest covers:
//! - the test's own text and environment (the shell script, or the reproducer's run line);
//! - every ELF executable or shared object (ELF type `ET_EXEC` or `ET_DYN`, the latter covering
//!   PIE programs and `.so*`) under the artifact root, by relative path and bytes, skipping
//!   `CMakeFiles/` (CMake's compiler probes, never run by a test) and `.git/`, plus every
//!   symlink there by its target (`libggml.so -> libggml.so.0`): whatever the program loads
//!   from the build is in it, without reading `DT_NEEDED` or guessing what `dlopen` picks
//!   (for a `--script`, the same rule over the checkout covers a prebuilt library committed
//!   there);
//! - the bytes of every other file the test names on its command line (`$WORK/x`, `$SRC/x`,
//!   or a relative path, which the test resolves in the checkout), or the fact that it is absent.
//!
//! Files outside the checkout and the build dir (system libraries, `/data/model.gguf`, a
//! counter under `/tmp`) are the environment, which the result store already treats as fixed:
//! a stored result of a tree is reused whatever they hold now, so a reuse by digest claims no
//! more than a reuse by tree. A test whose reads cannot be listed (a script of the checkout,
//! `make`, `python`, a glob, `$VAR` other than `$WORK`/`$SRC`) gets no digest and always runs.
//! A test program that reads files of the checkout it does not name is assumed not to exist,
//! the same assumption build-aware grouping makes (`Prober::named_inputs`); so is one that
//! reads a non-ELF file the build wrote (a generated data file, found through `$WORK` in its
//! environment) without naming it: name such a file on the test's command line and it counts.

use crate::probe::ProbeReport;
use sha2::{Digest, Sha256};
use std::path::{Component, Path};

/// Outcomes already recorded for a digest, by whoever keeps results (the run layer's store).
/// Passed to a prober only where reusing an outcome is right: one run per commit decides
/// (`--confidence`, `--repeat`, `--validate` and the matrix re-run on purpose and pass none).
pub trait ArtifactIndex: Sync + std::fmt::Debug {
    /// The stored run of the commit whose artifacts had this digest, if any.
    fn lookup(&self, digest: &str) -> Option<ArtifactHit>;
}

/// An earlier run of identical artifacts, and the commit that produced them.
#[derive(Debug, Clone)]
pub struct ArtifactHit {
    pub commit: String,
    pub report: ProbeReport,
}

/// Looks the digest up and, on a hit, turns `built` (a report whose build just succeeded)
/// into the earlier run's answer without running the test. On a miss the digest is noted in
/// `built`, so the run layer records it once the test has run and the result is stored.
pub fn reuse_or_note(
    index: Option<&dyn ArtifactIndex>,
    digest: Option<String>,
    built: &mut ProbeReport,
) -> bool {
    let (Some(index), Some(digest)) = (index, digest) else {
        return false;
    };
    let hit = index.lookup(&digest);
    built.artifact_digest = Some(digest);
    let Some(hit) = hit else { return false };
    let earlier = hit.report;
    built.outcome = earlier.outcome;
    built.signature = earlier.signature;
    built.exit_code = earlier.exit_code;
    built.signal = earlier.signal;
    built.output_tail = earlier.output_tail;
    built.test_s = 0.0;
    built.duration_s = built.build_s;
    // What the earlier test saw of the device (backend, features) holds for the same
    // binaries; what the launcher says now wins where both speak.
    let mut provenance = earlier.provenance;
    provenance.append(&mut built.provenance);
    built.provenance = provenance;
    let line = format!(
        "\n[setrows-bisect] test skipped: artifacts identical to {} (digest {}); outcome reused: {}\n",
        hit.commit,
        built.artifact_digest.as_deref().unwrap_or_default(),
        built.outcome
    );
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&built.log_path)
    {
        use std::io::Write;
        let _ = f.write_all(line.as_bytes());
    }
    built.reused_from = Some(hit.commit);
    true
}

/// The digest of a `--script` test, or `None` when it runs something the build did not make
/// or reads what cannot be listed (module doc). `text`: the test's script and environment;
/// `commands`: the script's simple commands (`script::commands`).
pub fn script_digest(
    text: &str,
    commands: &[Vec<String>],
    checkout: &Path,
    work: &Path,
) -> Option<String> {
    const READS_NOTHING: &[&str] = &["exit", "echo", "test", "[", "]", "!", "true", "false"];
    let mut h = Sha256::new();
    h.update(b"setrows-bisect artifacts v1 script\0");
    h.update(text.as_bytes());
    let mut runs_built_program = false;
    for cmd in commands {
        let mut words = cmd.iter().map(String::as_str).peekable();
        // `! prog` and `exec prog` run `prog`.
        while matches!(words.peek(), Some(&"!" | &"exec")) {
            words.next();
        }
        let Some(first) = words.next() else { continue };
        if let Some(rel) = under(first, "WORK") {
            let program = work.join(safe_rel(rel)?);
            if !is_elf_program(&program) {
                return None;
            }
            runs_built_program = true;
            file_entry(&mut h, "program", rel, &program)?;
        } else if !READS_NOTHING.contains(&first) {
            return None;
        }
        for w in words {
            // `--in=data/x.bin` names a file as surely as `data/x.bin` does.
            let w = match w.strip_prefix('-') {
                Some(flag) => match flag.split_once('=') {
                    Some((_, value)) => value,
                    None => continue,
                },
                None => w,
            };
            if w.contains(['*', '?', '`', '~', '[']) || w == "$SRC" || w == "${SRC}" {
                return None;
            }
            if let Some(rel) = under(w, "WORK") {
                file_entry(&mut h, "work", rel, &work.join(safe_rel(rel)?))?;
            } else if let Some(rel) = under(w, "SRC") {
                file_entry(&mut h, "src", rel, &checkout.join(safe_rel(rel)?))?;
            } else if w.starts_with('$') {
                return None;
            } else if !w.starts_with('/') && w.contains(['/', '.']) {
                file_entry(&mut h, "src", w, &checkout.join(safe_rel(w)?))?;
            }
        }
    }
    if !runs_built_program {
        return None;
    }
    build_tree(&mut h, work, work).ok()?;
    // A prebuilt library committed to the checkout may be loaded too (an rpath into `$SRC`).
    h.update(b"\0checkout");
    build_tree(&mut h, checkout, checkout).ok()?;
    Some(hex::encode(h.finalize()))
}

/// The digest of the bundled reproducer: its run line, its binary (`program`, in the build
/// tree), the ggml libraries (and anything else ELF) of its build tree, and `extra` files its
/// classification reads (`compile_commands.json` when the configuration's expectations are
/// checked). `None` when the program is not an ELF file the build made.
pub fn build_digest(
    run_line: &str,
    program: &Path,
    build_tree_dir: &Path,
    extra: &[&Path],
) -> Option<String> {
    if !is_elf_program(program) {
        return None;
    }
    let mut h = Sha256::new();
    h.update(b"setrows-bisect artifacts v1 build\0");
    h.update(run_line.as_bytes());
    for p in extra {
        let rel = p.strip_prefix(build_tree_dir).unwrap_or(p);
        file_entry(&mut h, "extra", &rel.to_string_lossy(), p)?;
    }
    build_tree(&mut h, build_tree_dir, build_tree_dir).ok()?;
    Some(hex::encode(h.finalize()))
}

/// `$NAME/rest` or `${NAME}/rest` -> `rest`.
fn under<'w>(w: &'w str, name: &str) -> Option<&'w str> {
    w.strip_prefix(&format!("${name}/"))
        .or_else(|| w.strip_prefix(&format!("${{{name}}}/")))
}

/// A relative path that stays inside its root (no `..`, not absolute).
fn safe_rel(rel: &str) -> Option<&Path> {
    let p = Path::new(rel);
    p.components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        .then_some(p)
}

/// One named file: its bytes, or that it is absent. A directory cannot be accounted for.
fn file_entry(h: &mut Sha256, kind: &str, rel: &str, path: &Path) -> Option<()> {
    h.update(format!("\0{kind}\0{rel}\0").as_bytes());
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => {
            h.update(std::fs::read(path).ok()?);
            Some(())
        }
        Ok(_) => None,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            h.update(b"\0absent");
            Some(())
        }
        Err(_) => None,
    }
}

/// ELF type of a file (`e_type`), if it is ELF.
fn elf_type(path: &Path) -> Option<u16> {
    use std::io::Read;
    let mut head = [0u8; 18];
    std::fs::File::open(path).ok()?.read_exact(&mut head).ok()?;
    if head[..4] != *b"\x7fELF" {
        return None;
    }
    let t = [head[16], head[17]];
    Some(if head[5] == 2 {
        u16::from_be_bytes(t)
    } else {
        u16::from_le_bytes(t)
    })
}

const ET_EXEC: u16 = 2;
const ET_DYN: u16 = 3;

fn is_elf_program(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
        && matches!(elf_type(path), Some(ET_EXEC | ET_DYN))
}

/// Every ELF executable or shared object and every symlink under `dir` (module doc), in path
/// order so the digest does not depend on directory listing order.
fn build_tree(h: &mut Sha256, root: &Path, dir: &Path) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let ft = e.file_type()?;
        let rel = path.strip_prefix(root).unwrap_or(&path).to_string_lossy();
        if ft.is_dir() {
            if e.file_name() != "CMakeFiles" && e.file_name() != ".git" {
                build_tree(h, root, &path)?;
            }
        } else if ft.is_symlink() {
            let target = std::fs::read_link(&path)?;
            h.update(format!("\0link\0{rel}\0{}", target.display()).as_bytes());
        } else if ft.is_file() && matches!(elf_type(&path), Some(ET_EXEC | ET_DYN)) {
            h.update(format!("\0elf\0{rel}\0").as_bytes());
            h.update(std::fs::read(&path)?);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(script: &str) -> Vec<Vec<String>> {
        crate::probe::script::commands(script)
    }

    /// A minimal ELF header of the given type (enough for `elf_type`).
    fn elf(t: u16) -> Vec<u8> {
        let mut b = b"\x7fELF\x02\x01\x01".to_vec();
        b.resize(16, 0);
        b.extend(t.to_le_bytes());
        b.extend([0u8; 32]);
        b
    }

    #[test]
    fn digest_covers_program_libraries_and_named_files_only() {
        let d = tempfile::tempdir().unwrap();
        let (src, work) = (d.path().join("src"), d.path().join("work"));
        for p in [&src, &work.join("lib"), &work.join("CMakeFiles")] {
            std::fs::create_dir_all(p).unwrap();
        }
        std::fs::write(work.join("t"), elf(ET_DYN)).unwrap();
        std::fs::write(work.join("lib/libx.so.1"), elf(ET_DYN)).unwrap();
        std::fs::write(work.join("a.o"), elf(1)).unwrap();
        std::fs::write(work.join("CMakeFiles/a.out"), elf(ET_EXEC)).unwrap();
        std::fs::write(src.join("in.txt"), "1").unwrap();
        let script = "echo hi >> /tmp/count; \"$WORK/t\" -v --in=data/in.txt";
        let digest = || script_digest(script, &words(script), &src, &work);
        let first = digest().expect("a built program gets a digest");
        // Objects, CMake's probes and unnamed checkout files change nothing the test runs.
        std::fs::write(work.join("a.o"), [elf(1), b"x".to_vec()].concat()).unwrap();
        std::fs::write(
            work.join("CMakeFiles/a.out"),
            [elf(ET_EXEC), b"z".to_vec()].concat(),
        )
        .unwrap();
        std::fs::write(src.join("other.c"), "x").unwrap();
        assert_eq!(digest().as_deref(), Some(first.as_str()));
        // A library it may load, and a file it names, do.
        std::fs::write(
            work.join("lib/libx.so.1"),
            [elf(ET_DYN), b"y".to_vec()].concat(),
        )
        .unwrap();
        let second = digest().unwrap();
        assert_ne!(second, first);
        std::fs::create_dir_all(src.join("data")).unwrap();
        std::fs::write(src.join("data/in.txt"), "2").unwrap();
        assert_ne!(digest().unwrap(), second);
    }

    #[test]
    fn tests_that_read_the_unlisted_get_no_digest() {
        let d = tempfile::tempdir().unwrap();
        let (src, work) = (d.path().join("src"), d.path().join("work"));
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(work.join("t"), elf(ET_EXEC)).unwrap();
        std::fs::write(work.join("gen.sh"), "#!/bin/sh\n").unwrap();
        for s in [
            "make test",
            "sh ./run.sh",
            "\"$WORK/t\" $SRC",
            "\"$WORK/t\" data/*.bin",
            "\"$WORK/t\" $HOME/x",
            "\"$WORK/gen.sh\"",
            "\"$WORK/t\" ../up.txt",
            "\"$WORK/t\" --in=$HOME/x",
            "exit 0",
            "python3 x.py && \"$WORK/t\"",
        ] {
            assert_eq!(script_digest(s, &words(s), &src, &work), None, "{s}");
        }
        for s in [
            "! \"$WORK/t\" && exit 1 || exit 0",
            "exec \"${WORK}/t\" -n 3",
        ] {
            assert!(script_digest(s, &words(s), &src, &work).is_some(), "{s}");
        }
    }
}
