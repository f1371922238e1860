//! Peers in a scenario: servers and clients (with `count`), their relays, implementations,
//! clocks and publish pipelines; names are unique because keys and traces derive from them.

use super::diagnostic::{closest, Ctx, ScenarioError};
use super::programs::{program, program_options};
use super::spec::{self, ScenarioSpec};
use super::timing::{clock, publish};
use super::{ClientDef, ServerDef};
use crate::peer::behaviour::{
    AcceptWait, Behaviour, CallRefresh, Dedup, MissingOk, OkQuorum, PublishWait, ReaderSession,
    Role, TimerSweep, TokenShape, OK_TIMEOUT, PRESETS,
};
use crate::peer::engines::Implementation;
use std::time::Duration;
use toml::Spanned;

/// A scenario's peers, validated.
pub(super) struct Peers {
    pub(super) servers: Vec<ServerDef>,
    pub(super) clients: Vec<ClientDef>,
    /// Client indices by their `[[clients]]` table's name (a table with `count` is a group).
    pub(super) groups: Vec<(String, Vec<usize>)>,
    /// The `[behaviours.NAME]` tables, by name: as a server's behaviour and as a client's,
    /// each `None` where the table sets the other role's knobs.
    pub(super) behaviour_sets: Vec<BehaviourSet>,
}

/// A `[behaviours.NAME]` table, built for each role it fits.
#[derive(Debug, Clone)]
pub(super) struct BehaviourSet {
    /// The table's name.
    pub(super) name: String,
    /// As a server's behaviour (`None`: it sets clients' knobs).
    pub(super) server: Option<Behaviour>,
    /// As a client's behaviour (`None`: it sets servers' knobs).
    pub(super) client: Option<Behaviour>,
}

/// Every peer name `spec` declares (clients with `count` as `<name>-0`, `<name>-1`, ...),
/// whether or not the peer is valid.
pub(super) fn declared_names(spec: &ScenarioSpec) -> Vec<String> {
    let mut names: Vec<String> = spec
        .servers
        .iter()
        .map(|s| s.name.get_ref().clone())
        .collect();
    for c in &spec.clients {
        names.extend(client_names(c));
    }
    names
}

/// The names of one `[[clients]]` table's clients: its `name`, or `<name>-0`, `<name>-1`, ...
/// with `count`. An invalid count (0, or over the limit) still declares the name.
fn client_names(c: &spec::ClientSpec) -> Vec<String> {
    match c.count.unwrap_or(1) {
        0 | 1 => vec![c.name.get_ref().clone()],
        n => (0..n.min(10_000))
            .map(|k| format!("{}-{k}", c.name.get_ref()))
            .collect(),
    }
}

/// The peers of `spec`, each problem recorded in `ctx`: servers, clients, and the clients by
/// their table's name (a table with `count` is a group), for workloads to target. A peer with
/// a problem is left out, but its name stays known so no second problem follows from it.
pub(super) fn peers(ctx: &Ctx, spec: &ScenarioSpec, relay_names: &[String]) -> Peers {
    if spec.servers.is_empty() {
        ctx.record(ctx.at(
            None,
            "servers",
            "a scenario needs at least one [[servers]] table".into(),
            None,
        ));
    }
    if spec.clients.is_empty() {
        ctx.record(ctx.at(
            None,
            "clients",
            "a scenario needs at least one [[clients]] table".into(),
            None,
        ));
    }
    // Each behaviour table is checked once, whether or not a peer uses it.
    let mut behaviour_sets = Vec::new();
    for (name, table) in &spec.behaviours {
        let built = |role| {
            other_roles_knobs(table, role)
                .is_empty()
                .then(|| custom(ctx, name, table, role).ok())
                .flatten()
        };
        behaviour_sets.push(BehaviourSet {
            name: name.clone(),
            server: built(Role::Server),
            client: built(Role::Client),
        });
        if PRESETS.contains(&name.as_str()) {
            ctx.record(ctx.at(
                None,
                &format!("behaviours.{name}"),
                format!("{name:?} is a preset's name; give the table another name"),
                None,
            ));
        }
        for role in [Role::Server, Role::Client] {
            if let Err(e) = custom(ctx, name, table, role) {
                ctx.record(e);
                break;
            }
        }
    }
    let mut servers = Vec::new();
    for (i, s) in spec.servers.iter().enumerate() {
        if let Some(server) = ctx.attempt(|| server(ctx, spec, i, s, relay_names)) {
            servers.push(server);
        }
    }
    let server_names: Vec<String> = spec
        .servers
        .iter()
        .map(|s| s.name.get_ref().clone())
        .collect();
    let mut clients = Vec::new();
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, c) in spec.clients.iter().enumerate() {
        let mut group = Vec::new();
        if let Some(defs) = ctx.attempt(|| client(ctx, spec, i, c, relay_names, &server_names)) {
            for def in defs {
                group.push(clients.len());
                clients.push(def);
            }
        }
        groups.push((c.name.get_ref().clone(), group));
    }
    // Names identify peers (their keys derive from them, traces name them): no two alike.
    let mut names: Vec<&str> = servers
        .iter()
        .map(|s| s.name.as_str())
        .chain(clients.iter().map(|c| c.name.as_str()))
        .collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        ctx.record(ctx.at(
            None,
            "clients",
            format!(
                "two peers are named {:?} (clients with `count` are named <name>-0, <name>-1, ...)",
                w[0]
            ),
            None,
        ));
    }
    Peers {
        servers,
        clients,
        groups,
        behaviour_sets,
    }
}

fn server(
    ctx: &Ctx,
    spec: &ScenarioSpec,
    i: usize,
    s: &spec::ServerSpec,
    relay_names: &[String],
) -> Result<ServerDef, ScenarioError> {
    let key = format!("servers[{i}]");
    let behaviour = behaviour(ctx, spec, &s.behaviour, Role::Server, &key)?;
    let transport = [
        ("impl", s.r#impl.is_some()),
        ("behaviour", s.behaviour.is_some()),
        ("publish", s.publish.is_some()),
        ("clock_skew_secs", s.clock_skew_secs.is_some()),
        ("subscribe_since", s.subscribe_since),
    ];
    let program = program(ctx, &s.program, &key, &transport)?;
    let program_options = program_options(ctx, &s.program, &s.program_options, &key)?;
    Ok(ServerDef {
        program,
        program_options,
        implementation: implementation(ctx, &s.r#impl, &behaviour, &format!("{key}.impl"))?,
        behaviour,
        publish: publish(ctx, &format!("{key}.publish"), &s.publish)?,
        clock: clock(ctx, &key, s.clock_skew_secs, s.subscribe_since)?,
        name: s.name.get_ref().clone(),
        relays: relays(ctx, relay_names, &s.relays, &format!("{key}.relays"))?,
    })
}

/// The clients of one `[[clients]]` table (several with `count`).
fn client(
    ctx: &Ctx,
    spec: &ScenarioSpec,
    i: usize,
    c: &spec::ClientSpec,
    relay_names: &[String],
    server_names: &[String],
) -> Result<Vec<ClientDef>, ScenarioError> {
    let key = format!("clients[{i}]");
    let behaviour = behaviour(ctx, spec, &c.behaviour, Role::Client, &key)?;
    let transport = [
        ("impl", c.r#impl.is_some()),
        ("behaviour", c.behaviour.is_some()),
        ("publish", c.publish.is_some()),
        ("clock_skew_secs", c.clock_skew_secs.is_some()),
        ("subscribe_since", c.subscribe_since),
        ("stateless", c.stateless),
        ("resumable_streams", c.resumable_streams),
    ];
    let program = program(ctx, &c.program, &key, &transport)?;
    let program_options = program_options(ctx, &c.program, &c.program_options, &key)?;
    let implementation = implementation(ctx, &c.r#impl, &behaviour, &format!("{key}.impl"))?;
    let relays = relays(ctx, relay_names, &c.relays, &format!("{key}.relays"))?;
    let server = match &c.server {
        Some(s) => server_names
            .iter()
            .position(|n| n == s.get_ref())
            .ok_or_else(|| {
                ctx.spanned(
                    s,
                    &format!("{key}.server"),
                    format!("no server named {:?}", s.get_ref()),
                    closest(s.get_ref(), server_names.iter().map(String::as_str)),
                )
            })?,
        None if server_names.len() <= 1 => 0,
        None => {
            return Err(ctx.spanned(
                &c.name,
                &format!("{key}.server"),
                "several servers: say which one this client calls".into(),
                None,
            ))
        }
    };
    let pipeline = publish(ctx, &format!("{key}.publish"), &c.publish)?;
    let peer_clock = clock(ctx, &key, c.clock_skew_secs, c.subscribe_since)?;
    let count = c.count.unwrap_or(1);
    if count == 0 || count > 10_000 {
        return Err(ctx.at(
            None,
            &format!("{key}.count"),
            "must be between 1 and 10000".into(),
            None,
        ));
    }
    Ok(client_names(c)
        .into_iter()
        .map(|name| ClientDef {
            program: program.clone(),
            program_options: program_options.clone(),
            publish: pipeline.clone(),
            clock: peer_clock,
            name,
            relays: relays.clone(),
            server,
            stateless: c.stateless,
            ip: c.ip.clone(),
            resumable: c.resumable_streams,
            implementation,
            behaviour: behaviour.clone(),
        })
        .collect())
}

/// The relay indices of a peer's `relays` list.
fn relays(
    ctx: &Ctx,
    relay_names: &[String],
    list: &[Spanned<String>],
    key: &str,
) -> Result<Vec<usize>, ScenarioError> {
    if list.is_empty() {
        return Err(ctx.at(None, key, "lists no relay".into(), None));
    }
    list.iter()
        .map(|r| {
            relay_names
                .iter()
                .position(|n| n == r.get_ref())
                .ok_or_else(|| {
                    ctx.spanned(
                        r,
                        key,
                        format!(
                            "no relay named {:?}; relays: {}",
                            r.get_ref(),
                            relay_names.join(", ")
                        ),
                        closest(r.get_ref(), relay_names.iter().map(String::as_str)),
                    )
                })
        })
        .collect()
}

/// A peer's endpoint implementation from its `impl` key. Without one, an SDK's behaviour
/// brings that SDK's engines (the contextvm-sdk crate's), so a preset is a whole
/// implementation.
fn implementation(
    ctx: &Ctx,
    i: &Option<Spanned<String>>,
    behaviour: &Behaviour,
    key: &str,
) -> Result<Implementation, ScenarioError> {
    match i {
        None if behaviour.wants_sdk_engines() => crate::implementations::parse("contextvm-sdk")
            .map_err(|e| {
                ctx.at(
                    None,
                    key,
                    format!(
                        "behaviour {:?} runs the SDK's engines: {e}",
                        behaviour.preset
                    ),
                    None,
                )
            }),
        None => Ok(Implementation::default()),
        Some(s) => crate::implementations::parse(s.get_ref()).map_err(|e| {
            // A name this build lacks is spelled right: suggesting it again would mislead.
            let suggestion = match e {
                crate::implementations::ImplementationError::Unknown(_) => {
                    closest(s.get_ref(), crate::implementations::NAMES)
                }
                crate::implementations::ImplementationError::NotBuilt => None,
            };
            ctx.spanned(s, key, e.to_string(), suggestion)
        }),
    }
}

/// A peer's behaviour from its `behaviour` key: a preset, or a `[behaviours.NAME]` table.
fn behaviour(
    ctx: &Ctx,
    spec: &ScenarioSpec,
    name: &Option<Spanned<String>>,
    role: Role,
    peer: &str,
) -> Result<Behaviour, ScenarioError> {
    let Some(name) = name else {
        return Ok(Behaviour::relaysim());
    };
    if let Some(b) = Behaviour::preset(name.get_ref(), role) {
        return Ok(b);
    }
    if let Some(table) = spec.behaviours.get(name.get_ref()) {
        let foreign = other_roles_knobs(table, role);
        if !foreign.is_empty() {
            let (this, other) = match role {
                Role::Server => ("a server", "clients'"),
                Role::Client => ("a client", "servers'"),
            };
            return Err(ctx.spanned(
                name,
                &format!("{peer}.behaviour"),
                format!(
                    "[behaviours.{}] sets {}, {other} knobs, and {peer} is {this}; give {this} \
                     a table without them",
                    name.get_ref(),
                    foreign.join(", ")
                ),
                None,
            ));
        }
        // Its problems were recorded once, above; a peer using a broken table keeps relaysim's.
        return Ok(custom(ctx, name.get_ref(), table, role).unwrap_or_default());
    }
    let known: Vec<&str> = PRESETS
        .iter()
        .copied()
        .chain(spec.behaviours.keys().map(String::as_str))
        .collect();
    Err(ctx.spanned(
        name,
        &format!("{peer}.behaviour"),
        format!(
            "no behaviour named {:?}; presets and [behaviours] tables: {}",
            name.get_ref(),
            known.join(", ")
        ),
        closest(name.get_ref(), known),
    ))
}

/// The knobs of `t` that only a peer of the other role has (`feed_accept` on a client,
/// `reader_session` on a server), by name: set there, they would do nothing.
fn other_roles_knobs(t: &spec::BehaviourSpec, role: Role) -> Vec<&'static str> {
    let server = [
        ("feed_accept", t.feed_accept.is_some()),
        ("stream_accept", t.stream_accept.is_some()),
        ("ping_bypass", t.ping_bypass.is_some()),
        ("writer_e_tags", t.writer_e_tags.is_some()),
    ];
    let client = [
        ("upload_accept", t.upload_accept.is_some()),
        ("reader_session", t.reader_session.is_some()),
        ("call_refresh", t.call_refresh.is_some()),
        ("timer_sweep", t.timer_sweep.is_some()),
        ("nonce_limit", t.nonce_limit.is_some()),
        ("failures_reach_call", t.failures_reach_call.is_some()),
    ];
    let other: &[(&'static str, bool)] = match role {
        Role::Server => &client,
        Role::Client => &server,
    };
    other
        .iter()
        .filter(|(_, set)| *set)
        .map(|(k, _)| *k)
        .collect()
}

/// A `[behaviours.NAME]` table: its preset with the knobs it sets.
fn custom(
    ctx: &Ctx,
    name: &str,
    t: &spec::BehaviourSpec,
    role: Role,
) -> Result<Behaviour, ScenarioError> {
    let key = format!("behaviours.{name}");
    let choose = |value: &Spanned<String>, knob: &str, options: &[&str]| {
        let v = value.get_ref().as_str();
        if options.contains(&v) {
            Ok(v.to_owned())
        } else {
            Err(ctx.spanned(
                value,
                &format!("{key}.{knob}"),
                format!("{v:?} is not one of {}", options.join(", ")),
                closest(v, options.iter().copied()),
            ))
        }
    };
    let mut b = match &t.preset {
        None => Behaviour::relaysim(),
        Some(p) => Behaviour::preset(&choose(p, "preset", &PRESETS)?, role)
            .expect("a preset name was checked"),
    };
    if let Some(d) = &t.dedup {
        b.dedup = match choose(d, "dedup", &["none", "per-id"])?.as_str() {
            "none" => Dedup::None,
            _ => Dedup::PerId {
                memory: match b.dedup {
                    Dedup::PerId { memory } => memory,
                    Dedup::None => 65_536,
                },
            },
        };
    }
    if let Some(memory) = t.dedup_memory {
        if !(1..=10_000_000).contains(&memory) {
            return Err(ctx.at(
                None,
                &format!("{key}.dedup_memory"),
                format!("must be between 1 and 10000000 ids, got {memory}"),
                None,
            ));
        }
        if b.dedup == Dedup::None {
            return Err(ctx.at(
                None,
                &format!("{key}.dedup_memory"),
                "applies to `dedup = \"per-id\"`; this behaviour does not de-duplicate".into(),
                None,
            ));
        }
        b.dedup = Dedup::PerId { memory };
    }
    if let Some(tokens) = &t.tokens {
        b.tokens = match choose(
            tokens,
            "tokens",
            &["prefixed", "message-id", "peer-counter"],
        )?
        .as_str()
        {
            "prefixed" => TokenShape::Prefixed("p".into()),
            "message-id" => TokenShape::MessageId,
            _ => TokenShape::PeerCounter,
        };
    }
    if let Some(prefix) = &t.token_prefix {
        // Only with prefixed tokens, said or the preset's: a prefix never changes the shape.
        if !matches!(b.tokens, TokenShape::Prefixed(_)) {
            let why = match &t.tokens {
                Some(_) => "applies to `tokens = \"prefixed\"`".to_owned(),
                None => format!(
                    "applies to `tokens = \"prefixed\"`, and preset {:?} makes {} tokens; \
                     add `tokens = \"prefixed\"` to change the shape",
                    b.preset,
                    b.tokens.name()
                ),
            };
            return Err(ctx.at(None, &format!("{key}.token_prefix"), why, None));
        }
        if prefix.len() > 4096 {
            return Err(ctx.at(
                None,
                &format!("{key}.token_prefix"),
                format!("at most 4096 bytes, got {}", prefix.len()),
                None,
            ));
        }
        b.tokens = TokenShape::Prefixed(prefix.clone());
    }
    if let Some(feed) = t.feed_accept {
        b.feed_accept = feed;
    }
    if let Some(wait) = &t.upload_accept {
        b.upload_accept = match choose(wait, "upload_accept", &["when-unknown", "never"])?.as_str()
        {
            "never" => AcceptWait::Never,
            _ => AcceptWait::WhenUnknown,
        };
    }
    if let Some(wait) = &t.stream_accept {
        b.stream_accept = match choose(wait, "stream_accept", &["when-unknown", "never"])?.as_str()
        {
            "never" => AcceptWait::Never,
            _ => AcceptWait::WhenUnknown,
        };
    }
    if let Some(wait) = &t.publish_wait {
        b.publish_wait = match choose(wait, "publish_wait", &["none", "ok"])?.as_str() {
            "none" => PublishWait::Immediate,
            _ => match b.publish_wait {
                wait @ PublishWait::ForOk { .. } => wait,
                PublishWait::Immediate => PublishWait::ForOk {
                    timeout: OK_TIMEOUT,
                    quorum: OkQuorum::All,
                    missing: MissingOk::Proceed,
                },
            },
        };
    }
    let waiting = b.publish_wait;
    let waits = |knob: &str| match waiting {
        PublishWait::ForOk { .. } => Ok(()),
        PublishWait::Immediate => Err(ctx.at(
            None,
            &format!("{key}.{knob}"),
            "applies to `publish_wait = \"ok\"`; this behaviour does not wait".into(),
            None,
        )),
    };
    if let Some(quorum) = &t.ok_quorum {
        waits("ok_quorum")?;
        let q = match choose(quorum, "ok_quorum", &["all", "any"])?.as_str() {
            "any" => OkQuorum::Any,
            _ => OkQuorum::All,
        };
        if let PublishWait::ForOk { quorum, .. } = &mut b.publish_wait {
            *quorum = q;
        }
    }
    if let Some(missing) = &t.missing_ok {
        waits("missing_ok")?;
        let m = match choose(missing, "missing_ok", &["proceed", "retry"])?.as_str() {
            "retry" => MissingOk::Retry,
            _ => MissingOk::Proceed,
        };
        if let PublishWait::ForOk { missing, .. } = &mut b.publish_wait {
            *missing = m;
        }
    }
    if let Some(timeout) = t.ok_timeout {
        waits("ok_timeout")?;
        if timeout.0.is_zero() || timeout.0 > Duration::from_secs(3600) {
            return Err(ctx.at(
                None,
                &format!("{key}.ok_timeout"),
                format!("must be above 0 and at most 1h, got {:?}", timeout.0),
                None,
            ));
        }
        if let PublishWait::ForOk { timeout: t, .. } = &mut b.publish_wait {
            *t = timeout.0;
        }
    }
    if let Some(bypass) = t.ping_bypass {
        b.ping_bypass = bypass;
    }
    if let Some(tags) = t.writer_e_tags {
        b.writer_e_tags = tags;
    }
    if let Some(refresh) = &t.call_refresh {
        b.call_refresh = match choose(refresh, "call_refresh", &["token", "e-tag"])?.as_str() {
            "e-tag" => CallRefresh::ETag,
            _ => CallRefresh::Token,
        };
    }
    if let Some(sweep) = t.timer_sweep {
        if sweep.0 > Duration::from_secs(3600) {
            return Err(ctx.at(
                None,
                &format!("{key}.timer_sweep"),
                format!("at most 1h, got {:?}", sweep.0),
                None,
            ));
        }
        b.timer_sweep = match sweep.0.is_zero() {
            true => TimerSweep::Exact,
            false => TimerSweep::Every(sweep.0),
        };
    }
    if let Some(limit) = t.nonce_limit {
        if limit > 1_000_000 {
            return Err(ctx.at(
                None,
                &format!("{key}.nonce_limit"),
                format!("at most 1000000 bytes (0 for no cap), got {limit}"),
                None,
            ));
        }
        b.nonce_limit = (limit > 0).then_some(limit);
    }
    if let Some(reach) = t.failures_reach_call {
        b.failures_reach_call = reach;
    }
    if let Some(when) = &t.reader_session {
        b.reader_session =
            match choose(when, "reader_session", &["at-start", "at-request"])?.as_str() {
                "at-request" => ReaderSession::AtRequest,
                _ => ReaderSession::AtStart,
            };
    }
    Ok(b)
}
