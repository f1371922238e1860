//! The design notes and recipes name the files a reader should open; every path they name
//! exists, so they cannot drift from the code unnoticed.

use std::path::Path;

/// The backquoted repository paths in `text`: those that start with a top-level directory of
/// the repository or are a top-level file, without templates such as `src/adapter/<name>.rs`.
fn named_paths(text: &str) -> Vec<String> {
    const ROOTS: [&str; 12] = [
        "src/",
        "tests/",
        "benches/",
        "docs/",
        "scenarios/",
        "traces/",
        "sweeps/",
        "results/",
        "scripts/",
        "interop/",
        "fuzz/",
        "examples/",
    ];
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| ROOTS.iter().any(|r| s.starts_with(r)) || *s == "Cargo.toml")
        .filter(|s| !s.contains(['<', '*', ' ']))
        .map(|s| s.trim_end_matches(':').to_owned())
        .collect()
}

#[test]
fn every_path_the_design_notes_and_recipes_name_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for doc in ["docs/design.md", "docs/recipes.md"] {
        let text = std::fs::read_to_string(root.join(doc)).expect(doc);
        let paths = named_paths(&text);
        assert!(paths.len() > 10, "{doc} names few paths: {paths:?}");
        for path in paths {
            assert!(
                root.join(&path).exists(),
                "{doc} names {path}, which does not exist"
            );
            checked += 1;
        }
    }
    assert!(checked > 40);
}

#[test]
fn paths_are_found_in_backquotes_and_templates_are_left_out() {
    let text = "see `src/relay/profile.rs` and `src/adapter/<name>.rs`, not `cargo test`";
    assert_eq!(named_paths(text), ["src/relay/profile.rs"]);
}
