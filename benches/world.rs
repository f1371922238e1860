//! Speed of the `des` driver (deferred signatures, as `relaysim run` by default). Run with `cargo bench --bench world`.
//!
//! Reports relay events per wall second (events published to relays plus copies delivered to
//! subscribers) for a busy world, and the simulated/wall time ratio of a ten-minute idle
//! CEP-41 stream kept alive by ping/pong.

use relaysim::peer::client::ClientEvent;
use relaysim::peer::content::ContentClass;
use relaysim::peer::server::ServerConfig;
use relaysim::peer::tools::ToolCall;
use relaysim::relay::impair::{Delay, Direction};
use relaysim::relay::RelayProfile;
use relaysim::sim::world::{Call, Observation, Observer, World};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The binary's allocator, so the figures are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Default)]
struct Count {
    published: u64,
    delivered: u64,
    responses: u64,
    failures: u64,
}

impl Observer for Count {
    fn wants_event_json(&self) -> bool {
        false
    }

    fn observe(&mut self, _at: Duration, o: &Observation) {
        match o {
            Observation::Published { .. } => self.published += 1,
            Observation::Delivered { .. } => self.delivered += 1,
            Observation::Client {
                event:
                    ClientEvent::Response {
                        response: Ok(_), ..
                    },
                ..
            } => self.responses += 1,
            Observation::Client {
                event: ClientEvent::Failed { .. },
                ..
            } => self.failures += 1,
            _ => {}
        }
    }
}

fn world(profile: RelayProfile, clients: usize) -> (World, Rc<RefCell<Count>>) {
    let mut w = World::new(1);
    let count = Rc::new(RefCell::new(Count::default()));
    w.set_observer(Box::new(count.clone()));
    let relay = w.add_relay("relay", profile);
    let server = w.add_server("server", &[relay], ServerConfig::default());
    for i in 0..clients {
        w.add_client(&format!("client-{i}"), &[relay], server, |c| {
            c.stateless = true;
            c.max_request_timeout = Duration::from_secs(3600);
        });
    }
    (w, count)
}

/// Every shipped scenario, run once with its seed: simulated seconds and relay events per wall
/// second.
fn shipped_scenarios() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let files =
        relaysim::scenario::scenario_files(&[root.clone(), root.join("resumable")]).unwrap();
    println!(
        "{:<28} {:>10} {:>10} {:>14} {:>16}",
        "scenario", "simulated", "wall", "sim s/wall s", "relay events/s"
    );
    for path in files {
        let scenario = relaysim::scenario::Scenario::from_file(&path).unwrap();
        let mut world = scenario.build(scenario.seed);
        let count = Rc::new(RefCell::new(Count::default()));
        world.set_observer(Box::new(count.clone()));
        let t = Instant::now();
        world.run_until(scenario.duration);
        let wall = t.elapsed().as_secs_f64();
        let c = count.borrow();
        println!(
            "{:<28} {:>9.1}s {:>9.3}s {:>14.0} {:>16.0}",
            scenario.name,
            world.now().as_secs_f64(),
            wall,
            world.now().as_secs_f64() / wall,
            (c.published + c.delivered) as f64 / wall
        );
    }
}

fn main() {
    shipped_scenarios();
    let mut profile = RelayProfile::strfry();
    profile.impairments.relay_to_peer = Direction {
        delay: Delay::LogNormal {
            median: Duration::from_millis(60),
            sigma: 0.5,
        },
        ..Direction::default()
    };
    let (mut w, count) = world(profile, 4);
    for c in 0..4 {
        let at = Duration::from_millis(100 * c as u64);
        w.schedule_call(
            at,
            c,
            Call {
                tool: ToolCall::LargeResult {
                    bytes: 4 << 20,
                    content: ContentClass::Random,
                },
                progress: true,
                workload: 0,
                consume_every: None,
            },
        );
        w.schedule_call(
            at,
            c,
            Call {
                tool: ToolCall::Stream {
                    chunks: 500,
                    chunk_bytes: 200,
                    interval: Duration::from_millis(10),
                },
                progress: true,
                workload: 0,
                consume_every: None,
            },
        );
    }
    let t = Instant::now();
    w.run_until(Duration::from_secs(600));
    let wall = t.elapsed();
    let c = count.borrow();
    let events = c.published + c.delivered;
    println!(
        "des busy world:   {:>9.0} relay events/s  ({} published + {} delivered in {:?} wall, {:.1} s simulated)",
        events as f64 / wall.as_secs_f64(),
        c.published,
        c.delivered,
        wall,
        w.now().as_secs_f64()
    );
    println!(
        "                  {} calls answered, {} failed (of 8)",
        c.responses, c.failures
    );

    let (mut w, count) = world(RelayProfile::strfry(), 1);
    w.schedule_call(
        Duration::ZERO,
        0,
        Call {
            tool: ToolCall::Stream {
                chunks: 2,
                chunk_bytes: 64,
                interval: Duration::from_secs(600),
            },
            progress: true,
            workload: 0,
            consume_every: None,
        },
    );
    let t = Instant::now();
    w.run_until(Duration::from_secs(700));
    let wall = t.elapsed();
    println!(
        "des idle stream:  {:>9.0}x simulated/wall  ({:.0} s simulated in {:?} wall, {} events)",
        w.now().as_secs_f64() / wall.as_secs_f64(),
        w.now().as_secs_f64(),
        wall,
        count.borrow().published
    );
}
