//! A workload call the world makes at its time: the tool, its arguments, and what a correct
//! answer looks like, for every driver (des, turmoil, live).

use super::Observation;
use crate::peer::client::{CallId, CallOptions, ContextVmClient};
use crate::peer::tools::{Expected, ToolCall};
use std::time::Duration;

/// A workload call scheduled in the world.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The tool and its arguments.
    pub tool: ToolCall,
    /// Send a progress token (needed for streams and oversized messages).
    pub progress: bool,
    /// The workload it belongs to (for attribution in reports).
    pub workload: usize,
    /// For streams: the application reads one chunk per this interval (a slow consumer).
    /// `None`: it reads each chunk as soon as it is released.
    pub consume_every: Option<Duration>,
}

impl Call {
    /// Makes this call on `client` at `now` (a stream through `call_tool_stream`, as the SDK's
    /// `callToolStream`); returns its id, and for a stream its chunk size, by which chunks read
    /// are checked. Every driver starts workload calls here.
    pub fn start(self, client: &mut ContextVmClient, now: Duration) -> (CallId, Option<usize>) {
        let chunk_bytes = match self.tool {
            ToolCall::Stream { chunk_bytes, .. } => Some(chunk_bytes),
            _ => None,
        };
        // A payload of a segment or more is written into the request a segment at a time;
        // a shorter one in place, as before.
        let (name, arguments, long) = self.tool.into_request(crate::segmented::SEGMENT);
        if let Some(bytes) = chunk_bytes {
            (client.call_tool_stream(name, arguments, now).0, Some(bytes))
        } else {
            let options = CallOptions {
                progress: self.progress,
            };
            let call = client.call_tool_with_long_argument(name, arguments, long, options, now);
            (call, None)
        }
    }

    /// Makes the call as [`Call::start`] does, and also returns the observation that client
    /// `index` started it (made before the call's payload is taken).
    pub fn start_observed(
        self,
        index: usize,
        client: &mut ContextVmClient,
        now: Duration,
    ) -> (CallId, Option<usize>, Observation) {
        let (workload, expected) = (self.workload, Expected::of(&self.tool));
        let tool = self.tool.name();
        let (call, chunk_bytes) = self.start(client, now);
        let called = Observation::Called {
            client: index,
            call,
            workload,
            tool,
            expected,
        };
        (call, chunk_bytes, called)
    }

    /// The observation that this call, with id `call` on client `client`, started.
    pub fn called(&self, client: usize, call: CallId) -> Observation {
        Observation::Called {
            client,
            call,
            workload: self.workload,
            tool: self.tool.name(),
            expected: Expected::of(&self.tool),
        }
    }
}
