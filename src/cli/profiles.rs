//! `relaysim profiles`: the built-in relay profiles, knob by knob, with their sources.

use super::Exit;
use anyhow::{bail, Result};
use relaysim::RelayProfile;

#[derive(clap::Args, Debug)]
pub(super) struct ProfilesArgs {
    /// Show only this profile, every knob and its sources.
    name: Option<String>,
    /// Print as JSON: every knob and the sources of each profile shown.
    #[arg(long)]
    json: bool,
}

/// The knobs the overview table shows (all of them are in `profiles NAME` and `--json`).
const TABLE: [(&str, &str); 6] = [
    ("max_event_bytes", "event limit"),
    ("ephemeral", "ephemeral events"),
    ("store_regular", "regular events"),
    ("rate_limit", "rate limit"),
    ("intake", "intake"),
    ("keepalive", "keepalive"),
];

pub(super) fn profiles(args: ProfilesArgs) -> Result<Exit> {
    let profiles: Vec<RelayProfile> = match &args.name {
        Some(name) => match RelayProfile::built_in(name) {
            Some(p) => vec![p],
            None => bail!(
                "no built-in profile {name:?}; the built-in profiles are {}",
                RelayProfile::BUILT_IN.join(", ")
            ),
        },
        None => RelayProfile::BUILT_IN
            .iter()
            .filter_map(|n| RelayProfile::built_in(n))
            .collect(),
    };
    if args.json {
        let list: Vec<serde_json::Value> = profiles
            .iter()
            .map(|p| {
                let knobs: serde_json::Map<String, serde_json::Value> = p
                    .facts()
                    .into_iter()
                    .map(|f| (f.knob.to_owned(), f.value.into()))
                    .collect();
                serde_json::json!({ "name": p.name, "knobs": knobs, "sources": p.sources })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(Exit::Success);
    }
    if args.name.is_some() {
        for p in &profiles {
            println!("{}", p.name);
            for f in p.facts() {
                println!("  {:<20} {}", f.knob, f.value);
            }
            println!("  sources:\n{}", wrap(&p.sources, 96, "    "));
        }
        return Ok(Exit::Success);
    }
    for p in &profiles {
        println!("{}", p.name);
        let facts = p.facts();
        for (knob, words) in TABLE {
            if let Some(f) = facts.iter().find(|f| f.knob == knob) {
                println!("  {words:<17} {}", f.value);
            }
        }
    }
    println!(
        "\nEvery knob and its sources: relaysim profiles NAME (or --json). In a scenario: \
         [[relays]] profile = \"NAME\", and any knob overridden beside it \
         (docs/scenario-reference.md)."
    );
    Ok(Exit::Success)
}

/// `text` in lines of at most `width` characters, each starting with `indent`.
fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(format!("{indent}{line}"));
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(format!("{indent}{line}"));
    }
    lines.join("\n")
}
