//! A tiny sweep end to end through the CLI: CSV, plots, recommendation; the same rows whatever
//! the job count; shards merge to the full result.

use std::path::PathBuf;
use std::process::{Command, Output};

fn relaysim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_relaysim"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("relaysim-sweep-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

const SWEEP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny-sweep.toml");

#[test]
fn a_tiny_sweep_writes_csv_plots_and_a_recommendation() {
    let out = dir("full");
    let o = relaysim(&[
        "sweep",
        SWEEP,
        "--jobs",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("recommendation"), "{text}");
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 5, "a header and four cells");
    assert!(lines[0].starts_with(
        "cell,policy.budget,relays[0].profile,runs,calls,completion_ratio,failure_rate,"
    ));
    for f in ["p99.svg", "p99.png", "recommendation.txt"] {
        assert!(out.join(f).metadata().unwrap().len() > 100, "{f}");
    }
    // Fewer, larger frames: the 32 KiB budget publishes fewer events than the 8 KiB one.
    let events: Vec<f64> = lines[1..]
        .iter()
        .map(|l| l.split(',').nth(14).unwrap().parse().unwrap())
        .collect();
    assert!(events[2] < events[0], "{events:?}");

    let serial = dir("serial");
    let o = relaysim(&[
        "sweep",
        SWEEP,
        "--jobs",
        "1",
        "--out",
        serial.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert_eq!(
        std::fs::read_to_string(serial.join("sweep.csv")).unwrap(),
        csv,
        "rows do not depend on the job count"
    );

    let shards: Vec<PathBuf> = (0..2).map(|i| dir(&format!("shard{i}"))).collect();
    for (i, s) in shards.iter().enumerate() {
        let o = relaysim(&[
            "sweep",
            SWEEP,
            "--shard",
            &format!("{i}/2"),
            "--out",
            s.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let merged = dir("merged");
    let shard_csvs: Vec<String> = shards
        .iter()
        .map(|s| s.join("sweep.csv").to_string_lossy().into_owned())
        .collect();
    let mut args = vec!["merge", SWEEP];
    args.extend(shard_csvs.iter().map(String::as_str));
    args.extend(["--out", merged.to_str().unwrap()]);
    let o = relaysim(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(merged.join("sweep.csv")).unwrap(),
        csv,
        "merged shards equal the full sweep"
    );
}

#[test]
fn a_bad_axis_is_refused_before_anything_runs() {
    let bad = dir("bad");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny-base.toml"),
        bad.join("tiny-base.toml"),
    )
    .unwrap();
    let text = std::fs::read_to_string(SWEEP)
        .unwrap()
        .replace("\"khatru\"]", "\"khatru\", \"strfy\"]");
    std::fs::write(bad.join("s.toml"), text).unwrap();
    let o = relaysim(&[
        "sweep",
        bad.join("s.toml").to_str().unwrap(),
        "--out",
        bad.join("out").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("unknown relay profile \"strfy\""), "{err}");
    assert!(err.contains("relays[0].profile=strfy"), "{err}");
    let o = relaysim(&["sweep", SWEEP, "--shard", "2/2"]);
    assert_eq!(o.status.code(), Some(2));
}

/// The batch-engine path (`deploy/`): every shard run by `run-shard.sh` as an array task
/// would, then `merge-shards.sh`, gives the sweep.csv of one whole run, byte for byte; a
/// missing shard stops the merge. Each job definition calls the script with its engine's
/// task index.
#[test]
fn the_batch_definitions_shard_and_merge_to_the_whole_sweep() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = |name: &str, args: &[&str]| {
        Command::new("sh")
            .arg(root.join("deploy").join(name))
            .args(args)
            .env("RELAYSIM", env!("CARGO_BIN_EXE_relaysim"))
            .output()
            .expect("sh runs")
    };
    let whole = dir("batch-whole");
    let o = relaysim(&["sweep", SWEEP, "--out", whole.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let shards = dir("batch-shards");
    let merged = dir("batch-merged");
    let count = "3"; // more shards than some cells divide into evenly
    let merge = || {
        script(
            "merge-shards.sh",
            &[
                SWEEP,
                count,
                shards.to_str().unwrap(),
                merged.to_str().unwrap(),
            ],
        )
    };
    let o = merge();
    assert_eq!(o.status.code(), Some(1), "no shard ran yet");
    assert!(String::from_utf8_lossy(&o.stderr).contains("shard 0 of 3 is missing"));
    for i in ["0", "1", "2"] {
        let o = script("run-shard.sh", &[SWEEP, i, count, shards.to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let o = merge();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(merged.join("sweep.csv")).unwrap(),
        std::fs::read_to_string(whole.join("sweep.csv")).unwrap(),
        "the merged shards are the whole sweep"
    );
    for (file, index) in [
        ("kubernetes/sweep-indexed-job.yaml", "$JOB_COMPLETION_INDEX"),
        ("slurm/sweep-array.sbatch", "$SLURM_ARRAY_TASK_ID"),
        ("github-actions/sweep-matrix.yml", "${{ matrix.shard }}"),
    ] {
        let text = std::fs::read_to_string(root.join("deploy").join(file)).unwrap();
        let call = text
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .find(|l| l.contains("deploy/run-shard.sh"))
            .unwrap_or_else(|| panic!("{file} runs deploy/run-shard.sh"));
        assert!(call.contains(index), "{file} passes {index}: {call}");
    }
}
