//! docs/engine.md's module map names the engine's source files as they are: every file it
//! names exists in `crates/engine/src`, and every `.rs` file there (unit-test files named
//! `tests.rs` excepted) has a row.
//!
//! The map is the table under `## Module map`; a row's first cell is the file's path
//! relative to `crates/engine/src`, in backticks (`` `session/mod.rs` ``). When a module
//! moves, the failure lists the rows to drop and the files to add.

use std::collections::BTreeSet;
use std::path::Path;

/// The paths in the first cell of each table row under `## Module map`.
fn map_entries(doc: &str) -> Vec<String> {
    let Some(start) = doc.find("\n## Module map") else {
        return Vec::new();
    };
    let section = &doc[start + 1..];
    let end = section[3..].find("\n## ").map_or(section.len(), |i| i + 3);
    section[..end]
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(path, _)| path.to_string()))
        .collect()
}

/// Every `.rs` file below `dir` but `tests.rs` files, relative to `base`.
fn sources(dir: &Path, base: &Path, out: &mut BTreeSet<String>) {
    for e in std::fs::read_dir(dir).expect("crates/engine/src").flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, base, out);
        } else if p.extension().is_some_and(|x| x == "rs") && p.file_name().is_some_and(|n| n != "tests.rs") {
            out.insert(p.strip_prefix(base).unwrap().to_string_lossy().replace('\\', "/"));
        }
    }
}

#[test]
fn the_engine_map_names_every_source_file_and_only_those() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/engine.md")).expect("docs/engine.md");
    let entries = map_entries(&doc);
    assert!(!entries.is_empty(), "docs/engine.md has no `## Module map` table");
    let named: BTreeSet<String> = entries.iter().cloned().collect();
    assert_eq!(
        named.len(),
        entries.len(),
        "a file is named twice in the map: {entries:?}"
    );
    let src = root.join("crates/engine/src");
    let mut tree = BTreeSet::new();
    sources(&src, &src, &mut tree);
    let stale: Vec<&String> = named.difference(&tree).collect();
    let unmapped: Vec<&String> = tree.difference(&named).collect();
    assert!(
        stale.is_empty() && unmapped.is_empty(),
        "docs/engine.md's module map is out of date with crates/engine/src:\n  \
         rows naming files that do not exist (drop or rename them): {stale:?}\n  \
         files with no row (add `| `path` | what it owns |`): {unmapped:?}"
    );
}

#[test]
fn the_map_is_read_from_its_own_section_only() {
    let doc = "# x\n\n| `a.rs` | not the map |\n\n## Module map\n\n| file | owns |\n|---|---|\n\
               | `lib.rs` | root |\n| `x/mod.rs` | x |\n\nText with `y.rs`.\n\n## Next\n\n| `b.rs` | no |\n";
    assert_eq!(map_entries(doc), ["lib.rs", "x/mod.rs"]);
}
