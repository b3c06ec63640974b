//! The repository stands alone: every relative link in `README.md` and `docs/*.md` resolves to a
//! file inside the repository (and its `#anchor`, when it names a markdown file, to a heading of
//! that file); every `docs/NAME.md` that experiment files, examples and source comments mention
//! exists; and no text refers to files next to the repository (a `shared` directory beside it).
//!
//! The checks are plain functions over text so that the tests below can show that each of them
//! fails on a broken input.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// The repository root (two levels above this crate).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

/// The link targets of a markdown text, outside fenced code blocks and inline code: the `URL` of
/// every `[text](URL)` and `![alt](URL)`, with the line number.
fn markdown_links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Drop inline code spans so that `a](b)` inside backticks is not a link.
        let mut plain = String::new();
        for (k, part) in line.split('`').enumerate() {
            if k % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(pos) = rest.find("](") {
            let after = &rest[pos + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].trim();
            // `[text](<url> "title")`: the URL is the first word.
            let target = target.split_whitespace().next().unwrap_or("");
            out.push((i + 1, target.trim_matches(['<', '>']).to_string()));
            rest = &after[end..];
        }
    }
    out
}

/// GitHub's anchor of a heading: lower case, letters, digits, `-` and `_` kept, spaces to `-`,
/// everything else dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a markdown text's headings (outside code blocks).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(slug(line.trim_start_matches('#')));
        }
    }
    out
}

/// Whether `path` (made of normal components after resolving `..`) stays inside `root`.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Problems with the relative links of the markdown file `file` (text `text`) in the repository
/// at `root`: targets that leave the repository, do not exist, or name a missing heading.
fn broken_links(root: &Path, file: &Path, text: &str) -> Vec<String> {
    let dir = file.parent().unwrap_or(root);
    let mut out = Vec::new();
    for (line, target) in markdown_links(text) {
        if target.is_empty()
            || target.contains("://")
            || target.starts_with("mailto:")
            || target.starts_with('#') && target.len() == 1
        {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        let where_ = format!("{}:{line}: ({target})", file.display());
        let resolved = if path.is_empty() {
            file.to_path_buf()
        } else {
            normalize(&dir.join(path))
        };
        if !resolved.starts_with(root) {
            out.push(format!("{where_}: points outside the repository"));
            continue;
        }
        if !resolved.exists() {
            out.push(format!("{where_}: {} does not exist", resolved.display()));
            continue;
        }
        if let Some(a) = anchor
            && resolved.extension().is_some_and(|e| e == "md")
        {
            let heads = anchors(&std::fs::read_to_string(&resolved).unwrap_or_default());
            if !heads.contains(a) {
                out.push(format!("{where_}: no heading with anchor #{a}"));
            }
        }
    }
    out
}

/// `docs/NAME.md` mentions in `text` whose file does not exist under `root`.
fn missing_doc_mentions(root: &Path, file: &Path, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(pos) = rest.find("docs/") {
            let tail = &rest[pos..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || "/._-".contains(c)))
                .unwrap_or(tail.len());
            let name = tail[..end].trim_end_matches('.');
            if name.ends_with(".md") && !root.join(name).exists() {
                out.push(format!(
                    "{}:{}: {name} does not exist",
                    file.display(),
                    i + 1
                ));
            }
            rest = &tail[end.max(5)..];
        }
    }
    out
}

/// The text that must not appear anywhere: a path next to the repository.
fn outside_reference() -> String {
    ["..", "shared"].join("/")
}

/// Every text file under `dir`, skipping build output, VCS data and hidden directories.
fn text_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        if p.is_dir() {
            if name != "target" && !name.starts_with('.') && name != "__pycache__" {
                text_files(&p, out);
            }
        } else if std::fs::read_to_string(&p).is_ok() {
            out.push(p);
        }
    }
}

/// `README.md` and `docs/*.md`.
fn markdown_docs(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

#[test]
fn relative_links_in_readme_and_docs_resolve_inside_the_repository() {
    let root = root();
    let mut problems = Vec::new();
    let mut checked = 0;
    for f in markdown_docs(&root) {
        let text = std::fs::read_to_string(&f).unwrap();
        checked += markdown_links(&text).len();
        problems.extend(broken_links(&root, &f, &text));
    }
    assert!(
        checked > 50,
        "only {checked} links found: is the parser broken?"
    );
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn docs_mentioned_by_experiments_examples_and_sources_exist() {
    let root = root();
    let mut files = Vec::new();
    for d in ["experiments", "examples", "crates"] {
        text_files(&root.join(d), &mut files);
    }
    // This file names missing pages on purpose (the self-test below).
    files.retain(|f| !f.ends_with("docs_links.rs"));
    assert!(files.len() > 50, "only {} files found", files.len());
    let mut problems = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        problems.extend(missing_doc_mentions(&root, f, &text));
        // Markdown links in comments of experiment files resolve too.
        if f.extension().is_some_and(|e| e == "toml" || e == "md") {
            problems.extend(broken_links(&root, f, &text));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn no_text_refers_to_files_next_to_the_repository() {
    let root = root();
    let mut files = Vec::new();
    text_files(&root, &mut files);
    assert!(files.len() > 50, "only {} files found", files.len());
    let needle = outside_reference();
    let hits: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let text = std::fs::read_to_string(f).ok()?;
            let lines: Vec<String> = text
                .lines()
                .enumerate()
                .filter(|(_, l)| l.contains(&needle))
                .map(|(i, l)| format!("{}:{}: {}", f.display(), i + 1, l.trim()))
                .collect();
            (!lines.is_empty()).then(|| lines.join("\n"))
        })
        .collect();
    assert!(hits.is_empty(), "{}", hits.join("\n"));
}

/// Each check finds what it is meant to find (so that the tests above can fail).
#[test]
fn the_checks_catch_broken_links_missing_docs_and_outside_references() {
    let root = root();
    let readme = root.join("README.md");
    let bad = format!(
        "[ok](docs/studies.md) [gone](docs/nope.md) [out]({}/DESIGN.md) [anchor](docs/studies.md#no-such-heading) \
         [good anchor](docs/studies.md#storage) [web](https://example.org/x.md)\n\
         ```\n[in code](missing.md)\n```\n`[inline](missing.md)`\n",
        outside_reference()
    );
    let found = broken_links(&root, &readme, &bad);
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(found[0].contains("docs/nope.md"), "{found:?}");
    assert!(found[1].contains("outside the repository"), "{found:?}");
    assert!(found[2].contains("#no-such-heading"), "{found:?}");
    let mentions = missing_doc_mentions(
        &root,
        &readme,
        "# see docs/studies.md, docs/missing-page.md.",
    );
    assert_eq!(mentions.len(), 1, "{mentions:?}");
    assert!(mentions[0].contains("docs/missing-page.md"));
    assert_eq!(
        slug("Differences from the reference code (notes B11)"),
        "differences-from-the-reference-code-notes-b11"
    );
    let heads =
        anchors("## Storage\n```\n# not a heading\n```\n### `lda` (online-LDA surrogate)\n");
    assert!(
        heads
            .into_iter()
            .eq(["lda-online-lda-surrogate", "storage"])
    );
}
