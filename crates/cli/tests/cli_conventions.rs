//! What a user expects of any command-line tool: `--version` names the
//! commit, shell completions that the shell itself accepts, a manual page,
//! and output cut short by `| head` not treated as a failure.

use std::process::{Command, Stdio};

fn marrow(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_marrow")).args(args).output().unwrap()
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let out = marrow(&["--version"]);
    assert!(out.status.success());
    let v = String::from_utf8(out.stdout).unwrap();
    assert!(v.starts_with(&format!("marrow {} (", env!("CARGO_PKG_VERSION"))), "{v}");
    let head =
        Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).current_dir(env!("CARGO_MANIFEST_DIR")).output();
    match head {
        Ok(h) if h.status.success() => {
            let h = String::from_utf8(h.stdout).unwrap();
            assert!(v.contains(h.trim()), "--version {v:?} does not name HEAD {h:?}");
        }
        // Built outside a checkout: the build says so.
        _ => assert!(v.contains("unknown commit"), "{v}"),
    }
}

#[test]
fn bash_accepts_the_completion_script_and_it_knows_the_subcommands() {
    let out = marrow(&["completions", "bash"]);
    assert!(out.status.success());
    let script = String::from_utf8(out.stdout).unwrap();
    for sub in ["decode", "demo", "trace", "softnic", "doctor", "bench", "completions", "man"] {
        assert!(script.contains(sub), "no {sub} in the completions");
    }
    let path = std::env::temp_dir().join(format!("marrow-completions-{}.bash", std::process::id()));
    std::fs::write(&path, &script).unwrap();
    // bash -n parses without running: a syntax error fails here.
    let check = Command::new("bash").arg("-n").arg(&path).output().unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
    assert_eq!(marrow(&["completions", "no-such-shell"]).status.code(), Some(2));
}

#[test]
fn the_manual_page_is_roff_for_section_1() {
    let out = marrow(&["man"]);
    assert!(out.status.success());
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.contains(".TH marrow 1") && page.contains(".SH NAME") && page.contains("softnic"), "{page}");
}

#[test]
fn a_reader_that_leaves_early_is_not_an_error() {
    for args in [&["man"][..], &["completions", "bash"][..]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_marrow"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}
