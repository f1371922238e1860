//! The composition root for engines: every implementation of the CEP-22 and CEP-41 endpoints
//! this build has, by the name a scenario's `impl = "..."` gives. Adding an implementation means
//! an adapter (`src/adapter/`) and one line here.

use crate::peer::engines::{Implementation, RELAYSIM};

/// The names `impl` accepts, whether or not this build has them.
pub const NAMES: [&str; 2] = ["relaysim", "contextvm-sdk"];

/// Why an implementation name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImplementationError {
    /// Not an implementation relaysim knows.
    #[error("unknown implementation {0:?}: use relaysim or contextvm-sdk")]
    Unknown(String),
    /// Known, but this build lacks it.
    #[error("this relaysim was built without the contextvm-sdk feature: build it with `cargo build --release --features contextvm-sdk`")]
    NotBuilt,
}

/// Every implementation in this build.
pub fn all() -> Vec<Implementation> {
    vec![
        RELAYSIM,
        #[cfg(feature = "contextvm-sdk")]
        crate::adapter::contextvm_sdk::IMPLEMENTATION,
    ]
}

/// The implementation named `name`.
pub fn parse(name: &str) -> Result<Implementation, ImplementationError> {
    if let Some(found) = all().into_iter().find(|i| i.name() == name) {
        return Ok(found);
    }
    if NAMES.contains(&name) {
        Err(ImplementationError::NotBuilt)
    } else {
        Err(ImplementationError::Unknown(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_a_missing_feature_is_explained() {
        assert_eq!(parse("relaysim"), Ok(RELAYSIM));
        assert!(matches!(
            parse("rust-sdk"),
            Err(ImplementationError::Unknown(_))
        ));
        #[cfg(feature = "contextvm-sdk")]
        assert_eq!(
            parse("contextvm-sdk").map(|i| i.name()),
            Ok("contextvm-sdk")
        );
        #[cfg(not(feature = "contextvm-sdk"))]
        assert!(parse("contextvm-sdk")
            .unwrap_err()
            .to_string()
            .contains("--features contextvm-sdk"));
        for i in all() {
            assert_eq!(parse(i.name()), Ok(i));
            assert!(NAMES.contains(&i.name()));
        }
    }
}
