//! The des world: virtual time, relays and peers on a network of connections, and what a run
//! observes. Every command that runs a scenario in virtual time runs it here.

pub(crate) mod fates;
pub mod hosted;
pub mod loopback;
pub(crate) mod order;
pub(crate) mod planner;
pub mod program_lines;
pub(crate) mod publish;
pub mod world;
