//! Peer behaviour as data: what a ContextVM transport does around its CEP-22 and CEP-41
//! engines. Many relay-induced bugs of real SDKs live there rather than in the engines.
//! Examples are an `accept` that is sent but never fed to the server's own receiver, an
//! inbound pipeline that does not de-duplicate, and progress tokens shaped like numbers.
//!
//! A [`Behaviour`] is a set of knobs. Each knob is settable on its own. Three presets copy
//! whole transports:
//!
//! - `relaysim`: relaysim's own peers, as they were before behaviours existed.
//! - `ts-sdk`: the TypeScript `@contextvm/sdk`, read at `bb0fb3f` (0.13.10).
//! - `rust-sdk`: the Rust `contextvm-sdk` crate 0.2.2, which is rs-sdk `6ff669d`, in front of
//!   the nostr-sdk 0.44 relay pool.
//!
//! Each knob's documentation cites the source file in those SDKs. `docs/behaviours.md` has
//! the table.

use crate::protocol::jsonrpc::ProgressToken;

/// Which transport a peer copies: a preset, with any knob overridden.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Behaviour {
    /// The preset this behaviour starts from (`relaysim`, `ts-sdk`, `rust-sdk`).
    pub preset: &'static str,
    /// How inbound events are de-duplicated by id before any engine sees them.
    pub dedup: Dedup,
    /// How a client shapes the progress tokens of its calls.
    pub tokens: TokenShape,
    /// Server: after answering an upload's `start` with `accept`, whether the server also feeds
    /// that accept to its own CEP-22 receiver, so the receiver expects chunks from slot 3.
    ///
    /// The TS server sends `accept` (`nostr-server/inbound-notification-dispatcher.ts:203`) but
    /// never feeds it to its global receiver. Its frontier stays at slot 2 while chunks arrive
    /// from slot 3, so an upload of 22 chunks or more fails with "Out-of-order gap 22 exceeds
    /// policy limit 21" (sdk-behaviour §6 B1). The Rust server feeds a synthetic accept
    /// (`transport/server/mod.rs:2174-2196`).
    ///
    /// Only the contextvm-sdk receiver tracks the accept slot. relaysim's own receiver
    /// completes either numbering, so this knob does not change it.
    pub feed_accept: bool,
    /// Client: when an upload's sender waits for `accept` before sending chunks.
    pub upload_accept: AcceptWait,
    /// Client: when the reading session of a streaming call is created.
    pub reader_session: ReaderSession,
    /// Server: when a CEP-41 writer waits for the client's `accept` before its chunks.
    ///
    /// relaysim's server waits when the client has not advertised `support_open_stream`, as the
    /// CEP requires. Neither SDK server ever waits, and neither gates writer creation on the
    /// client's support: the TS server makes a writer for any method with a token, the Rust
    /// server for `tools/call` (sdk-behaviour §3.5, §6 D).
    pub stream_accept: AcceptWait,
    /// Whether a transfer's or stream's next frame waits until the relays answered the last.
    pub publish_wait: PublishWait,
    /// Server: whether a CEP-41 writer's keepalive ping skips the wait for earlier frames.
    ///
    /// Both SDK writers publish the ping outside the lock their writes hold: Rust's
    /// `send_probe` bypasses the op lock (the order on the wire became `start(1), ping(3),
    /// chunk(2)` and the reader failed with "Non-increasing progress"), and the TS writer does
    /// the same (`writer.ts:290`) (sdk-behaviour §6 B4). With lanes that wait for OKs, a ping
    /// that comes due while a chunk waits overtakes it.
    pub ping_bypass: bool,
    /// Server: whether CEP-41 writer frames (start, chunk, ping, pong, close, abort) carry an
    /// `e` tag naming the request event.
    ///
    /// The TS writer's frames carry only `p` (`open-stream-factory.ts:249` calls
    /// `sendNotification` without `correlatedEventId`); the Rust writer's carry `p` and `e`
    /// (`server/mod.rs:2383`) (sdk-behaviour §1, §6 D).
    pub writer_e_tags: bool,
    /// Client: what keeps a pending call from timing out.
    pub call_refresh: CallRefresh,
    /// Client: when call timeouts are checked.
    pub timer_sweep: TimerSweep,
    /// Client: the largest ping nonce its stream reader answers, in bytes (`None`: any).
    ///
    /// The Rust reader refuses a nonce over 64 bytes and the stream dies
    /// (`MAX_OPEN_STREAM_PING_NONCE_BYTES`, `open_stream/session.rs:443`); the TS reader has no
    /// cap (sdk-behaviour §6 D). SDK writers' nonces are `"<token>:<n>"`, so a progress token
    /// of about 62 bytes makes every keepalive ping fatal to a Rust reader. relaysim's reader
    /// ignores a ping over its cap of 64 (the spec's SHOULD).
    pub nonce_limit: Option<usize>,
    /// Client: whether a failed CEP-22 download fails its call at once.
    ///
    /// In both SDKs it does not: "failure on the client is not surfaced to the caller"; the
    /// error is logged (TS `onerror`) and the request times out at the MCP/rmcp layer
    /// (sdk-behaviour §2.5). relaysim's client fails the call at once with the cause. Either
    /// way the report names the failure; with `false` the call's outcome is `timeout`.
    pub failures_reach_call: bool,
}

/// When a client checks its calls' timeouts.
///
/// The Rust client sweeps its pending requests every `(timeout/2).clamp(1 s, 30 s)`, 15 s for
/// its default 30 s timeout (sdk-behaviour §3.4); TS timers are exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerSweep {
    /// At the deadline.
    Exact,
    /// On sweeps this far apart, from virtual time zero.
    Every(std::time::Duration),
    /// On sweeps every half the request timeout, between 1 s and 30 s (the Rust client).
    HalfTimeout,
}

impl TimerSweep {
    /// The sweep interval for a client whose request timeout is `timeout`; `None` for exact.
    pub fn interval(self, timeout: std::time::Duration) -> Option<std::time::Duration> {
        use std::time::Duration;
        match self {
            TimerSweep::Exact => None,
            TimerSweep::Every(every) => Some(every),
            TimerSweep::HalfTimeout => {
                Some((timeout / 2).clamp(Duration::from_secs(1), Duration::from_secs(30)))
            }
        }
    }
}

/// What keeps a client's pending call alive (pushes its timeout back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallRefresh {
    /// Any inbound frame or progress notification with the call's progress token: relaysim's
    /// client, and the TS client, which forwards every inbound frame to the MCP SDK's
    /// `resetTimeoutOnProgress` (`37430bd`, sdk-behaviour §2.5).
    Token,
    /// Only inbound events whose `e` tag names the call's request event: the Rust client
    /// `touch`es its pending entry that way (sdk-behaviour §2.5). Frames without an `e` tag
    /// (the TS writer's) keep nothing alive, so a stream longer than the timeout loses its
    /// final response ("Response for unknown request", sdk-behaviour §6 B5).
    ETag,
}

/// Whether the frames of one transfer or stream wait for the relays' verdicts on the frame
/// before.
///
/// Both SDKs publish "strictly in sequence, each awaiting the relay's publish acknowledgement"
/// (sdk-behaviour §2.3). nostr-sdk 0.44's `send_event` waits up to 10 s for each relay's OK
/// (`WAIT_FOR_OK_TIMEOUT`) and then returns as if it had succeeded (`relay/mod.rs:89`). The TS
/// pool (`ApplesauceRelayPool`) resolves once a relay acknowledged; an attempt times out after
/// 10 s, is retried once, and then every 500 ms for ever, unless a relay gave a definitive
/// `OK false` (sdk-behaviour §5; zero acknowledgements count as failure since `6e2013a`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublishWait {
    /// Every event goes out at once (relaysim's peers).
    Immediate,
    /// A lane's next event goes out when the relays answered the last one (see [`OkQuorum`]),
    /// or when its time runs out (see [`MissingOk`]).
    ForOk {
        /// How long to wait for the verdicts.
        timeout: std::time::Duration,
        /// Whose answers end the wait.
        quorum: OkQuorum,
        /// What a missing answer means.
        missing: MissingOk,
    },
}

/// Whose OK ends a lane's wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OkQuorum {
    /// Every relay's verdict (nostr-sdk's `send_event`).
    All,
    /// The first relay's acceptance, or every relay's verdict if none accepts (the TS pool).
    Any,
}

/// What a lane does when its wait for OKs times out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingOk {
    /// Goes on, as if the publish had succeeded (nostr-sdk).
    Proceed,
    /// Publishes the same event again to the relays that have not answered: when the timeout
    /// runs out, again after another timeout, then every 500 ms, for as long as no relay
    /// accepts or rejects it (the TS pool). Against a relay that never answers, the lane never
    /// moves again.
    Retry,
}

/// How often the TS pool retries a publish after its first retry.
pub const RETRY_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// nostr-sdk's and the TS pool's wait for a relay's OK.
pub const OK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// When a client creates the reading session of a streaming call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReaderSession {
    /// When `start` arrives: a frame that beats `start` finds no session and is dropped
    /// (relaysim's reader keeps it until `start` comes).
    AtStart,
    /// When the request is sent, as both SDK clients bind their reader in `callToolStream` /
    /// `call_tool_stream` (sdk-behaviour §3.3): a chunk that beats `start` hits a live session,
    /// which refuses it ("Received non-start frame before start") and the stream is dead.
    /// Only the contextvm-sdk reader has such sessions; relaysim's ignores this.
    AtRequest,
}

/// De-duplication of inbound events by id, before any engine sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dedup {
    /// Every copy is processed.
    ///
    /// This is the TS server, whose `nostr-server/event-pipeline.ts` `handleUnencryptedEvent`
    /// only checks the encryption mode and the signature, in front of `ApplesauceRelayPool`,
    /// which forwards every relay's copy (`25eb39d`).
    None,
    /// Repeated ids are dropped while they are among the last `memory` ids seen.
    ///
    /// The TS client keeps an LRU of 5,000 ids (`nostr-client/event-pipeline.ts`, `4610f71`).
    /// The Rust transports de-duplicate only gift-wrap ids, but the nostr-sdk 0.44 pool in
    /// front of them drops repeats with a 35,000-entry seen-tracker. relaysim remembers 65,536.
    PerId {
        /// How many ids are remembered (the oldest are forgotten first).
        memory: usize,
    },
}

/// How a client's progress tokens look. Frames carry the token as a string in both SDKs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenShape {
    /// `<prefix><call id>`, relaysim's `p1`, `p2`, …. A long prefix makes every nonce
    /// `"<token>:<n>"` long. The Rust reader refuses ping nonces over 64 bytes
    /// (`MAX_OPEN_STREAM_PING_NONCE_BYTES`, sdk-behaviour §3.3).
    Prefixed(String),
    /// The request's JSON-RPC id, as a string of digits. The TS `callToolStream` uses the MCP
    /// SDK's token, which is the request's numeric message id (sdk-behaviour §3.2).
    MessageId,
    /// A per-client counter from 0, as a string of digits. In the Rust `call_tool_stream`,
    /// rmcp's per-peer counter makes every client's first token `"0"` (sdk-behaviour §3.2).
    PeerCounter,
}

impl TokenShape {
    /// The shape's name in scenario files (`tokens = "..."`).
    pub fn name(&self) -> &'static str {
        match self {
            TokenShape::Prefixed(_) => "prefixed",
            TokenShape::MessageId => "message-id",
            TokenShape::PeerCounter => "peer-counter",
        }
    }
}

/// When a client's CEP-22 upload waits for the server's `accept`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcceptWait {
    /// Wait unless the server is known to support CEP-22, as the CEP requires.
    ///
    /// The Rust client registers a waiter before `start` and gives up after 30 s
    /// (`transport/client/mod.rs`, `accept_timeout_ms`). relaysim's client also waits.
    WhenUnknown,
    /// Never wait. The TS client's `waitForAccept` (`oversized-transfer/receiver.ts:158`)
    /// resolves at once, so start and every chunk go out back to back, still numbered for
    /// the handshake (sdk-behaviour §6 B2).
    Never,
}

/// The names [`Behaviour::preset`] accepts.
pub const PRESETS: [&str; 3] = ["relaysim", "ts-sdk", "rust-sdk"];

/// Which side of a call a peer is on. Some presets differ by side: the TS client
/// de-duplicates plain events and the TS server does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A server peer.
    Server,
    /// A client peer.
    Client,
}

impl Default for Behaviour {
    fn default() -> Self {
        Behaviour::relaysim()
    }
}

impl Behaviour {
    /// relaysim's own peers.
    pub fn relaysim() -> Self {
        Behaviour {
            preset: "relaysim",
            dedup: Dedup::PerId { memory: 65_536 },
            tokens: TokenShape::Prefixed("p".into()),
            feed_accept: true,
            upload_accept: AcceptWait::WhenUnknown,
            reader_session: ReaderSession::AtStart,
            stream_accept: AcceptWait::WhenUnknown,
            publish_wait: PublishWait::Immediate,
            ping_bypass: false,
            writer_e_tags: true,
            call_refresh: CallRefresh::Token,
            timer_sweep: TimerSweep::Exact,
            nonce_limit: Some(64),
            failures_reach_call: true,
        }
    }

    /// The preset named `name` for a peer in `role`, or `None` for an unknown name.
    pub fn preset(name: &str, role: Role) -> Option<Self> {
        Some(match name {
            "relaysim" => Behaviour::relaysim(),
            "ts-sdk" => Behaviour {
                preset: "ts-sdk",
                dedup: match role {
                    Role::Client => Dedup::PerId { memory: 5_000 },
                    Role::Server => Dedup::None,
                },
                tokens: TokenShape::MessageId,
                feed_accept: false,
                upload_accept: AcceptWait::Never,
                reader_session: ReaderSession::AtRequest,
                stream_accept: AcceptWait::Never,
                publish_wait: PublishWait::ForOk {
                    timeout: OK_TIMEOUT,
                    quorum: OkQuorum::Any,
                    missing: MissingOk::Retry,
                },
                ping_bypass: true,
                writer_e_tags: false,
                call_refresh: CallRefresh::Token,
                timer_sweep: TimerSweep::Exact,
                nonce_limit: None,
                failures_reach_call: false,
            },
            "rust-sdk" => Behaviour {
                preset: "rust-sdk",
                dedup: Dedup::PerId { memory: 35_000 },
                tokens: TokenShape::PeerCounter,
                feed_accept: true,
                upload_accept: AcceptWait::WhenUnknown,
                reader_session: ReaderSession::AtRequest,
                stream_accept: AcceptWait::Never,
                publish_wait: PublishWait::ForOk {
                    timeout: OK_TIMEOUT,
                    quorum: OkQuorum::All,
                    missing: MissingOk::Proceed,
                },
                ping_bypass: true,
                writer_e_tags: true,
                call_refresh: CallRefresh::ETag,
                timer_sweep: TimerSweep::HalfTimeout,
                nonce_limit: Some(64),
                failures_reach_call: false,
            },
            _ => return None,
        })
    }

    /// Whether a preset names a real SDK, whose engines (the contextvm-sdk crate's, a
    /// line-by-line port of the TypeScript ones) go with its transport.
    pub fn wants_sdk_engines(&self) -> bool {
        self.preset != "relaysim"
    }
}

/// A client's progress tokens in its shape. Prefixed and message-id tokens are the call id
/// written out, so nothing is stored for them; only the peer counter remembers which calls got
/// one, in order (call ids only grow, so the list stays sorted).
#[derive(Debug, Clone)]
pub struct Tokens {
    shape: TokenShape,
    counted: Vec<u64>,
}

impl Tokens {
    /// Tokens of `shape`.
    pub fn new(shape: TokenShape) -> Self {
        Tokens {
            shape,
            counted: Vec::new(),
        }
    }

    /// Mints the token of call `call` (call ids must grow from one call to the next).
    pub fn mint(&mut self, call: u64) -> ProgressToken {
        if self.shape == TokenShape::PeerCounter {
            self.counted.push(call);
        }
        self.of_call(call).expect("a minted call has a token")
    }

    /// The token of call `call`.
    pub fn of_call(&self, call: u64) -> Option<ProgressToken> {
        let text = match &self.shape {
            TokenShape::Prefixed(prefix) => format!("{prefix}{call}"),
            TokenShape::MessageId => call.to_string(),
            TokenShape::PeerCounter => self.counted.binary_search(&call).ok()?.to_string(),
        };
        Some(ProgressToken::String(text))
    }

    /// The call a token names, if it has this client's shape.
    pub fn call_of(&self, token: &ProgressToken) -> Option<u64> {
        let ProgressToken::String(text) = token else {
            return None;
        };
        let digits = match &self.shape {
            TokenShape::Prefixed(prefix) => text.strip_prefix(prefix.as_str())?,
            TokenShape::MessageId | TokenShape::PeerCounter => text,
        };
        let n: u64 = digits.parse().ok()?;
        // Only the exact text this client would write ("01" is not "1").
        if n.to_string() != digits {
            return None;
        }
        match self.shape {
            TokenShape::PeerCounter => self.counted.get(usize::try_from(n).ok()?).copied(),
            _ => Some(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_shapes_follow_their_sdks() {
        let s = |t: ProgressToken| match t {
            ProgressToken::String(s) => s,
            ProgressToken::Number(n) => n.to_string(),
        };
        let mut tokens = Tokens::new(TokenShape::PeerCounter);
        // The Rust client's first token is "0", whatever the call's id.
        assert_eq!(s(tokens.mint(2)), "0");
        assert_eq!(s(tokens.mint(5)), "1");
        assert_eq!(tokens.call_of(&ProgressToken::String("1".into())), Some(5));
        assert_eq!(tokens.call_of(&ProgressToken::String("2".into())), None);
        assert_eq!(tokens.of_call(5).map(s).as_deref(), Some("1"));
        assert_eq!(tokens.of_call(3), None);
        let mut tokens = Tokens::new(TokenShape::MessageId);
        assert_eq!(s(tokens.mint(7)), "7");
        assert_eq!(tokens.call_of(&ProgressToken::String("07".into())), None);
        let long = "x".repeat(70);
        let mut tokens = Tokens::new(TokenShape::Prefixed(long.clone()));
        let token = tokens.mint(3);
        assert_eq!(s(token.clone()), format!("{long}3"));
        assert_eq!(tokens.call_of(&token), Some(3));
        assert_eq!(tokens.of_call(3), Some(token));
        assert_eq!(tokens.call_of(&ProgressToken::String("p3".into())), None);
        assert_eq!(tokens.call_of(&ProgressToken::Number(3)), None);
    }

    #[test]
    fn presets_differ_where_the_sdks_do() {
        let ts_server = Behaviour::preset("ts-sdk", Role::Server).unwrap();
        let ts_client = Behaviour::preset("ts-sdk", Role::Client).unwrap();
        assert_eq!(ts_server.dedup, Dedup::None);
        assert_eq!(ts_client.dedup, Dedup::PerId { memory: 5_000 });
        assert!(!ts_server.feed_accept);
        assert_eq!(ts_client.upload_accept, AcceptWait::Never);
        let rust = Behaviour::preset("rust-sdk", Role::Client).unwrap();
        assert_eq!(rust.tokens, TokenShape::PeerCounter);
        assert_eq!(
            Behaviour::preset("relaysim", Role::Server),
            Some(Behaviour::relaysim())
        );
        assert!(Behaviour::preset("go-sdk", Role::Client).is_none());
        for name in PRESETS {
            assert!(Behaviour::preset(name, Role::Client).is_some());
        }
    }
}
