use super::layout::*;
use super::*;
use crate::chart::nice_step;
use std::collections::BTreeMap;

fn row(cell: usize, x: &str, series: &str, y: f64) -> Row {
    let mut values = BTreeMap::new();
    values.insert("failure_rate".to_owned(), y);
    values.insert("failure_rate_lo".to_owned(), (y - 0.1).max(0.0));
    values.insert("failure_rate_hi".to_owned(), (y + 0.1).min(1.0));
    Row {
        cell,
        params: vec![x.into(), series.into()],
        values,
        failures: String::new(),
    }
}

fn spec() -> PlotSpec {
    toml::from_str("file = \"f\"\nx = \"idle\"\ny = \"failure_rate\"\nseries = \"probe\"\n")
        .unwrap()
}

#[test]
fn series_come_in_numeric_order_with_their_intervals() {
    let axes = ["idle".to_owned(), "probe".to_owned()];
    let rows = vec![
        row(0, "5s", "10s", 0.3),
        row(1, "5s", "2s", 0.5),
        row(2, "5s", "20s", 0.1),
        row(3, "30s", "2s", 0.0),
    ];
    let s = series(&spec(), &axes, &rows);
    let names: Vec<&str> = s.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["2s", "10s", "20s"]);
    assert_eq!(s[0].points.len(), 2);
    assert_eq!(s[0].points[0].x, 5.0);
    let (lo, hi) = s[0].points[0].interval.unwrap();
    assert!((lo - 0.4).abs() < 1e-9 && (hi - 0.6).abs() < 1e-9);
}

#[test]
fn a_cell_without_a_value_is_kept_as_a_failure() {
    let axes = ["idle".to_owned(), "probe".to_owned()];
    let mut r = row(0, "5s", "2s", 0.0);
    r.values.insert("failure_rate".into(), f64::NAN);
    let s = series(&spec(), &axes, &[r]);
    assert_eq!(s[0].points.len(), 1);
    assert_eq!(s[0].points[0].y, None);
    assert_eq!(s[0].points[0].interval, None);
}

#[test]
fn axes_go_logarithmic_when_values_span_decades_and_read_in_human_units() {
    let mut p = spec();
    p.y = "transfer_completion_p99_ms".into();
    let data = vec![Series {
        name: "a".into(),
        points: [(4096.0, 150.0), (65536.0, 90_000.0)]
            .iter()
            .map(|&(x, y)| Point {
                x,
                y: Some(y),
                interval: None,
            })
            .collect(),
    }];
    let l = Layout::new(&p, &data, XKind::Bytes, 3.0);
    assert!(l.x_log && l.y_log);
    assert_eq!(l.x_text(l.x_ticks[0]), "4 KiB");
    assert_eq!(l.x_text(l.x_ticks[1]), "64 KiB");
    assert!(l.y_label.contains("(s)"), "{}", l.y_label);
    assert!(l.subtitle.contains("3 seeds"));
    let linear = Layout::new(
        &p,
        &[Series {
            name: "a".into(),
            points: vec![Point {
                x: 1.0,
                y: Some(500.0),
                interval: None,
            }],
        }],
        XKind::Number,
        1.0,
    );
    assert!(!linear.x_log && !linear.y_log);
    assert!(linear.y_label.ends_with("(ms)"));
}

#[test]
fn failure_rates_are_shown_in_percent() {
    let l = Layout::new(&spec(), &[], XKind::Seconds, 20.0);
    assert_eq!(l.y_text(50.0), "50%");
    assert_eq!(l.y_label, "calls failed (%)");
}

#[test]
fn ticks_are_round_numbers() {
    assert_eq!(nice_ceiling(7.3), 10.0);
    assert_eq!(nice_ceiling(230.0), 250.0);
    assert_eq!(nice_step(0.37), 0.5);
    assert_eq!(human_bytes(61440.0), "60 KiB");
    assert_eq!(human_seconds(5.0), "5 s");
    assert_eq!(human_seconds(0.25), "250 ms");
    assert_eq!(human_seconds(120.0), "2 min");
    assert_eq!(human_bytes(10.0 * 1024.0 * 1024.0), "10 MiB");
}
