#!/usr/bin/env python3
"""Writes lab-results/README.md: every file in lab-results/, the commits its records carry,
and the doc sections that cite it.

A citation is the text `lab-results/<path>` in README.md, CHANGELOG.md or docs/**/*.md,
with one `{a,b}` alternation and `*` wildcards allowed (the rule
crates/lab/tests/citations.rs checks). Run from the repository's root after adding,
deleting or citing a results file: `python3 scripts/lab-results-index.py`.
"""
import glob
import json
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DATA = "lab-results"


def data_files():
    out = []
    for d, _, fs in os.walk(os.path.join(ROOT, DATA)):
        for f in fs:
            rel = os.path.relpath(os.path.join(d, f), os.path.join(ROOT, DATA))
            if rel != "README.md":
                out.append(rel.replace(os.sep, "/"))
    return sorted(out)


def citations(line):
    out = []
    for m in re.finditer(r"lab-results/", line):
        rest = line[m.end():]
        depth, end = 0, len(rest)
        for i, c in enumerate(rest):
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
            elif c == "," and depth == 0:
                end = i
                break
            if not (c.isascii() and (c.isalnum() or c in "._-/*{},")):
                end = i
                break
        cited = rest[:end].rstrip("./")
        if cited:
            out.append(cited)
    return out


def expand(p):
    m = re.search(r"\{([^}]*)\}", p)
    if not m:
        return [p]
    return [p[: m.start()] + a + p[m.end():] for a in m.group(1).split(",")]


def matches(pattern, name):
    rx = "^" + "".join("[^/]*" if ch == "*" else re.escape(ch) for ch in pattern) + "$"
    return re.match(rx, name) is not None


def slug(heading):
    h = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return h.replace(" ", "-")


def cited_by(files):
    docs = ["README.md", "CHANGELOG.md"] + sorted(
        os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs/**/*.md"), recursive=True)
    )
    by = {f: [] for f in files}
    for doc in docs:
        path = os.path.join(ROOT, doc)
        if not os.path.exists(path):
            continue
        section, fence = None, False
        for line in open(path, encoding="utf-8"):
            if line.startswith("```"):
                fence = not fence
            if not fence and line.startswith("#"):
                section = line.lstrip("#").strip()
            for c in citations(line):
                for p in expand(c):
                    for f in files:
                        if matches(p, f):
                            where = (doc, section)
                            if where not in by[f]:
                                by[f].append(where)
    return by


def commits(f):
    path = os.path.join(ROOT, DATA, f)
    if not f.endswith(".jsonl"):
        return None
    seen, total, without = [], 0, 0
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if not line:
            continue
        total += 1
        c = json.loads(line).get("commit")
        if c:
            if c not in seen:
                seen.append(c)
        else:
            without += 1
    return seen, total, without


def link(doc, section):
    target = os.path.relpath(os.path.join(ROOT, doc), os.path.join(ROOT, DATA))
    if section and doc != "README.md" and not section.startswith(doc):
        return f"[{doc} § {section}]({target}#{slug(section)})"
    return f"[{doc}]({target})"


def main():
    files = data_files()
    by = cited_by(files)
    rows = []
    bare = 0
    for f in files:
        c = commits(f)
        if c is None:
            what = "–"
        else:
            seen, total, without = c
            shown = ", ".join(s[:12] for s in seen[:4]) + (" …" if len(seen) > 4 else "")
            if not seen:
                what = f"**none recorded** ({total} records)"
                bare += 1
            elif without:
                what = f"{shown}; **{without} of {total} records without**"
                bare += 1
            else:
                what = f"{shown} ({total} records)"
        cites = "; ".join(link(d, s) for d, s in by[f]) or "**cited by nothing**"
        rows.append(f"| `{f}` | {what} | {cites} |")
    out = f"""# lab-results

The records behind the docs' figures: one JSON line per measurement, written by
`mpflex-lab run` (and `mpflex-lab reproduce` in `reproduce/`); `mpflex-lab report <file>`
draws their tables. Each file is listed with the commits its records carry (`commit`,
the lab's build; the mpflex build is in `build`) and the doc sections that cite it.
`crates/lab/tests/citations.rs` fails when a doc cites a missing file or a file here is
cited by no doc or missing from this list; `python3 scripts/lab-results-index.py` writes
this page again.

{bare} of {len(files)} files hold records without a commit: they were written before the
lab recorded its commit, and the build each doc names for them is the doc's word.

| file | commit | cited in |
|---|---|---|
""" + "\n".join(rows) + "\n"
    with open(os.path.join(ROOT, DATA, "README.md"), "w", encoding="utf-8") as fh:
        fh.write(out)
    uncited = [f for f in files if not by[f]]
    if uncited:
        print("cited by nothing:", *uncited, sep="\n  ", file=sys.stderr)


if __name__ == "__main__":
    main()
