//! relaysim's integration tests, in one binary (one link step instead of sixteen), one
//! module per area. Modules that need an optional feature are compiled only with it.

#[cfg(feature = "cli")]
mod cli;
#[cfg(all(feature = "contextvm-sdk", feature = "cli"))]
mod contextvm_sdk;
mod docs;
#[cfg(feature = "cli")]
mod hostile;
#[cfg(feature = "cli")]
mod json;
mod large_payloads;
mod layers;
#[cfg(feature = "live")]
mod live;
#[cfg(feature = "live")]
mod live_peers;
#[cfg(feature = "live")]
mod live_world;
mod open_stream_props;
mod oversized_props;
mod oversized_signed;
mod peers;
#[cfg(feature = "live")]
mod probe;
#[cfg(feature = "cli")]
mod readme;
#[cfg(feature = "cli")]
mod real_relays;
#[cfg(feature = "cli")]
mod real_sdk;
#[cfg(feature = "cli")]
mod reports;
mod resumable;
mod scenarios;
#[cfg(feature = "cli")]
mod soak;
#[cfg(feature = "cli")]
mod sweep;
mod traces;
#[cfg(feature = "cli")]
mod ts_sdk;
#[cfg(feature = "turmoil")]
mod turmoil;
mod world;
mod world_props;
