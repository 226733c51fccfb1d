//! The `hcomm-viz` binary: operator parameters by name on the command line
//! and in the drawing.

use std::process::{Command, Stdio};

fn viz(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hcomm-viz"))
        .args(args)
        .output()
        .expect("run hcomm-viz");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn operator_parameter_by_keyword() {
    let (ok, svg, err) = viz(&["ring_all_reduce", "--world", "3", "--scalar", "op=max"]);
    assert!(ok, "{err}");
    assert!(svg.contains("ring_all_reduce   world = 3, op = max"), "{svg}");
    assert!(!svg.contains("op = 2"));
}

#[test]
fn operator_parameter_by_number_is_refused() {
    let (ok, svg, err) = viz(&["ring_all_reduce", "--world", "3", "--scalar", "op=2"]);
    assert!(!ok);
    assert!(svg.is_empty());
    assert_eq!(
        err.trim(),
        "error: `op` is an operator parameter: its value is `sum`, `prod`, `max` or `min`, not `2`"
    );
}

/// Output into a pipe whose reader is gone (`hcomm-viz --list | head -0`):
/// the output ends quietly, with success and no panic.
#[test]
fn a_closed_standard_output_ends_the_output_quietly() {
    for args in [&["--list"][..], &["ring_all_gather", "--world", "64"]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hcomm-viz"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run hcomm-viz");
        // the reading end closes before the tool writes
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("hcomm-viz ends");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?}: {err}");
    }
}

#[test]
fn list_marks_operator_parameters() {
    let (ok, out, err) = viz(&["--list"]);
    assert!(ok, "{err}");
    let line = out.lines().find(|l| l.starts_with("ring_all_reduce ")).expect(&out);
    assert!(line.ends_with("scalars: op (operator)"), "{line}");
}

/// A text file of schedules in a fresh temporary directory.
fn schedule_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("hcomm-viz-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let path = dir.join("sched.rs");
    std::fs::write(&path, text).expect("write the schedule file");
    path
}

const BLOCKING: &str = "
fn blocking(a: &[T; n], b: &mut [T; n]) {
    send a to (rank + 1) % world;
    recv b from (rank - 1) % world;
}
";

#[test]
fn draws_a_schedule_from_a_text_file() {
    // the built-in ring's own source text, and a schedule that deadlocks
    let text = format!("{}\n{BLOCKING}", hcomm::schedules::ring_all_gather::SOURCE);
    let path = schedule_file("ring", &text);
    let file = path.to_str().expect("a UTF-8 path");
    let (ok, svg, err) = viz(&["--file", file, "ring_all_gather", "--world", "4"]);
    assert!(ok, "{err}");
    let doc = roxmltree::Document::parse(&svg).expect("valid SVG");
    assert!(svg.contains("ring_all_gather   world = 4"), "{svg}");
    assert!(
        doc.descendants().any(|n| n.text().map(str::trim) == Some("rank 3")),
        "{svg}"
    );
    // the same drawing as the catalog's (the IR the macro built)
    let (ok, builtin, err) = viz(&["ring_all_gather", "--world", "4"]);
    assert!(ok, "{err}");
    assert_eq!(svg, builtin);
    // a failing check is drawn with its diagnostic
    let (ok, svg, err) = viz(&["--file", file, "blocking", "--world", "2"]);
    assert!(ok, "{err}");
    assert!(svg.contains("deadlock"), "{svg}");
    // two schedules: a name is needed
    let (ok, _, err) = viz(&["--file", file, "--world", "2"]);
    assert!(!ok);
    assert_eq!(
        err.trim(),
        format!("error: {file} holds 2 schedules: name one of `ring_all_gather`, `blocking`")
    );
    let (ok, _, err) = viz(&["--file", file, "blockng", "--world", "2"]);
    assert!(!ok);
    assert_eq!(
        err.trim(),
        format!(
            "error: {file} has no schedule called `blockng`; it has `ring_all_gather`, `blocking`. hint: did you \
             mean `blocking`?"
        )
    );
    std::fs::remove_dir_all(path.parent().expect("a directory")).expect("clean up");
}

#[test]
fn a_text_file_with_errors_is_reported_at_its_lines() {
    let path = schedule_file("bad", "fn f(x: &mut [T; n]) {\n    copy x -> y;\n}\n");
    let file = path.to_str().expect("a UTF-8 path");
    let (ok, svg, err) = viz(&["--file", file, "--world", "2"]);
    assert!(!ok);
    assert!(svg.is_empty());
    assert!(err.starts_with(&format!("error: {file}:2:15: unknown name: ")), "{err}");
    std::fs::remove_dir_all(path.parent().expect("a directory")).expect("clean up");
}

#[test]
fn a_misspelt_name_gets_a_suggestion() {
    let (ok, svg, err) = viz(&["ring_al_gather", "--world", "4"]);
    assert!(!ok);
    assert!(svg.is_empty());
    assert_eq!(
        err.trim(),
        "error: no schedule called `ring_al_gather`. hint: did you mean `ring_all_gather`? `hcomm-viz --list` names \
         them"
    );
    // nothing close: no suggestion, only the hint
    let (ok, _, err) = viz(&["zzz", "--world", "4"]);
    assert!(!ok);
    assert_eq!(
        err.trim(),
        "error: no schedule called `zzz`. hint: `hcomm-viz --list` names them"
    );
    let (ok, _, err) = viz(&["ring_all_reduce", "--world", "3", "--scalar", "po=max"]);
    assert!(!ok);
    assert_eq!(
        err.trim(),
        "error: `ring_all_reduce` has no scalar parameter `po`. hint: did you mean `op`?"
    );
}

#[test]
fn worlds_outside_one_to_4096_are_refused_by_name() {
    for (world, why) in [
        ("0", "a world of 0 ranks cannot be drawn: it needs 1 to 4096 ranks"),
        ("-3", "a world of -3 ranks cannot be drawn: it needs 1 to 4096 ranks"),
        (
            "5000",
            "a world of 5000 ranks cannot be drawn: it needs 1 to 4096 ranks",
        ),
        ("four", "`four` is not a number of ranks"),
    ] {
        let (ok, svg, err) = viz(&["ring_all_gather", "--world", world]);
        assert!(!ok, "{world}");
        assert!(svg.is_empty(), "{world}");
        assert!(err.contains("--world") && err.contains(why), "{world}: {err}");
    }
    let (ok, svg, err) = viz(&["ring_all_gather", "--world", "1"]);
    assert!(ok, "{err}");
    assert!(svg.contains("world = 1"), "{svg}");
}
