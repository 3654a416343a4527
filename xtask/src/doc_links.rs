//! Checks the `#fragment` of every link between the crate's rustdoc pages.
//!
//! rustdoc resolves intra-doc links to items, but not the fragment after
//! them: `[docs](super#no-such-heading)` renders as a link to a heading that
//! does not exist, and `-D warnings` says nothing. So after rustdoc has run,
//! every relative `href` with a fragment in the crate's HTML is followed to
//! its page, which must carry an element with that `id`.

use std::collections::{BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};

/// Every relative link under `root` whose fragment names no element of its
/// target page, as `page: href`. A link to a page outside `root` (another
/// crate's docs, std's) is not checked.
pub fn broken_fragments(root: &Path) -> Result<Vec<String>, String> {
    let mut pages = Vec::new();
    collect_html(root, &mut pages)?;
    let mut ids: HashMap<PathBuf, BTreeSet<String>> = HashMap::new();
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).map_err(|e| format!("read {}: {e}", page.display()))?;
        for href in attribute_values(&text, "href") {
            let Some((path, fragment)) = href.split_once('#') else { continue };
            if fragment.is_empty() || path.contains("://") || path.starts_with("javascript:") {
                continue;
            }
            let target = if path.is_empty() { page.clone() } else { normalize(&page.parent().unwrap().join(path)) };
            if !target.starts_with(root) || !target.is_file() {
                continue;
            }
            if !ids.contains_key(&target) {
                let t = std::fs::read_to_string(&target).map_err(|e| format!("read {}: {e}", target.display()))?;
                ids.insert(target.clone(), attribute_values(&t, "id").map(str::to_string).collect());
            }
            if !ids[&target].contains(fragment) {
                broken.push(format!("{}: {href}", page.strip_prefix(root).unwrap_or(page).display()));
            }
        }
    }
    broken.sort();
    broken.dedup();
    Ok(broken)
}

fn collect_html(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    for entry in std::fs::read_dir(dir).map_err(|e| format!("read {}: {e}", dir.display()))? {
        let path = entry.map_err(|e| format!("read {}: {e}", dir.display()))?.path();
        if path.is_dir() {
            collect_html(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "html") {
            out.push(path);
        }
    }
    Ok(())
}

/// The double-quoted values of `name="..."` attributes in `html`.
fn attribute_values<'a>(html: &'a str, name: &str) -> impl Iterator<Item = &'a str> {
    let needle = format!(" {name}=\"");
    let starts: Vec<usize> = html.match_indices(needle.as_str()).map(|(i, _)| i + needle.len()).collect();
    starts.into_iter().filter_map(move |start| {
        let rest = &html[start..];
        rest.find('"').map(|end| &rest[..end])
    })
}

/// `path` with its `.` and `..` components resolved lexically.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fragment_naming_no_heading_is_reported_and_others_are_not() {
        let root = std::env::temp_dir().join(format!("xtask-doc-links-{}", std::process::id()));
        let sub = root.join("task");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(
            sub.join("index.html"),
            r##"<h2 id="design-of-closure-tasks">Design</h2> <a href="#self">x</a>"##,
        )
        .unwrap();
        std::fs::write(
            sub.join("struct.JoinHandle.html"),
            concat!(
                r##"<a href="index.html#design">bad</a> <a href="index.html#design-of-closure-tasks">good</a> "##,
                r##"<a href="../task/index.html#design-of-closure-tasks">good</a> <a href="https://x.org/a#b">ext</a> "##,
                r##"<a href="../../std/index.html#nope">other crate</a> <a href="index.html">no fragment</a>"##
            ),
        )
        .unwrap();
        let broken = broken_fragments(&root).unwrap();
        std::fs::remove_dir_all(&root).unwrap();
        let sep = std::path::MAIN_SEPARATOR;
        assert_eq!(
            broken,
            [format!("task{sep}index.html: #self"), format!("task{sep}struct.JoinHandle.html: index.html#design")]
        );
    }
}
