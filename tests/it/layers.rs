//! The layer rule of `docs/design.md`, checked: a module of the library uses only modules of
//! lower layers (`use crate::...` and `crate::...` paths in code, not in comments). A new
//! top-level module must be given a layer here, or this test fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Top-level modules from the bottom. A module may name only modules of a strictly lower rank,
/// so two modules of one rank (sweep and compare) cannot use each other either.
const LAYERS: &[(&str, u32)] = &[
    ("rng", 0),
    ("limits", 0),
    ("parallel", 0),
    ("chart", 0),
    ("segmented", 0),
    ("nip01", 1),
    ("protocol", 2),
    ("relay", 3),
    ("peer", 4),
    ("adapter", 5),
    ("implementations", 6),
    ("sim", 7),
    ("stats", 8),
    ("trace", 9),
    ("scenario", 10),
    ("replay", 11),
    ("live", 12),
    ("node_host", 12),
    ("turmoil_driver", 13),
    ("live_engine", 13),
    ("probe", 13),
    ("sweep", 14),
    ("compare", 14),
    ("soak", 14),
    ("show", 14),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level modules a line of code names through `crate::`.
fn named_modules(line: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or_default();
    code.match_indices("crate::")
        .filter(|(i, _)| {
            // `relaysim::` and `$crate::` are not this crate's paths from inside it.
            !code[..*i].ends_with('$') && !code[..*i].ends_with(|c: char| c.is_alphanumeric())
        })
        .map(|(i, m)| {
            code[i + m.len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()
        })
        .collect()
}

/// The violations of the layer rule in `src/` (the library; `main.rs` and `cli/` are the
/// binary on top of everything).
fn violations(src: &Path) -> Vec<String> {
    let rank: BTreeMap<&str, u32> = LAYERS.iter().copied().collect();
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let relative = file.strip_prefix(src).unwrap();
        let top = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        if top == "lib" || top == "main" || top == "cli" {
            continue;
        }
        let Some(&own) = rank.get(top.as_str()) else {
            found.push(format!(
                "src/{}: module `{top}` has no layer in tests/it/layers.rs",
                relative.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for used in named_modules(line) {
                if used == top {
                    continue;
                }
                match rank.get(used.as_str()) {
                    Some(&r) if r < own => {}
                    Some(_) => found.push(format!(
                        "src/{}:{}: `{top}` (layer {own}) uses `{used}`, which is not below it",
                        relative.display(),
                        n + 1
                    )),
                    None => found.push(format!(
                        "src/{}:{}: `{used}` is not a known module",
                        relative.display(),
                        n + 1
                    )),
                }
            }
        }
    }
    found
}

#[test]
fn every_module_uses_only_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = violations(&src);
    assert!(found.is_empty(), "layer violations:\n{}", found.join("\n"));
}

#[test]
fn the_check_catches_an_upward_use() {
    let dir = std::env::temp_dir().join(format!("relaysim-layers-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("relay")).unwrap();
    std::fs::write(
        dir.join("relay/mod.rs"),
        "// crate::scenario in a comment is fine\nuse crate::scenario::Scenario;\nuse crate::nip01::Identity;\n",
    )
    .unwrap();
    let found = violations(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("relay/mod.rs:2"), "{found:?}");
}

/// Files above `protocol/` (whose engines are long because each spec rule has its test beside
/// it) that are longer than about 600 lines, unless their top says why.
fn long_files(src: &Path) -> Vec<String> {
    const LIMIT: usize = 650;
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    files
        .iter()
        .filter(|f| !f.strip_prefix(src).unwrap().starts_with("protocol"))
        .filter_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let lines = text.lines().count();
            let head: String = text.lines().take(12).collect::<Vec<_>>().join("\n");
            (lines > LIMIT && !head.contains("Longer than 600 lines")).then(|| {
                format!(
                    "{}: {lines} lines and no \"Longer than 600 lines because ...\" at its top",
                    f.display()
                )
            })
        })
        .collect()
}

#[test]
fn no_file_above_the_protocol_layer_is_long_without_a_reason() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = long_files(&src);
    assert!(found.is_empty(), "{}", found.join("\n"));
}
