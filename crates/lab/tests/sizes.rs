//! The size floors, held by test: no source file over 800 lines anywhere (the engine's
//! over 650), and no function over 100 lines in the engine, the schedulers, the wire
//! codec or the driver (tests excepted). A file or function past its floor is one doing
//! more than one job: the failure names it, to be split by responsibility.

use std::path::{Path, PathBuf};

const MAX_FILE: usize = 800;
const MAX_ENGINE_FILE: usize = 650;
const MAX_FN: usize = 100;
/// Where functions are held to [`MAX_FN`] lines.
const FN_ROOTS: &[&str] = &[
    "crates/engine/src",
    "crates/sched/src",
    "crates/wire/src",
    "crates/mpflex/src/driver",
];

/// Fails naming everything over its floor.
fn check_over(what: &str, over: &[String]) {
    assert!(
        over.is_empty(),
        "{what} over their floor; split them by responsibility: {over:#?}"
    );
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file below `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
    {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The source with comments, strings and character literals blanked out (line breaks
/// kept), so braces and `fn` in them do not count.
fn code_only(src: &str) -> Vec<u8> {
    let s = src.as_bytes();
    let mut out = s.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for b in &mut out[from..to.min(s.len())] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    };
    let find = |from: usize, pat: &[u8]| {
        s[from..]
            .windows(pat.len())
            .position(|w| w == pat)
            .map_or(s.len(), |i| from + i + pat.len())
    };
    let mut i = 0;
    while i < s.len() {
        let ident_before = i > 0 && (s[i - 1].is_ascii_alphanumeric() || s[i - 1] == b'_');
        let end = if s[i..].starts_with(b"//") {
            find(i, b"\n") - 1
        } else if s[i..].starts_with(b"/*") {
            find(i + 2, b"*/")
        } else if s[i] == b'r' && !ident_before && matches!(s.get(i + 1), Some(b'"' | b'#')) {
            let hashes = s[i + 1..].iter().take_while(|&&b| b == b'#').count();
            if s.get(i + 1 + hashes) != Some(&b'"') {
                i += 1;
                continue;
            }
            let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
            find(i + 2 + hashes, &close)
        } else if s[i] == b'"' {
            let mut j = i + 1;
            while j < s.len() && s[j] != b'"' {
                j += if s[j] == b'\\' { 2 } else { 1 };
            }
            j + 1
        } else if s[i] == b'\'' && (s.get(i + 2) == Some(&b'\'') || s.get(i + 1) == Some(&b'\\')) {
            // A character literal ('x', '\n', '\u{..}'); a lifetime has no closing quote.
            find(i + 2, b"'")
        } else {
            i += 1;
            continue;
        };
        blank(&mut out, i, end);
        i = end;
    }
    out
}

/// The byte just past the brace that closes the one at `open`.
fn matching_brace(code: &[u8], open: usize) -> usize {
    let mut depth = 0;
    for (k, &b) in code.iter().enumerate().skip(open) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// Each function with a body outside test code: (name, first line, lines).
fn functions(src: &str) -> Vec<(String, usize, usize)> {
    let code = code_only(src);
    let text = String::from_utf8_lossy(&code);
    let line_of = |at: usize| code[..at].iter().filter(|&&b| b == b'\n').count() + 1;
    // Test modules: `#[cfg(test)]` then `mod name {`.
    let mut tests = Vec::new();
    let raw: Vec<&str> = src.lines().collect();
    let mut at = 0;
    for (n, line) in text.lines().enumerate() {
        let start = at;
        at += line.len() + 1;
        let t = line.trim_start();
        let is_mod = t.starts_with("mod ") || t.starts_with("pub mod ") || t.starts_with("pub(crate) mod ");
        if is_mod && n > 0 && raw[n - 1].trim() == "#[cfg(test)]" {
            if let Some(o) = line.find('{') {
                tests.push((start, matching_brace(&code, start + o)));
            }
        }
    }
    let mut out = Vec::new();
    let mut at = 0;
    for (n, line) in text.lines().enumerate() {
        let start = at;
        at += line.len() + 1;
        let Some(name) = fn_name(line) else { continue };
        let attr = if n > 0 { raw[n - 1].trim() } else { "" };
        if attr == "#[test]" || attr.starts_with("#[tokio::test") || tests.iter().any(|&(a, b)| a <= start && start < b)
        {
            continue;
        }
        // The body's brace, unless a `;` ends a declaration first.
        let rest = &code[start..];
        let Some(open) = rest.iter().position(|&b| b == b'{' || b == b';') else {
            continue;
        };
        if rest[open] == b';' {
            continue;
        }
        let end = matching_brace(&code, start + open);
        out.push((name, n + 1, line_of(end - 1) - n));
    }
    out
}

/// The name of the function a line declares, if it does.
fn fn_name(line: &str) -> Option<String> {
    let mut t = line.trim_start();
    for prefix in ["pub(crate) ", "pub(super) ", "pub ", "const ", "async ", "unsafe "] {
        t = t.strip_prefix(prefix).unwrap_or(t);
    }
    let rest = t.strip_prefix("fn ")?;
    let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
    (!name.is_empty()).then_some(name)
}

#[test]
fn no_source_file_is_over_its_floor() {
    let root = root();
    let mut files = Vec::new();
    for e in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        if e.path().join("src").is_dir() {
            rust_files(&e.path().join("src"), &mut files);
        }
    }
    assert!(files.len() > 50, "too few sources found: {}", files.len());
    let engine = root.join("crates/engine/src");
    let mut over = Vec::new();
    for f in files {
        let lines = std::fs::read_to_string(&f).unwrap().lines().count();
        let max = if f.starts_with(&engine) {
            MAX_ENGINE_FILE
        } else {
            MAX_FILE
        };
        if lines > max {
            let at = f.strip_prefix(&root).unwrap().display();
            over.push(format!("{at} ({lines} > {max})"));
        }
    }
    check_over("files", &over);
}

#[test]
fn no_function_in_the_core_is_over_a_hundred_lines() {
    let root = root();
    let mut over = Vec::new();
    for dir in FN_ROOTS {
        let mut files = Vec::new();
        rust_files(&root.join(dir), &mut files);
        for f in files.iter().filter(|f| f.file_name().is_some_and(|n| n != "tests.rs")) {
            for (name, line, len) in functions(&std::fs::read_to_string(f).unwrap()) {
                if len > MAX_FN {
                    let at = f.strip_prefix(&root).unwrap().display();
                    over.push(format!("{at}:{line} fn {name} ({len} lines)"));
                }
            }
        }
    }
    check_over("functions", &over);
}

/// The scanner sees a function's whole body, braces in strings, characters and
/// comments left out, and passes over test code.
#[test]
fn the_scanner_measures_functions_as_written() {
    let src = "fn a() {\n    let s = \"}\";\n    let c = '{';\n    // }\n    let r = r#\"}\"#;\n}\n\
               fn b<'x>(v: &'x str) -> &'x str { v }\n\
               trait T { fn decl(&self); }\n\
               #[test]\nfn t() {\n}\n\
               #[cfg(test)]\nmod tests {\n    fn helper() {\n    }\n}\n";
    let got = functions(src);
    assert_eq!(got, vec![("a".to_string(), 1, 6), ("b".to_string(), 7, 1)]);
}
