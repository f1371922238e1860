//! Very large requests end to end in the des world: a request over 64 MiB is reassembled by
//! the server in pieces and its argument reaches the tool in segments
//! (`nip01::json_segmented`), and the integrity oracle finds what came back intact.

use relaysim::scenario::Scenario;

fn run(kind: &str, content: &str) -> relaysim::stats::Report {
    let text = format!(
        r#"
name = "large-{kind}"
[policy]
max_transfer_bytes = "200MiB"
max_transfer_chunks = 100000
[[relays]]
name = "ideal"
profile = "ideal"
[[servers]]
name = "server"
relays = ["ideal"]
[[clients]]
name = "client"
relays = ["ideal"]
[[workloads]]
kind = "{kind}"
bytes = "70MiB"
{content}
"#
    );
    Scenario::from_toml_str(&text, "large.toml")
        .unwrap()
        .run_seeds(3, 1, |_| {})
}

#[test]
fn a_70_mib_echo_and_upload_come_back_intact() {
    for (kind, content) in [
        ("request", ""),
        ("upload", r#"content = "escape-heavy""#),
        ("upload", r#"content = "utf8""#),
    ] {
        let report = run(kind, content);
        assert_eq!(report.items().count(), 1, "{kind} {content}");
        assert_eq!(
            report.completion_ratio(),
            1.0,
            "{kind} {content}: {:?}",
            report.failure_texts()
        );
        assert_eq!(report.integrity_violations(), 0, "{kind} {content}");
    }
}
