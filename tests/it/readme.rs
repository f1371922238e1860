//! Every command the README shows is run: each line of a fenced `sh` block that starts with
//! `relaysim`, `./target/release/relaysim` or `cargo run` (lines ending in `\` joined), through
//! `sh` in a scratch directory that links the repository's inputs, with `relaysim` on `PATH`
//! as the binary under test. A command the README shows and CI cannot run must be listed in
//! [`NOT_RUN`] with the reason; a README command neither run nor listed fails the test, so the
//! README cannot drift from the code.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Commands shown in the README that this test does not run, and why.
const NOT_RUN: &[(&str, &str)] = &[
    (
        "cargo test --release --locked --features contextvm-sdk",
        "the test command itself",
    ),
    (
        "cargo bench",
        "benchmarks measure speed, which tests never assert; they take minutes",
    ),
    (
        "(cd interop/ts-sdk && npm ci)",
        ".ci/run runs npm ci (and node_packages() here)",
    ),
    (
        "(cd interop/ts-sdk && npm ci) && (cd interop/node-host && npm ci)",
        ".ci/run runs npm ci in both (and node_packages() here)",
    ),
];

/// What README commands print, as their comments in the README say (stdout and stderr
/// together): the command as the README writes it (without its comment) and the words that
/// must appear.
const PRINTS: &[(&str, &[&str])] = &[
    ("relaysim run", &["scenario default"]),
    (
        "relaysim shrink drop.jsonl --out drop.min.jsonl",
        &["kept 1 of 10 disturbances", "outage    #0"],
    ),
    (
        "relaysim run scenarios/real-sdk/mobile-reconnect.toml --trace mobile.jsonl",
        &["Non-increasing progress for stream 1"],
    ),
    (
        "relaysim shrink mobile.jsonl --out mobile.min.jsonl",
        &["kept 1 of 136 disturbances", "outage    #0"],
    ),
];

/// The README's shell commands, continuation lines joined, comments kept (sh drops them).
fn readme_commands() -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_sh = trimmed == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        if let Some(head) = trimmed.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(trimmed);
        let command = std::mem::take(&mut pending);
        if !command.is_empty() {
            out.push(command);
        }
    }
    out
}

fn is_relaysim(command: &str) -> bool {
    command.starts_with("relaysim ")
        || command.starts_with("./target/release/relaysim ")
        || command.starts_with("cargo run")
}

/// A scratch directory with the repository's inputs linked in and `bin/relaysim`.
fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("relaysim-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::create_dir_all(dir.join("target/release")).unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    for input in ["scenarios", "traces", "sweeps", "tests", "interop", "docs"] {
        std::os::unix::fs::symlink(repo.join(input), dir.join(input)).unwrap();
    }
    let binary = Path::new(env!("CARGO_BIN_EXE_relaysim"));
    std::os::unix::fs::symlink(binary, dir.join("bin/relaysim")).unwrap();
    std::os::unix::fs::symlink(binary, dir.join("target/release/relaysim")).unwrap();
    dir
}

#[test]
fn every_readme_command_runs_or_is_listed_with_a_reason() {
    let commands = readme_commands();
    assert!(
        commands.iter().filter(|c| is_relaysim(c)).count() >= 5,
        "the README's commands were found: {commands:#?}"
    );
    for c in &commands {
        assert!(
            is_relaysim(c) || NOT_RUN.iter().any(|(n, _)| c.starts_with(n)),
            "README command neither run by this test nor listed in NOT_RUN: {c}"
        );
    }
    if let Err(e) = super::ts_sdk::node_packages() {
        panic!("the README's TypeScript example needs the node packages: {e}");
    }
    super::real_sdk::packages();
    let dir = scratch();
    let path = format!(
        "{}:{}",
        dir.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut printed = 0;
    for command in commands.iter().filter(|c| is_relaysim(c)) {
        // `cargo run --release -- ARGS` is the binary with ARGS; the test already built it.
        let shell = command.replacen("cargo run --release --", "relaysim", 1);
        let out = Command::new("sh")
            .args(["-c", &shell])
            .current_dir(&dir)
            .env("PATH", &path)
            .output()
            .expect("sh runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "README command failed ({:?}): {command}\nstdout:\n{}\nstderr:\n{stderr}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(!stderr.contains("panicked"), "{command}: {stderr}");
        // `cargo run --release -- run` is `relaysim run` with no file: the default scenario.
        let said = format!("{}{stderr}", String::from_utf8_lossy(&out.stdout));
        let bare = shell.split('#').next().unwrap_or_default().trim();
        let prints = PRINTS.iter().find(|(written, _)| bare == *written);
        for words in prints.map_or(&[][..], |(_, words)| *words) {
            assert!(
                said.contains(words),
                "{command} does not print {words:?}:\n{said}"
            );
        }
        printed += usize::from(prints.is_some());
    }
    assert_eq!(
        printed,
        PRINTS.len(),
        "every PRINTS entry matched a README command"
    );
    // What the README says these commands leave behind.
    for file in [
        "drop.jsonl",
        "drop.min.jsonl",
        "drop.min.svg",
        "drop.min.png",
        "ts.jsonl",
        "mobile.jsonl",
        "mobile.min.jsonl",
        "mobile.min.svg",
    ] {
        assert!(
            dir.join(file).exists(),
            "{file} after the README's commands"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every picture the README shows is in the repository.
#[test]
fn every_readme_picture_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let mut pictures = 0;
    for (i, _) in text.match_indices("](") {
        let is_image = text[..i]
            .rfind("![")
            .is_some_and(|open| !text[open..i].contains(']'));
        if !is_image {
            continue;
        }
        let target: String = text[i + 2..].chars().take_while(|c| *c != ')').collect();
        pictures += 1;
        assert!(
            root.join(&target).exists(),
            "README picture {target} is missing"
        );
    }
    assert!(
        pictures >= 2,
        "the README shows a trace picture and a sweep plot"
    );
}
