//! `cargo xtask layers`: the library's module structure, counted from its
//! own `use` lines and paths, printed, and checked. `cargo xtask test` runs
//! the check ([`check`], also `cargo xtask layers --check`), which prints
//! only a summary and the violations.
//!
//! # Rooms and arrows
//!
//! The **rooms** of `src/` are the library's top-level modules: each
//! `src/<name>.rs` and each folder `src/<name>/` (its module file being
//! `src/<name>/mod.rs` or `src/<name>.rs`); `lib.rs` is not a room. Each
//! folder module also has a graph of its own, whose rooms are that folder's
//! files and subfolders plus `mod`, the folder's module file. Deeper folders
//! are handled the same way recursively: `src/trace/imp/` is one room
//! (`imp`) of `src/trace/`'s graph and has a graph of its own.
//!
//! Room A has an **arrow** to room B when A's non-test code names B by a
//! path: in `use` declarations (grouped `use crate::{b, c::d}`, nested
//! groups, `self` in a group, `as` renames) and inline (`crate::b::f()`,
//! `$crate::b` in a macro, `pub(in crate::b)`). Paths start at `crate` or
//! `$crate`, at `self` or `super` (resolved against the module the path is
//! written in, inline modules such as `mod sealed { .. }` included), or,
//! as the 2018 edition allows, at the name of a child module the file
//! declares (`pub use engine::X` in `io/mod.rs` names `io/engine.rs`). A
//! path that starts elsewhere names another crate or a local item and is
//! no arrow, as is a path back into its own room. A path naming an item
//! that `lib.rs` re-exports (`crate::Work`) is followed to the room it
//! comes from.
//!
//! In a folder `f`'s graph, paths are resolved the same way: from
//! `src/f/x.rs`, `super::y` and `crate::f::y` name the sibling `y`; from
//! `f`'s module file, `self::y`, `y::` and `crate::f::y` name the child `y`,
//! and `super::` names the crate's top level (no arrow in `f`'s graph). A
//! path ending at an item of the module file rather than at a child module
//! (`crate::f::Item`, `super::Item`) points to `mod`, unless the module
//! file imports that item from one of its children (`pub use y::Item`, or
//! a glob `use y::*` whose module defines or imports it): then it points to
//! that child, where the item is. Paths leaving the folder are arrows of
//! the top level only.
//!
//! Not counted: comments (line, doc and nested block comments, so no
//! intra-doc link) and the contents of string and character literals; files named `tests.rs`;
//! every item under an attribute that compiles it for tests only
//! (`#[cfg(test)]`, or `#[cfg(all(.., test, ..))]`): `mod tests { .. }`
//! blocks (brace-matched), and `#[cfg(test)] mod x;` declarations, whose
//! file (and folder) are then test-only and skipped too; and modules
//! declared with `#[path]` (the tests' support files the library borrows).
//! Macro invocations (`trace_record!(..)`) are not paths and are not
//! counted; a macro's own `$crate::b` paths count for the room that
//! defines it.
//!
//! # Circles and floors
//!
//! A **circle** is a strongly connected component of more than one room
//! (Tarjan's algorithm), in every graph. The arrows inside a circle are the
//! **arrows back up**: whatever order the circle's rooms are put in, some
//! of them point upwards. Circles collapse into single nodes of a DAG,
//! where a room's **floor** is 0 when it has no arrow out of its circle,
//! and otherwise 1 + the highest floor its arrows reach.
//!
//! # The check
//!
//! Each violation is printed, and the command fails when there is one:
//!
//! - every circle is justified: the module docs (the leading `//!` lines of
//!   its file) of at least one member have a `# Circular imports` section
//!   (any heading level) naming every other member in backticks (`` `tcp` ``,
//!   `` `net::tcp` `` or `` `net/tcp.rs` ``; the module file as `` `mod` `` or by
//!   the folder's name);
//! - the trace sits below the modules that record events: no arrow from
//!   `trace` to a room that has an arrow to `trace`, justified or not;
//! - no file of `src/` is over [`MAX_LINES`] lines (every line counted)
//!   unless its module docs have a `# Length` section saying why (with
//!   some text in it);
//! - the README's `## Layout` section lists every folder and `.rs` file of
//!   `src/`, and nothing else under `src/`: the first backticked `src/..`
//!   path of each list item is the item's path (`src/io/` and `src/io` are
//!   both the folder; `src/` itself may be listed).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::env::{self, Result};

/// Files longer than this need their module docs to say why.
pub const MAX_LINES: usize = 700;

/// `cargo xtask layers [--check]`: print the graphs of `src/`, then the
/// check (`--check`: the check alone, as `cargo xtask test` prints it).
pub fn layers(args: &[String]) -> Result<()> {
    match args {
        [] => {}
        [a] if a == "--check" => return check(),
        _ => return Err(format!("unexpected arguments {args:?} (usage: cargo xtask layers [--check])")),
    }
    let report = Report::of_workspace(&env::workspace_root())?;
    print!("{}", report.render());
    report.verdict()
}

/// The check alone, for `cargo xtask test`: a summary and the violations.
pub fn check() -> Result<()> {
    let report = Report::of_workspace(&env::workspace_root()).inspect_err(|e| println!("xtask layers: {e}"))?;
    println!("xtask layers: {}", report.summary());
    for v in &report.violations {
        println!("xtask layers: VIOLATION: {v}");
    }
    report.verdict()
}

// ---------------------------------------------------------------- lexing

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    /// An identifier or keyword; `$crate` and other macro variables keep their `$`.
    Ident(String),
    /// `::`.
    Sep,
    /// A string, character or number literal.
    Lit,
    Punct(char),
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    line: usize,
}

impl Token {
    fn is(&self, c: char) -> bool {
        self.tok == Tok::Punct(c)
    }
    fn ident(&self) -> Option<&str> {
        match &self.tok {
            Tok::Ident(s) => Some(s),
            _ => None,
        }
    }
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Rust source as tokens, without comments; literals are single tokens, so
/// nothing inside them is read as code.
fn lex(text: &str) -> Vec<Token> {
    let c: Vec<char> = text.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    // Skips a string body from `i` (just past the opening quote) to past
    // its closing quote followed by `hashes` `#`s; escapes only when not raw.
    let string = |i: &mut usize, line: &mut usize, hashes: usize, raw: bool| {
        while *i < c.len() {
            match c[*i] {
                '\\' if !raw => {
                    if at(*i + 1) == '\n' {
                        *line += 1;
                    }
                    *i += 2;
                }
                '"' if (1..=hashes).all(|h| at(*i + h) == '#') => {
                    *i += 1 + hashes;
                    return;
                }
                ch => {
                    if ch == '\n' {
                        *line += 1;
                    }
                    *i += 1;
                }
            }
        }
    };
    while i < c.len() {
        let ch = c[i];
        let tok_line = line;
        let tok = match ch {
            '\n' => {
                line += 1;
                i += 1;
                continue;
            }
            _ if ch.is_whitespace() => {
                i += 1;
                continue;
            }
            '/' if at(i + 1) == '/' => {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '/' if at(i + 1) == '*' => {
                let mut depth = 0;
                while i < c.len() {
                    if c[i] == '/' && at(i + 1) == '*' {
                        depth += 1;
                        i += 2;
                    } else if c[i] == '*' && at(i + 1) == '/' {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        if c[i] == '\n' {
                            line += 1;
                        }
                        i += 1;
                    }
                }
                continue;
            }
            '"' => {
                i += 1;
                string(&mut i, &mut line, 0, false);
                Tok::Lit
            }
            '\'' => {
                i += 1;
                if at(i) == '\\' {
                    i += 2;
                    while i < c.len() && c[i] != '\'' {
                        i += 1;
                    }
                    i += 1;
                    Tok::Lit
                } else if at(i + 1) == '\'' {
                    i += 2;
                    Tok::Lit
                } else {
                    // A lifetime or a label: no token.
                    while i < c.len() && is_ident_char(c[i]) {
                        i += 1;
                    }
                    continue;
                }
            }
            ':' if at(i + 1) == ':' => {
                i += 2;
                Tok::Sep
            }
            '$' if is_ident_char(at(i + 1)) => {
                let start = i;
                i += 1;
                while i < c.len() && is_ident_char(c[i]) {
                    i += 1;
                }
                Tok::Ident(c[start..i].iter().collect())
            }
            _ if ch.is_ascii_digit() => {
                while i < c.len() && (is_ident_char(c[i]) || (c[i] == '.' && at(i + 1).is_ascii_digit())) {
                    i += 1;
                }
                Tok::Lit
            }
            _ if is_ident_char(ch) => {
                let start = i;
                while i < c.len() && is_ident_char(c[i]) {
                    i += 1;
                }
                let word: String = c[start..i].iter().collect();
                let raw = matches!(word.as_str(), "r" | "br" | "cr");
                let hashes = (0..).take_while(|h| at(i + h) == '#').count();
                if matches!(word.as_str(), "r" | "b" | "br" | "c" | "cr") && at(i) == '"' {
                    i += 1;
                    string(&mut i, &mut line, 0, raw);
                    Tok::Lit
                } else if raw && hashes > 0 && at(i + hashes) == '"' {
                    i += hashes + 1;
                    string(&mut i, &mut line, hashes, true);
                    Tok::Lit
                } else if word == "r" && hashes == 1 && is_ident_char(at(i + 1)) {
                    // A raw identifier.
                    let start = i + 1;
                    i = start;
                    while i < c.len() && is_ident_char(c[i]) {
                        i += 1;
                    }
                    Tok::Ident(c[start..i].iter().collect())
                } else if word == "b" && at(i) == '\'' {
                    i += 1;
                    if at(i) == '\\' {
                        i += 1;
                    }
                    i += 1;
                    while i < c.len() && c[i] != '\'' {
                        i += 1;
                    }
                    i += 1;
                    Tok::Lit
                } else {
                    Tok::Ident(word)
                }
            }
            _ => {
                i += 1;
                Tok::Punct(ch)
            }
        };
        out.push(Token { tok, line: tok_line });
    }
    out
}

// ------------------------------------------------- test-only items, attributes

/// The index of the `]` closing the attribute whose `[` is at `open`.
fn attribute_end(t: &[Token], open: usize) -> usize {
    let mut depth = 0;
    for (k, tok) in t.iter().enumerate().skip(open) {
        if tok.is('[') {
            depth += 1;
        } else if tok.is(']') {
            depth -= 1;
            if depth == 0 {
                return k;
            }
        }
    }
    t.len().saturating_sub(1)
}

/// Whether the cfg predicate starting at `*i` holds only under `cfg(test)`:
/// `test`, or an `all(..)` with such a member. Advances past it.
fn test_only_predicate(t: &[Token], i: &mut usize) -> bool {
    let Some(name) = t.get(*i).and_then(Token::ident).map(str::to_string) else {
        *i += 1;
        return false;
    };
    *i += 1;
    let mut members = Vec::new();
    if t.get(*i).is_some_and(|x| x.is('(')) {
        *i += 1;
        while *i < t.len() && !t[*i].is(')') {
            members.push(test_only_predicate(t, i));
            if t.get(*i).is_some_and(|x| x.is(',')) {
                *i += 1;
            }
        }
        *i += 1;
        return name == "all" && members.contains(&true);
    }
    if t.get(*i).is_some_and(|x| x.is('=')) {
        *i += 2;
        return false;
    }
    name == "test"
}

/// What one attribute (`#[` at `i`, `]` at `end`) says, as far as rooms go.
fn attribute(t: &[Token], i: usize, end: usize) -> (bool, bool) {
    let body = t.get(i + 2..end).unwrap_or_default();
    let name = body.first().and_then(Token::ident);
    let test_only = name == Some("cfg") && {
        let mut k = 2;
        body.get(1).is_some_and(|x| x.is('(')) && test_only_predicate(body, &mut k)
    };
    let path = name == Some("path") && body.get(1).is_some_and(|x| x.is('='));
    (test_only, path)
}

const ITEM_WORDS: [&str; 14] = [
    "fn", "mod", "struct", "enum", "union", "trait", "impl", "const", "static", "type", "use", "extern", "unsafe",
    "async",
];

/// The end (exclusive) of the item, or statement, field or arm, at `j`:
/// its `;`, its first top-level `{ .. }` block, or, for what is not an
/// item, its `,`; never past a bracket that closes around it.
fn item_end(t: &[Token], j: usize) -> usize {
    let mut k = j;
    if t.get(k).and_then(Token::ident) == Some("pub") {
        k += 1;
        if t.get(k).is_some_and(|x| x.is('(')) {
            while k < t.len() && !t[k].is(')') {
                k += 1;
            }
            k += 1;
        }
    }
    let word = t.get(k).and_then(Token::ident).unwrap_or("");
    let is_item = ITEM_WORDS.contains(&word) || word == "macro_rules";
    let (mut depth, mut braced) = (0usize, false);
    for (k, tok) in t.iter().enumerate().skip(j) {
        match tok.tok {
            Tok::Punct('(' | '[' | '{') => {
                if depth == 0 && tok.is('{') {
                    braced = true;
                }
                depth += 1;
            }
            Tok::Punct(')' | ']' | '}') => {
                if depth == 0 {
                    return k;
                }
                depth -= 1;
                if depth == 0 && braced && tok.is('}') {
                    return k + 1;
                }
            }
            Tok::Punct(';') if depth == 0 => return k + 1,
            Tok::Punct(',') if depth == 0 && !is_item => return k + 1,
            _ => {}
        }
    }
    t.len()
}

/// A file's tokens without its test-only items, and what was taken out.
#[derive(Debug, Default)]
struct Stripped {
    tokens: Vec<Token>,
    /// `#![cfg(test)]` at the top: the whole file is test-only.
    test_file: bool,
    /// `mod x;` declared test-only or with `#[path]`: x's file is not a room.
    skipped_mods: BTreeSet<String>,
}

fn strip_test_items(t: Vec<Token>) -> Stripped {
    let mut s = Stripped::default();
    let mut i = 0;
    while i < t.len() {
        if t[i].is('#') && t.get(i + 1).is_some_and(|x| x.is('!')) && t.get(i + 2).is_some_and(|x| x.is('[')) {
            let end = attribute_end(&t, i + 2);
            if attribute(&t, i + 1, end).0 {
                s.test_file = true;
            }
            i = end + 1;
            continue;
        }
        if !(t[i].is('#') && t.get(i + 1).is_some_and(|x| x.is('['))) {
            s.tokens.push(t[i].clone());
            i += 1;
            continue;
        }
        // A run of outer attributes, then the item they apply to.
        let (mut j, mut test_only, mut path) = (i, false, false);
        while j < t.len() && t[j].is('#') && t.get(j + 1).is_some_and(|x| x.is('[')) {
            let end = attribute_end(&t, j + 1);
            let (tst, pth) = attribute(&t, j, end);
            test_only |= tst;
            path |= pth;
            j = end + 1;
        }
        if test_only || path {
            let end = item_end(&t, j);
            if let Some(name) = declared_mod(&t[j..end]) {
                s.skipped_mods.insert(name);
            }
            if test_only {
                i = end;
                continue;
            }
        }
        s.tokens.extend(t[i..j].iter().cloned());
        i = j;
    }
    s
}

/// `x` when `item` is `[pub(..)] mod x;`.
fn declared_mod(item: &[Token]) -> Option<String> {
    let k = item.iter().position(|x| x.ident() == Some("mod"))?;
    let name = item.get(k + 1)?.ident()?;
    item.get(k + 2).is_some_and(|x| x.is(';')).then(|| name.to_string())
}

// ------------------------------------------------------------- paths, uses

/// One leaf of a `use` tree.
#[derive(Clone, Debug, PartialEq)]
struct UseLeaf {
    path: Vec<String>,
    /// The name it brings into scope (`None` for a glob or `as _`).
    name: Option<String>,
    glob: bool,
    line: usize,
}

/// Expands the `use` tree at `*i` (past `use`) into leaves, up to its `;`.
fn use_tree(t: &[Token], i: &mut usize, prefix: &[String], out: &mut Vec<UseLeaf>) {
    let mut path = prefix.to_vec();
    if t.get(*i).is_some_and(|x| x.tok == Tok::Sep) {
        // `::name`: another crate.
        path.push("::".into());
        *i += 1;
    }
    loop {
        let Some(tok) = t.get(*i) else { return };
        match &tok.tok {
            Tok::Punct('{') => {
                *i += 1;
                while *i < t.len() && !t[*i].is('}') {
                    let before = *i;
                    use_tree(t, i, &path, out);
                    // Past the comma, or past a token that is no tree.
                    if t.get(*i).is_some_and(|x| x.is(',')) || *i == before {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            Tok::Punct('*') => {
                *i += 1;
                out.push(UseLeaf { path, name: None, glob: true, line: tok.line });
                return;
            }
            Tok::Ident(seg) => {
                path.push(seg.clone());
                *i += 1;
                if t.get(*i).is_some_and(|x| x.tok == Tok::Sep) {
                    *i += 1;
                    continue;
                }
                let mut name = Some(seg.clone());
                if t.get(*i).and_then(Token::ident) == Some("as") {
                    name = t.get(*i + 1).and_then(Token::ident).filter(|n| *n != "_").map(str::to_string);
                    *i += 2;
                }
                if path.len() > 1 && path.last().is_some_and(|s| s == "self") {
                    path.pop();
                    if name.as_deref() == Some("self") {
                        name = path.last().cloned();
                    }
                }
                out.push(UseLeaf { path, name, glob: false, line: tok.line });
                return;
            }
            _ => return,
        }
    }
}

/// Where a path was written: for `self`/`super` and child names.
#[derive(Clone, Debug, PartialEq)]
struct Written {
    path: Vec<String>,
    line: usize,
    /// The inline modules (`mod x { .. }`) around it, outermost first.
    scope: Vec<String>,
}

/// What one file says, as far as rooms go.
#[derive(Debug, Default)]
struct Scan {
    /// Every `use` leaf, with the inline modules around it.
    uses: Vec<(UseLeaf, Vec<String>)>,
    /// `use` leaves at the file's top level: its imports.
    top_uses: Vec<UseLeaf>,
    /// Inline paths (outside `use`).
    paths: Vec<Written>,
    /// Names of items defined at the file's top level (modules included).
    defined: BTreeSet<String>,
    /// Modules declared at the top level (`mod x;` and `mod x { .. }`).
    mods: BTreeSet<String>,
}

const DEFINING: [&str; 10] =
    ["fn", "struct", "enum", "union", "trait", "type", "const", "static", "mod", "macro_rules"];

fn scan(t: &[Token]) -> Scan {
    let mut s = Scan::default();
    // The declared child modules first: a path may name one before its `mod`.
    let mut depth = 0usize;
    for (k, tok) in t.iter().enumerate() {
        match tok.tok {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => depth = depth.saturating_sub(1),
            _ if depth == 0 && tok.ident() == Some("mod") => {
                if let Some(name) = t.get(k + 1).and_then(Token::ident)
                    && t.get(k + 2).is_some_and(|x| x.is(';') || x.is('{'))
                {
                    s.mods.insert(name.to_string());
                }
            }
            _ => {}
        }
    }
    let mut scope: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < t.len() {
        let tok = &t[i];
        let prev = i.checked_sub(1).map(|p| &t[p]);
        match &tok.tok {
            Tok::Punct('{') => {
                depth += 1;
                if i >= 2
                    && t[i - 2].ident() == Some("mod")
                    && let Some(name) = t[i - 1].ident()
                {
                    scope.push((name.to_string(), depth));
                }
            }
            Tok::Punct('}') => {
                if scope.last().is_some_and(|(_, d)| *d == depth) {
                    scope.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Ident(w) if w == "use" && prev.is_none_or(|p| p.tok != Tok::Sep && !p.is('.')) => {
                i += 1;
                let mut leaves = Vec::new();
                while i < t.len() && !t[i].is(';') {
                    let before = i;
                    use_tree(t, &mut i, &[], &mut leaves);
                    if i == before {
                        i += 1;
                    }
                }
                let names: Vec<String> = scope.iter().map(|(n, _)| n.clone()).collect();
                for leaf in leaves {
                    if depth == 0 {
                        s.top_uses.push(leaf.clone());
                    }
                    s.uses.push((leaf, names.clone()));
                }
            }
            Tok::Ident(w) if depth == 0 && DEFINING.contains(&w.as_str()) => {
                let mut k = i + 1;
                if t.get(k).is_some_and(|x| x.is('!')) {
                    k += 1;
                }
                if let Some(name) = t.get(k).and_then(Token::ident).filter(|n| !DEFINING.contains(n)) {
                    s.defined.insert(name.to_string());
                }
            }
            Tok::Ident(w) => {
                let starts = matches!(w.as_str(), "crate" | "$crate" | "self" | "super")
                    || (scope.is_empty() && s.mods.contains(w));
                let continues = prev.is_some_and(|p| p.tok == Tok::Sep || p.is('.'));
                if starts && !continues && t.get(i + 1).is_some_and(|x| x.tok == Tok::Sep) {
                    let mut path = vec![w.clone()];
                    let mut k = i + 1;
                    while t.get(k).is_some_and(|x| x.tok == Tok::Sep) {
                        let Some(seg) = t.get(k + 1).and_then(Token::ident) else { break };
                        path.push(seg.to_string());
                        k += 2;
                    }
                    if path.len() > 1 {
                        let names = scope.iter().map(|(n, _)| n.clone()).collect();
                        s.paths.push(Written { path, line: tok.line, scope: names });
                    }
                    i = k;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    s
}

/// `path`, written in module `module` (whose declared children are
/// `children`; `in_file_scope`: not inside an inline module), from the
/// crate root; `None` for another crate or a local item.
fn absolute(
    path: &[String],
    module: &[String],
    children: &BTreeSet<String>,
    in_file_scope: bool,
) -> Option<Vec<String>> {
    let first = path.first()?;
    let mut abs = match first.as_str() {
        "crate" | "$crate" => Vec::new(),
        "self" => module.to_vec(),
        "super" => {
            let ups = path.iter().take_while(|s| *s == "super").count();
            let mut m = module.to_vec();
            for _ in 0..ups {
                m.pop()?;
            }
            return Some(m.into_iter().chain(path[ups..].iter().cloned()).collect());
        }
        name if in_file_scope && children.contains(name) => return Some(module.iter().chain(path).cloned().collect()),
        _ => return None,
    };
    abs.extend(path[1..].iter().cloned());
    Some(abs)
}

// ------------------------------------------------------------------ files

/// One module file of `src/`, read.
#[derive(Debug, Default)]
struct Module {
    /// Relative to `src/`.
    file: String,
    path: Vec<String>,
    children: BTreeSet<String>,
    defined: BTreeSet<String>,
    /// Top-level imports: the name each brings into scope, from the crate root.
    imports: BTreeMap<String, Vec<String>>,
    globs: Vec<Vec<String>>,
    /// Every path the file names, from the crate root, with its line.
    names: Vec<(Vec<String>, usize)>,
    skipped_mods: BTreeSet<String>,
    test_file: bool,
}

/// The module path of a file relative to `src/` (`io/mod.rs` is `io`).
fn module_path(file: &str) -> Vec<String> {
    let stem = file.strip_suffix(".rs").unwrap_or(file);
    let mut p: Vec<String> = stem.split('/').map(str::to_string).collect();
    if p.last().is_some_and(|l| l == "mod") || p == ["lib"] {
        p.pop();
    }
    p
}

fn read_module(file: &str, text: &str) -> Module {
    let stripped = strip_test_items(lex(text));
    let s = scan(&stripped.tokens);
    let path = module_path(file);
    let mut m = Module {
        file: file.to_string(),
        children: s.mods.iter().filter(|x| !stripped.skipped_mods.contains(*x)).cloned().collect(),
        defined: s.defined,
        skipped_mods: stripped.skipped_mods,
        test_file: stripped.test_file,
        ..Module::default()
    };
    for leaf in &s.top_uses {
        let Some(abs) = absolute(&leaf.path, &path, &m.children, true) else { continue };
        if leaf.glob {
            m.globs.push(abs);
        } else if let Some(name) = &leaf.name {
            m.imports.insert(name.clone(), abs);
        }
    }
    let written = s
        .uses
        .iter()
        .map(|(l, scope)| (&l.path, l.line, scope))
        .chain(s.paths.iter().map(|w| (&w.path, w.line, &w.scope)));
    for (p, line, scope) in written {
        let module: Vec<String> = path.iter().chain(scope).cloned().collect();
        if let Some(abs) = absolute(p, &module, &m.children, scope.is_empty()) {
            m.names.push((abs, line));
        }
    }
    m.path = path;
    m
}

/// Every module of `src/` that is not test-only, by module path, and the
/// files of `src/` that were skipped as test-only.
fn read_modules(files: &BTreeMap<String, String>) -> (BTreeMap<Vec<String>, Module>, BTreeSet<String>) {
    let mut all: BTreeMap<Vec<String>, Module> = BTreeMap::new();
    let mut skipped = BTreeSet::new();
    for (file, text) in files.iter().filter(|(f, _)| f.ends_with(".rs")) {
        let m = read_module(file, text);
        if file.rsplit('/').next() == Some("tests.rs") || m.test_file {
            skipped.insert(file.clone());
            continue;
        }
        all.insert(m.path.clone(), m);
    }
    // A module is test-only when an ancestor's file declares it so.
    let test_only: Vec<Vec<String>> = all
        .keys()
        .filter(|p| {
            (1..=p.len()).any(|n| all.get(&p[..n - 1]).is_some_and(|parent| parent.skipped_mods.contains(&p[n - 1])))
        })
        .cloned()
        .collect();
    for p in test_only {
        if let Some(m) = all.remove(&p) {
            skipped.insert(m.file);
        }
    }
    (all, skipped)
}

// ------------------------------------------------------------------ graphs

/// One graph: the top level, or a folder's.
#[derive(Debug, Default)]
struct Graph {
    /// `src/` or `src/io/`.
    name: String,
    /// The folder's module path (empty for the top level).
    folder: Vec<String>,
    rooms: BTreeSet<String>,
    /// Each arrow with one place that names it (`src/...` and line).
    arrows: BTreeMap<(String, String), (String, usize)>,
}

impl Graph {
    fn targets(&self, from: &str) -> impl Iterator<Item = &str> {
        self.arrows.keys().filter(move |(a, _)| a == from).map(|(_, b)| b.as_str())
    }

    /// The strongly connected components (Tarjan), each sorted.
    fn components(&self) -> Vec<Vec<String>> {
        struct Tarjan<'a> {
            g: &'a Graph,
            index: BTreeMap<&'a str, usize>,
            low: BTreeMap<&'a str, usize>,
            stack: Vec<&'a str>,
            on_stack: BTreeSet<&'a str>,
            out: Vec<Vec<String>>,
        }
        impl<'a> Tarjan<'a> {
            fn visit(&mut self, v: &'a str) {
                let n = self.index.len();
                self.index.insert(v, n);
                self.low.insert(v, n);
                self.stack.push(v);
                self.on_stack.insert(v);
                for w in self.g.targets(v) {
                    if !self.index.contains_key(w) {
                        self.visit(w);
                        let low = self.low[v].min(self.low[w]);
                        self.low.insert(v, low);
                    } else if self.on_stack.contains(w) {
                        let low = self.low[v].min(self.index[w]);
                        self.low.insert(v, low);
                    }
                }
                if self.low[v] == self.index[v] {
                    let mut scc = Vec::new();
                    while let Some(w) = self.stack.pop() {
                        self.on_stack.remove(w);
                        scc.push(w.to_string());
                        if w == v {
                            break;
                        }
                    }
                    scc.sort();
                    self.out.push(scc);
                }
            }
        }
        let mut t = Tarjan {
            g: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on_stack: BTreeSet::new(),
            out: Vec::new(),
        };
        for r in &self.rooms {
            if !t.index.contains_key(r.as_str()) {
                t.visit(r);
            }
        }
        t.out
    }

    /// The components of more than one room.
    fn circles(&self) -> Vec<Vec<String>> {
        self.components().into_iter().filter(|c| c.len() > 1).collect()
    }

    /// Each room's floor in the DAG of components.
    fn floors(&self) -> BTreeMap<String, usize> {
        let comps = self.components();
        let comp_of: BTreeMap<&str, usize> =
            comps.iter().enumerate().flat_map(|(n, c)| c.iter().map(move |r| (r.as_str(), n))).collect();
        // Tarjan emits a component after every component it reaches.
        let mut floor = vec![0usize; comps.len()];
        for (n, c) in comps.iter().enumerate() {
            floor[n] = c
                .iter()
                .flat_map(|r| self.targets(r))
                .map(|w| comp_of[w])
                .filter(|m| *m != n)
                .map(|m| floor[m] + 1)
                .max()
                .unwrap_or(0);
        }
        self.rooms.iter().map(|r| (r.clone(), floor[comp_of[r.as_str()]])).collect()
    }

    /// The arrows inside `circle`.
    fn arrows_within<'a>(
        &'a self,
        circle: &'a [String],
    ) -> impl Iterator<Item = (&'a (String, String), &'a (String, usize))> {
        self.arrows.iter().filter(|((a, b), _)| circle.contains(a) && circle.contains(b))
    }
}

/// The room of module path `target` in the graph of `folder` (whose rooms
/// are `rooms`), following re-exports of the folder's module file (or of
/// `lib.rs`) to the child that holds the item.
fn room_of(
    target: &[String],
    folder: &[String],
    rooms: &BTreeSet<String>,
    modules: &BTreeMap<Vec<String>, Module>,
) -> Option<String> {
    if !target.starts_with(folder) {
        return None;
    }
    let top = folder.is_empty();
    // What names the folder's module file itself (`None`: lib.rs, no room).
    let here = (!top).then(|| "mod".to_string());
    let mut path = target.to_vec();
    // Each turn follows one re-export; a chain of them is short.
    for _ in 0..8 {
        // Re-exported from outside the folder: the path names the module file's import.
        if !path.starts_with(folder) {
            return here;
        }
        let rest = &path[folder.len()..];
        let Some(name) = rest.first() else { return here };
        if rooms.contains(name) && name != "mod" {
            return Some(name.clone());
        }
        let Some(m) = modules.get(folder) else { return here };
        if m.defined.contains(name) {
            return here;
        }
        if let Some(import) = m.imports.get(name) {
            path = import.iter().chain(&rest[1..]).cloned().collect();
            continue;
        }
        let from_glob = m.globs.iter().find(|g| {
            g.len() == folder.len() + 1
                && g.starts_with(folder)
                && modules.get(*g).is_some_and(|c| c.defined.contains(name) || c.imports.contains_key(name))
        });
        return from_glob.map(|g| g[folder.len()].clone()).or(here);
    }
    here
}

/// The graphs of `src/`: the top level first, then each folder's.
fn graphs(modules: &BTreeMap<Vec<String>, Module>) -> Vec<Graph> {
    let mut folders: BTreeSet<Vec<String>> = BTreeSet::new();
    for m in modules.values() {
        let dirs = m.file.split('/').count() - 1;
        for n in 1..=dirs {
            folders.insert(m.path[..n].to_vec());
        }
    }
    let mut out = Vec::new();
    for folder in std::iter::once(Vec::new()).chain(folders) {
        let mut g = Graph {
            name: format!("src/{}", folder.iter().map(|f| format!("{f}/")).collect::<String>()),
            folder: folder.clone(),
            ..Graph::default()
        };
        let room_of_file = |m: &Module| -> Option<String> {
            if !m.path.starts_with(&folder) || (folder.is_empty() && m.path.is_empty()) {
                return None;
            }
            Some(m.path.get(folder.len()).cloned().unwrap_or_else(|| "mod".into()))
        };
        g.rooms = modules.values().filter_map(room_of_file).collect();
        for m in modules.values() {
            let Some(from) = room_of_file(m) else { continue };
            for (target, line) in &m.names {
                if let Some(to) = room_of(target, &folder, &g.rooms, modules).filter(|to| *to != from) {
                    g.arrows.entry((from.clone(), to)).or_insert_with(|| (format!("src/{}", m.file), *line));
                }
            }
        }
        out.push(g);
    }
    out
}

// ------------------------------------------------------------------ docs

/// The leading `//!` lines of a file, without their `//!`.
fn module_docs(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let l = line.trim();
        if let Some(doc) = l.strip_prefix("//!") {
            out.push_str(doc.strip_prefix(' ').unwrap_or(doc));
            out.push('\n');
        } else if !(l.is_empty() || l.starts_with("#![") || l.starts_with("//")) {
            break;
        }
    }
    out
}

/// The text of the Markdown section headed `heading` (any level, outside
/// code blocks), up to the next heading of its level or above.
fn section(markdown: &str, heading: &str) -> Option<String> {
    let mut fenced = false;
    let mut found: Option<(usize, String)> = None;
    for line in markdown.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
        }
        let level = t.chars().take_while(|c| *c == '#').count();
        let is_heading = !fenced && (1..=6).contains(&level) && t[level..].starts_with(' ');
        match &mut found {
            Some((l, _)) if is_heading && level <= *l => break,
            Some((_, text)) => {
                text.push_str(line);
                text.push('\n');
            }
            None if is_heading && t[level..].trim().eq_ignore_ascii_case(heading) => {
                found = Some((level, String::new()))
            }
            None => {}
        }
    }
    found.map(|(_, text)| text)
}

/// The module names a text mentions in backticks: the last segment of each
/// span (`net::tcp`, `net/tcp.rs`: `tcp`), and a folder's for its `mod.rs`.
fn named_modules(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for span in text.split('`').skip(1).step_by(2) {
        let p = span.trim().replace('/', "::");
        let p = p.strip_suffix(".rs").unwrap_or(&p);
        let segs: Vec<&str> = p.split("::").filter(|s| !s.is_empty()).collect();
        if let Some(last) = segs.last() {
            out.insert(last.to_string());
            if *last == "mod"
                && let Some(parent) = segs.len().checked_sub(2).map(|k| segs[k])
            {
                out.insert(parent.to_string());
            }
        }
    }
    out
}

// ------------------------------------------------------------------ report

/// Everything `cargo xtask layers` prints.
struct Report {
    graphs: Vec<Graph>,
    skipped: BTreeSet<String>,
    violations: Vec<String>,
}

impl Report {
    fn of_workspace(root: &Path) -> Result<Report> {
        let src = root.join("src");
        let mut files = BTreeMap::new();
        let mut dirs = BTreeSet::new();
        read_tree(&src, "", &mut files, &mut dirs)?;
        let readme = std::fs::read_to_string(root.join("README.md")).map_err(|e| format!("README.md: {e}"))?;
        Ok(Report::of(&files, &dirs, &readme))
    }

    /// The report on `files` (relative to `src/`, with their text), the
    /// folders `dirs` of `src/`, and the README.
    fn of(files: &BTreeMap<String, String>, dirs: &BTreeSet<String>, readme: &str) -> Report {
        let (modules, skipped) = read_modules(files);
        let graphs = graphs(&modules);
        let mut violations = Vec::new();
        for g in &graphs {
            violations.extend(unjustified_circles(g, &modules, files));
        }
        if let Some(top) = graphs.first() {
            violations.extend(trace_above(top));
        }
        violations.extend(long_files(files));
        violations.extend(readme_layout(readme, files, dirs));
        Report { graphs, skipped, violations }
    }

    /// One graph's counts.
    fn counts(g: &Graph) -> String {
        let circles = g.circles();
        let back: usize = circles.iter().map(|c| g.arrows_within(c).count()).sum();
        format!(
            "{}: {} rooms, {} arrows, {} circles, {} arrows back up",
            g.name,
            g.rooms.len(),
            g.arrows.len(),
            circles.len(),
            back
        )
    }

    fn summary(&self) -> String {
        let top = self.graphs.first().map(Report::counts).unwrap_or_default();
        let folders = &self.graphs[1.min(self.graphs.len())..];
        let circles: usize = folders.iter().map(|g| g.circles().len()).sum();
        let v = match self.violations.len() {
            0 => "no violation".to_string(),
            n => format!("{n} violations"),
        };
        format!("{top}; {} folder graphs, {circles} circles in them; {v}", folders.len())
    }

    fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut o = String::new();
        if !self.skipped.is_empty() {
            let skipped: Vec<String> = self.skipped.iter().map(|f| format!("src/{f}")).collect();
            let _ = writeln!(o, "test-only, not counted: {}\n", skipped.join(" "));
        }
        for g in &self.graphs {
            let circles = g.circles();
            let _ = writeln!(o, "== {}", Report::counts(g));
            let _ = writeln!(o, "rooms: {}", g.rooms.iter().cloned().collect::<Vec<_>>().join(" "));
            let _ = writeln!(o, "arrows:");
            for r in &g.rooms {
                let to: Vec<&str> = g.targets(r).collect();
                if !to.is_empty() {
                    let _ = writeln!(o, "  {r} -> {}", to.join(" "));
                }
            }
            let _ = writeln!(o, "floors:");
            let floors = g.floors();
            let top = floors.values().copied().max().unwrap_or(0);
            for f in 0..=top {
                let on: Vec<String> = floors
                    .iter()
                    .filter(|(_, fl)| **fl == f)
                    .map(|(r, _)| match circles.iter().position(|c| c.contains(r)) {
                        Some(n) => format!("{r}(circle {})", n + 1),
                        None => r.clone(),
                    })
                    .collect();
                let _ = writeln!(o, "  {f}: {}", on.join(" "));
            }
            for (n, c) in circles.iter().enumerate() {
                let _ = writeln!(
                    o,
                    "circle {} ({} rooms: {}), its {} arrows:",
                    n + 1,
                    c.len(),
                    c.join(" "),
                    g.arrows_within(c).count()
                );
                for ((a, b), (file, line)) in g.arrows_within(c) {
                    let _ = writeln!(o, "  {a} -> {b}  {file}:{line}");
                }
            }
            o.push('\n');
        }
        for v in &self.violations {
            let _ = writeln!(o, "VIOLATION: {v}");
        }
        let _ = writeln!(o, "{}", self.summary());
        o
    }

    fn verdict(&self) -> Result<()> {
        match self.violations.len() {
            0 => Ok(()),
            n => Err(format!("{n} violations of the layering rules (listed above)")),
        }
    }
}

/// Every file (relative path to text; non-`.rs` files with no text) and
/// folder under `dir`.
fn read_tree(dir: &Path, rel: &str, files: &mut BTreeMap<String, String>, dirs: &mut BTreeSet<String>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for e in entries {
        let e = e.map_err(|e| format!("{}: {e}", dir.display()))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        let rel = format!("{rel}{name}");
        if path.is_dir() {
            read_tree(&path, &format!("{rel}/"), files, dirs)?;
            dirs.insert(rel);
        } else if name.ends_with(".rs") {
            let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            files.insert(rel, text);
        } else {
            files.insert(rel, String::new());
        }
    }
    Ok(())
}

/// The file holding the module docs of `room` in graph `g`.
fn room_file<'a>(g: &Graph, room: &str, modules: &'a BTreeMap<Vec<String>, Module>) -> Option<&'a Module> {
    let mut path = g.folder.clone();
    if room != "mod" {
        path.push(room.to_string());
    }
    modules.get(&path)
}

fn unjustified_circles(
    g: &Graph,
    modules: &BTreeMap<Vec<String>, Module>,
    files: &BTreeMap<String, String>,
) -> Vec<String> {
    let folder_name = g.folder.last().cloned().unwrap_or_default();
    let mut out = Vec::new();
    for c in g.circles() {
        let justified = c.iter().any(|member| {
            let Some(m) = room_file(g, member, modules) else { return false };
            let docs = module_docs(files.get(&m.file).map_or("", String::as_str));
            let Some(text) = section(&docs, "Circular imports") else { return false };
            let named = named_modules(&text);
            c.iter()
                .filter(|other| *other != member)
                .all(|other| named.contains(other) || (other == "mod" && named.contains(&folder_name)))
        });
        if !justified {
            let files: Vec<String> =
                c.iter().filter_map(|r| room_file(g, r, modules)).map(|m| format!("src/{}", m.file)).collect();
            out.push(format!(
                "{}: the circle {{{}}} is not justified: no member's module docs ({}) have a `# Circular imports` \
                 section naming every other member in backticks",
                g.name,
                c.join(", "),
                files.join(", ")
            ));
        }
    }
    out
}

/// Arrows from `trace` to a room that has one back.
fn trace_above(top: &Graph) -> Vec<String> {
    top.targets("trace")
        .filter(|to| top.arrows.contains_key(&(to.to_string(), "trace".to_string())))
        .map(|to| {
            let (file, line) = &top.arrows[&("trace".to_string(), to.to_string())];
            format!(
                "trace -> {to} ({file}:{line}), and {to} -> trace: the trace sits below the modules that record events"
            )
        })
        .collect()
}

fn long_files(files: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for (file, text) in files.iter().filter(|(f, _)| f.ends_with(".rs")) {
        let lines = text.lines().count();
        let why = section(&module_docs(text), "Length").filter(|t| !t.trim().is_empty());
        if lines > MAX_LINES && why.is_none() {
            out.push(format!(
                "src/{file}: {lines} lines, over {MAX_LINES}, and its module docs have no `# Length` section saying why"
            ));
        }
    }
    out
}

/// The README's `## Layout` against the files and folders of `src/`.
fn readme_layout(readme: &str, files: &BTreeMap<String, String>, dirs: &BTreeSet<String>) -> Vec<String> {
    let Some(text) = section(readme, "Layout") else {
        return vec!["README.md has no `## Layout` section listing the files and folders of src/".into()];
    };
    let mut listed = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
        }
        let item = !fenced
            && (t.starts_with("- ")
                || t.starts_with("* ")
                || t.starts_with("+ ")
                || t.split_once(". ").is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit())));
        if !item {
            continue;
        }
        if let Some(path) = t.split('`').skip(1).step_by(2).find(|s| *s == "src" || s.starts_with("src/")) {
            listed.insert(path.trim_end_matches('/').to_string());
        }
    }
    let exists: BTreeSet<String> = files
        .keys()
        .filter(|f| f.ends_with(".rs"))
        .chain(dirs)
        .map(|p| format!("src/{p}"))
        .chain(["src".to_string()])
        .collect();
    let mut out = Vec::new();
    for p in exists.iter().filter(|p| *p != "src" && !listed.contains(*p)) {
        let shown = if dirs.contains(&p["src/".len()..]) { format!("{p}/") } else { p.clone() };
        out.push(format!("README.md's `## Layout` does not list `{shown}`"));
    }
    for p in listed.iter().filter(|p| !exists.contains(*p) && !files.contains_key(p.strip_prefix("src/").unwrap_or("")))
    {
        out.push(format!("README.md's `## Layout` lists `{p}`, which is not a folder or .rs file of src/"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(list: &[(&str, &str)]) -> BTreeMap<String, String> {
        list.iter().map(|(f, t)| (f.to_string(), t.to_string())).collect()
    }

    fn dirs_of(files: &BTreeMap<String, String>) -> BTreeSet<String> {
        let mut dirs = BTreeSet::new();
        for f in files.keys() {
            let mut d = f.as_str();
            while let Some((parent, _)) = d.rsplit_once('/') {
                dirs.insert(parent.to_string());
                d = parent;
            }
        }
        dirs
    }

    /// The README that lists exactly `files`' paths.
    fn readme_for(files: &BTreeMap<String, String>) -> String {
        let mut r = String::from("# x\n\n## Layout\n\n");
        for d in dirs_of(files) {
            r.push_str(&format!("- `src/{d}/`: a folder\n"));
        }
        for f in files.keys() {
            r.push_str(&format!("- `src/{f}`\n"));
        }
        r + "\n## Next\n\n- `src/not_listed_here.rs`\n"
    }

    fn report(list: &[(&str, &str)]) -> Report {
        let f = files(list);
        Report::of(&f, &dirs_of(&f), &readme_for(&f))
    }

    fn arrows(g: &Graph) -> Vec<String> {
        g.arrows.keys().map(|(a, b)| format!("{a}->{b}")).collect()
    }

    fn leaves(src: &str) -> Vec<(String, Option<String>, bool)> {
        let s = scan(&lex(src));
        s.uses.into_iter().map(|(l, _)| (l.path.join("::"), l.name, l.glob)).collect()
    }

    #[test]
    fn grouped_and_nested_uses_expand_to_their_leaves() {
        let got = leaves("pub(crate) use crate::{b, c::d, e::{self, f as g, h::*, i::{j, k as _}}};\nuse ::std::io;");
        let want = [
            ("crate::b", Some("b"), false),
            ("crate::c::d", Some("d"), false),
            ("crate::e", Some("e"), false),
            ("crate::e::f", Some("g"), false),
            ("crate::e::h", None, true),
            ("crate::e::i::j", Some("j"), false),
            ("crate::e::i::k", None, false),
            ("::::std::io", Some("io"), false),
        ];
        let want: Vec<_> = want.iter().map(|(p, n, g)| (p.to_string(), n.map(str::to_string), *g)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn inline_paths_are_found_from_crate_super_self_and_child_modules() {
        let src = "mod child;\nfn f() { crate::b::g(); let x = super::super::c::D; self::e::f(); child::h(); other::i(); }\n\
                   macro_rules! m { () => { $crate::j::k!() } }\npub(crate) fn v() {}\npub(in crate::l) fn w() {}\n\
                   fn n(x: X) { x.child::y(); Self::z(); }";
        let s = scan(&lex(src));
        let paths: Vec<String> = s.paths.iter().map(|w| format!("{}@{}", w.path.join("::"), w.line)).collect();
        assert_eq!(
            paths,
            ["crate::b::g@2", "super::super::c::D@2", "self::e::f@2", "child::h@2", "$crate::j::k@3", "crate::l@5"]
        );
        let module = ["a".to_string(), "m".to_string()];
        let children: BTreeSet<String> = ["child".to_string()].into();
        let abs = |p: &[&str], file_scope| {
            let p: Vec<String> = p.iter().map(|x| x.to_string()).collect();
            absolute(&p, &module, &children, file_scope).map(|a| a.join("::"))
        };
        assert_eq!(abs(&["super", "super", "c", "D"], true).as_deref(), Some("c::D"));
        assert_eq!(abs(&["super", "super", "super", "x"], true), None);
        assert_eq!(abs(&["self", "e"], true).as_deref(), Some("a::m::e"));
        assert_eq!(abs(&["child", "h"], true).as_deref(), Some("a::m::child::h"));
        assert_eq!(abs(&["child", "h"], false), None, "inside an inline module a child is not in scope");
        assert_eq!(abs(&["std", "io"], true), None);
    }

    #[test]
    fn comments_strings_and_literals_are_not_code() {
        let src = r####"
//! Uses `crate::a` in docs: [`X`](crate::a::X).
/// use crate::b;
/* use crate::c; /* nested */ use crate::d; */
const S: &str = "use crate::e; \" crate::f::g";
const R: &str = r#"use crate::h::i; "# ;
const Q: &str = r##"a "# crate::j::k"##;
const C: char = '"'; const D: char = '\''; const E: u8 = b'"';
fn l<'a>(x: &'a str) -> &'static str { 'outer: loop { break 'outer; } crate::real::f() }
"####;
        let s = scan(&lex(src));
        let paths: Vec<String> = s.paths.iter().map(|w| format!("{}@{}", w.path.join("::"), w.line)).collect();
        assert_eq!(paths, ["crate::real::f@9"]);
        assert!(s.uses.is_empty());
        // Unterminated literals and comments end the file, no more.
        for broken in ["\"open", "r#\"open", "/* open", "'", "b'", "use crate::{a, b", "#[cfg(test)] mod x {", "#["] {
            let _ = scan(&strip_test_items(lex(broken)).tokens);
        }
    }

    #[test]
    fn test_only_items_are_skipped() {
        let src = "use crate::kept;\n#[cfg(test)]\nmod tests {\n use crate::gone1;\n fn f() { if x { crate::gone2::f() } }\n}\n\
                   #[cfg(all(test, loom))] mod loom_tests { use crate::gone3; }\n\
                   #[cfg(all(windows, not(loom), test))]\n#[allow(unused)]\nfn helper<A, B>() where A: Copy, B: Copy { crate::gone4::f() }\n\
                   #[cfg(any(test, feature = \"x\"))] use crate::kept2;\n#[cfg(not(test))] use crate::kept3;\n\
                   #[cfg(test)] mod t;\n#[cfg(test)]\n#[path = \"../tests/support/x.rs\"]\nmod support;\n#[path = \"p.rs\"] mod p;\n\
                   struct S { #[cfg(test)] a: crate::gone5::A, b: crate::kept4::B }\nfn g() { crate::kept5::f() }";
        let stripped = strip_test_items(lex(src));
        let s = scan(&stripped.tokens);
        let named: Vec<String> =
            s.uses.iter().map(|(l, _)| l.path.join("::")).chain(s.paths.iter().map(|w| w.path.join("::"))).collect();
        assert_eq!(named, ["crate::kept", "crate::kept2", "crate::kept3", "crate::kept4::B", "crate::kept5::f"]);
        assert_eq!(stripped.skipped_mods, ["p", "support", "t"].map(String::from).into());
        assert!(strip_test_items(lex("//! docs\n#![cfg(test)]\nuse crate::x;")).test_file);
    }

    #[test]
    fn test_only_files_are_not_rooms() {
        let r = report(&[
            ("lib.rs", "mod a; mod b; mod f;"),
            ("a.rs", "use crate::b;"),
            ("b.rs", ""),
            ("f/mod.rs", "mod x;\n#[cfg(test)]\nmod t;\n#[cfg(test)]\nmod tests;"),
            ("f/x.rs", ""),
            ("f/t.rs", "use crate::a;"),
            ("f/t/deep.rs", "use crate::a;"),
            ("f/tests.rs", "use crate::a;"),
            ("f/x/tests.rs", "use crate::a;"),
        ]);
        assert_eq!(arrows(&r.graphs[0]), ["a->b"]);
        assert_eq!(r.graphs[1].rooms, ["mod", "x"].map(String::from).into());
        let skipped: Vec<&str> = r.skipped.iter().map(String::as_str).collect();
        assert_eq!(skipped, ["f/t.rs", "f/t/deep.rs", "f/tests.rs", "f/x/tests.rs"]);
    }

    /// A small crate: a circle at the top level, a folder with its own.
    fn sample() -> Vec<(&'static str, &'static str)> {
        vec![
            ("lib.rs", "mod a;\nmod b;\nmod c;\nmod f;\npub use c::Thing;\npub struct Root;"),
            ("a.rs", "use crate::{b::{self, B}, Root};\nfn g() {}"),
            ("b.rs", "fn h() { crate::a::g(); let _ = crate::Thing; }"),
            ("c.rs", "pub struct Thing;"),
            (
                "f/mod.rs",
                "mod x;\nmod y;\nmod z;\npub use y::Item;\nuse z::*;\npub(crate) fn helper() {}\nuse super::c;\nfn k() { self::x::X; }",
            ),
            ("f/x.rs", "pub struct X;\nfn g() { super::Item; super::helper(); }"),
            ("f/y.rs", "pub struct Item;\nuse super::x::X;\nfn g() { crate::f::Zed; }"),
            ("f/z.rs", "pub struct Zed;"),
        ]
    }

    #[test]
    fn arrows_follow_paths_and_re_exports_at_both_levels() {
        let r = report(&sample());
        let top = &r.graphs[0];
        assert_eq!(top.name, "src/");
        assert_eq!(top.rooms, ["a", "b", "c", "f"].map(String::from).into());
        // b -> c only through lib.rs's `pub use c::Thing`; `crate::Root` is lib.rs's own.
        assert_eq!(arrows(top), ["a->b", "b->a", "b->c", "f->c"]);
        assert_eq!(top.arrows[&("a".into(), "b".into())], ("src/a.rs".into(), 1));
        let f = &r.graphs[1];
        assert_eq!(f.name, "src/f/");
        assert_eq!(f.rooms, ["mod", "x", "y", "z"].map(String::from).into());
        // super::Item is y's (re-exported by mod.rs), super::helper is mod.rs's own,
        // crate::f::Zed is z's (through mod.rs's glob).
        assert_eq!(arrows(f), ["mod->x", "mod->y", "mod->z", "x->mod", "x->y", "y->x", "y->z"]);
    }

    #[test]
    fn circles_and_floors_are_counted() {
        let r = report(&sample());
        let top = &r.graphs[0];
        assert_eq!(top.circles(), [["a", "b"].map(String::from)]);
        assert_eq!(top.arrows_within(&top.circles()[0]).count(), 2);
        let floors = top.floors();
        assert_eq!((floors["c"], floors["a"], floors["b"], floors["f"]), (0, 1, 1, 1));
        let f = &r.graphs[1];
        let circles = f.circles();
        assert_eq!(circles, [["mod", "x", "y"].map(String::from)]);
        assert_eq!(f.floors()["z"], 0);
        assert_eq!(f.floors()["x"], 1);
        // A chain: floors rise by one per arrow.
        let g = Graph {
            rooms: ["p", "q", "r", "s"].map(String::from).into(),
            arrows: [("p", "q"), ("q", "r"), ("p", "r"), ("s", "r")]
                .map(|(a, b)| ((a.to_string(), b.to_string()), (String::new(), 0)))
                .into(),
            ..Graph::default()
        };
        assert!(g.circles().is_empty());
        assert_eq!(g.floors(), [("p", 2), ("q", 1), ("r", 0), ("s", 1)].map(|(r, f)| (r.to_string(), f)).into());
    }

    fn circle_violations(r: &Report) -> Vec<&String> {
        r.violations.iter().filter(|v| v.contains("circle")).collect()
    }

    #[test]
    fn a_circle_is_justified_only_by_docs_naming_every_other_member() {
        assert_eq!(circle_violations(&report(&sample())).len(), 2, "{:?}", report(&sample()).violations);
        let with = |file: &'static str, docs: &'static str| {
            let mut s = sample();
            let (_, text) = s.iter_mut().find(|(f, _)| *f == file).unwrap();
            *text = Box::leak(format!("{docs}\n{text}").into_boxed_str());
            report(&s)
        };
        let justified =
            "//! The a module.\n//!\n//! ## Circular imports\n//!\n//! `b` calls back into `a::g`.\n//!\n//! # Next";
        assert_eq!(circle_violations(&with("a.rs", justified)).len(), 1);
        assert_eq!(circle_violations(&with("b.rs", "//! # Circular imports\n//! With `crate::a`.")).len(), 1);
        // The folder's circle {mod, x, y}: x names y and the module file by the folder's name.
        let v = with("f/x.rs", "//! # Circular imports\n//! `y` and `f` (its `mod.rs`).");
        assert_eq!(circle_violations(&v).len(), 1);
        assert!(circle_violations(&v)[0].contains("{a, b}"));
        for refused in [
            "//! # Circular imports\n//! b, unquoted.",
            "//! # Circular imports\n//!\n//! # Other\n//! `b`",
            "//! ```\n//! # Circular imports\n//! `b`\n//! ```",
            "//! # Circular\n//! `b`",
        ] {
            assert_eq!(circle_violations(&with("a.rs", refused)).len(), 2, "{refused}");
        }
        // One member short.
        assert_eq!(circle_violations(&with("f/x.rs", "//! # Circular imports\n//! `y`.")).len(), 2);
        // Not module docs: an item's.
        assert_eq!(circle_violations(&with("a.rs", "/// # Circular imports\n/// `b`")).len(), 2);
    }

    #[test]
    fn the_trace_may_not_point_at_a_room_that_points_at_it() {
        let trace_docs = "//! # Circular imports\n//! `a`";
        let r = report(&[
            ("lib.rs", "mod a; mod c; mod trace;"),
            ("a.rs", "use crate::trace::record;"),
            ("c.rs", ""),
            ("trace.rs", Box::leak(format!("{trace_docs}\nuse crate::a::A;\nuse crate::c::C;").into_boxed_str())),
        ]);
        let v: Vec<&String> = r.violations.iter().filter(|v| v.contains("trace ->")).collect();
        assert_eq!(v.len(), 1, "{:?}", r.violations);
        assert!(v[0].starts_with("trace -> a (src/trace.rs:3), and a -> trace"), "{}", v[0]);
        assert!(circle_violations(&r).is_empty(), "the circle itself is justified");
    }

    #[test]
    fn a_long_file_needs_its_length_explained() {
        let long = |docs: &str, lines: usize| {
            let body = "fn f() {}\n".repeat(lines - docs.lines().count());
            let r = report(&[("lib.rs", "mod a;"), ("a.rs", Box::leak(format!("{docs}{body}").into_boxed_str()))]);
            r.violations.into_iter().filter(|v| v.contains("lines")).collect::<Vec<_>>()
        };
        assert!(long("", MAX_LINES).is_empty());
        assert_eq!(
            long("", MAX_LINES + 1),
            [format!(
                "src/a.rs: {} lines, over {MAX_LINES}, and its module docs have no `# Length` section saying why",
                MAX_LINES + 1
            )]
        );
        assert!(long("//! # Length\n//!\n//! One state machine, read top to bottom.\n", 2000).is_empty());
        assert_eq!(long("//! # Length\n//!\n//! # Next\n//! Text.\n", 2000).len(), 1, "an empty section says nothing");
        assert_eq!(long("//! Docs.\n// # Length: a plain comment\n", 2000).len(), 1);
    }

    #[test]
    fn the_readme_layout_must_list_exactly_the_files_and_folders() {
        let f = files(&[("lib.rs", "mod a; mod io;"), ("a.rs", ""), ("io/mod.rs", ""), ("io/engine.rs", "")]);
        let dirs = dirs_of(&f);
        let layout =
            |section: &str| readme_layout(&format!("# T\n\n## Layout\n\n{section}\n## License\n\nMIT\n"), &f, &dirs);
        // Any list marker, any text around, the folder with or without its slash; `src/` itself may be listed.
        let exact = "- `src/`: the library\n* `src/lib.rs`\n  + `src/a.rs`: A (see `src/nowhere.rs`)\n\
                     1. `src/io`: I/O\n   - `src/io/mod.rs`\n   - `src/io/engine.rs` — the engine\n\nProse: `src/gone.rs`.\n";
        assert!(layout(exact).is_empty(), "{:?}", layout(exact));
        let missing = layout(&exact.replace("   - `src/io/engine.rs` — the engine\n", ""));
        assert_eq!(missing, ["README.md's `## Layout` does not list `src/io/engine.rs`"]);
        let folder = layout(&exact.replace("1. `src/io`: I/O\n", ""));
        assert_eq!(folder, ["README.md's `## Layout` does not list `src/io/`"]);
        let extra = layout(&format!("{exact}- `src/old.rs`\n- `src/io/`\n"));
        assert_eq!(extra, ["README.md's `## Layout` lists `src/old.rs`, which is not a folder or .rs file of src/"]);
        // Another section's list and a code block do not count.
        let elsewhere = readme_layout("## Layout\n\n```\n- `src/a.rs`\n```\n## Other\n- `src/a.rs`\n", &f, &dirs);
        assert_eq!(elsewhere.len(), 5, "{elsewhere:?}");
        assert_eq!(readme_layout("# T\n\nNo layout.\n", &f, &dirs).len(), 1);
        // The sample report's README lists everything.
        assert!(report(&sample()).violations.iter().all(|v| !v.contains("README")));
    }

    #[test]
    fn docs_sections_and_names_are_read_as_markdown() {
        let docs = module_docs(
            "\n//! Top.\n//!\n//! ## Circular imports\n//! `net::tcp`, `ops.rs`, `f/mod.rs`, `crate::x`\n#![allow(x)]\n//! more\nuse a;\n//! not docs",
        );
        assert_eq!(docs, "Top.\n\n## Circular imports\n`net::tcp`, `ops.rs`, `f/mod.rs`, `crate::x`\nmore\n");
        let text = section(&docs, "circular imports").unwrap();
        assert_eq!(named_modules(&text), ["f", "mod", "ops", "tcp", "x"].map(String::from).into());
        assert_eq!(section("# A\n## B\nb\n### C\nc\n## D\nd", "B").as_deref(), Some("b\n### C\nc\n"));
    }
}
