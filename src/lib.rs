//! relaysim: a deterministic record-and-replay simulator of Nostr relays carrying ContextVM
//! traffic (MCP JSON-RPC inside signed kind-25910 Nostr events).
//!
//! The crate is a library core with a thin command-line front end (`src/main.rs`,
//! `src/cli/`, not part of the library). Layers, from the bottom, in groups; within a group
//! each module is its own, ordered layer (`tests/it/layers.rs` holds the ranks and checks that
//! a module uses only modules below it; `docs/design.md` has the table):
//!
//! 1. [`rng`] and [`nip01`]: seeded random streams; Nostr identities, events and NIP-01
//!    messages (no ContextVM).
//! 2. [`protocol`]: sans-IO CEP-22, CEP-41 and resumable-stream engines, JSON-RPC, and the
//!    engine traits with their factory.
//! 3. [`relay`] (the relay model and its profiles) and [`peer`] (ContextVM peers, the tool
//!    catalogue); [`adapter`]s of other implementations; [`implementations`], the names they
//!    register under.
//! 4. [`sim`] (the des world), [`stats`], [`trace`].
//! 5. [`scenario`]: scenario files, validation, runs, expectations.
//! 6. [`replay`] and shrinking, the `live` and `turmoil_driver` drivers (features `live`,
//!    `turmoil`), [`sweep`], [`compare`].
//!
//! The items re-exported at the root are the surface for your own tests: load a scenario, run
//! it, check it, record a trace, replay and shrink it. The modules stay public for the
//! command-line tool and the integration tests; inner modules that nobody outside needs are
//! private. With `default-features = false` you get the core alone (no tokio, tungstenite,
//! turmoil, plotters or clap).
//!
//! # Example: a scenario as a regression test
//!
//! ```
//! let scenario = relaysim::Scenario::from_file(std::path::Path::new("scenarios/ideal-baseline.toml"))
//!     .expect("the shipped scenario is valid");
//! let report = scenario.run_all();
//! assert!(scenario.check(&report).is_empty(), "{:?}", scenario.check(&report));
//! ```
//!
//! # Example: a CEP-22 transfer, sans-IO
//!
//! ```
//! use relaysim::protocol::envelope::EscapedContentEnvelope;
//! use relaysim::protocol::jsonrpc::{Message, RequestId};
//! use relaysim::protocol::oversized::{
//!     OversizedReceiver, OversizedSender, ReceiverConfig, ReceiverEvent, SenderConfig,
//! };
//! use std::time::Duration;
//!
//! let message = Message::Response {
//!     id: RequestId::Number(1),
//!     result: serde_json::json!({ "text": "\"quoted\" ".repeat(5000) }),
//! }
//! .to_json();
//! // Frames must publish within 4,000 bytes; an event adds ~650 bytes around its content.
//! let envelope = EscapedContentEnvelope { overhead: 650 };
//! let config = SenderConfig { budget: 4_000, ..SenderConfig::default() };
//! let token = RequestId::String("req-1".into());
//! let mut sender = OversizedSender::new(token, message.clone(), config, &envelope).unwrap();
//! let mut receiver = OversizedReceiver::new(ReceiverConfig::default());
//!
//! let now = Duration::ZERO;
//! let mut frames: Vec<_> = std::iter::from_fn(|| sender.poll_transmit(now)).collect();
//! frames[1..].reverse(); // a relay that reorders everything after `start`
//! for frame in frames {
//!     receiver.handle_frame(&"server", frame, now);
//! }
//! let delivered = std::iter::from_fn(|| receiver.poll_event()).find_map(|e| match e {
//!     ReceiverEvent::Completed { message, .. } => message,
//!     _ => None,
//! });
//! assert_eq!(delivered, Some(message));
//! ```

#![warn(missing_docs)]
#![warn(unreachable_pub)]
// Safe code only, but for the two places a measured figure needs more: `nip01::shuffle`'s calls
// into the SSSE3 escape and unescape, and `nip01::json_read`'s unchecked string, each saying why
// (with its figure) and tested against `serde_json` and the portable code.
#![deny(unsafe_code)]

pub use relay::RelayProfile;
pub use replay::shrink::{shrink, Shrunk};
pub use replay::{inject, schedule, ReplayError, ScheduleReplay};
pub use scenario::{Diagnostic, Scenario, ScenarioError};
pub use stats::{Outcome, Report, RunReport};
pub use sweep::{Sweep, SweepError};
pub use trace::{EventsMode, Trace, TraceError};

pub mod adapter;
#[cfg(feature = "plots")]
pub mod chart;
pub mod compare;
pub mod implementations;
pub mod limits;
#[cfg(feature = "live")]
pub mod live;
#[cfg(feature = "live")]
pub mod live_engine;
pub mod nip01;
pub mod node_host;
pub mod parallel;
pub mod peer;
#[cfg(feature = "live")]
pub mod probe;
pub mod protocol;
pub mod relay;
pub mod replay;
pub mod rng;
pub mod scenario;
pub mod segmented;
pub mod show;
pub mod sim;
pub mod soak;
pub mod stats;
pub mod sweep;
pub mod trace;
#[cfg(feature = "turmoil")]
pub mod turmoil_driver;
