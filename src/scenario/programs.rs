//! A program peer's keys: `program` (the peer's whole transport, run by the node host) and
//! the `program_options` handed to it.

use super::diagnostic::{Ctx, ScenarioError};
use toml::Spanned;

/// A peer's `program`, refused beside the keys of relaysim's own transport: the program is the
/// peer's whole transport.
pub(super) fn program(
    ctx: &Ctx,
    program: &Option<Spanned<String>>,
    key: &str,
    transport: &[(&str, bool)],
) -> Result<Option<String>, ScenarioError> {
    let Some(program) = program else {
        return Ok(None);
    };
    if program.get_ref().trim().is_empty() {
        return Err(ctx.spanned(
            program,
            &format!("{key}.program"),
            "name a program: `ts-sdk` or a path to a program module".into(),
            None,
        ));
    }
    if let Some((name, _)) = transport.iter().find(|(_, set)| *set) {
        return Err(ctx.spanned(
            program,
            &format!("{key}.{name}"),
            format!(
                "`{name}` sets relaysim's own transport, but this peer's transport is the \
                 program {:?}; leave one of them out",
                program.get_ref()
            ),
            None,
        ));
    }
    Ok(Some(program.get_ref().clone()))
}

/// A peer's `program_options`, as JSON for the program; only beside `program`.
pub(super) fn program_options(
    ctx: &Ctx,
    program: &Option<Spanned<String>>,
    options: &Option<Spanned<toml::Table>>,
    key: &str,
) -> Result<serde_json::Value, ScenarioError> {
    match (program, options) {
        (_, None) => Ok(serde_json::Value::Object(Default::default())),
        (None, Some(o)) => Err(ctx.spanned(
            o,
            &format!("{key}.program_options"),
            "`program_options` are for a program peer: add `program`".into(),
            None,
        )),
        (Some(_), Some(o)) => serde_json::to_value(o.get_ref()).map_err(|e| {
            ctx.spanned(
                o,
                &format!("{key}.program_options"),
                format!("cannot hand these options to a program: {e}"),
                None,
            )
        }),
    }
}
