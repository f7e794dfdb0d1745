//! The lab's source is laid out by role (docs/lab.md, "The lab's source"):
//! no import circle of more than three files, and the top-level modules
//! (the role folders, `args`, `output`, `error`) import one another in one
//! direction only.
//!
//! An import is a path that names a module of the lab: a `use` of
//! `crate::`, `super::`, `self::` or a child module, or such a path written
//! inline. It points at the deepest file of that path (`crate::run::row::Ctx`
//! → `run/row.rs`). Test modules (from `#[cfg(test)]` on) are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The most files an import circle may hold (issue 39).
const MAX_CIRCLE: usize = 3;

type Module = Vec<String>;

/// Every file of `lab/src` but `main.rs`, by module path, with its code.
fn files() -> BTreeMap<Module, (String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read lab/src") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let rel = path.strip_prefix(&root).expect("under src");
            let rel = rel.to_string_lossy().replace('\\', "/");
            let Some(stem) = rel.strip_suffix(".rs") else {
                continue;
            };
            if rel == "main.rs" {
                continue;
            }
            let mut module: Module = stem.split('/').map(String::from).collect();
            if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
                module.pop();
            }
            let text = std::fs::read_to_string(&path).expect("read a source file");
            out.insert(module, (rel, text));
        }
    }
    out
}

/// The code's tokens: identifiers, `::` and single punctuation, without
/// comments, string or char literals, and without the test module.
fn tokens(text: &str) -> Vec<String> {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    let chars: Vec<char> = text.chars().collect();
    let (mut out, mut i) = (Vec::new(), 0);
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i += 2;
            while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == '\'' && (chars.get(i + 2) == Some(&'\'') || next == Some('\\')) {
            // A char literal ('x' or '\n'); a lifetime has no closing quote.
            i += 2;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let ident: String = chars[start..i].iter().collect();
            if matches!(ident.as_str(), "r" | "br") && matches!(chars.get(i), Some('#' | '"')) {
                // A raw string: r#"…"# ends at a quote and as many hashes.
                let hashes = chars[i..].iter().take_while(|&&c| c == '#').count();
                i += hashes + 1;
                while i < chars.len()
                    && !(chars[i] == '"' && chars[i + 1..].iter().take(hashes).all(|&c| c == '#'))
                {
                    i += 1;
                }
                i += hashes + 1;
                continue;
            }
            out.push(ident);
        } else if c == ':' && next == Some(':') {
            out.push("::".into());
            i += 2;
        } else {
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
            i += 1;
        }
    }
    out
}

/// The paths of a use tree starting at `toks[*i]`, up to its `;`.
fn use_tree(toks: &[String], i: &mut usize, prefix: &str, out: &mut Vec<String>) {
    let mut path = prefix.to_string();
    while *i < toks.len() {
        match toks[*i].as_str() {
            ";" | "," | "}" => break,
            "{" => {
                *i += 1;
                while *i < toks.len() && toks[*i] != "}" {
                    use_tree(toks, i, &path, out);
                    if toks.get(*i).is_some_and(|t| t == ",") {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            "as" => *i += 2,
            t => {
                path.push_str(t);
                *i += 1;
            }
        }
    }
    out.push(path);
}

fn is_ident(t: &str) -> bool {
    t.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// The paths `toks` name: use trees, and inline paths from `crate`,
/// `super` or `self`.
fn paths(toks: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if toks[i] == "use" {
            i += 1;
            use_tree(toks, &mut i, "", &mut out);
        } else if matches!(toks[i].as_str(), "crate" | "super" | "self")
            && toks.get(i + 1).is_some_and(|t| t == "::")
        {
            // `ident (:: ident)*`
            let mut path = toks[i].clone();
            i += 1;
            while toks.get(i).is_some_and(|t| t == "::")
                && toks.get(i + 1).is_some_and(|t| is_ident(t))
            {
                path.push_str("::");
                path.push_str(&toks[i + 1]);
                i += 2;
            }
            out.push(path);
        } else {
            i += 1;
        }
    }
    out
}

/// The file `path` points at from `module` (whose child modules are
/// `children`), if it names one of the lab's modules.
fn resolve(
    files: &BTreeMap<Module, (String, String)>,
    module: &Module,
    children: &BTreeSet<String>,
    path: &str,
) -> Option<Module> {
    let segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let (mut base, rest) = match segs.first().copied()? {
        "crate" => (Vec::new(), &segs[1..]),
        "super" | "self" => {
            let mut base = module.clone();
            let mut k = 0;
            while let Some(&s) = segs.get(k).filter(|s| matches!(**s, "super" | "self")) {
                if s == "super" {
                    base.pop();
                }
                k += 1;
            }
            (base, &segs[k..])
        }
        first if children.contains(first) => (module.clone(), &segs[..]),
        _ => return None,
    };
    for s in rest {
        base.push((*s).to_string());
        if !files.keys().any(|k| k.starts_with(&base)) {
            base.pop();
            break;
        }
    }
    while !files.contains_key(&base) {
        base.pop();
    }
    Some(base)
}

/// Which file imports which, by their paths under `lab/src`.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let files = files();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, (rel, text)) in &files {
        let toks = tokens(text);
        let children: BTreeSet<String> = toks
            .windows(3)
            .filter(|w| w[0] == "mod" && w[2] == ";")
            .map(|w| w[1].clone())
            .collect();
        let targets = edges.entry(rel.clone()).or_default();
        for p in paths(&toks) {
            if let Some(t) = resolve(&files, module, &children, &p)
                && &t != module
            {
                targets.insert(files[&t].0.clone());
            }
        }
    }
    edges
}

/// The strongly connected components of `edges` with more than one node:
/// its import circles.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    // Two nodes share a circle when each reaches the other.
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for m in edges.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    todo.push(m.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        edges.keys().map(|n| (n, reach(n))).collect();
    let mut out: Vec<BTreeSet<String>> = Vec::new();
    for (n, r) in &reached {
        let circle: BTreeSet<String> = r
            .iter()
            .filter(|m| reached.get(m).is_some_and(|back| back.contains(*n)))
            .cloned()
            .collect();
        if circle.len() > 1 && !out.contains(&circle) {
            out.push(circle);
        }
    }
    out
}

#[test]
fn no_import_circle_of_more_than_three_files() {
    let edges = graph();
    // The reading works: a known import is seen.
    assert!(
        edges["driver/mod.rs"].contains("run/row.rs"),
        "driver/mod.rs imports run::row::Ctx: {:?}",
        edges["driver/mod.rs"]
    );
    let too_big: Vec<_> = circles(&edges)
        .into_iter()
        .filter(|c| c.len() > MAX_CIRCLE)
        .collect();
    assert!(too_big.is_empty(), "import circles: {too_big:?}");
}

#[test]
fn top_level_modules_import_one_way() {
    let top = |f: &str| {
        let first = f.split('/').next().unwrap_or(f);
        first.strip_suffix(".rs").unwrap_or(first).to_string()
    };
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in graph() {
        let targets = edges.entry(top(&from)).or_default();
        targets.extend(to.iter().map(|t| top(t)).filter(|t| *t != top(&from)));
    }
    assert!(
        edges["driver"].contains("run") && edges["run"].contains("scenario"),
        "the reading works: {edges:?}"
    );
    assert_eq!(circles(&edges), Vec::<BTreeSet<String>>::new(), "{edges:?}");
}
