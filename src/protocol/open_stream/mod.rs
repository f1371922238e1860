//! CEP-41 open-ended streams.
