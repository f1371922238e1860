//! CEP-41 keepalive, shared by writer and session: idle timer, ping with a unique nonce,
//! probe timer, pong matching.
//!
//! Any valid frame from the peer resets the idle timer ([`Keepalive::heard`]). When the timer
//! runs out the peer is probed with a `ping`; only a `pong` carrying the outstanding nonce
//! satisfies the probe. Unknown, duplicate, expired or already-satisfied nonces are not liveness
//! evidence and do not reset anything. No matching `pong` before the probe timeout fails the
//! stream.

use std::time::Duration;

/// What the owner of a keepalive must do after a timeout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeepaliveAction {
    /// Nothing is due.
    Nothing,
    /// Send a `ping` with this nonce.
    Ping(String),
    /// The probe went unanswered: fail the stream.
    ProbeTimedOut,
}

/// The keepalive state of one stream endpoint.
#[derive(Debug, Clone)]
pub(crate) struct Keepalive {
    idle_timeout: Duration,
    probe_timeout: Duration,
    last_heard: Duration,
    probe: Option<(String, Duration)>,
    pings_sent: u64,
}

impl Keepalive {
    /// A keepalive that starts counting at `now`.
    pub(crate) fn new(idle_timeout: Duration, probe_timeout: Duration, now: Duration) -> Self {
        Keepalive {
            idle_timeout,
            probe_timeout,
            last_heard: now,
            probe: None,
            pings_sent: 0,
        }
    }

    /// A valid frame arrived from the peer.
    pub(crate) fn heard(&mut self, now: Duration) {
        self.last_heard = self.last_heard.max(now);
    }

    /// A `pong` arrived; true if it answered the outstanding probe (and so counts as liveness).
    pub(crate) fn pong(&mut self, nonce: &str, now: Duration) -> bool {
        match &self.probe {
            Some((outstanding, deadline)) if outstanding == nonce && now < *deadline => {
                self.probe = None;
                self.heard(now);
                true
            }
            _ => false,
        }
    }

    /// The nonce of the outstanding probe, if any.
    pub(crate) fn outstanding(&self) -> Option<&str> {
        self.probe.as_ref().map(|(n, _)| n.as_str())
    }

    /// When [`Keepalive::on_timeout`] next has work.
    pub(crate) fn poll_timeout(&self) -> Duration {
        match &self.probe {
            Some((_, deadline)) => *deadline,
            None => self.last_heard + self.idle_timeout,
        }
    }

    /// Advances the timers to `now`.
    pub(crate) fn on_timeout(&mut self, now: Duration) -> KeepaliveAction {
        match &self.probe {
            Some((_, deadline)) if now >= *deadline => KeepaliveAction::ProbeTimedOut,
            Some(_) => KeepaliveAction::Nothing,
            None if now >= self.last_heard + self.idle_timeout => {
                self.pings_sent += 1;
                // Short, unique within the stream, far below the 64-byte limit.
                let nonce = format!("ka{}", self.pings_sent);
                self.probe = Some((nonce.clone(), now + self.probe_timeout));
                KeepaliveAction::Ping(nonce)
            }
            None => KeepaliveAction::Nothing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn idle_timeout_sends_a_ping_with_a_unique_nonce() {
        let mut k = Keepalive::new(S(30), S(20), S(0));
        assert_eq!(k.poll_timeout(), S(30));
        assert_eq!(k.on_timeout(S(29)), KeepaliveAction::Nothing);
        let KeepaliveAction::Ping(n1) = k.on_timeout(S(30)) else {
            panic!()
        };
        assert!(k.pong(&n1, S(31)));
        let KeepaliveAction::Ping(n2) = k.on_timeout(S(61)) else {
            panic!()
        };
        assert_ne!(n1, n2);
        assert!(n2.len() <= 64);
    }

    #[test]
    fn activity_resets_the_idle_timer() {
        let mut k = Keepalive::new(S(30), S(20), S(0));
        k.heard(S(25));
        assert_eq!(k.on_timeout(S(30)), KeepaliveAction::Nothing);
        assert_eq!(k.poll_timeout(), S(55));
    }

    #[test]
    fn unknown_duplicate_and_expired_pongs_are_not_liveness() {
        let mut k = Keepalive::new(S(30), S(20), S(0));
        let KeepaliveAction::Ping(n) = k.on_timeout(S(30)) else {
            panic!()
        };
        assert!(!k.pong("other", S(31)), "unknown nonce");
        assert!(k.pong(&n, S(32)));
        assert!(!k.pong(&n, S(33)), "already satisfied");
        let KeepaliveAction::Ping(n2) = k.on_timeout(S(62)) else {
            panic!()
        };
        assert!(
            !k.pong(&n2, S(82)),
            "expired: the probe deadline has passed"
        );
        assert_eq!(k.on_timeout(S(82)), KeepaliveAction::ProbeTimedOut);
    }
}
