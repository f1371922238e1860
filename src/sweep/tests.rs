use super::*;

/// A sweep's size is checked before its cells are built: five axes of 100 values would be
/// 10^10 cells.
#[test]
fn too_many_cells_seeds_or_runs_are_refused_before_building_cells() {
    let spec = |axes: usize, values: usize, seeds: u32| {
        let axes: String = (0..axes)
            .map(|a| {
                let v: Vec<String> = (0..values).map(|i| i.to_string()).collect();
                format!("[[axes]]\nparam = \"p{a}\"\nvalues = [{}]\n", v.join(","))
            })
            .collect();
        toml::from_str::<SweepSpec>(&format!("scenario = \"x\"\nseeds = {seeds}\n{axes}")).unwrap()
    };
    let base = "[[relays]]\nname = \"r\"\n";
    let refused = |s| match Sweep::new("t".into(), s, base, "t.toml") {
        Err(e) => e.to_string(),
        Ok(_) => panic!("accepted"),
    };
    assert!(refused(spec(5, 100, 1)).contains("at most 10000"));
    assert!(refused(spec(1, 2, 20_000)).contains("at most 10000 per cell"));
    assert!(refused(spec(2, 100, 200)).contains("at most 1000000"));
}

#[test]
fn paths_set_nested_keys_and_array_items() {
    let mut t: toml::Table = toml::from_str(
        "[policy]\nbudget = 1\n[[relays]]\nname = \"a\"\n[relays.down]\nloss = 0.0\n",
    )
    .unwrap();
    set_path(&mut t, "policy.budget", toml::Value::Integer(9)).unwrap();
    set_path(&mut t, "relays[0].down.loss", toml::Value::Float(0.5)).unwrap();
    set_path(
        &mut t,
        "relays[0].down.delay.sigma",
        toml::Value::Float(1.0),
    )
    .unwrap();
    assert_eq!(t["policy"]["budget"].as_integer(), Some(9));
    assert_eq!(t["relays"][0]["down"]["loss"].as_float(), Some(0.5));
    assert_eq!(
        t["relays"][0]["down"]["delay"]["sigma"].as_float(),
        Some(1.0)
    );
    assert!(
        set_path(&mut t, "relays[3].profile", toml::Value::String("x".into()))
            .unwrap_err()
            .contains("does not exist")
    );
}

#[test]
fn recommendations_pick_the_lowest_value_that_completes() {
    let row = |cell, budget: &str, profile: &str, ratio: f64, p99: f64| Row {
        cell,
        params: vec![budget.into(), profile.into()],
        values: COLUMNS
            .iter()
            .map(|c| (c.to_string(), 1.0))
            .chain([
                ("completion_ratio".to_owned(), ratio),
                ("transfer_completion_p99_ms".to_owned(), p99),
            ])
            .collect(),
        failures: String::new(),
    };
    let rows = vec![
        row(0, "4096", "a", 1.0, 900.0),
        row(1, "8192", "a", 1.0, 400.0),
        row(2, "65536", "a", 0.5, 100.0),
        row(3, "4096", "b", 0.0, 1.0),
    ];
    let spec = RecommendSpec {
        choose: "budget".into(),
        by: vec!["profile".into()],
        minimise: "transfer_completion_p99_ms".into(),
        min_completion_ratio: 1.0,
    };
    let recs = recommend(&spec, &["budget".into(), "profile".into()], &rows);
    assert_eq!(
        recs[0].value.as_deref(),
        Some("8192"),
        "the faster budget that still completes"
    );
    assert_eq!(recs[1].value, None);
}

/// A winner whose interval overlaps another cell's is reported with that cell as a tie;
/// one whose interval is clear of the rest is not.
#[test]
fn recommendations_say_when_the_best_cells_are_a_tie() {
    let row = |cell, budget: &str, p99: f64, lo: f64, hi: f64| Row {
        cell,
        params: vec![budget.into()],
        values: COLUMNS
            .iter()
            .map(|c| (c.to_string(), 1.0))
            .chain([
                ("transfer_completion_p99_ms".to_owned(), p99),
                ("transfer_completion_p99_ms_lo".to_owned(), lo),
                ("transfer_completion_p99_ms_hi".to_owned(), hi),
            ])
            .collect(),
        failures: String::new(),
    };
    let spec = RecommendSpec {
        choose: "budget".into(),
        by: vec![],
        minimise: "transfer_completion_p99_ms".into(),
        min_completion_ratio: 1.0,
    };
    let axes = ["budget".to_owned()];
    let near = [
        row(0, "4096", 900.0, 850.0, 950.0),
        row(1, "8192", 400.0, 350.0, 480.0),
        row(2, "16384", 450.0, 420.0, 500.0),
    ];
    let recs = recommend(&spec, &axes, &near);
    assert_eq!(recs[0].value.as_deref(), Some("8192"));
    assert_eq!(recs[0].ties, ["16384"]);
    assert!(recs[0].text.contains("a tie"), "{}", recs[0].text);
    assert!(recs[0].text.contains("[95% CI"), "{}", recs[0].text);
    let clear = [
        row(0, "4096", 900.0, 850.0, 950.0),
        row(1, "8192", 400.0, 350.0, 410.0),
        row(2, "16384", 450.0, 420.0, 500.0),
    ];
    let recs = recommend(&spec, &axes, &clear);
    assert!(recs[0].ties.is_empty());
    assert!(!recs[0].text.contains("a tie"));
}
