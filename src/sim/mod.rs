//! The simulated world and its drivers. So far: seeded randomness split into named streams,
//! an impaired one-way link, and a single-transfer run used by `relaysim transfer`.

pub mod fates;
pub mod link;
pub mod loopback;
pub mod order;
pub mod publish;
pub mod transfer;
pub mod world;
