//! Request memory: the bytes of requests being read or waiting for their
//! response, Kafka's memory pool (`queued.max.request.bytes`), shared so that
//! no connection and no client address can stall the others.
//!
//! Each chunk of a frame is charged, in this order, to:
//!
//! 1. its connection, which may hold at most `socket.request.max.bytes`;
//! 2. for a small frame (up to [`ALLOWANCE`], or [`PRE_AUTH_ALLOWANCE`]
//!    before the client has authenticated), the connection's own allowance
//!    when it is free, outside the pools: metadata, heartbeats, commits and
//!    logins are read whatever the pools hold;
//! 3. otherwise its source (the client's IP address) and then a pool: the
//!    main pool of `queued.max.request.bytes` (P), of which one source may
//!    hold a quarter (at least one request of `socket.request.max.bytes`);
//!    before authentication (a SASL listener before the SASL exchange ends)
//!    a separate pre-authentication pool U of P/16 (at least four frames of
//!    `sasl.server.max.receive.size`), a quarter of it per source.
//!
//! Memory held by requests is bounded by P + U + 64 KiB per open connection
//! (at most `max.connections`); an unauthenticated connection holds at most
//! 8 KiB outside U. Fairness: a source that stalls its requests stalls only
//! itself once it holds its share, so fewer than four busy sources never
//! delay another's requests of any size, and no number of them delays a
//! connection's small requests. Stalled frames are closed after
//! `socket.request.receive.timeout.ms` (see [`super::frame`]), which gives
//! their memory back.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The largest frame a connection's allowance takes: a follower's fetch of
/// a couple of thousand partitions, any metadata request or commit.
pub(crate) const ALLOWANCE: usize = 64 * 1024;

/// The largest frame the allowance takes before authentication: every SASL
/// message but the largest OAUTHBEARER tokens, which use the pre-auth pool.
pub(crate) const PRE_AUTH_ALLOWANCE: usize = 8 * 1024;

/// One source may hold this fraction of a pool.
const SOURCE_FRACTION: usize = 4;

/// The pre-authentication pool is this fraction of the main pool.
const PRE_AUTH_FRACTION: usize = 16;

/// Whether the client has proved who it is, which decides the pool its
/// requests draw on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// A SASL listener before the SASL exchange has completed.
    PreAuth,
    /// Any other connection.
    Authenticated,
}

/// The sizes of the budgets, in bytes, derived from the configs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sizes {
    pub(crate) pool: usize,
    pub(crate) source_share: usize,
    pub(crate) pre_auth_pool: usize,
    pub(crate) pre_auth_source_share: usize,
    pub(crate) connection: usize,
}

impl Sizes {
    /// From `queued.max.request.bytes`, `socket.request.max.bytes` and
    /// `sasl.server.max.receive.size`. A source's share always fits the
    /// largest frame it may send, else that frame could never be read.
    pub(crate) fn new(queued: usize, largest: usize, largest_pre_auth: usize) -> Self {
        let pool = queued.max(1);
        let largest = largest.clamp(1, pool);
        let largest_pre_auth = largest_pre_auth.clamp(1, largest);
        let pre_auth_pool = (pool / PRE_AUTH_FRACTION)
            .max(largest_pre_auth.saturating_mul(SOURCE_FRACTION))
            .min(pool);
        Self {
            pool,
            source_share: (pool / SOURCE_FRACTION).max(largest),
            pre_auth_pool,
            pre_auth_source_share: (pre_auth_pool / SOURCE_FRACTION).max(largest_pre_auth),
            connection: largest,
        }
    }
}

/// The broker's request memory, shared by every listener.
#[derive(Debug)]
pub(crate) struct RequestMemory {
    sizes: Sizes,
    pool: Arc<Semaphore>,
    pre_auth_pool: Arc<Semaphore>,
    /// The shares of the sources with a connection open.
    sources: Mutex<HashMap<IpAddr, Source>>,
}

#[derive(Debug)]
struct Source {
    connections: usize,
    share: Arc<Semaphore>,
    pre_auth_share: Arc<Semaphore>,
}

impl RequestMemory {
    pub(crate) fn new(sizes: Sizes) -> Self {
        Self {
            sizes,
            pool: Arc::new(Semaphore::new(sizes.pool)),
            pre_auth_pool: Arc::new(Semaphore::new(sizes.pre_auth_pool)),
            sources: Mutex::new(HashMap::new()),
        }
    }

    /// The budgets of a new connection from `source` (`None`: unknown, it
    /// shares with nobody).
    pub(crate) fn connection(self: &Arc<Self>, source: Option<IpAddr>) -> ConnectionMemory {
        let sizes = self.sizes;
        let new_shares = || {
            (
                Arc::new(Semaphore::new(sizes.source_share)),
                Arc::new(Semaphore::new(sizes.pre_auth_source_share)),
            )
        };
        let (share, pre_auth_share) = match source {
            Some(address) => {
                let mut sources = self.sources.lock();
                let source = sources.entry(address).or_insert_with(|| {
                    let (share, pre_auth_share) = new_shares();
                    Source {
                        connections: 0,
                        share,
                        pre_auth_share,
                    }
                });
                source.connections += 1;
                (source.share.clone(), source.pre_auth_share.clone())
            }
            None => new_shares(),
        };
        ConnectionMemory {
            memory: self.clone(),
            source,
            own: Arc::new(Semaphore::new(sizes.connection)),
            allowance: Arc::new(Semaphore::new(ALLOWANCE)),
            share,
            pre_auth_share,
        }
    }

    /// Bytes of the main and the pre-authentication pool free now.
    #[cfg(test)]
    fn available(&self) -> (usize, usize) {
        (
            self.pool.available_permits(),
            self.pre_auth_pool.available_permits(),
        )
    }
}

/// One connection's budgets. Dropped once the connection has ended and every
/// reservation it made is released.
#[derive(Debug)]
pub(crate) struct ConnectionMemory {
    memory: Arc<RequestMemory>,
    source: Option<IpAddr>,
    /// `socket.request.max.bytes`: what this connection's requests may hold.
    own: Arc<Semaphore>,
    allowance: Arc<Semaphore>,
    share: Arc<Semaphore>,
    pre_auth_share: Arc<Semaphore>,
}

/// Memory reserved for one request while it is read and handled: released
/// when dropped. One permit per budget, grown chunk by chunk.
#[derive(Debug, Default)]
pub(crate) struct Reservation {
    own: Option<OwnedSemaphorePermit>,
    allowance: Option<OwnedSemaphorePermit>,
    share: Option<OwnedSemaphorePermit>,
    pool: Option<OwnedSemaphorePermit>,
}

impl Reservation {
    /// Bytes reserved.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.own
            .as_ref()
            .map_or(0, OwnedSemaphorePermit::num_permits)
    }
}

fn add(held: &mut Option<OwnedSemaphorePermit>, permit: OwnedSemaphorePermit) {
    match held {
        Some(held) => held.merge(permit),
        None => *held = Some(permit),
    }
}

async fn acquire(semaphore: &Arc<Semaphore>, bytes: usize) -> OwnedSemaphorePermit {
    // A chunk is at most a frame, and each budget holds the largest frame
    // it is asked for (see `Sizes::new`).
    semaphore
        .clone()
        .acquire_many_owned(bytes as u32)
        .await
        .expect("budgets are never closed")
}

impl ConnectionMemory {
    /// Reserves `bytes` more of a frame of `frame` bytes into `into`,
    /// waiting while the budgets are spent.
    pub(crate) async fn reserve(
        &self,
        frame: usize,
        bytes: usize,
        stage: Stage,
        into: &mut Reservation,
    ) {
        add(&mut into.own, acquire(&self.own, bytes).await);
        let small = match stage {
            Stage::PreAuth => PRE_AUTH_ALLOWANCE,
            Stage::Authenticated => ALLOWANCE,
        };
        // Only this connection's reads take the allowance, one after the
        // other: trying never waits behind anyone. Before authentication
        // the connection may use only the first `PRE_AUTH_ALLOWANCE` of it.
        let used = ALLOWANCE - self.allowance.available_permits();
        if frame <= small && used + bytes <= small {
            if let Ok(permit) = self.allowance.clone().try_acquire_many_owned(bytes as u32) {
                into.allowance = Some(permit);
                return;
            }
        }
        let (share, pool) = match stage {
            Stage::PreAuth => (&self.pre_auth_share, &self.memory.pre_auth_pool),
            Stage::Authenticated => (&self.share, &self.memory.pool),
        };
        // The source's share first: a source at its share waits there,
        // never in the pool's queue ahead of other sources.
        add(&mut into.share, acquire(share, bytes).await);
        add(&mut into.pool, acquire(pool, bytes).await);
    }
}

impl Drop for ConnectionMemory {
    fn drop(&mut self) {
        let Some(address) = self.source else {
            return;
        };
        let mut sources = self.memory.sources.lock();
        if let Some(source) = sources.get_mut(&address) {
            source.connections -= 1;
            if source.connections == 0 {
                sources.remove(&address);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1024 * 1024;

    fn ip(last: u8) -> Option<IpAddr> {
        Some(IpAddr::from([127, 0, 0, last]))
    }

    #[test]
    fn sizes_are_kafkas_pool_split_and_always_fit_the_largest_frame() {
        let defaults = Sizes::new(512 * MIB, 100 * MIB, 512 * 1024);
        assert_eq!(defaults.pool, 512 * MIB);
        assert_eq!(defaults.source_share, 128 * MIB);
        assert_eq!(defaults.pre_auth_pool, 32 * MIB);
        assert_eq!(defaults.pre_auth_source_share, 8 * MIB);
        assert_eq!(defaults.connection, 100 * MIB);
        // A small pool: a source may still send one largest request, and
        // four largest logins fit the pre-authentication pool.
        let small = Sizes::new(4 * MIB, 2 * MIB, 512 * 1024);
        assert_eq!(small.source_share, 2 * MIB);
        assert_eq!(small.pre_auth_pool, 2 * MIB);
        assert_eq!(small.pre_auth_source_share, 512 * 1024);
        // Never more than the pool.
        let tight = Sizes::new(MIB, MIB, MIB);
        assert_eq!(
            (
                tight.source_share,
                tight.pre_auth_pool,
                tight.pre_auth_source_share
            ),
            (MIB, MIB, MIB)
        );
    }

    #[tokio::test]
    async fn a_source_at_its_share_leaves_the_rest_of_the_pool_to_others() {
        let memory = Arc::new(RequestMemory::new(Sizes::new(4 * MIB, MIB, 64 * 1024)));
        let attacker: Vec<_> = (0..4).map(|_| memory.connection(ip(2))).collect();
        let mut held = Vec::new();
        for connection in &attacker[..1] {
            let mut reservation = Reservation::default();
            connection
                .reserve(MIB, MIB, Stage::Authenticated, &mut reservation)
                .await;
            held.push(reservation);
        }
        // The attacker's next connection waits at its source's share.
        let mut more = Reservation::default();
        let waiting = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            attacker[1].reserve(MIB, MIB, Stage::Authenticated, &mut more),
        )
        .await;
        assert!(waiting.is_err(), "a source never holds more than its share");
        assert_eq!(memory.available().0, 3 * MIB);
        // Another source reads a large request at once.
        let other = memory.connection(ip(1));
        let mut reservation = Reservation::default();
        tokio::time::timeout(
            std::time::Duration::from_millis(50),
            other.reserve(MIB, MIB, Stage::Authenticated, &mut reservation),
        )
        .await
        .expect("another source is not stalled");
    }

    #[tokio::test]
    async fn small_frames_are_read_when_every_pool_is_spent() {
        let memory = Arc::new(RequestMemory::new(Sizes::new(MIB, MIB, 64 * 1024)));
        let mut hogs = Vec::new();
        let hog = memory.connection(ip(2));
        let mut all = Reservation::default();
        hog.reserve(MIB, MIB, Stage::Authenticated, &mut all).await;
        hogs.push((hog, all));
        // Four sources fill the pre-authentication pool.
        for source in 10..14 {
            let hog = memory.connection(ip(source));
            let mut login = Reservation::default();
            hog.reserve(64 * 1024, 64 * 1024, Stage::PreAuth, &mut login)
                .await;
            hogs.push((hog, login));
        }
        assert_eq!(memory.available(), (0, 0));
        let client = memory.connection(ip(3));
        let mut small = Reservation::default();
        tokio::time::timeout(
            std::time::Duration::from_millis(50),
            client.reserve(1000, 1000, Stage::Authenticated, &mut small),
        )
        .await
        .expect("a small request is read from the allowance");
        assert_eq!(small.bytes(), 1000);
        let login = memory.connection(ip(4));
        let mut hello = Reservation::default();
        tokio::time::timeout(
            std::time::Duration::from_millis(50),
            login.reserve(300, 300, Stage::PreAuth, &mut hello),
        )
        .await
        .expect("a login is read from the allowance");
        // Past its allowance, a connection waits like the others.
        let mut second = Reservation::default();
        let waiting = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            client.reserve(ALLOWANCE, ALLOWANCE, Stage::Authenticated, &mut second),
        )
        .await;
        assert!(waiting.is_err());
        // Before authentication, the allowance is smaller.
        let mut more = Reservation::default();
        let waiting = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            login.reserve(
                PRE_AUTH_ALLOWANCE,
                PRE_AUTH_ALLOWANCE,
                Stage::PreAuth,
                &mut more,
            ),
        )
        .await;
        assert!(waiting.is_err());
    }

    #[tokio::test]
    async fn unauthenticated_frames_draw_on_their_own_pool_only() {
        let memory = Arc::new(RequestMemory::new(Sizes::new(16 * MIB, MIB, 512 * 1024)));
        let mut held = Vec::new();
        for source in 2..10 {
            let connection = memory.connection(ip(source));
            let mut reservation = Reservation::default();
            let _ = tokio::time::timeout(
                std::time::Duration::from_millis(20),
                connection.reserve(512 * 1024, 512 * 1024, Stage::PreAuth, &mut reservation),
            )
            .await;
            held.push((connection, reservation));
        }
        assert_eq!(memory.available(), (16 * MIB, 0));
    }

    #[test]
    fn a_source_is_forgotten_with_its_last_connection() {
        let memory = Arc::new(RequestMemory::new(Sizes::new(4 * MIB, MIB, 1024)));
        let first = memory.connection(ip(2));
        let second = memory.connection(ip(2));
        assert_eq!(memory.sources.lock()[&ip(2).unwrap()].connections, 2);
        drop(first);
        assert_eq!(memory.sources.lock().len(), 1);
        drop(second);
        assert!(memory.sources.lock().is_empty());
        let _unknown = memory.connection(None);
        assert!(memory.sources.lock().is_empty());
    }
}
