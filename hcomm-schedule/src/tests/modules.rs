//! The crate's modules depend on each other in a chain: no module reaches
//! itself through `crate::` paths.

use std::collections::BTreeMap;
use std::path::Path;

/// The top-level module of each source file (`check/deadlock.rs` is part of
/// `check`), except `lib.rs` and the test tree, with the text of its code:
/// comments and inline `#[cfg(test)]` modules removed.
fn sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("the source directory is readable") {
            let path = entry.expect("a directory entry").path();
            let rel = path.strip_prefix(&root).expect("below src").to_path_buf();
            let top = rel.components().next().expect("a first component");
            let top = top.as_os_str().to_string_lossy().trim_end_matches(".rs").to_owned();
            if top == "tests" || top == "lib" {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("a readable source file");
                let text = text.split("#[cfg(test)]\nmod ").next().unwrap_or_default();
                let code: String = text
                    .lines()
                    .map(|l| l.split("//").next().unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join("\n");
                out.push((top, code));
            }
        }
    }
    out
}

/// `module -> modules it names through crate::` (self-references left out).
fn graph() -> BTreeMap<String, Vec<String>> {
    let files = sources();
    let mut g: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (module, _) in &files {
        g.entry(module.clone()).or_default();
    }
    for (module, code) in &files {
        for (i, _) in code.match_indices("crate::") {
            let name: String = code[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if name != *module && g.contains_key(&name) {
                let deps = g.get_mut(module).expect("every module is a node");
                if !deps.contains(&name) {
                    deps.push(name);
                }
            }
        }
    }
    g
}

/// A cycle of `g` as `a -> b -> .. -> a`, if there is one.
fn find_cycle(g: &BTreeMap<String, Vec<String>>) -> Option<String> {
    // 0: unvisited, 1: on the current path, 2: done
    fn visit<'a>(
        n: &'a str,
        g: &'a BTreeMap<String, Vec<String>>,
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
fn modules_form_a_chain() {
    let g = graph();
    for expected in ["eval", "ir", "resolve", "compile", "trace", "unroll", "check", "verify"] {
        assert!(g.contains_key(expected), "module `{expected}` not found in {g:?}");
    }
    assert!(g["unroll"].contains(&"trace".to_owned()), "{g:?}");
    if let Some(cycle) = find_cycle(&g) {
        panic!("the modules of hcomm-schedule import each other in a cycle: {cycle}");
    }
}

#[test]
fn a_cycle_is_named() {
    let mut g: BTreeMap<String, Vec<String>> = BTreeMap::new();
    g.insert("a".into(), vec!["b".into()]);
    g.insert("b".into(), vec!["c".into()]);
    g.insert("c".into(), vec!["a".into()]);
    g.insert("d".into(), vec!["a".into()]);
    assert_eq!(find_cycle(&g).as_deref(), Some("a -> b -> c -> a"));
    g.insert("c".into(), Vec::new());
    assert_eq!(find_cycle(&g), None);
}
