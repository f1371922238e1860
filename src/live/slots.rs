//! The connection slots of one relay, shared fairly between addresses.
//!
//! A relay takes at most `max_connections` sockets, and one address at most a quarter of them.
//! That alone leaves the door open to a handful of addresses: ten of them, each within its
//! quarter, can hold every slot with sockets that only answer pings, and every fresh client
//! gets 429 for as long as they do. So when the slots are full, a fresh client takes the slot
//! of an idle socket of the address holding the most slots (more than the newcomer's address
//! would): idle is upgraded, never having subscribed, and silent (pongs aside) for at least
//! [`IDLE_FOR`]; the longest silent goes first. A socket that subscribed, or that publishes,
//! keeps its slot, and an address with no more slots than the newcomer's gives none up.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// How long a socket must have been silent to be idle.
pub(crate) const IDLE_FOR: Duration = Duration::from_secs(1);
/// How long a fresh client waits for an evicted socket's slot before it is refused.
const EVICTION_WAIT: Duration = Duration::from_secs(2);

/// What a connection's task tells its slot, and how the slot tells it to go.
#[derive(Debug)]
pub(crate) struct Activity {
    origin: Instant,
    /// Milliseconds from `origin` when the client last sent a frame other than a pong.
    last_heard_ms: AtomicU64,
    subscribed: AtomicBool,
    /// The WebSocket handshake finished: only then does the socket listen for eviction.
    upgraded: AtomicBool,
    evicted: Notify,
}

impl Activity {
    fn new(origin: Instant) -> Self {
        Activity {
            origin,
            last_heard_ms: AtomicU64::new(origin.elapsed().as_millis() as u64),
            subscribed: AtomicBool::new(false),
            upgraded: AtomicBool::new(false),
            evicted: Notify::new(),
        }
    }

    /// The client sent a frame (`req`: a REQ, after which the socket is never idle).
    pub(crate) fn heard(&self, req: bool) {
        self.last_heard_ms
            .store(self.origin.elapsed().as_millis() as u64, Ordering::Relaxed);
        if req {
            self.subscribed.store(true, Ordering::Relaxed);
        }
    }

    /// The socket is upgraded: from now on it can be told to go, and its silence counts.
    pub(crate) fn upgraded(&self) {
        self.heard(false);
        self.upgraded.store(true, Ordering::Relaxed);
    }

    /// Resolves when a fresh client took this socket's slot.
    pub(crate) async fn evicted(&self) {
        self.evicted.notified().await
    }

    fn idle_since(&self, now_ms: u64) -> Option<u64> {
        let last = self.last_heard_ms.load(Ordering::Relaxed);
        let idle = self.upgraded.load(Ordering::Relaxed)
            && !self.subscribed.load(Ordering::Relaxed)
            && now_ms.saturating_sub(last) >= IDLE_FOR.as_millis() as u64;
        idle.then_some(last)
    }
}

struct Entry {
    ip: IpAddr,
    activity: Arc<Activity>,
    /// Already told to go (a second newcomer picks another).
    evicting: bool,
}

#[derive(Default)]
struct State {
    per_address: BTreeMap<IpAddr, usize>,
    conns: BTreeMap<u64, Entry>,
    next: u64,
}

/// One relay's slots.
pub(crate) struct Slots {
    permits: Arc<Semaphore>,
    share: usize,
    origin: Instant,
    state: Arc<Mutex<State>>,
}

/// A connection's slot, given back when dropped.
pub(crate) struct Slot {
    _permit: OwnedSemaphorePermit,
    id: u64,
    ip: IpAddr,
    state: Arc<Mutex<State>>,
    /// What its connection's task reports, and how it learns it was evicted.
    pub(crate) activity: Arc<Activity>,
}

/// Whether a fresh connection gets a slot.
pub(crate) enum Admission {
    /// It has one.
    Now(Slot),
    /// An idle socket was told to go; its slot comes within [`EVICTION_WAIT`], or not at all.
    AfterEviction(std::pin::Pin<Box<dyn std::future::Future<Output = Option<Slot>> + Send>>),
    /// It is refused, and why.
    Refused(&'static str),
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl Slots {
    /// `max` slots, a quarter of them (at least one) per address.
    pub(crate) fn new(max: usize) -> Self {
        Slots {
            permits: Arc::new(Semaphore::new(max)),
            share: (max / 4).max(1),
            origin: Instant::now(),
            state: Arc::default(),
        }
    }

    /// A slot for a fresh connection from `ip`.
    pub(crate) fn admit(&self, ip: IpAddr) -> Admission {
        let mut state = lock(&self.state);
        let held = state.per_address.get(&ip).copied().unwrap_or(0);
        if held >= self.share {
            return Admission::Refused("too many connections from this address\n");
        }
        if let Ok(permit) = self.permits.clone().try_acquire_owned() {
            return Admission::Now(self.register(&mut state, ip, permit));
        }
        let Some(victim) = self.victim(&state, held) else {
            return Admission::Refused("too many connections\n");
        };
        let entry = state.conns.get_mut(&victim).expect("picked from the map");
        entry.evicting = true;
        entry.activity.evicted.notify_one();
        // The newcomer's address counts the slot now, so its share holds while it waits; the
        // count goes back if it gives up (or its wait is dropped).
        *state.per_address.entry(ip).or_default() += 1;
        drop(state);
        let mut hold = AddressHold {
            state: self.state.clone(),
            ip,
            kept: false,
        };
        let (permits, origin) = (self.permits.clone(), self.origin);
        Admission::AfterEviction(Box::pin(async move {
            let permit = tokio::time::timeout(EVICTION_WAIT, permits.acquire_owned()).await;
            let permit = permit.ok()?.ok()?;
            hold.kept = true;
            let state = hold.state.clone();
            let mut guard = lock(&state);
            Some(register(&state, &mut guard, origin, ip, permit))
        }))
    }

    /// The socket to evict for a newcomer whose address holds `held` slots: the longest idle
    /// one of the address holding the most slots, if that is more than `held + 1`.
    fn victim(&self, state: &State, held: usize) -> Option<u64> {
        let now_ms = self.origin.elapsed().as_millis() as u64;
        let mut best: Option<(usize, std::cmp::Reverse<u64>, std::cmp::Reverse<u64>)> = None;
        for (id, entry) in &state.conns {
            let count = state.per_address.get(&entry.ip).copied().unwrap_or(0);
            if entry.evicting || count <= held + 1 {
                continue;
            }
            let Some(since) = entry.activity.idle_since(now_ms) else {
                continue;
            };
            // The most slots, then the longest silent, then the first opened.
            let key = (count, std::cmp::Reverse(since), std::cmp::Reverse(*id));
            if best.as_ref().is_none_or(|b| key > *b) {
                best = Some(key);
            }
        }
        best.map(|(_, _, id)| id.0)
    }

    fn register(&self, state: &mut State, ip: IpAddr, permit: OwnedSemaphorePermit) -> Slot {
        *state.per_address.entry(ip).or_default() += 1;
        register(&self.state, state, self.origin, ip, permit)
    }
}

/// Enters a connection whose address was counted already.
fn register(
    shared: &Arc<Mutex<State>>,
    state: &mut State,
    origin: Instant,
    ip: IpAddr,
    permit: OwnedSemaphorePermit,
) -> Slot {
    state.next += 1;
    let id = state.next;
    let activity = Arc::new(Activity::new(origin));
    state.conns.insert(
        id,
        Entry {
            ip,
            activity: activity.clone(),
            evicting: false,
        },
    );
    Slot {
        _permit: permit,
        id,
        ip,
        state: shared.clone(),
        activity,
    }
}

/// An address's count of a slot not yet had, given back when dropped.
struct AddressHold {
    state: Arc<Mutex<State>>,
    ip: IpAddr,
    /// The slot was had: the count stays, with the connection's [`Slot`].
    kept: bool,
}

impl Drop for AddressHold {
    fn drop(&mut self) {
        if !self.kept {
            release_address(&mut lock(&self.state), self.ip);
        }
    }
}

fn release_address(state: &mut State, ip: IpAddr) {
    if let Some(n) = state.per_address.get_mut(&ip) {
        *n -= 1;
        if *n == 0 {
            state.per_address.remove(&ip);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut state = lock(&self.state);
        state.conns.remove(&self.id);
        release_address(&mut state, self.ip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    fn now(admission: Admission) -> Slot {
        match admission {
            Admission::Now(slot) => slot,
            _ => panic!("no slot at once"),
        }
    }

    fn refused(admission: Admission) -> &'static str {
        match admission {
            Admission::Refused(why) => why,
            _ => panic!("admitted"),
        }
    }

    fn told_to_go(slots: &Slots) -> Vec<u64> {
        let state = lock(&slots.state);
        state
            .conns
            .iter()
            .filter(|(_, e)| e.evicting)
            .map(|(id, _)| *id)
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn only_a_socket_idle_long_enough_of_an_address_holding_more_gives_its_slot_up() {
        let slots = Slots::new(8); // two per address
        let mut held = Vec::new();
        for address in 1..=4 {
            for _ in 0..2 {
                held.push(now(slots.admit(ip(address))));
            }
        }
        for slot in &held[..7] {
            slot.activity.upgraded();
        }
        // Address 1's sockets subscribed; the others never sent a REQ.
        held[0].activity.heard(true);
        held[1].activity.heard(true);
        assert!(refused(slots.admit(ip(1))).contains("address"));
        // Nobody has been silent for IDLE_FOR yet.
        assert_eq!(refused(slots.admit(ip(9))), "too many connections\n");
        tokio::time::advance(IDLE_FOR / 2).await;
        held[2].activity.heard(false); // address 2's first socket publishes
        tokio::time::advance(IDLE_FOR / 2).await;
        let Admission::AfterEviction(wait) = slots.admit(ip(9)) else {
            panic!("nobody was told to go")
        };
        // The first-opened of the sockets silent since they opened: address 2's second (the
        // last socket never finished its handshake, so it is never picked).
        assert_eq!(told_to_go(&slots), vec![held[3].id]);
        drop(held.remove(3));
        let slot = wait.await.expect("the evicted socket's slot");
        assert_eq!(slot.ip, ip(9));
        // A newcomer from an address with none takes one from an address holding two; one
        // from an address holding one takes nothing from an address holding two.
        let Admission::AfterEviction(_) = slots.admit(ip(10)) else {
            panic!("address 3 holds two, address 10 none: one of 3's goes")
        };
        assert_eq!(refused(slots.admit(ip(9))), "too many connections\n");
    }

    #[tokio::test(start_paused = true)]
    async fn a_newcomer_whose_slot_never_frees_is_refused_and_its_address_released() {
        let slots = Slots::new(4); // one per address
        let held: Vec<Slot> = (1..=4).map(|a| now(slots.admit(ip(a)))).collect();
        held.iter().for_each(|s| s.activity.upgraded());
        tokio::time::advance(IDLE_FOR).await;
        // Held by one socket each: no address holds more than a newcomer's would.
        assert_eq!(refused(slots.admit(ip(9))), "too many connections\n");
        drop(held);
        assert!(matches!(slots.admit(ip(9)), Admission::Now(_)));
        let slots = Slots::new(8);
        let held: Vec<Slot> = [1, 1, 2, 2, 3, 3, 4, 4]
            .into_iter()
            .map(|a| now(slots.admit(ip(a))))
            .collect();
        // Sockets still in their handshake are never idle.
        tokio::time::advance(IDLE_FOR).await;
        assert_eq!(refused(slots.admit(ip(9))), "too many connections\n");
        held.iter().for_each(|s| s.activity.upgraded());
        tokio::time::advance(IDLE_FOR).await;
        let Admission::AfterEviction(wait) = slots.admit(ip(9)) else {
            panic!("nobody was told to go")
        };
        // The socket told to go never lets go (its task is stuck): the newcomer gives up.
        assert!(wait.await.is_none());
        assert_eq!(lock(&slots.state).per_address.get(&ip(9)), None);
    }
}
