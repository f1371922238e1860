//! Longer than 600 lines because it holds every built-in profile, each knob with its source.
//!
//! Relay profiles: every way real relays differ (`docs/relays.md`) is a knob, and the
//! built-in profiles set the knobs the way the named relay does.

use super::impair::Impairments;
use std::time::Duration;

/// How a relay measures an event against its size limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeMeasure {
    /// The serialized event JSON (strfry re-normalises the event and measures that).
    EventJson,
    /// The whole `["EVENT", ...]` client message (nostr-rs-relay).
    EventMessage,
    /// The characters (code points) of the event's `content` (Python nostr-relay).
    ContentChars,
}

/// What a relay does with an event over its size limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OversizeReaction {
    /// `OK false` with this message; `{size}` is replaced by the measured size.
    OkFalse(String),
    /// A NOTICE with this message and no OK at all (nostr-rs-relay).
    Notice(String),
}

/// What a relay does with a WebSocket message over its frame limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameOversizeReaction {
    /// Drop the connection with no message (strfry, khatru).
    Drop,
    /// Send a NOTICE, then drop the connection (nostr-rs-relay); `{size}` and `{max}` are
    /// replaced.
    NoticeThenDrop(String),
}

/// How a relay treats ephemeral events (kinds 20000–29999, so ContextVM's 25910).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EphemeralPolicy {
    /// Keep them this long: a re-sent one is answered `duplicate:` and not re-broadcast, and a
    /// new REQ gets the stored ones (strfry: 300 s). `None`: live-only, no de-duplication.
    pub store_for: Option<Duration>,
    /// From when `store_for` counts, and when a stored event is actually forgotten.
    pub expiry: StoreExpiry,
    /// Answer them with OK (nostr-rs-relay 0.8 sends none).
    pub send_ok: bool,
    /// Refuse them with `OK false "mute: ..."` when no subscription matches (khatru).
    pub mute_without_listener: bool,
    /// Refuse ones whose `created_at` is older than this (strfry: 60 s).
    pub reject_older_than: Option<Duration>,
}

/// When a relay forgets a stored ephemeral event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreExpiry {
    /// `store_for` after it arrived, exactly.
    AfterArrival,
    /// `store_for` after its `created_at` by the relay's clock, at the first of the relay's
    /// sweeps (one every `sweep_every` from its start) that finds it older: strfry's cron
    /// deletes ephemeral events whose `created_at` is more than 300 s behind, every 9 s.
    AfterCreatedAt {
        /// How often the relay sweeps its store.
        sweep_every: Duration,
    },
}

/// Who shares a rate-limit bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateScope {
    /// One bucket per connection.
    Connection,
    /// One bucket per event author.
    Pubkey,
    /// One bucket per client IP (each peer has its own address unless a scenario shares one).
    Ip,
    /// One bucket for the whole relay.
    Server,
}

/// What happens to an event when its bucket is empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RateAction {
    /// `OK false` with this message (e.g. `rate-limited: slow down`).
    Reject(String),
    /// Hold it until a token is available (nostr-rs-relay's writer sleeps).
    Delay,
    /// Drop it silently: no OK, no broadcast.
    Drop,
}

/// Content a relay's policy refuses.
#[derive(Debug, Clone, PartialEq)]
pub struct ContentRefusal {
    /// Refused when the content holds any of these.
    pub containing: Vec<String>,
    /// The OK false message, with its prefix.
    pub message: String,
}

/// A token-bucket rate limit on published events.
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimit {
    /// Who shares a bucket.
    pub scope: RateScope,
    /// Bucket size (burst).
    pub capacity: f64,
    /// Tokens added per second (on average, for the stepwise refills).
    pub refill_per_sec: f64,
    /// How the tokens come back.
    pub refill: Refill,
    /// What happens when the bucket is empty.
    pub action: RateAction,
}

/// How a rate limit's tokens come back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Refill {
    /// Continuously (a token bucket such as `governor`'s, nostr-relay-builder's).
    Smooth,
    /// In steps, on one relay-wide timer started with the relay: at every multiple of `every`
    /// each bucket gets `refill_per_sec × every` tokens back (khatru's `policies` limiters, a
    /// goroutine that sleeps `every` and subtracts from every key's count).
    Ticks {
        /// The timer's period.
        every: Duration,
    },
    /// In whole tokens for whole seconds, counted from the last *accepted* event: the first
    /// event passes with a full bucket of `capacity` (a per-minute figure); each later one adds
    /// `floor(whole seconds since the last accepted event, at most 60 / 60 × capacity)`, takes
    /// one, keeps the count within 0..capacity-1, and is refused at 0. Both damus-io/noteguard's
    /// `ratelimit` filter (relay.damus.io) and nostr-relay-builder's `Session::check_rate_limit`
    /// count this way (read from source).
    WholeSeconds,
}

/// Everything that makes one relay behave like a particular real relay.
#[derive(Debug, Clone, PartialEq)]
pub struct RelayProfile {
    /// The profile's name.
    pub name: String,
    /// Where its facts come from.
    pub sources: String,
    /// Event size limit, how it is measured, and the reaction.
    pub max_event_bytes: Option<usize>,
    /// How the event size is measured.
    pub size_measure: SizeMeasure,
    /// The reaction to an event over the limit.
    pub oversize: OversizeReaction,
    /// WebSocket message limit (NIP-11 `max_message_length`).
    pub max_message_bytes: Option<usize>,
    /// The reaction to a message over it.
    pub frame_oversize: FrameOversizeReaction,
    /// Ephemeral events.
    pub ephemeral: EphemeralPolicy,
    /// Refuse events whose `created_at` is further in the future than this (strfry: 900 s).
    pub reject_newer_than: Option<Duration>,
    /// Kinds accepted; `None` accepts all (ContextVM's strfry deployment lists a few).
    pub allowed_kinds: Option<Vec<u16>>,
    /// Events whose content holds one of these texts are refused with the paired message
    /// (khatru's `RejectEventsWithBase64Media`), before any rate limit takes a token.
    pub refused_content: Vec<ContentRefusal>,
    /// Rate limit on published events.
    pub rate_limit: Option<RateLimit>,
    /// Subscriptions per connection, and the message when a REQ goes over it.
    pub max_subscriptions: usize,
    /// Over the subscription limit: a NOTICE (strfry, nostr-rs-relay) instead of CLOSED.
    pub too_many_subscriptions_notice: Option<String>,
    /// The REQ over the limit still gets its stored events and EOSE before the refusal, and
    /// is not kept (strfry: the query worker answers, then the live monitor refuses it).
    pub refuses_subscription_after_replay: bool,
    /// The OK for a stored event sent again: accepted or not, and its message (strfry:
    /// `true`, "duplicate: have this event").
    pub duplicate_answer: (bool, String),
    /// Keep regular events (every kind not ephemeral, such as kind-1059 gift wraps): a re-sent
    /// one is answered with `duplicate_answer` and not broadcast again, and a new REQ gets the
    /// stored ones back. They are never forgotten, only evicted past the store's bounds, after
    /// every stored ephemeral event. Replaceable and addressable kinds are kept like any other
    /// (real relays keep the newest only; ContextVM traffic has none).
    pub store_regular: bool,
    /// Kinds a connection that has not authenticated (NIP-42) cannot read: a REQ asking for
    /// these kinds only is refused with CLOSED `auth-required:` (after an `AUTH` challenge,
    /// the first time on a connection), and events of these kinds are not sent to it
    /// (strfry's `relay.auth.restrictedReadKinds`, "4, 1059" by default). relaysim's peers
    /// never authenticate.
    pub restricted_read_kinds: Vec<u16>,
    /// Stored events one REQ gets back at most, whatever its `limit` asks (strfry's
    /// `maxFilterLimit` 500); `None`: as many as `limit` says, or all.
    pub max_limit: Option<usize>,
    /// The longest subscription id (strfry: 71, `MAX_SUBID_SIZE`; NIP-01 says 64).
    pub max_subscription_id: usize,
    /// The most filters in one REQ (strfry's `maxReqFilterSize` 200); `None`: no cap.
    pub max_filters: Option<usize>,
    /// Live deliveries are batched: subscribers are woken at most this often (strfry's
    /// 100 ms file-watcher debounce).
    pub delivery_batch: Option<Duration>,
    /// The message with `OK true` for an ephemeral event; `{n}` becomes the listener count.
    pub ok_message: String,
    /// Time the relay spends on each published event (verification, storage), one event at a
    /// time: it caps the relay's event rate. Zero for every built-in profile (no source gives
    /// a figure); scenarios set it as an assumption.
    pub processing: Duration,
    /// How the relay orders work between reading a message and acting on it.
    pub intake: Intake,
    /// Network behaviour between peers and this relay.
    pub impairments: Impairments,
    /// WebSocket pings, and when a silent connection is closed (live relays only: simulated
    /// peers always answer). `None`: the relay never pings nor closes a quiet connection.
    pub keepalive: Option<KeepAlive>,
}

/// How a relay pings its clients and closes the ones it no longer hears from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepAlive {
    /// A WebSocket ping to every connection this often (from the connection's start).
    pub ping_every: Duration,
    /// At a ping time, a connection not heard from for at least this long is closed (the
    /// socket dropped, no close frame) instead of pinged.
    pub silent_after: Duration,
    /// Only a pong counts as hearing from the client (khatru's read deadline, extended by
    /// its pong handler); otherwise any frame does (uWebSockets, nostr-rs-relay).
    pub pongs_only: bool,
    /// Pings go out on the relay's clock, every connection at once (`ping_every` after the
    /// relay started, and every `ping_every` after): a new connection's first ping comes
    /// within `ping_every`, at a moment it does not choose (uWebSockets' one timer for its
    /// group, strfry). Otherwise each connection's pings count from its own start.
    pub on_relay_clock: bool,
}

const KB: usize = 1024;

/// How a relay orders work between reading a client message and acting on it (answering,
/// storing, broadcasting). The source of relay-internal reordering; see `docs/physics.md`.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Intake {
    /// One message after another, in the order they arrived (events each taking the
    /// profile's `processing`): nothing overtakes.
    #[default]
    Serial,
    /// Each message handled by its own task, done after a drawn handling time plus a cost per
    /// KiB: a message can finish before one that arrived earlier (khatru starts a goroutine
    /// per message).
    Concurrent {
        /// Handling time of any message (scheduling, parsing, verifying).
        handling: super::impair::Delay,
        /// Extra time per KiB of message (hashing, parsing).
        per_kib: Duration,
    },
    /// Each connection's messages in arrival order, then one writer that commits accepted
    /// events in batches: everything queued since its last commit, sorted by
    /// `(created_at, id)`; a batch's OKs and broadcasts follow that order (strfry's
    /// `RelayWriter`, `writeEvents`). A commit takes `per_batch` plus `per_event` for each
    /// event in it.
    BatchCommit {
        /// Fixed cost of one commit (a database write transaction).
        per_batch: Duration,
        /// Extra cost per event in the batch.
        per_event: Duration,
    },
}

impl Intake {
    /// The `mode` names scenarios write.
    pub const MODES: [&'static str; 3] = ["serial", "concurrent", "batch-commit"];
}

impl RelayProfile {
    /// Whether a REQ may open a subscription called `sub`: not empty and within
    /// [`RelayProfile::max_subscription_id`].
    pub fn accepts_subscription_id(&self, sub: &str) -> bool {
        !sub.is_empty() && sub.len() <= self.max_subscription_id
    }

    /// A relay that accepts and broadcasts everything at once: the baseline.
    pub fn ideal() -> Self {
        RelayProfile {
            name: "ideal".into(),
            sources: "no relay: NIP-01 with no limits, no storage of ephemeral events, zero delay \
                      (behind `serve`, frames over 1 MiB meet relaysim's own bound: a NOTICE \
                      that says so, then the connection closes)"
                .into(),
            max_event_bytes: None,
            size_measure: SizeMeasure::EventJson,
            oversize: OversizeReaction::OkFalse("invalid: event too large: {size}".into()),
            max_message_bytes: None,
            frame_oversize: FrameOversizeReaction::Drop,
            ephemeral: EphemeralPolicy {
                store_for: None,
                expiry: StoreExpiry::AfterArrival,
                send_ok: true,
                mute_without_listener: false,
                reject_older_than: None,
            },
            reject_newer_than: None,
            allowed_kinds: None,
            refused_content: Vec::new(),
            rate_limit: None,
            max_subscriptions: 1000,
            max_limit: None,
            max_subscription_id: 64,
            max_filters: None,
            too_many_subscriptions_notice: None,
            refuses_subscription_after_replay: false,
            restricted_read_kinds: Vec::new(),
            duplicate_answer: (true, "duplicate: have this event".into()),
            store_regular: false,
            delivery_batch: None,
            ok_message: String::new(),
            processing: Duration::ZERO,
            intake: Intake::Serial,
            impairments: Impairments::none(),
            // No keepalive: the ideal relay never closes a connection.
            keepalive: None,
        }
    }

    /// strfry with its default configuration (hoytech/strfry @ f8a56a85).
    pub fn strfry() -> Self {
        RelayProfile {
            name: "strfry".into(),
            sources: "relays.md, strfry (measured on a running strfry f8a56a85 with `relaysim \
                      probe`, fixtures/probes/strfry-f8a56a8.json): maxEventSize 65536 on the \
                      re-normalised event (OK false \"invalid: event too large: N\"); \
                      maxWebsocketPayloadSize 131072 (connection dropped silently); ephemeral \
                      events stored until 300 s after their created_at, deleted by a sweep \
                      every 9 s that never deletes the newest event \
                      (fixtures/probes/strfry-expiry), re-sends answered \"duplicate: have \
                      this event\" and not re-broadcast, replayed to new REQs newest first; subscription ids up \
                      to 64 characters (CLOSED \"ERROR: bad req: invalid subscription id \
                      length\"); 200 subscriptions (the 201st gets its replay and EOSE, then \
                      NOTICE \"ERROR: too many concurrent REQs\"); kinds 4 and 1059 not read \
                      without NIP-42 AUTH (an AUTH challenge, then CLOSED \
                      \"ERROR: auth-required: ...\"); one writer \
                      commits what queued since its last commit sorted by (created_at, id), so \
                      a same-second burst from one connection is reordered, OKs too (commit \
                      0.75 ms + 0.15 ms per event, measured on loopback); live delivery with a \
                      100 ms debounce; a re-sent gift wrap (kind 1059, regular) answered \
                      \"duplicate: have this event\", and none sent to a REQ for kinds 1059 and \
                      25910 either; pings every 55 s on the relay's clock, a connection that \
                      answered none closed at the next tick. Read from source only: ephemeral \
                      older than 60 s rejected; created_at more than 900 s ahead rejected; \
                      regular events kept for good; the AUTH challenge sent only the first \
                      time a connection needs one (RelayIngester.cpp)"
                .into(),
            max_event_bytes: Some(64 * KB),
            size_measure: SizeMeasure::EventJson,
            oversize: OversizeReaction::OkFalse("invalid: event too large: {size}".into()),
            max_message_bytes: Some(128 * KB),
            frame_oversize: FrameOversizeReaction::Drop,
            ephemeral: EphemeralPolicy {
                store_for: Some(Duration::from_secs(300)),
                expiry: StoreExpiry::AfterCreatedAt {
                    sweep_every: Duration::from_secs(9),
                },
                send_ok: true,
                mute_without_listener: false,
                reject_older_than: Some(Duration::from_secs(60)),
            },
            reject_newer_than: Some(Duration::from_secs(900)),
            allowed_kinds: None,
            refused_content: Vec::new(),
            rate_limit: None,
            max_subscriptions: 200,
            // strfry.conf `maxFilterLimit`, `maxReqFilterSize`; src/constants.h MAX_SUBID_SIZE
            // (64 since c579e75, measured).
            max_limit: Some(500),
            max_subscription_id: 64,
            max_filters: Some(200),
            too_many_subscriptions_notice: Some("ERROR: too many concurrent REQs".into()),
            // RelayReqWorker answers the query, then ActiveMonitors::addSub refuses (measured).
            refuses_subscription_after_replay: true,
            // golpe.yaml `relay.auth.restrictedReadKinds` (measured: AUTH, then CLOSED).
            restricted_read_kinds: vec![4, 1059],
            duplicate_answer: (true, "duplicate: have this event".into()),
            // Measured: a re-sent gift wrap is answered `duplicate:` (so it was stored); that
            // strfry keeps every event that is not ephemeral for good is read from source.
            store_regular: true,
            delivery_batch: Some(Duration::from_millis(100)),
            ok_message: String::new(),
            processing: Duration::ZERO,
            // RelayWriter's pop_all and writeEvents' sort; the costs are the medians of
            // `relaysim probe` on loopback (publish->OK awaiting each OK 0.77-1.03 ms; 1,000
            // back-to-back events' last OK after 153 ms).
            intake: Intake::BatchCommit {
                per_batch: Duration::from_micros(750),
                per_event: Duration::from_micros(150),
            },
            impairments: Impairments::none(),
            // strfry.conf `relay.autoPingSeconds = 55`; its uWebSockets fork pings every
            // connection on that timer and terminates one whose pong is still outstanding
            // from the previous tick (any received data clears it).
            keepalive: Some(KeepAlive {
                ping_every: Duration::from_secs(55),
                silent_after: Duration::from_secs(55),
                pongs_only: false,
                // Measured on strfry f8a56a8: two connections opened 20 s apart got
                // their first pings 12 s and 47 s after connecting (fixtures/probes).
                on_relay_clock: true,
            }),
        }
    }

    /// relay.damus.io: strfry plus noteguard's rate limit of 6 events per minute per IP.
    pub fn damus() -> Self {
        RelayProfile {
            name: "damus".into(),
            sources: "relays.md: strfry (see that profile) with damus-io/noteguard's ratelimit \
                      filter per source IP (read from source @ e6566e6): 6 posts/min (the \
                      operator's figure, damus-io/damus#2616), OK false \"rate-limited: you \
                      note too much\" (noteguard's sample configuration); NIP-11 \
                      max_message_length 1,000,000"
                .into(),
            max_message_bytes: Some(1_000_000),
            rate_limit: Some(RateLimit {
                scope: RateScope::Ip,
                capacity: 6.0,
                refill_per_sec: 6.0 / 60.0,
                refill: Refill::WholeSeconds,
                action: RateAction::Reject("rate-limited: you note too much".into()),
            }),
            ..Self::strfry()
        }
    }

    /// nostr-rs-relay 0.8.12, the crates.io release.
    pub fn nostr_rs_relay() -> Self {
        RelayProfile {
            name: "nostr-rs-relay".into(),
            sources: "relays.md, nostr-rs-relay 0.8.12 (measured with `relaysim probe`, \
                      fixtures/probes/nostr-rs-relay-0.8.12.json): no OK at all for ephemeral \
                      events, a re-send delivered again; regular events (a kind-1059 gift wrap) \
                      stored: a re-send answered OK true \"duplicate: \", a new REQ gets them \
                      back; WebSocket message over 262144 \
                      (`2 << 17`, the default of max_ws_message_bytes and max_event_bytes): \
                      NOTICE \"message too large (N > M)\" and the connection drops; no \
                      subscription-id limit; 32 subscriptions per connection (NOTICE \
                      \"Subscription error: Maximum concurrent subscription count reached\"). \
                      Read from source only: max_event_bytes on the whole EVENT message \
                      (NOTICE \"event exceeded max size\", connection kept); ephemeral events \
                      live-only; messages_per_sec server-wide delays writes, never rejects"
                .into(),
            max_event_bytes: Some(256 * KB),
            size_measure: SizeMeasure::EventMessage,
            oversize: OversizeReaction::Notice("event exceeded max size".into()),
            max_message_bytes: Some(256 * KB),
            frame_oversize: FrameOversizeReaction::NoticeThenDrop(
                "message too large ({size} > {max})".into(),
            ),
            ephemeral: EphemeralPolicy {
                store_for: None,
                expiry: StoreExpiry::AfterArrival,
                send_ok: false,
                mute_without_listener: false,
                reject_older_than: None,
            },
            reject_newer_than: None,
            allowed_kinds: None,
            refused_content: Vec::new(),
            rate_limit: None,
            max_subscriptions: 32,
            max_limit: None,
            // Measured: 65 and 72 characters accepted.
            max_subscription_id: usize::MAX,
            max_filters: None,
            too_many_subscriptions_notice: Some(
                "Subscription error: Maximum concurrent subscription count reached".into(),
            ),
            refuses_subscription_after_replay: false,
            restricted_read_kinds: Vec::new(),
            // Measured on a gift wrap (kind 1059) sent again; ephemeral events are not stored.
            duplicate_answer: (true, "duplicate: ".into()),
            store_regular: true,
            delivery_batch: None,
            ok_message: String::new(),
            processing: Duration::ZERO,
            intake: Intake::Serial,
            impairments: Impairments::none(),
            // src/server.rs: a ping every `network.ping_interval_seconds` (300 by default);
            // at a ping time, a client silent (no frame of any kind) for over 20 minutes
            // is disconnected.
            keepalive: Some(KeepAlive {
                ping_every: Duration::from_secs(300),
                silent_after: Duration::from_secs(20 * 60),
                pongs_only: false,
                on_relay_clock: false,
            }),
        }
    }

    /// nostr-rs-relay 0.9.0, the tagged release after 0.8.12 (not on crates.io): ephemeral
    /// events get an OK, everything else is 0.8.12's.
    pub fn nostr_rs_relay_0_9() -> Self {
        RelayProfile {
            name: "nostr-rs-relay-0.9".into(),
            sources: "nostr-rs-relay 0.9.0 (tag at ff65ec2; the ephemeral OK from a7b169c), built \
                      from source and measured \
                      with `relaysim probe` (fixtures/probes/nostr-rs-relay-0.9.0.json): \
                      ephemeral events answered OK true \"\" and a re-send delivered again; \
                      every other answer as 0.8.12's (see nostr-rs-relay: sizes, texts, \
                      subscription limits, bursts, gift-wrap storage and its duplicate answer \
                      measured the same)"
                .into(),
            ephemeral: EphemeralPolicy {
                send_ok: true,
                ..Self::nostr_rs_relay().ephemeral
            },
            ..Self::nostr_rs_relay()
        }
    }

    /// nostr-rs-relay with `messages_per_sec` set (server-wide; writes are delayed).
    pub fn nostr_rs_relay_rate(messages_per_sec: f64) -> Self {
        RelayProfile {
            name: "nostr-rs-relay-rate".into(),
            rate_limit: Some(RateLimit {
                scope: RateScope::Server,
                capacity: messages_per_sec.max(1.0),
                refill_per_sec: messages_per_sec,
                refill: Refill::Smooth,
                action: RateAction::Delay,
            }),
            ..Self::nostr_rs_relay()
        }
    }

    /// khatru with no policies (fiatjaf/khatru @ 9f99b98).
    pub fn khatru() -> Self {
        RelayProfile {
            name: "khatru".into(),
            sources: "relays.md, khatru @ 9f99b98 (read from source): read limit 512000 bytes \
                      (connection closed, code 1009, no NOTICE); no rate limit; no subscription \
                      or subscription-id limit; ephemeral with no listener and no \
                      OnEphemeralEvent hook: OK false \"mute: no one was listening for this\", \
                      otherwise OK true \"broadcasted to N listeners\"; no storage, no \
                      de-duplication; each incoming message handled in its own goroutine, so \
                      answers and broadcasts of pipelined messages can come out of order \
                      (modelled as a concurrent intake: 50-300 us + 5 us/KiB, inferred)"
                .into(),
            max_event_bytes: None,
            size_measure: SizeMeasure::EventJson,
            oversize: OversizeReaction::OkFalse("invalid: event too large".into()),
            max_message_bytes: Some(512_000),
            frame_oversize: FrameOversizeReaction::Drop,
            ephemeral: EphemeralPolicy {
                store_for: None,
                expiry: StoreExpiry::AfterArrival,
                send_ok: true,
                mute_without_listener: true,
                reject_older_than: None,
            },
            reject_newer_than: None,
            allowed_kinds: None,
            refused_content: Vec::new(),
            rate_limit: None,
            // addListener appends with no count and go-nostr takes any id: neither is limited.
            max_subscriptions: usize::MAX,
            max_limit: None,
            max_subscription_id: usize::MAX,
            max_filters: None,
            too_many_subscriptions_notice: None,
            refuses_subscription_after_replay: false,
            restricted_read_kinds: Vec::new(),
            duplicate_answer: (true, "duplicate: have this event".into()),
            store_regular: false,
            delivery_batch: None,
            ok_message: "broadcasted to {n} listeners".into(),
            processing: Duration::ZERO,
            // handleMessage runs in its own goroutine per incoming message: parsing, id and
            // signature checks (~70 us), policies and the broadcast race with the next
            // message's. The magnitude is inferred from the costs, not measured on khatru.
            intake: Intake::Concurrent {
                handling: super::impair::Delay::Uniform {
                    min: Duration::from_micros(50),
                    max: Duration::from_micros(300),
                },
                per_kib: Duration::from_micros(5),
            },
            impairments: Impairments::none(),
            // relay.go: PingPeriod 30 s, PongWait 60 s; handlers.go sets a read deadline of
            // PongWait that only the pong handler extends, so a client that stops answering
            // pings is closed however much else it sends (checked here at ping times: closed
            // 60 to 90 s after its last pong, where khatru closes at 60 s).
            keepalive: Some(KeepAlive {
                ping_every: Duration::from_secs(30),
                silent_after: Duration::from_secs(60),
                pongs_only: true,
                on_relay_clock: false,
            }),
        }
    }

    /// khatru after `ApplySaneDefaults`: a per-IP event bucket of 10, refilled by 2 every 3 min.
    pub fn khatru_sane_defaults() -> Self {
        RelayProfile {
            name: "khatru-sane-defaults".into(),
            sources: "relays.md, khatru ApplySaneDefaults (read from source @ 9f99b98): content \
                      holding data:image/ or data:video/ refused, OK false \"blocked: event with \
                      base64 media\"; then a per-IP event bucket of 10 given 2 back every 3 \
                      minutes by one relay-wide timer, OK false \"rate-limited: slow down, \
                      please\" (the filter, complex-filter and connection limiters are not \
                      modelled)"
                .into(),
            refused_content: vec![ContentRefusal {
                containing: vec!["data:image/".into(), "data:video/".into()],
                message: "blocked: event with base64 media".into(),
            }],
            rate_limit: Some(RateLimit {
                scope: RateScope::Ip,
                capacity: 10.0,
                refill_per_sec: 2.0 / 180.0,
                refill: Refill::Ticks {
                    every: Duration::from_secs(180),
                },
                action: RateAction::Reject("rate-limited: slow down, please".into()),
            }),
            ..Self::khatru()
        }
    }

    /// rust-nostr's nostr-relay-builder 0.44.1 LocalRelay.
    pub fn relay_builder() -> Self {
        RelayProfile {
            name: "relay-builder".into(),
            sources: "relays.md, nostr-relay-builder 0.44.1: per-connection notes_per_minute 60 \
                      (OK false \"rate-limited: slow down\"); no event size limit (tungstenite's \
                      64 MiB message limit); ephemeral OK true \"\", not stored, not \
                      de-duplicated; regular events (a kind-1059 gift wrap) stored, a re-send \
                      answered OK true \"duplicate: already have this event\" (measured with \
                      `relaysim probe` on the in-process LocalRelay); max_reqs 500"
                .into(),
            max_event_bytes: None,
            size_measure: SizeMeasure::EventJson,
            oversize: OversizeReaction::OkFalse("invalid: event too large".into()),
            max_message_bytes: Some(64 * KB * KB),
            frame_oversize: FrameOversizeReaction::Drop,
            ephemeral: EphemeralPolicy {
                store_for: None,
                expiry: StoreExpiry::AfterArrival,
                send_ok: true,
                mute_without_listener: false,
                reject_older_than: None,
            },
            reject_newer_than: None,
            allowed_kinds: None,
            refused_content: Vec::new(),
            rate_limit: Some(RateLimit {
                scope: RateScope::Connection,
                capacity: 60.0,
                refill_per_sec: 1.0,
                refill: Refill::WholeSeconds,
                action: RateAction::Reject("rate-limited: slow down".into()),
            }),
            max_subscriptions: 500,
            max_limit: None,
            // Measured with `relaysim probe` against the real LocalRelay: 65 and 72 accepted.
            max_subscription_id: usize::MAX,
            max_filters: None,
            too_many_subscriptions_notice: None,
            refuses_subscription_after_replay: false,
            restricted_read_kinds: Vec::new(),
            // Measured on a gift wrap (kind 1059) sent again; ephemeral events are not stored.
            duplicate_answer: (true, "duplicate: already have this event".into()),
            store_regular: true,
            delivery_batch: None,
            ok_message: String::new(),
            processing: Duration::ZERO,
            intake: Intake::Serial,
            impairments: Impairments::none(),
            // nostr-relay-builder 0.44 never pings and has no idle timeout (its
            // connection loop only answers pings).
            keepalive: None,
        }
    }

    /// The Python `nostr-relay` 1.14 (PyPI) with its packaged configuration.
    pub fn nostr_relay_py() -> Self {
        RelayProfile {
            name: "nostr-relay-py".into(),
            sources: "relays.md, Python nostr-relay 1.14 (measured with `relaysim probe`, \
                      fixtures/probes/nostr-relay-py-1.14.json): ephemeral events OK true \"\" and \
                      stored (replayed to new REQs newest first; read from source: deleted by a \
                      300 s garbage collection); regular events (a kind-1059 gift wrap) stored and \
                      replayed; a re-send OK false \"duplicate: exists\"; \
                      max_event_size 4096 characters of content (OK false \"invalid: 280 \
                      characters should be enough for anybody\"); no subscription-id limit; \
                      32 subscriptions (NOTICE \"rejected: too many subscriptions\", no EOSE); \
                      every burst in order. Read from source only: events more than 1 h ahead \
                      rejected; 16 MiB messages (uvicorn); idle connections closed after \
                      1800 s; a rejected event doubles a delay on its connection (not modelled); \
                      error OKs carry an empty event id (not modelled)"
                .into(),
            max_event_bytes: Some(4096),
            size_measure: SizeMeasure::ContentChars,
            oversize: OversizeReaction::OkFalse(
                "invalid: 280 characters should be enough for anybody".into(),
            ),
            max_message_bytes: Some(16 * KB * KB),
            frame_oversize: FrameOversizeReaction::Drop,
            ephemeral: EphemeralPolicy {
                store_for: Some(Duration::from_secs(300)),
                expiry: StoreExpiry::AfterArrival,
                send_ok: true,
                mute_without_listener: false,
                reject_older_than: None,
            },
            reject_newer_than: Some(Duration::from_secs(3600)),
            allowed_kinds: None,
            refused_content: Vec::new(),
            rate_limit: None,
            max_subscriptions: 32,
            max_limit: Some(6000),
            max_subscription_id: usize::MAX,
            max_filters: None,
            too_many_subscriptions_notice: Some("rejected: too many subscriptions".into()),
            refuses_subscription_after_replay: false,
            restricted_read_kinds: Vec::new(),
            duplicate_answer: (false, "duplicate: exists".into()),
            store_regular: true,
            delivery_batch: None,
            ok_message: String::new(),
            processing: Duration::ZERO,
            intake: Intake::Serial,
            impairments: Impairments::none(),
            keepalive: Some(KeepAlive {
                ping_every: Duration::from_secs(1800),
                silent_after: Duration::from_secs(1800),
                pongs_only: false,
                on_relay_clock: false,
            }),
        }
    }

    /// strfry seen from a phone on a mobile network: a WebSocket over a radio link, so
    /// heavy-tailed head-of-line delay, limited bandwidth and frequent connection drops —
    /// not single lost or reordered messages, which TCP does not produce.
    pub fn mobile() -> Self {
        use super::impair::{Delay, Direction, Outages};
        let jitter = Delay::LogNormal {
            median: Duration::from_millis(60),
            sigma: 0.8,
        };
        RelayProfile {
            name: "mobile".into(),
            sources: "strfry semantics (see that profile) behind a modelled mobile link: \
                      per-connection in-order delivery with lognormal head-of-line delay \
                      (median 60 ms, sigma 0.8), 2 MB/s down and 512 KiB/s up, and the \
                      connection dropping about every 2 minutes (radio handover, NAT timeout, \
                      app backgrounded) for 1-10 s. The figures are an assumption, not a \
                      measurement; see docs/physics.md"
                .into(),
            impairments: Impairments {
                peer_to_relay: Direction {
                    delay: jitter.clone(),
                    bandwidth: Some(512 * 1024),
                    ..Default::default()
                },
                relay_to_peer: Direction {
                    delay: jitter,
                    bandwidth: Some(2_000_000),
                    ..Default::default()
                },
                outages: Outages {
                    connection_drop_every: Some(Duration::from_secs(120)),
                    connection_down_for: (Duration::from_secs(1), Duration::from_secs(10)),
                    ..Outages::default()
                },
            },
            ..Self::strfry()
        }
    }

    /// The names of the built-in profiles.
    pub const BUILT_IN: [&'static str; 10] = [
        "ideal",
        "strfry",
        "damus",
        "nostr-rs-relay",
        "nostr-rs-relay-0.9",
        "khatru",
        "khatru-sane-defaults",
        "relay-builder",
        "nostr-relay-py",
        "mobile",
    ];

    /// Built-in profiles that are another version of a relay in [`Self::FAMILIES`], each with
    /// the profile it is a version of.
    pub const VERSIONS: [(&'static str, &'static str); 1] =
        [("nostr-rs-relay-0.9", "nostr-rs-relay")];

    /// One built-in profile per relay: every built-in profile but the [`Self::VERSIONS`]. The
    /// soak draws from these. A version differs from its relay's profile only in knobs other
    /// drawn profiles already exercise (nostr-rs-relay 0.9's OK for ephemeral events is
    /// strfry's and relay-builder's), so drawing it would add no mechanism, and it would
    /// change every run of every soak seed whose figures the documents give.
    pub const FAMILIES: [&'static str; 9] = [
        "ideal",
        "strfry",
        "damus",
        "nostr-rs-relay",
        "khatru",
        "khatru-sane-defaults",
        "relay-builder",
        "nostr-relay-py",
        "mobile",
    ];

    /// A built-in profile by name.
    pub fn built_in(name: &str) -> Option<Self> {
        Some(match name {
            "ideal" => Self::ideal(),
            "strfry" => Self::strfry(),
            "damus" => Self::damus(),
            "nostr-rs-relay" => Self::nostr_rs_relay(),
            "nostr-rs-relay-0.9" => Self::nostr_rs_relay_0_9(),
            "khatru" => Self::khatru(),
            "khatru-sane-defaults" => Self::khatru_sane_defaults(),
            "relay-builder" => Self::relay_builder(),
            "nostr-relay-py" => Self::nostr_relay_py(),
            "mobile" => Self::mobile(),
            _ => return None,
        })
    }
}
