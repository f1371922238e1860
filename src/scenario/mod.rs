//! Scenarios: TOML files that describe relays, peers, workloads and expectations; validation
//! with precise errors; running them in the `des` world; checking the expectations.
//!
//! # Example: a deterministic regression test in your own crate
//!
//! ```
//! use relaysim::scenario::Scenario;
//!
//! let scenario = Scenario::from_toml_str(
//!     r#"
//!     name = "echo-over-strfry"
//!     [[relays]]
//!     name = "main"
//!     profile = "strfry"
//!     [[servers]]
//!     name = "server"
//!     relays = ["main"]
//!     [[clients]]
//!     name = "client"
//!     relays = ["main"]
//!     [[workloads]]
//!     kind = "download"
//!     bytes = "200KiB"
//!     content = "escape-heavy"
//!     [expect]
//!     min_completion_ratio = 1.0
//!     "#,
//!     "inline.toml",
//! )
//! .unwrap();
//! let report = scenario.run_all();
//! assert!(scenario.check(&report).is_empty());
//! assert_eq!(report.completion_ratio(), 1.0);
//! ```

mod diagnostic;
mod expect;
mod peers;
mod plan;
mod policy;
mod programs;
pub(crate) mod relays;
mod run;
pub mod spec;
mod timing;
pub(crate) mod workloads;

pub use diagnostic::{Diagnostic, Diagnostics, ScenarioError};
pub use expect::Observes;
pub use plan::Plan;
pub use workloads::{Workload, WorkloadKind};

use crate::peer::core::Clock;
use crate::peer::engines::Implementation;
use crate::peer::server::ServerConfig;
use crate::relay::RelayProfile;
use crate::sim::publish::PublishPipeline;
use diagnostic::Ctx;
use sha2::{Digest as _, Sha256};
use spec::ScenarioSpec;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What the header of a rerun's trace says about it: the outages its planners suppress and,
/// for a shrunk trace, the shrink it came from.
#[derive(Debug, Clone, Default)]
pub struct TraceContext {
    /// Outages (by number) that did not happen.
    pub suppressed_outages: Vec<u64>,
    /// The shrink this trace is the result of.
    pub shrunk: Option<crate::trace::ShrinkInfo>,
}

/// The smallest `policy.budget` accepted: a signed kind-25910 event with an empty content is
/// about 650 bytes and a CEP-22 frame's JSON-RPC wrapper about 200 more.
pub const MIN_BUDGET: usize = 1024;

/// The built-in default scenario: what `relaysim run` runs without a file (also shipped as
/// `scenarios/default.toml`).
pub const DEFAULT_SCENARIO: &str = include_str!("../../scenarios/default.toml");

struct ClientDef {
    program: Option<String>,
    program_options: serde_json::Value,
    publish: PublishPipeline,
    clock: Clock,
    name: String,
    relays: Vec<usize>,
    server: usize,
    stateless: bool,
    ip: Option<String>,
    resumable: bool,
    implementation: Implementation,
    behaviour: crate::peer::behaviour::Behaviour,
}

struct ServerDef {
    program: Option<String>,
    program_options: serde_json::Value,
    publish: PublishPipeline,
    clock: Clock,
    implementation: Implementation,
    behaviour: crate::peer::behaviour::Behaviour,
    name: String,
    relays: Vec<usize>,
}

/// The scenario files (`*.toml`) directly in each of `dirs`, sorted: how tests, benches and
/// tools find the shipped scenarios (`scenarios/`, `scenarios/resumable/`, ...).
pub fn scenario_files(dirs: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for dir in dirs {
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "toml") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// A validated scenario, ready to run.
pub struct Scenario {
    /// Its name.
    pub name: String,
    /// What it shows.
    pub description: String,
    /// First seed.
    pub seed: u64,
    /// Runs (seeds `seed`, `seed + 1`, ...).
    pub runs: u32,
    /// Virtual time limit of one run.
    pub duration: Duration,
    /// How the world's peers sign their events.
    pub signatures: spec::SignatureMode,
    /// SHA-256 of the file text (for traces).
    pub hash: String,
    /// The file text (traces carry it, so they replay on their own).
    pub source: String,
    relays: Vec<(String, RelayProfile)>,
    servers: Vec<ServerDef>,
    clients: Vec<ClientDef>,
    /// The workloads.
    pub workloads: Vec<Workload>,
    server_config: ServerConfig,
    policy: spec::PolicySpec,
    expect: spec::ExpectSpec,
    /// Its `[behaviours.NAME]` tables, built for each role they fit (`relaysim compare` pairs
    /// them beside the presets).
    behaviour_sets: Vec<peers::BehaviourSet>,
    /// The program of its program peers (`program = "..."`), one per scenario.
    program: Option<String>,
    /// Where a program's relative path is read from: the scenario file's directory.
    base_dir: PathBuf,
    /// Where its worlds get hosts for their program peers.
    hosts: Option<std::sync::Arc<dyn crate::sim::hosted::ProgramHosts>>,
}

impl Scenario {
    /// Loads and validates a scenario file.
    pub fn from_file(path: &Path) -> Result<Self, ScenarioError> {
        let text = crate::limits::read_text_io(path, crate::limits::MAX_SPEC_FILE_BYTES).map_err(
            |source| ScenarioError::Io {
                path: path.display().to_string(),
                source,
            },
        )?;
        let mut s = Self::from_toml_str(&text, &path.display().to_string())?;
        s.base_dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        if s.name.is_empty() {
            s.name = path
                .file_stem()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
        }
        Ok(s)
    }

    /// Parses and validates scenario text; `file` names it in error messages.
    pub fn from_toml_str(text: &str, file: &str) -> Result<Self, ScenarioError> {
        let ctx = Ctx::new(file, text);
        let spec: ScenarioSpec = toml::from_str(text).map_err(|e| ctx.toml(e))?;
        Self::validate(ctx, spec, text)
    }

    /// Checks every part of `spec`, recording each problem, so that one reading reports them
    /// all; a part with a problem is left out (its name stays known, so nothing cascades).
    fn validate(ctx: Ctx, spec: ScenarioSpec, text: &str) -> Result<Self, ScenarioError> {
        if spec.relays.is_empty() {
            ctx.record(ctx.at(
                None,
                "relays",
                "a scenario needs at least one [[relays]] table".into(),
                None,
            ));
        }
        let mut relays: Vec<(String, RelayProfile)> = Vec::new();
        for (i, r) in spec.relays.iter().enumerate() {
            // A relay with a problem stays in, as `ideal`, so peers naming it are not refused.
            let profile = ctx
                .attempt(|| relays::relay(&ctx, i, r, &relays))
                .unwrap_or_else(RelayProfile::ideal);
            relays.push((r.name.get_ref().clone(), profile));
        }
        let relay_names: Vec<String> = relays.iter().map(|(n, _)| n.clone()).collect();
        let peers::Peers {
            servers,
            clients,
            groups,
            behaviour_sets,
        } = peers::peers(&ctx, &spec, &relay_names);
        let mut programs: Vec<&String> = servers
            .iter()
            .filter_map(|s| s.program.as_ref())
            .chain(clients.iter().filter_map(|c| c.program.as_ref()))
            .collect();
        programs.sort();
        programs.dedup();
        if programs.len() > 1 {
            ctx.record(ctx.at(
                None,
                "servers",
                format!(
                    "program peers of one scenario run one program (they share its host), \
                     found {programs:?}"
                ),
                None,
            ));
        }
        let program = programs.first().map(|p| (*p).clone());
        // Every declared name, valid or not, so one problem does not cause another.
        let declared_peers = peers::declared_names(&spec);
        let peer_names: Vec<&str> = declared_peers.iter().map(String::as_str).collect();
        relays::check_outage_peers(&ctx, &relays, &peer_names);
        let mut workloads = Vec::new();
        for (i, w) in spec.workloads.iter().enumerate() {
            if let Some(w) = ctx.attempt(|| workloads::workload(&ctx, i, w, clients.len(), &groups))
            {
                workloads.push(w);
            }
        }
        let workload_names: Vec<String> = spec
            .workloads
            .iter()
            .enumerate()
            .map(|(i, w)| workloads::declared_name(i, w.get_ref()))
            .collect();
        expect::validate(&ctx, &spec.expect, &workload_names);
        match spec.runs {
            Some(0) => ctx.record(ctx.at(None, "runs", "must be at least 1".into(), None)),
            Some(n) if n > crate::limits::MAX_RUNS => ctx.record(ctx.at(
                None,
                "runs",
                format!("at most {} runs, got {n}", crate::limits::MAX_RUNS),
                None,
            )),
            _ => {}
        }
        let calls: u64 = workloads
            .iter()
            .map(|w| u64::from(w.count).saturating_mul(w.clients.len() as u64))
            .fold(0, u64::saturating_add);
        if calls > crate::limits::MAX_CALLS {
            ctx.record(ctx.at(
                None,
                "workloads",
                format!(
                    "{calls} calls in one run (count × clients over every workload); at most {}",
                    crate::limits::MAX_CALLS
                ),
                None,
            ));
        }
        let server_config = policy::server_config(&ctx, &spec.policy);
        ctx.finish()?;
        Ok(Scenario {
            name: spec.name.clone().unwrap_or_default(),
            description: spec.description.clone().unwrap_or_default(),
            seed: spec.seed.unwrap_or(1),
            runs: spec.runs.unwrap_or(1),
            duration: spec.duration.map_or(Duration::from_secs(600), |d| d.0),
            signatures: spec.signatures.unwrap_or_default(),
            hash: hex::encode(Sha256::digest(text.as_bytes())),
            source: text.to_owned(),
            relays,
            servers,
            clients,
            workloads,
            server_config,
            policy: spec.policy,
            expect: spec.expect,
            behaviour_sets,
            program,
            base_dir: PathBuf::from("."),
            hosts: None,
        })
    }

    /// The program its program peers run (`program = "..."`): a shipped program's name or a
    /// path relative to [`Scenario::base_dir`]; `None` without program peers.
    pub fn program(&self) -> Option<&str> {
        self.program.as_deref()
    }

    /// The directory a program's relative path is read from (the scenario file's).
    pub fn base_dir(&self) -> &Path {
        &self.base_dir
    }

    /// Sets the directory a program's relative path is read from (for a scenario made from
    /// text, such as a sweep's cell, whose file is elsewhere).
    pub fn set_base_dir(&mut self, dir: PathBuf) {
        self.base_dir = dir;
    }

    /// Where its worlds get hosts for their program peers (the driver's processes). Without
    /// it, a scenario with program peers runs with every call of theirs failed.
    pub fn set_program_hosts(
        &mut self,
        hosts: std::sync::Arc<dyn crate::sim::hosted::ProgramHosts>,
    ) {
        self.hosts = Some(hosts);
    }

    /// The profile (with overrides) of the relay named `name`.
    pub fn relay_profile(&self, name: &str) -> Option<&RelayProfile> {
        self.relays.iter().find(|(n, _)| n == name).map(|(_, p)| p)
    }

    /// The workloads' names, in index order (for reports).
    pub fn workload_names(&self) -> Vec<String> {
        self.workloads.iter().map(|w| w.name.clone()).collect()
    }

    /// Its `[behaviours.NAME]` tables' names, in name order.
    pub fn behaviour_tables(&self) -> Vec<String> {
        self.behaviour_sets.iter().map(|b| b.name.clone()).collect()
    }

    /// The clients' names, in index order (a group's members are `<name>-<k>`).
    pub fn client_names(&self) -> Vec<String> {
        self.clients.iter().map(|c| c.name.clone()).collect()
    }

    /// The name of client `index` (its index when there is no such client).
    pub fn client_name(&self, index: usize) -> String {
        self.clients
            .get(index)
            .map_or_else(|| index.to_string(), |c| c.name.clone())
    }

    /// The same scenario with every server copying preset `server` and every client preset
    /// `client`, each with the engines that go with its preset (what `relaysim compare`
    /// runs); either may also name one of the scenario's `[behaviours.NAME]` tables. `None`
    /// for a name this build does not know or cannot run on that side.
    pub fn with_presets(&self, server: &str, client: &str) -> Option<Self> {
        use crate::peer::behaviour::Role;
        let (server, server_engines) = self.behaviour_named(server, Role::Server)?;
        let (client, client_engines) = self.behaviour_named(client, Role::Client)?;
        let mut s = self.with_implementations(server_engines, client_engines);
        for d in &mut s.servers {
            d.behaviour = server.clone();
        }
        for d in &mut s.clients {
            d.behaviour = client.clone();
        }
        Some(s)
    }

    /// Whether `name` (a preset or one of the scenario's `[behaviours.NAME]` tables) can be
    /// the behaviour of a peer of `role` in this build: it fits the role and its engines are
    /// built.
    pub fn can_run_behaviour(&self, name: &str, role: crate::peer::behaviour::Role) -> bool {
        self.behaviour_named(name, role).is_some()
    }

    /// The behaviour called `name` for `role` (a preset, or a table that fits the role), with
    /// the engines that go with it; `None` when there is none or its engines are not built.
    fn behaviour_named(
        &self,
        name: &str,
        role: crate::peer::behaviour::Role,
    ) -> Option<(crate::peer::behaviour::Behaviour, Implementation)> {
        use crate::peer::behaviour::{Behaviour, Role};
        let behaviour = Behaviour::preset(name, role).or_else(|| {
            let set = self.behaviour_sets.iter().find(|b| b.name == name)?;
            match role {
                Role::Server => set.server.clone(),
                Role::Client => set.client.clone(),
            }
        })?;
        let engines = match behaviour.wants_sdk_engines() {
            true => crate::implementations::parse("contextvm-sdk").ok()?,
            false => Implementation::default(),
        };
        Some((behaviour, engines))
    }

    /// The same scenario with every peer a program peer running `program` (a shipped
    /// program's name or a path), hosted by `hosts`: relaysim's transport settings of the
    /// peers are set aside, as a program is the peer's whole transport.
    pub fn with_program(
        &self,
        program: &str,
        hosts: std::sync::Arc<dyn crate::sim::hosted::ProgramHosts>,
    ) -> Self {
        let mut s = self.with_implementations(Implementation::default(), Implementation::default());
        // The scenario's knobs the shipped TypeScript program maps onto its SDK's options
        // (interop/ts-sdk/program.mjs `sdkOptions`): the chunk budget as the CEP-22 chunk size
        // (a frame publishes somewhat larger than its data), the stream keepalive and the
        // request timeout; a stateless client stays stateless.
        let ms = |d: &Option<spec::Dur>| d.map(|d| d.0.as_millis() as u64);
        let mut policy = serde_json::Map::new();
        let knobs = [
            ("chunk_size_bytes", self.policy.budget.map(|b| b.0 as u64)),
            ("idle_timeout_ms", ms(&self.policy.idle_timeout)),
            ("probe_timeout_ms", ms(&self.policy.probe_timeout)),
            ("request_timeout_ms", ms(&self.policy.request_timeout)),
        ];
        for (key, value) in knobs {
            if let Some(v) = value {
                policy.insert(key.into(), v.into());
            }
        }
        // A peer that already runs this program keeps the options the scenario gives it (say,
        // `encryption = "required"`), as `run` would pass them; the others get the knobs.
        let options_of = |own: (&Option<String>, &serde_json::Value), stateless: bool| {
            if own.0.as_deref() == Some(program) {
                return own.1.clone();
            }
            let mut options = policy.clone();
            if stateless {
                options.insert("stateless".into(), true.into());
            }
            serde_json::Value::Object(options)
        };
        for (d, own) in s.servers.iter_mut().zip(&self.servers) {
            d.program = Some(program.to_owned());
            d.program_options = options_of((&own.program, &own.program_options), false);
        }
        for (d, own) in s.clients.iter_mut().zip(&self.clients) {
            d.program = Some(program.to_owned());
            d.program_options = options_of((&own.program, &own.program_options), d.stateless);
        }
        s.program = Some(program.to_owned());
        s.hosts = Some(hosts);
        s
    }

    /// The same scenario with every server on `server` engines and every client on `client`
    /// engines, their behaviours unchanged. A program peer becomes one of relaysim's peers on
    /// those engines (with the default behaviour, as a program peer has none of its own), so
    /// a pairing of engines runs those engines, not the program.
    pub fn with_implementations(&self, server: Implementation, client: Implementation) -> Self {
        let mut s = Scenario::from_toml_str(&self.source, &self.name).expect("it parsed before");
        s.name = self.name.clone();
        s.base_dir = self.base_dir.clone();
        s.hosts = self.hosts.clone();
        s.program = None;
        for d in &mut s.servers {
            d.implementation = server;
            d.program = None;
            d.program_options = serde_json::Value::Null;
        }
        for d in &mut s.clients {
            d.implementation = client;
            d.program = None;
            d.program_options = serde_json::Value::Null;
        }
        s
    }
}

#[cfg(test)]
mod tests;
