//! Other implementations of the CEP-22 and CEP-41 endpoints, behind relaysim's endpoint traits
//! ([`crate::protocol::endpoint`]), so a scenario's client or server can run them
//! (`impl = "..."`) and `relaysim compare` can set them side by side.

#[cfg(feature = "contextvm-sdk")]
pub mod contextvm_sdk;
