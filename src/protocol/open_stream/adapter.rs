//! An async [`Stream`] of a session's chunks, for async drivers.
//!
//! The sans-IO session stays with the driver; the driver moves chunks it reads into a
//! [`ChunkFeeder`], and the application consumes them as a [`ChunkStream`] (`while let Some(c)
//! = stream.next().await`). The stream ends after the last chunk of a completed stream, or
//! yields the failure once after the chunks released before it.

use super::policy::StreamFailure;
use super::session::StreamChunk;
use futures_core::Stream;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

#[derive(Default)]
struct Shared {
    chunks: VecDeque<StreamChunk>,
    end: Option<Result<(), StreamFailure>>,
    waker: Option<Waker>,
}

/// The driver's end: pushes chunks and the outcome.
#[derive(Clone)]
pub struct ChunkFeeder {
    shared: Arc<Mutex<Shared>>,
}

/// The application's end: an async stream of chunks in order.
pub struct ChunkStream {
    shared: Arc<Mutex<Shared>>,
}

/// A connected feeder and stream.
pub fn chunk_stream() -> (ChunkFeeder, ChunkStream) {
    let shared = Arc::new(Mutex::new(Shared::default()));
    (
        ChunkFeeder {
            shared: shared.clone(),
        },
        ChunkStream { shared },
    )
}

impl ChunkFeeder {
    fn with<R>(&self, f: impl FnOnce(&mut Shared) -> R) -> R {
        let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        let r = f(&mut shared);
        if let Some(w) = shared.waker.take() {
            w.wake();
        }
        r
    }

    /// Hands one chunk to the application.
    pub fn push(&self, chunk: StreamChunk) {
        self.with(|s| s.chunks.push_back(chunk));
    }

    /// Ends the stream: `Ok` after a completed stream, `Err` after a failed one.
    pub fn finish(&self, outcome: Result<(), StreamFailure>) {
        self.with(|s| {
            s.end.get_or_insert(outcome);
        });
    }
}

impl Stream for ChunkStream {
    type Item = Result<StreamChunk, StreamFailure>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(chunk) = shared.chunks.pop_front() {
            return Poll::Ready(Some(Ok(chunk)));
        }
        match shared.end.take() {
            Some(Err(failure)) => {
                // Report the failure once; afterwards the stream is over.
                shared.end = Some(Ok(()));
                Poll::Ready(Some(Err(failure)))
            }
            Some(Ok(())) => {
                shared.end = Some(Ok(()));
                Poll::Ready(None)
            }
            None => {
                shared.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn poll(stream: &mut ChunkStream) -> Poll<Option<Result<StreamChunk, StreamFailure>>> {
        let mut cx = Context::from_waker(Waker::noop());
        Pin::new(stream).poll_next(&mut cx)
    }

    fn chunk(i: u64) -> StreamChunk {
        StreamChunk {
            chunk_index: i,
            data: format!("c{i}"),
        }
    }

    #[test]
    fn yields_chunks_in_order_then_ends() {
        let (feeder, mut stream) = chunk_stream();
        assert!(poll(&mut stream).is_pending());
        feeder.push(chunk(0));
        feeder.push(chunk(1));
        feeder.finish(Ok(()));
        assert_eq!(poll(&mut stream), Poll::Ready(Some(Ok(chunk(0)))));
        assert_eq!(poll(&mut stream), Poll::Ready(Some(Ok(chunk(1)))));
        assert_eq!(poll(&mut stream), Poll::Ready(None));
        assert_eq!(poll(&mut stream), Poll::Ready(None));
    }

    #[test]
    fn reports_a_failure_once_after_released_chunks() {
        let (feeder, mut stream) = chunk_stream();
        feeder.push(chunk(0));
        feeder.finish(Err(StreamFailure::ProbeTimeout));
        assert_eq!(poll(&mut stream), Poll::Ready(Some(Ok(chunk(0)))));
        assert_eq!(
            poll(&mut stream),
            Poll::Ready(Some(Err(StreamFailure::ProbeTimeout)))
        );
        assert_eq!(poll(&mut stream), Poll::Ready(None));
    }
}
