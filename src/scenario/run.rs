//! Running a scenario in the des world: building the world for a seed, running it with an
//! observer (metrics, and a trace when asked), and running many seeds.

use super::workloads::calls;
use super::{Scenario, TraceContext};
use crate::peer::server::ServerConfig;
use crate::sim::world::{PeerId, World};
use crate::stats::{Collector, Report};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// What a world's program host found: its errors, and the exceptions its programs left
/// unhandled (counted as `program.unhandled`, only where there are program peers).
fn world_findings(world: &World, report: &mut crate::stats::RunReport) {
    report.program_errors = world.hosted_errors();
    if world.has_hosted_peers() {
        report
            .counters
            .insert("program.unhandled".into(), world.hosted_unhandled());
    }
}

/// The world's relay and peer names, for the collector's explanations and trace lines.
fn names_of(world: &World) -> crate::stats::why::Names {
    crate::stats::why::Names {
        relays: world.relay_names_all(),
        peers: world.peers().into_iter().collect(),
    }
}

impl Scenario {
    /// Builds the world for one run.
    pub fn build(&self, seed: u64) -> World {
        let mut world = World::new(seed);
        // A program verifies the signatures of what it receives: every event is signed.
        world.set_deferred_signatures(
            self.signatures == super::spec::SignatureMode::Deferred && self.program.is_none(),
        );
        for (name, profile) in &self.relays {
            world.add_relay(name, profile.clone());
        }
        for s in &self.servers {
            if s.program.is_some() {
                world.add_hosted_server(&s.name, &s.relays, s.program_options.clone());
                continue;
            }
            let config = ServerConfig {
                implementation: s.implementation,
                behaviour: s.behaviour.clone(),
                clock: s.clock,
                ..self.server_config.clone()
            };
            let index = world.add_server(&s.name, &s.relays, config);
            world.set_publish(PeerId::Server(index), s.publish.clone());
        }
        for c in &self.clients {
            if c.program.is_some() {
                let index = world.add_hosted_client(
                    &c.name,
                    &c.relays,
                    c.server,
                    c.program_options.clone(),
                );
                if let Some(ip) = &c.ip {
                    world.set_ip(PeerId::Client(index), ip);
                }
                continue;
            }
            let index = world.add_client(&c.name, &c.relays, c.server, |config| {
                self.client_config(config, c.stateless, c.resumable);
                config.implementation = c.implementation;
                config.behaviour = c.behaviour.clone();
                config.clock = c.clock;
            });
            if let Some(ip) = &c.ip {
                world.set_ip(PeerId::Client(index), ip);
            }
            world.set_publish(PeerId::Client(index), c.publish.clone());
        }
        for (at, client, call) in calls(&self.workloads, seed) {
            world.schedule_call(at, client, call);
        }
        if let Some(program) = &self.program {
            let host = match &self.hosts {
                Some(hosts) => hosts.host(program, &self.base_dir),
                None => Err(format!(
                    "program peers ({program}) need a program host, and none was set up"
                )),
            };
            world.start_hosted(host);
        }
        world
    }

    /// The collector of one run: with program peers, it follows second writers in the
    /// events' JSON, since relaysim's receivers do not read the programs' streams.
    fn collector(&self, names: crate::stats::why::Names) -> Collector {
        let collector = Collector::named(names);
        let programs = self.servers.iter().any(|s| s.program.is_some())
            || self.clients.iter().any(|c| c.program.is_some());
        if programs {
            collector.following_second_writers()
        } else {
            collector
        }
    }

    /// Runs once with `seed`.
    pub fn run(&self, seed: u64) -> crate::stats::RunReport {
        let mut world = self.build(seed);
        let collector = Rc::new(RefCell::new(self.collector(names_of(&world))));
        world.set_observer(Box::new(collector.clone()));
        world.run_to_end(self.duration);
        drop(world.take_observer());
        self.report_of(&world, collector, seed)
    }

    /// Runs once with `seed` and records a trace; returns the report and the trace text.
    pub fn run_traced(
        &self,
        seed: u64,
        events: crate::trace::EventsMode,
    ) -> (crate::stats::RunReport, String) {
        self.run_planned(seed, events, TraceContext::default(), |_| Vec::new())
    }

    /// Runs once with `seed`, the fates of messages decided by the planners `make` builds from
    /// the world's names (schedule replays, shrinking, recorded fates; see
    /// [`crate::sim::planner`]) before the random draws, writing a des trace whose header
    /// carries `context`.
    pub fn run_planned(
        &self,
        seed: u64,
        events: crate::trace::EventsMode,
        context: TraceContext,
        make: impl FnOnce(&crate::trace::Names) -> Vec<Box<dyn crate::sim::planner::LinkPlanner>>,
    ) -> (crate::stats::RunReport, String) {
        let TraceContext {
            suppressed_outages: suppressed,
            shrunk,
        } = context;
        use crate::trace::{Line, TraceWriter};
        let mut world = self.build(seed);
        let names = names_of(&world);
        for planner in make(&names) {
            world.add_planner(planner);
        }
        let header = Line::Header {
            format: crate::trace::FORMAT,
            relaysim: env!("CARGO_PKG_VERSION").into(),
            scenario: self.name.clone(),
            scenario_hash: self.hash.clone(),
            seed,
            driver: "des".into(),
            events,
            suppressed_outages: suppressed,
            shrunk,
            scenario_toml: self.source.clone(),
        };
        let collector = Rc::new(RefCell::new(self.collector(names.clone())));
        let writer = Rc::new(RefCell::new(TraceWriter::new(&header, names, events)));
        world.set_observer(Box::new(Tee(collector.clone(), writer.clone())));
        world.run_to_end(self.duration);
        drop(world.take_observer());
        let report = self.report_of(&world, collector, seed);
        let writer = Rc::try_unwrap(writer)
            .map(RefCell::into_inner)
            .expect("the world released the writer");
        let text = writer.finish(&report, &self.workload_names());
        (report, text)
    }

    /// The report of a run that ended: the collector's, with what the world's programs logged
    /// and what their host found.
    fn report_of(
        &self,
        world: &World,
        collector: Rc<RefCell<Collector>>,
        seed: u64,
    ) -> crate::stats::RunReport {
        let mut collector = Rc::try_unwrap(collector)
            .map(RefCell::into_inner)
            .unwrap_or_default();
        collector.program_lines_not_kept(world.hosted_lines_not_kept());
        collector.still_reading(&world.readers_still_reading());
        if self.servers.iter().any(|s| s.program.is_some()) {
            collector.servers_are_programs();
        }
        let mut report = collector.finish(seed);
        world_findings(world, &mut report);
        report
    }

    /// Runs every run of the scenario (seeds `seed`, `seed + 1`, ...).
    pub fn run_all(&self) -> Report {
        self.run_seeds(self.seed, self.runs, |_| {})
    }

    /// Runs `runs` runs from `first_seed`, calling `progress` after each.
    pub fn run_seeds(&self, first_seed: u64, runs: u32, progress: impl FnMut(u32)) -> Report {
        self.run_seeds_on(first_seed, runs, 1, progress)
    }

    /// Runs `runs` runs from `first_seed` on `jobs` threads, calling `progress` after each
    /// (in seed order). Runs are independent and merged in seed order as they finish, so the
    /// report is the same for any `jobs`, and memory holds only the runs finished ahead of
    /// an unfinished earlier one.
    pub fn run_seeds_on(
        &self,
        first_seed: u64,
        runs: u32,
        jobs: usize,
        mut progress: impl FnMut(u32),
    ) -> Report {
        let mut report = Report::new(&self.name);
        crate::parallel::map_ordered(
            runs as usize,
            jobs,
            |i| self.run(first_seed.wrapping_add(i as u64)),
            |i, run| {
                report.push(run);
                progress(i as u32 + 1);
            },
        );
        report
    }
}

/// Sends every observation to two observers.
struct Tee<A, B>(A, B);

impl<A: crate::sim::world::Observer, B: crate::sim::world::Observer> crate::sim::world::Observer
    for Tee<A, B>
{
    fn observe(&mut self, at: Duration, o: &crate::sim::world::Observation) {
        self.0.observe(at, o);
        self.1.observe(at, o);
    }

    fn wants_event_json(&self) -> bool {
        self.0.wants_event_json() || self.1.wants_event_json()
    }
}

#[cfg(test)]
mod tests {
    use crate::scenario::Scenario;
    use crate::stats::Outcome;

    fn default_scenario() -> Scenario {
        Scenario::from_toml_str(include_str!("../../scenarios/default.toml"), "default.toml")
            .expect("the default scenario")
    }

    /// Changes the first letter `a` of `text` at or after `from` into `b`, keeping the JSON
    /// valid (an `a` is never part of an escape in relaysim's payloads).
    fn flip_a_after(text: &str, from: &str) -> Option<String> {
        let at = text.find(from)? + from.len();
        let a = at + text[at..].find('a')?;
        let mut changed = text.to_owned();
        changed.replace_range(a..a + 1, "b");
        Some(changed)
    }

    fn run_tampered(tamper: fn(&str) -> Option<String>) -> crate::stats::RunReport {
        run_tampering(tamper, |_| None)
    }

    fn run_tampering(
        server: fn(&str) -> Option<String>,
        client: fn(&str) -> Option<String>,
    ) -> crate::stats::RunReport {
        let scenario = default_scenario();
        let mut world = scenario.build(1);
        world.server(0).tamper_outgoing(server);
        world.client(0).tamper_outgoing(client);
        collected(&mut world, |w| w.run_to_end(scenario.duration))
    }

    /// The report of seed 1 of `world`, run by `run`.
    fn collected(
        world: &mut crate::sim::world::World,
        run: impl FnOnce(&mut crate::sim::world::World),
    ) -> crate::stats::RunReport {
        let collector = std::rc::Rc::new(std::cell::RefCell::new(crate::stats::Collector::new()));
        world.set_observer(Box::new(collector.clone()));
        run(world);
        drop(world.take_observer());
        std::rc::Rc::try_unwrap(collector)
            .map(std::cell::RefCell::into_inner)
            .unwrap_or_default()
            .finish(1)
    }

    #[test]
    fn real_and_deferred_signatures_give_the_same_report_and_trace() {
        let deferred = default_scenario();
        let real = Scenario::from_toml_str(
            &format!(
                "signatures = \"real\"\n{}",
                include_str!("../../scenarios/default.toml")
            ),
            "default.toml",
        )
        .expect("the default scenario, signing as it goes");
        let full = crate::trace::EventsMode::Full;
        let (report, trace) = deferred.run_traced(1, full);
        let (report_real, trace_real) = real.run_traced(1, full);
        assert_eq!(format!("{report:?}"), format!("{report_real:?}"));
        // The header carries the scenario's text and hash, which differ by the one line.
        let body = |t: &str| t.lines().skip(1).collect::<Vec<_>>().join("\n");
        assert!(body(&trace) == body(&trace_real), "the traces differ");
        assert!(trace.contains(r#""sig":""#), "events are stored whole");
    }

    #[test]
    fn messages_that_would_arrive_after_the_end_are_not_kept_and_change_nothing() {
        // A 4 MiB result over a 64 KiB/s down link for 10 s: most of its chunks would arrive
        // long after the end.
        let scenario = Scenario::from_toml_str(
            r#"
            name = "slow-link"
            duration = "10s"
            [[relays]]
            name = "r"
            profile = "ideal"
            [relays.down]
            bandwidth = "64KiB/s"
            [[servers]]
            name = "s"
            relays = ["r"]
            [[clients]]
            name = "c"
            relays = ["r"]
            stateless = true
            [[workloads]]
            kind = "download"
            bytes = "4MiB"
            "#,
            "slow-link.toml",
        )
        .expect("the scenario");
        let run = |to_end: bool| {
            let mut world = scenario.build(1);
            let report = collected(&mut world, |w| {
                if to_end {
                    w.run_to_end(scenario.duration);
                } else {
                    w.run_until(scenario.duration);
                }
            });
            (
                format!("{report:?}"),
                world.now(),
                world.messages_in_flight(),
            )
        };
        let (kept, kept_now, kept_in_flight) = run(false);
        let (ended, ended_now, ended_in_flight) = run(true);
        assert!(kept == ended, "the reports differ");
        assert_eq!(kept_now, ended_now);
        assert!(kept_in_flight > 20, "{kept_in_flight} in flight at the end");
        assert_eq!(ended_in_flight, 0);
    }

    #[test]
    fn the_default_run_completes_untampered() {
        let report = run_tampered(|_| None);
        assert!(report.items.iter().all(|i| i.outcome == Outcome::Completed));
        assert_eq!(report.integrity_violations, 0);
    }

    #[test]
    fn a_cep22_chunk_changed_after_the_server_made_it_fails_the_download() {
        // The server's frame says one thing, the text that crosses the relay another: a
        // receiver that read anything but the text would complete the download.
        let report = run_tampered(|content| {
            if !content.contains(r#""frameType":"chunk""#) || !content.contains("oversized") {
                return None;
            }
            flip_a_after(content, r#""data":""#)
        });
        let download = report
            .items
            .iter()
            .find(|i| i.tool == "large_result")
            .expect("the download");
        assert_ne!(download.outcome, Outcome::Completed, "{report:?}");
    }

    #[test]
    fn an_upload_chunk_changed_after_the_client_made_it_fails_the_upload() {
        let report = run_tampering(
            |_| None,
            |content| {
                if !content.contains(r#""frameType":"chunk""#) {
                    return None;
                }
                // The upload is UTF-8 text: change its first multi-byte character.
                let at = content.find(r#""data":""#)?;
                let (i, c) = content[at..].char_indices().find(|(_, c)| !c.is_ascii())?;
                let mut changed = content.to_owned();
                let other = if c == 'é' { "ß" } else { "é" };
                changed.replace_range(at + i..at + i + c.len_utf8(), other);
                Some(changed)
            },
        );
        let upload = report
            .items
            .iter()
            .find(|i| i.tool == "upload")
            .expect("the upload");
        assert_ne!(upload.outcome, Outcome::Completed, "{report:?}");
    }

    #[test]
    fn a_response_changed_after_the_server_made_it_counts_as_an_integrity_violation() {
        // The echo's answer, a direct response: the client reads what the relay carried, and
        // the oracle compares it with what was asked.
        let report = run_tampered(|content| {
            if !content.contains(r#""result":{"content":[{"type":"text","text":""#)
                || content.contains("_meta")
            {
                return None;
            }
            flip_a_after(content, r#""text":""#)
        });
        assert!(report.integrity_violations > 0, "{report:?}");
    }
}
