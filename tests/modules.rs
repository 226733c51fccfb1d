//! The modules of every crate of the workspace depend on each other in a
//! chain: no top-level module reaches itself through `crate::` paths (or
//! `super::` paths of a top-level file). A failure names the crate and the
//! cycle.
//!
//! A crate's top-level modules are the files and directories of its `src/`
//! (`check/deadlock.rs` is part of `check`), except `lib.rs`, `main.rs` and
//! a `tests` tree; a `#[path]` module of `lib.rs` (`__private`, whose
//! files are `private/`, is `private`) and the names `lib.rs` re-exports (`hcomm::Comm` is
//! `comm`'s) count as the module they come from. Comments, inline
//! `#[cfg(test)]` modules and the item after a `#[cfg(test)]` line are left
//! out: test code is not part of the chain.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `module -> modules it names`, for one crate.
type Graph = BTreeMap<String, Vec<String>>;

/// The directory of every crate of the workspace, the root package's
/// included.
fn crates() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("the workspace manifest is readable");
    let members = manifest
        .split("members = [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .expect("the workspace lists its members");
    let mut out = vec![root.to_path_buf()];
    out.extend(
        members
            .split(',')
            .map(|m| m.trim().trim_matches('"'))
            .filter(|m| !m.is_empty())
            .map(|m| root.join(m)),
    );
    out
}

/// A file's code: comments, inline test modules and the line after each
/// `#[cfg(test)]` removed.
fn code_of(text: &str) -> String {
    let text = text.split("#[cfg(test)]\nmod ").next().unwrap_or_default();
    let mut out = Vec::new();
    let mut skip = false;
    for line in text.lines() {
        if std::mem::take(&mut skip) {
            continue;
        }
        if line.trim() == "#[cfg(test)]" {
            skip = true;
            continue;
        }
        out.push(line.split("//").next().unwrap_or_default());
    }
    out.join("\n")
}

/// The identifiers a path names after `prefix` (`crate::`, `super::`): the
/// first segment, or each first segment of a `{..}` group.
fn named_after<'a>(code: &'a str, prefix: &str) -> Vec<&'a str> {
    let ident = |s: &'a str| {
        let end = s
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        &s[..end]
    };
    let mut out = Vec::new();
    for (i, _) in code.match_indices(prefix) {
        let before = code[..i].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == ':') {
            continue;
        }
        let rest = &code[i + prefix.len()..];
        let Some(group) = rest.strip_prefix('{') else {
            out.push(ident(rest));
            continue;
        };
        // the identifiers at depth 1 of the group
        let mut depth = 1;
        let mut start = true;
        for (j, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 1 => break,
                '}' => depth -= 1,
                ',' if depth == 1 => start = true,
                c if start && depth == 1 && !c.is_whitespace() => {
                    start = false;
                    out.push(ident(&group[j..]));
                }
                _ => {}
            }
        }
    }
    out
}

/// The module graph of the crate in `dir`.
fn graph(dir: &Path) -> Graph {
    let src = dir.join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap_or_default();
    let lib = code_of(&lib);
    let mut files: Vec<(String, String)> = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            let rel = path.strip_prefix(&src).expect("below src").to_path_buf();
            let top = rel.components().next().expect("a first component");
            let top = top.as_os_str().to_string_lossy().trim_end_matches(".rs").to_owned();
            if ["tests", "lib", "main", "bin"].contains(&top.as_str()) {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("a readable source file");
                let mut code = code_of(&text);
                // `super::` of a top-level file is `crate::`
                let top_level = rel.components().count() == 1 || rel.ends_with(format!("{top}/mod.rs"));
                if top_level {
                    code = code.replace("super::", "crate::");
                }
                files.push((top, code));
            }
        }
    }
    // names that stand for a module: `#[path]` modules and re-exports
    let mut alias: BTreeMap<String, String> = BTreeMap::new();
    for (module, _) in &files {
        alias.insert(module.clone(), module.clone());
    }
    for part in lib.split("#[path = \"").skip(1) {
        let target = part.split('/').next().unwrap_or_default().trim_end_matches(".rs\"]");
        let name = part
            .split("mod ")
            .nth(1)
            .map(|s| s.split(';').next().unwrap_or_default().trim());
        if let Some(name) = name {
            alias.insert(name.to_owned(), target.to_owned());
        }
    }
    for stmt in lib.split(';') {
        let Some(path) = stmt
            .split("use ")
            .nth(1)
            .filter(|_| stmt.trim_start().starts_with("pub"))
        else {
            continue;
        };
        let mut segments = path.trim().splitn(2, "::");
        let (Some(module), Some(names)) = (segments.next(), segments.next()) else {
            continue;
        };
        let Some(module) = alias.get(module).cloned() else {
            continue;
        };
        for name in names.trim_matches(|c| c == '{' || c == '}').split(',') {
            let name = name.split(" as ").last().unwrap_or_default().trim();
            let name = name.split("::").next().unwrap_or_default();
            if !name.is_empty() && !alias.contains_key(name) {
                alias.insert(name.to_owned(), module.clone());
            }
        }
    }
    let mut g = Graph::new();
    for (module, _) in &files {
        g.entry(module.clone()).or_default();
    }
    for (module, code) in &files {
        for name in named_after(code, "crate::") {
            if let Some(target) = alias.get(name).filter(|t| *t != module && g.contains_key(*t)).cloned() {
                let deps = g.get_mut(module).expect("every module is a node");
                if !deps.contains(&target) {
                    deps.push(target);
                }
            }
        }
    }
    g
}

/// A cycle of `g` as `a -> b -> .. -> a`, if there is one.
fn find_cycle(g: &Graph) -> Option<String> {
    // 0: unvisited, 1: on the current path, 2: done
    fn visit<'a>(
        n: &'a str,
        g: &'a Graph,
        state: &mut BTreeMap<&'a str, u8>,
        path: &mut Vec<&'a str>,
    ) -> Option<String> {
        state.insert(n, 1);
        path.push(n);
        for d in &g[n] {
            match state.get(d.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = path.iter().position(|p| p == d).unwrap_or(0);
                    let mut cycle: Vec<&str> = path[start..].to_vec();
                    cycle.push(d);
                    return Some(cycle.join(" -> "));
                }
                0 => {
                    if let Some(c) = visit(d, g, state, path) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        state.insert(n, 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in g.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, g, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn every_crate_s_modules_form_a_chain() {
    let crates = crates();
    assert!(crates.len() > 10, "{crates:?}");
    let mut scanned = 0;
    for dir in crates {
        let g = graph(&dir);
        scanned += g.len();
        if let Some(cycle) = find_cycle(&g) {
            panic!("the modules of {} import each other in a cycle: {cycle}", dir.display());
        }
    }
    assert!(scanned > 50, "only {scanned} modules found");
}

#[test]
fn the_scan_sees_the_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let hcomm = graph(&root.join("hcomm"));
    for (from, to) in [
        ("comm", "backend"),
        ("entry", "backend"),
        ("private", "entry"),
        ("collective", "comm"),
        ("backend", "header"),
    ] {
        let deps = hcomm.get(from);
        assert!(
            deps.is_some_and(|d| d.iter().any(|t| t == to)),
            "{from} -> {to} not seen: {hcomm:?}"
        );
    }
    let schedule = graph(&root.join("hcomm-schedule"));
    for expected in ["eval", "ir", "resolve", "compile", "trace", "unroll", "check", "verify"] {
        assert!(
            schedule.contains_key(expected),
            "module `{expected}` not found in {schedule:?}"
        );
    }
    assert!(schedule["unroll"].contains(&"trace".to_owned()), "{schedule:?}");
}

#[test]
fn a_cycle_is_named() {
    let mut g = Graph::new();
    g.insert("a".into(), vec!["b".into()]);
    g.insert("b".into(), vec!["c".into()]);
    g.insert("c".into(), vec!["a".into()]);
    g.insert("d".into(), vec!["a".into()]);
    assert_eq!(find_cycle(&g).as_deref(), Some("a -> b -> c -> a"));
    g.insert("c".into(), Vec::new());
    assert_eq!(find_cycle(&g), None);
}

#[test]
fn grouped_and_re_exported_names_count() {
    let code =
        code_of("use crate::{a::X, b, c::{d, e}};\n// crate::zz\n#[cfg(test)]\nuse crate::t;\nfn f() { crate::g(); }");
    assert_eq!(named_after(&code, "crate::"), vec!["a", "b", "c", "g"]);
}
