//! How the `des` driver scales with the number of clients. Run with
//! `cargo bench --bench clients` (add `-- 10000` to include 10,000 clients, about a minute).
//!
//! Each world has one strfry relay, one server and N clients making 10 echo calls each, 100 ms
//! apart, all from t = 0. It prints, per N, the run's CPU time on this thread (from
//! `/proc/thread-self/stat`; the wall clock where that cannot be read), the relay events
//! (published + delivered), and the cost per client relative to 100 clients: a flat ratio is
//! linear growth, a ratio growing like log N is N·log N. Worlds of up to 1,000 clients
//! run several times and print one run's share, so every row rests on enough CPU ticks. Each row
//! is the best of three such samples: on a shared machine interference only ever adds time
//! (mostly the system time of first touching memory, which varied 0.3–1.6 s between two
//! otherwise equal runs of 10,000 clients), so the least is the closest to the work itself.

use relaysim::scenario::Scenario;
use std::time::{Duration, Instant};

/// The binary's allocator, so the figures are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn scenario(clients: usize) -> Scenario {
    let text = format!(
        r#"name = "clients-{clients}"
seed = 1
[[relays]]
name = "strfry"
profile = "strfry"
[[servers]]
name = "server"
relays = ["strfry"]
[[clients]]
name = "client"
relays = ["strfry"]
count = {clients}
[[workloads]]
kind = "request"
count = 10
every = "100ms"
"#
    );
    Scenario::from_toml_str(&text, "benches/clients.rs").expect("a valid scenario")
}

/// This thread's CPU time so far (user + system), where Linux says.
fn thread_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // USER_HZ is 100 on every Linux this runs on.
    Some(Duration::from_millis(ticks * 10))
}

/// Samples per world size; a row prints the least.
const SAMPLES: usize = 3;

fn main() {
    let mut sizes = vec![100, 300, 1000, 3000];
    if std::env::args().any(|a| a == "10000") {
        sizes.push(10_000);
    }
    println!(
        "{:>8} {:>10} {:>14} {:>16} {:>12}",
        "clients", "cpu s", "relay events", "events per cpu s", "cost/client"
    );
    let mut base = None;
    for n in sizes {
        let s = scenario(n);
        // Small worlds run several times, so each row measures at least ~20,000 client-runs
        // and the 10 ms ticks of the CPU clock do not decide the cost-per-client column.
        let repeats = (20_000 / (n * 10)).max(1);
        let mut best = Duration::MAX;
        let mut report = None;
        for _ in 0..SAMPLES {
            let (cpu0, wall0) = (thread_cpu(), Instant::now());
            for _ in 0..repeats {
                report = Some(s.run(s.seed));
            }
            let cpu = match (cpu0, thread_cpu()) {
                (Some(a), Some(b)) => b - a,
                _ => wall0.elapsed(),
            } / repeats as u32;
            best = best.min(cpu);
        }
        let (cpu, report) = (best, report.expect("SAMPLES > 0"));
        let completed = report
            .items
            .iter()
            .filter(|i| i.outcome == relaysim::Outcome::Completed)
            .count();
        assert_eq!(completed, n * 10, "every call completes");
        let events = report
            .counters
            .get("events_published")
            .copied()
            .unwrap_or(0)
            + report.counters.get("delivered").copied().unwrap_or(0);
        let per_client = cpu.as_secs_f64() / n as f64;
        let base = *base.get_or_insert(per_client);
        println!(
            "{n:>8} {:>10.2} {events:>14} {:>16.0} {:>12.2}",
            cpu.as_secs_f64(),
            events as f64 / cpu.as_secs_f64(),
            per_client / base
        );
    }
}
