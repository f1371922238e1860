//! The des world: virtual time, relays and peers on a network of connections, and what a run
//! observes. Every command that runs a scenario in virtual time runs it here.

pub mod fates;
pub mod loopback;
pub mod order;
pub mod planner;
pub mod publish;
pub mod world;
