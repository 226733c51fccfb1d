//! The `hcomm-viz` binary: operator parameters by name on the command line
//! and in the drawing.

use std::process::Command;

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

#[test]
fn list_marks_operator_parameters() {
    let (ok, out, err) = viz(&["--list"]);
    assert!(ok, "{err}");
    let line = out.lines().find(|l| l.starts_with("ring_all_reduce ")).expect(&out);
    assert!(line.ends_with("scalars: op (operator)"), "{line}");
}
