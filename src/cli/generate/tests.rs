//! The pages and the script against the real command line: tests stand above the dispatcher
//! that owns it, where generate.rs does not.

use super::*;
use crate::cli::Cli;
use clap::CommandFactory;

/// Splits an example as sh would: spaces, single and double quotes (no expansions).
fn words(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, '\'' | '"') => (quote, any) = (Some(c), true),
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => cur.extend(chars.next()),
            (None, ' ') if any => {
                out.push(std::mem::take(&mut cur));
                any = false;
            }
            (None, ' ') => {}
            (_, c) => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

#[test]
fn every_example_parses_and_every_page_has_its_examples() {
    use clap::Parser;
    for (name, examples) in EXAMPLES {
        assert!(!examples.is_empty(), "{name}");
        for (_, line) in *examples {
            let mut argv = words(line);
            // The shell's redirection is not the command's.
            if let Some(at) = argv.iter().position(|w| w == ">") {
                argv.truncate(at);
            }
            assert_eq!(argv[0], "setrows-bisect", "{line}");
            if !name.is_empty() {
                assert_eq!(argv[1], *name, "{line}");
            }
            if let Err(e) = Cli::try_parse_from(&argv) {
                panic!("{line}: {e}");
            }
        }
        let mut cmd = Cli::command();
        cmd.build();
        let c = match *name {
            "" => cmd,
            n => cmd.find_subcommand(n).unwrap().clone(),
        };
        let roff = page(c, examples).unwrap();
        let ex = roff.find(".SH EXAMPLES").expect("an EXAMPLES section");
        assert!(ex < roff.find(".SH VERSION").unwrap_or(usize::MAX));
        assert!(roff.contains("setrows\\-bisect"), "{roff}");
    }
}

#[test]
fn bash_labels_match_the_dispatch_and_dynamic_flags_ask_the_binary() {
    let mut cmd = Cli::command();
    let mut raw = Vec::new();
    clap_complete::generate(
        clap_complete::Shell::Bash,
        &mut cmd,
        "setrows-bisect",
        &mut raw,
    );
    let s = bash(&String::from_utf8(raw).unwrap());
    assert!(!s.contains("__subcmd__bisect__subcmd__matrix)"));
    assert!(s.contains("        setrows__bisect__subcmd__matrix)"));
    assert!(!s.contains("--config)\n                    COMPREPLY=($(compgen -f"));
    assert!(!s.contains("--op)\n                    COMPREPLY=($(compgen -f"));
    assert!(s.contains("complete config --"));
    assert!(s.contains("complete op --"));
}
