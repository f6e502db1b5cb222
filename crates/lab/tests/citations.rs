//! Every figure in the docs stands on a file in `lab-results/`, and every file there
//! stands behind a figure: a doc (README.md, CHANGELOG.md, docs/**/*.md) that cites a
//! missing file fails, as does a file no doc cites, or one `lab-results/README.md` (the
//! index) does not list.
//!
//! The experiments of earlier builds keep their data in `docs/history/data/`, cited as
//! `history/data/<path>` by the pages of `docs/history/` only: every file there must be
//! cited by one, and a page for users may not cite it (its figures stand on `lab-results/`,
//! whose every record names the commit that measured it).
//!
//! A citation is the text `lab-results/<path>`, where `<path>` may hold one `{a,b,…}`
//! alternation and `*` wildcards within a file name (`lab-results/x-{a,b}.jsonl`,
//! `lab-results/x-*.jsonl`); a wildcard that matches nothing is a missing file. The index
//! names each file as `<path>` in the first column of its tables.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file below `dir`, as paths relative to `base` with `/` separators.
fn files_below(dir: &Path, base: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files_below(&p, base, out);
        } else {
            let rel = p.strip_prefix(base).unwrap();
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// The docs that may cite data, relative to the repository's root.
fn docs(root: &Path) -> Vec<String> {
    let mut out = vec!["README.md".to_string(), "CHANGELOG.md".to_string()];
    let mut d = Vec::new();
    files_below(&root.join("docs"), root, &mut d);
    out.extend(d.into_iter().filter(|p| p.ends_with(".md")));
    out.sort();
    out
}

/// The data files below `dir` (relative to the repository), relative to it, its index
/// (README.md) excepted.
fn data_in(root: &Path, dir: &str) -> Vec<String> {
    let dir = root.join(dir);
    let mut out = Vec::new();
    files_below(&dir, &dir, &mut out);
    out.retain(|p| p != "README.md");
    out.sort();
    out
}

fn data(root: &Path) -> Vec<String> {
    data_in(root, "lab-results")
}

const HISTORY_DATA: &str = "docs/history/data";

fn is_history_page(doc: &str) -> bool {
    doc.starts_with("docs/history/")
}

/// The paths cited in `text`: what follows each `lab-results/`, up to the first
/// character that cannot be part of a path, with trailing punctuation trimmed.
pub fn citations(text: &str) -> Vec<String> {
    citations_of(text, "lab-results/")
}

/// The paths cited in `text` after each `key` (`lab-results/` or `history/data/`).
fn citations_of(text: &str, key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(key) {
        rest = &rest[i + key.len()..];
        // The path runs to the first character a path cannot hold, or to a comma
        // outside an alternation; a sentence's full stop after it is not part of it.
        let mut depth = 0;
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => return true,
                    _ => {}
                }
                !(c.is_ascii_alphanumeric() || "._-/*{},".contains(c))
            })
            .map_or(rest.len(), |(i, _)| i);
        let cited = rest[..end].trim_end_matches(['.', '/']);
        if !cited.is_empty() {
            out.push(cited.to_string());
        }
    }
    out
}

/// `pattern` with its one `{a,b,…}` alternation expanded.
fn expand(pattern: &str) -> Vec<String> {
    match (pattern.find('{'), pattern.find('}')) {
        (Some(a), Some(b)) if a < b => pattern[a + 1..b]
            .split(',')
            .map(|alt| format!("{}{alt}{}", &pattern[..a], &pattern[b + 1..]))
            .collect(),
        _ => vec![pattern.to_string()],
    }
}

/// Whether `name` matches `pattern`, where `*` stands for any run of characters but `/`.
fn matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            let Some(rest) = name.strip_prefix(head) else {
                return false;
            };
            (0..=rest.len())
                .take_while(|&i| i == 0 || !rest[..i].contains('/'))
                .filter(|&i| rest.is_char_boundary(i))
                .any(|i| matches(tail, &rest[i..]))
        }
    }
}

/// The files a citation names; empty when one of its alternatives names none. A
/// directory cited (with or without its slash) names no file: the files in it need
/// citations of their own.
fn resolve(cited: &str, files: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for p in expand(cited) {
        let named: Vec<String> = files.iter().filter(|f| matches(&p, f)).cloned().collect();
        if named.is_empty() {
            return Vec::new();
        }
        out.extend(named);
    }
    out
}

fn is_directory(cited: &str, files: &[String]) -> bool {
    let dir = format!("{}/", cited.trim_end_matches('/'));
    !cited.contains(['*', '{']) && files.iter().any(|f| f.starts_with(&dir))
}

/// What the docs cite after `key` among `files`: (the docs citing any, as
/// `doc: key<path>`; the citations that name no file; the files no doc cites).
fn cited_by_docs(root: &Path, key: &str, files: &[String]) -> (Vec<(String, String)>, Vec<String>, Vec<String>) {
    let mut cited: BTreeSet<String> = BTreeSet::new();
    let mut citing = Vec::new();
    let mut missing = Vec::new();
    for doc in docs(root) {
        let Ok(text) = std::fs::read_to_string(root.join(&doc)) else {
            continue;
        };
        for c in citations_of(&text, key) {
            if c == "README.md" {
                continue; // the index itself
            }
            let named = resolve(&c, files);
            if named.is_empty() && !is_directory(&c, files) {
                missing.push(format!("{doc}: {key}{c}"));
            }
            citing.push((doc.clone(), format!("{doc}: {key}{c}")));
            cited.extend(named);
        }
    }
    let uncited = files.iter().filter(|f| !cited.contains(*f)).cloned().collect();
    (citing, missing, uncited)
}

#[test]
fn every_cited_lab_result_exists_and_every_lab_result_is_cited() {
    let root = root();
    let (_, missing, uncited) = cited_by_docs(&root, "lab-results/", &data(&root));
    assert!(
        missing.is_empty(),
        "docs cite lab-results files that do not exist (fix the citation or remove the claim):\n  {}",
        missing.join("\n  ")
    );
    assert!(
        uncited.is_empty(),
        "lab-results files no doc cites (cite them where their figures are, or delete them):\n  {}",
        uncited.join("\n  ")
    );
}

#[test]
fn history_data_is_cited_by_history_pages_only_and_every_file_of_it_is_cited() {
    let root = root();
    let (citing, missing, uncited) = cited_by_docs(&root, "history/data/", &data_in(&root, HISTORY_DATA));
    let from_user_docs: Vec<String> = citing
        .into_iter()
        .filter(|(doc, _)| !is_history_page(doc))
        .map(|(_, c)| c)
        .collect();
    assert!(
        from_user_docs.is_empty(),
        "pages for users cite the history's data (measure again into lab-results/, or move the claim to docs/history/):\n  {}",
        from_user_docs.join("\n  ")
    );
    assert!(
        missing.is_empty(),
        "history pages cite data that does not exist:\n  {}",
        missing.join("\n  ")
    );
    assert!(
        uncited.is_empty(),
        "{HISTORY_DATA} files no history page cites (cite them or delete them):\n  {}",
        uncited.join("\n  ")
    );
}

#[test]
fn the_index_lists_every_lab_result_and_nothing_else() {
    let root = root();
    let files: BTreeSet<String> = data(&root).into_iter().collect();
    let index = std::fs::read_to_string(root.join("lab-results/README.md")).expect("lab-results/README.md");
    let listed: BTreeSet<String> = index
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(name, _)| name.to_string()))
        .collect();
    let unlisted: Vec<&String> = files.difference(&listed).collect();
    let gone: Vec<&String> = listed.difference(&files).collect();
    assert!(
        unlisted.is_empty() && gone.is_empty(),
        "lab-results/README.md is out of date:\n  not listed: {unlisted:?}\n  listed but missing: {gone:?}"
    );
}

/// Every record in `lab-results/` says which commit measured it (`commit`): a figure a
/// page for users shows must name its build. Records of earlier builds without one belong
/// to the history (`docs/history/data/`).
#[test]
fn every_record_carries_its_commit() {
    let root = root();
    let mut without = Vec::new();
    let mut unparsed = Vec::new();
    for f in data(&root).into_iter().filter(|f| f.ends_with(".jsonl")) {
        let text = std::fs::read_to_string(root.join("lab-results").join(&f)).unwrap();
        let mut lacking = 0;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            match serde_json::from_str::<serde_json::Value>(line) {
                Ok(v) if v["commit"].as_str().is_some_and(|c| !c.is_empty()) => {}
                Ok(_) => lacking += 1,
                Err(e) => unparsed.push(format!("{f}: {e}")),
            }
        }
        if lacking > 0 {
            without.push(format!("{f} ({lacking} records)"));
        }
    }
    assert!(
        unparsed.is_empty(),
        "records that are not JSON:\n  {}",
        unparsed.join("\n  ")
    );
    assert!(
        without.is_empty(),
        "records without a commit (write them with the lab or a bench that records one):\n  {}",
        without.join("\n  ")
    );
}

#[test]
fn citations_are_read_as_written() {
    let text = "data (`lab-results/a-{x,y}.jsonl`), lab-results/b.jsonl. and lab-results/c-*.jsonl, \
                lab-results/reproduce/ledger.tsv; lab-results/reproduce/";
    assert_eq!(
        citations(text),
        [
            "a-{x,y}.jsonl",
            "b.jsonl",
            "c-*.jsonl",
            "reproduce/ledger.tsv",
            "reproduce"
        ]
    );
    let files: Vec<String> = [
        "a-x.jsonl",
        "a-y.jsonl",
        "c-1.jsonl",
        "c-2.jsonl",
        "reproduce/ledger.tsv",
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(resolve("a-{x,y}.jsonl", &files), ["a-x.jsonl", "a-y.jsonl"]);
    assert_eq!(resolve("c-*.jsonl", &files), ["c-1.jsonl", "c-2.jsonl"]);
    assert!(resolve("d.jsonl", &files).is_empty());
    assert!(
        resolve("a-{x,z}.jsonl", &files).is_empty(),
        "every alternative must name a file"
    );
    assert!(
        resolve("*.tsv", &files).is_empty(),
        "a wildcard does not cross a directory"
    );
    assert!(is_directory("reproduce", &files));
}
