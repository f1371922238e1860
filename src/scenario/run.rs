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

impl Scenario {
    /// Builds the world for one run.
    pub fn build(&self, seed: u64) -> World {
        let mut world = World::new(seed);
        for (name, profile) in &self.relays {
            world.add_relay(name, profile.clone());
        }
        for s in &self.servers {
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
        world
    }

    /// Runs once with `seed`.
    pub fn run(&self, seed: u64) -> crate::stats::RunReport {
        let mut world = self.build(seed);
        let collector = Rc::new(RefCell::new(Collector::new()));
        world.set_observer(Box::new(collector.clone()));
        world.run_until(self.duration);
        drop(world.take_observer());
        let collector = Rc::try_unwrap(collector)
            .map(RefCell::into_inner)
            .unwrap_or_default();
        collector.finish(seed)
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
        use crate::trace::{Line, Names, TraceWriter};
        let mut world = self.build(seed);
        let names = Names {
            relays: world.relay_names_all(),
            peers: world.peers().into_iter().collect(),
        };
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
        let collector = Rc::new(RefCell::new(Collector::new()));
        let writer = Rc::new(RefCell::new(TraceWriter::new(&header, names, events)));
        world.set_observer(Box::new(Tee(collector.clone(), writer.clone())));
        world.run_until(self.duration);
        drop(world.take_observer());
        let report = Rc::try_unwrap(collector)
            .map(RefCell::into_inner)
            .unwrap_or_default()
            .finish(seed);
        let writer = Rc::try_unwrap(writer)
            .map(RefCell::into_inner)
            .expect("the world released the writer");
        let text = writer.finish(&report, &self.workload_names());
        (report, text)
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
