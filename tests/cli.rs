//! End-to-end tests through the `relaysim` binary.

use std::process::{Command, Output};

fn relaysim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_relaysim"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_transfer_through_an_impaired_link_completes_exactly() {
    let out = relaysim(&[
        "transfer",
        "--size",
        "256KiB",
        "--jitter-ms",
        "200",
        "--duplicate",
        "0.2",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    assert!(text.contains("completed at"), "{text}");
    assert!(
        text.contains("exact: the delivered message is byte-identical"),
        "{text}"
    );
}

#[test]
fn the_same_seed_prints_the_same_report_and_another_seed_does_not() {
    let args = [
        "transfer",
        "--size",
        "300KiB",
        "--content",
        "random",
        "--seed",
        "11",
    ];
    let a = stdout(&relaysim(&args));
    let b = stdout(&relaysim(&args));
    assert_eq!(a, b);
    let mut other = args;
    other[6] = "12";
    assert_ne!(a, stdout(&relaysim(&other)));
}

#[test]
fn a_lossy_link_fails_with_a_typed_cause_and_surfaces_nothing() {
    let out = relaysim(&["transfer", "--size", "4MiB", "--loss", "0.2", "--seed", "3"]);
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(text.contains("failed ("), "{text}");
    assert!(text.contains("nothing surfaced"), "{text}");
}

#[test]
fn bad_input_gets_a_clear_error_and_no_panic() {
    let out = relaysim(&["transfer", "--size", "3GiB"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown size unit \"GiB\""));
    let out = relaysim(&["transfer", "--loss", "1.5"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--loss must be a probability"));
    let out = relaysim(&["transfer", "--budget", "100"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("budget 100 is too small"));
    let out = relaysim(&["transfer", "--content", "binary"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown content class"));
}

#[test]
fn help_shows_examples() {
    let out = relaysim(&["transfer", "--help"]);
    assert!(stdout(&out).contains("Examples:"));
}
