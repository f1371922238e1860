//! The soak's scenario generator: one whole random deployment per run, as scenario text, so a
//! run with a violation is reproduced by `relaysim run` on the file.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::Generated;
use crate::relay::profile::Intake;
use crate::rng::SeededStreams;

// What the soak draws from: the catalogues themselves, so a new profile, content class, preset,
// outage kind or workload kind is drawn without being listed here (a test checks every entry
// of each is drawn, and the workload kinds' parameters below panic on a kind they lack).
const PROFILES: &[&str] = &crate::relay::RelayProfile::FAMILIES;
const CONTENTS: &[&str] = &crate::peer::content::ContentClass::NAMES;
const PRESETS: &[&str] = &crate::peer::behaviour::PRESETS;
const OUTAGES: &[&str] = &crate::relay::impair::OutageKind::NAMES;
const WORKLOADS: &[&str] = &crate::scenario::workloads::KINDS;

/// Scenario `index` of the soak seeded with `seed`.
pub fn generate(seed: u64, index: u64) -> Generated {
    let mut rng = SeededStreams::new(seed).stream(&format!("soak/{index}"));
    let mut g = Gen {
        rng: &mut rng,
        text: String::new(),
        datagram: false,
    };
    g.scenario(index);
    Generated {
        toml: g.text,
        datagram: g.datagram,
    }
}

/// The generator's state: its random stream and the text so far.
struct Gen<'a> {
    rng: &'a mut ChaCha8Rng,
    text: String,
    datagram: bool,
}

impl Gen<'_> {
    fn line(&mut self, line: impl AsRef<str>) {
        self.text.push_str(line.as_ref());
        self.text.push('\n');
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn pick<'s>(&mut self, from: &[&'s str]) -> &'s str {
        from[self.rng.random_range(0..from.len())]
    }

    /// A value between `lo` and `hi` (inclusive), uniform on a log scale, so small and large
    /// sizes are equally common.
    fn log_uniform(&mut self, lo: u64, hi: u64) -> u64 {
        let (lo_f, hi_f) = (lo.max(1) as f64, hi as f64);
        let v = lo_f * (hi_f / lo_f).powf(self.rng.random::<f64>());
        (v.round() as u64).clamp(lo, hi)
    }

    /// A delay distribution of any kind whose typical value is drawn from `scale_ms`.
    fn delay(&mut self, scale_ms: std::ops::Range<u64>) -> String {
        let ms = self.rng.random_range(scale_ms).max(1);
        match self.rng.random_range(0..6) {
            0 => format!("{{ dist = \"constant\", value = \"{ms}ms\" }}"),
            1 => format!(
                "{{ dist = \"uniform\", min = \"0ms\", max = \"{}ms\" }}",
                2 * ms
            ),
            2 => format!(
                "{{ dist = \"normal\", mean = \"{ms}ms\", sd = \"{}ms\" }}",
                ms / 3 + 1
            ),
            3 => format!(
                "{{ dist = \"lognormal\", median = \"{ms}ms\", sigma = {:.2} }}",
                self.rng.random_range(0.0..1.2)
            ),
            4 => format!(
                "{{ dist = \"pareto\", scale = \"{ms}ms\", shape = {:.2} }}",
                self.rng.random_range(1.5..4.0)
            ),
            _ => {
                let samples: Vec<String> = (0..self.rng.random_range(1..5))
                    .map(|_| format!("\"{}ms\"", self.rng.random_range(0..=2 * ms)))
                    .collect();
                format!(
                    "{{ dist = \"empirical\", samples = [{}] }}",
                    samples.join(", ")
                )
            }
        }
    }

    fn scenario(&mut self, index: u64) {
        let run_seed: u64 = self.rng.random();
        self.line(format!("name = \"soak-{index}\""));
        self.line(format!("seed = {run_seed}"));
        self.line("duration = \"4m\"");
        let relays = self.rng.random_range(1..=3usize);
        let clients = self.rng.random_range(1..=3usize);
        let mut peers = vec!["s".to_owned()];
        peers.extend((0..clients).map(|c| format!("c{c}")));
        for r in 0..relays {
            self.relay(r, &peers);
        }
        let all: Vec<String> = (0..relays).map(|r| format!("\"r{r}\"")).collect();
        self.line("[[servers]]");
        self.line("name = \"s\"");
        self.line(format!("relays = [{}]", all.join(", ")));
        self.peer();
        for c in 0..clients {
            self.line("[[clients]]");
            self.line(format!("name = \"c{c}\""));
            // Each client on a non-empty subset of the relays (all of them share the server's).
            let mine: Vec<String> = (0..relays)
                .filter(|_| self.chance(0.7))
                .map(|r| format!("\"r{r}\""))
                .collect();
            let mine = if mine.is_empty() {
                vec![all[0].clone()]
            } else {
                mine
            };
            self.line(format!("relays = [{}]", mine.join(", ")));
            if self.chance(0.5) {
                self.line("stateless = true");
            }
            if self.chance(0.2) {
                self.line("resumable_streams = true");
            }
            if self.chance(0.2) {
                self.line("ip = \"10.0.0.1\"");
            }
            self.peer();
        }
        if self.chance(0.3) {
            self.line("[policy]");
            let budget = self.log_uniform(8_000, 120_000);
            self.line(format!("budget = {budget}"));
        }
        for _ in 0..self.rng.random_range(1..=4) {
            self.workload();
        }
    }

    fn relay(&mut self, r: usize, peers: &[String]) {
        let profile = self.pick(PROFILES);
        self.line("[[relays]]");
        self.line(format!("name = \"r{r}\""));
        self.line(format!("profile = \"{profile}\""));
        if self.chance(0.15) {
            let us = self.rng.random_range(0..3_000);
            self.line(format!("processing = \"{us}us\""));
        }
        if self.chance(0.1) {
            let random_drops = self.rng.random_range(20..120);
            self.line(format!("connection_drop_every = \"{random_drops}s\""));
            self.line("connection_down_for = [\"200ms\", \"3s\"]");
        }
        if self.chance(0.25) {
            self.line("[relays.intake]");
            // Every mode but the default serial one.
            let modes = &Intake::MODES[1..];
            let mode = modes[self.rng.random_range(0..modes.len())];
            self.line(format!("mode = \"{mode}\""));
            if mode == "concurrent" {
                let handling = self.delay(1..5);
                self.line(format!("handling = {handling}"));
            } else {
                let per_batch = self.rng.random_range(0..3_000);
                let per_event = self.rng.random_range(0..100);
                self.line(format!("per_batch = \"{per_batch}us\""));
                self.line(format!("per_event = \"{per_event}us\""));
            }
        }
        self.line("[relays.up]");
        let up = self.delay(1..60);
        self.line(format!("delay = {up}"));
        self.line("[relays.down]");
        let down = self.delay(1..150);
        self.line(format!("delay = {down}"));
        if self.chance(0.2) {
            let kib = self.log_uniform(64, 8_192);
            self.line(format!("bandwidth = \"{kib}KiB/s\""));
        }
        if self.chance(0.2) {
            self.datagram = true;
            self.line("ordering = \"datagram\"");
            if self.chance(0.6) {
                let p = self.rng.random_range(0.0..0.3);
                self.line(format!("reorder = {p:.3}"));
                self.line("reorder_delay = \"150ms\"");
            }
            if self.chance(0.5) {
                let p = self.rng.random_range(0.0..0.2);
                self.line(format!("duplicate = {p:.3}"));
            }
            if self.chance(0.4) {
                let p = self.rng.random_range(0.0..0.05);
                self.line(format!("loss = {p:.3}"));
            } else if self.chance(0.2) {
                self.line(
                    "burst_loss = { good_to_bad = 0.01, bad_to_good = 0.3, loss_in_good = 0.0, loss_in_bad = 0.5 }",
                );
            }
        }
        for _ in 0..self.rng.random_range(0..=2) {
            let kind = self.pick(OUTAGES);
            let at = self.rng.random_range(0..60_000);
            let length = self.log_uniform(50, 20_000);
            self.line("[[relays.outages]]");
            self.line(format!("at = \"{at}ms\""));
            self.line(format!("duration = \"{length}ms\""));
            self.line(format!("kind = \"{kind}\""));
            if kind != "relay-restart" && self.chance(0.5) {
                let peer = peers[self.rng.random_range(0..peers.len())].clone();
                self.line(format!("peer = \"{peer}\""));
            }
        }
    }

    /// The keys every peer may have: its transport preset, engines, publish pipeline and clock.
    fn peer(&mut self) {
        let preset = self.pick(PRESETS);
        if preset != "relaysim" {
            self.line(format!("behaviour = \"{preset}\""));
        }
        let implementations = crate::implementations::NAMES
            .iter()
            .copied()
            .filter(|n| crate::implementations::parse(n).is_ok())
            .collect::<Vec<_>>();
        let engine = self.pick(&implementations);
        self.line(format!("impl = \"{engine}\""));
        if self.chance(0.2) {
            let skew = self.rng.random_range(-5..=5);
            self.line(format!("clock_skew_secs = {skew}"));
            if self.chance(0.5) {
                self.line("subscribe_since = true");
            }
        }
        if self.chance(0.2) {
            let mode = self.pick(&["sequential", "concurrent"]);
            let jitter = self.delay(1..4);
            self.line(format!(
                "publish = {{ mode = \"{mode}\", per_event = \"40us\", per_kib = \"200us\", jitter = {jitter} }}"
            ));
        }
    }

    fn workload(&mut self) {
        let kind = self.pick(WORKLOADS);
        self.line("[[workloads]]");
        self.line(format!("kind = \"{kind}\""));
        let count = self.rng.random_range(1..=3);
        self.line(format!("count = {count}"));
        let every = self.rng.random_range(1..20);
        self.line(format!("every = \"{every}s\""));
        match kind {
            "request" => {
                let bytes = self.log_uniform(1, 20_000);
                self.line(format!("bytes = {bytes}"));
            }
            "download" | "upload" => {
                let bytes = self.log_uniform(100, 300_000);
                let content = self.pick(CONTENTS);
                self.line(format!("bytes = {bytes}"));
                self.line(format!("content = \"{content}\""));
            }
            "stream" => {
                let chunks = self.log_uniform(1, 150);
                let chunk_bytes = self.log_uniform(1, 4_000);
                let interval = self.rng.random_range(1..200);
                self.line(format!("chunks = {chunks}"));
                self.line(format!("chunk_bytes = {chunk_bytes}"));
                self.line(format!("interval = \"{interval}ms\""));
                if self.chance(0.2) {
                    let consume = self.rng.random_range(1..300);
                    self.line(format!("consume_interval = \"{consume}ms\""));
                }
            }
            "slow" => {
                let work = self.rng.random_range(1..30);
                self.line(format!("work = \"{work}s\""));
                if self.chance(0.5) {
                    self.line("progress_every = \"2s\"");
                }
            }
            other => unreachable!("the soak has no parameters for workload kind {other:?}"),
        }
    }
}
