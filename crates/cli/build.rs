//! Records the commit the binary is built from, for `marrow --version`:
//! `git describe --always --dirty` of the checkout, or "unknown commit"
//! when built outside one (a source tarball, a vendored copy).

fn main() {
    let commit = std::process::Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown commit".to_string());
    println!("cargo:rustc-env=MARROW_GIT_COMMIT={commit}");
    // A new commit or checkout moves HEAD or a ref; the index changes with
    // every `git add`, which is what --dirty reads.
    for p in ["../../.git/HEAD", "../../.git/refs/heads", "../../.git/index"] {
        println!("cargo:rerun-if-changed={p}");
    }
}
