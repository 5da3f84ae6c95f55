//! What a connection's requests share: the listener it came in on, who the
//! client is, the client's throttling (KIP-219), whether the peer is
//! another broker, and the order of its transactional appends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use tokio::sync::oneshot::error::TryRecvError;

/// The principal of a client that has not proved who it is: a PLAINTEXT
/// connection, or TLS without a client certificate.
pub(crate) use weir_meta::ANONYMOUS;

#[derive(Debug)]
pub(crate) struct Channel {
    /// The name of the listener the client connected to: it is told the
    /// brokers' addresses on that listener.
    listener: String,
    /// The authenticated principal, `Type:name` (`User:alice`).
    principal: RwLock<Arc<str>>,
    /// No request is read before then: the client is over a quota.
    muted_until: Mutex<Option<Instant>>,
    /// The peer sent a follower's fetch or transaction markers: it is a
    /// broker, whose requests client quotas do not limit.
    inter_broker: AtomicBool,
    /// The last transactional produce of the connection that waits for its
    /// partitions to join the transaction before appending (transactions
    /// v2): later ones append after it, in the order the client sent them.
    last_waiting_append: Mutex<Option<tokio::sync::oneshot::Receiver<()>>>,
}

impl Channel {
    pub(crate) fn new(listener: &str, principal: &str) -> Self {
        Self {
            listener: listener.to_owned(),
            principal: RwLock::new(Arc::from(principal)),
            muted_until: Mutex::new(None),
            inter_broker: AtomicBool::new(false),
            last_waiting_append: Mutex::new(None),
        }
    }

    /// An earlier transactional produce of this connection has yet to
    /// append.
    pub(crate) fn earlier_append_waits(&self) -> bool {
        let mut last = self.last_waiting_append.lock();
        let waits = last
            .as_mut()
            .is_some_and(|earlier| earlier.try_recv() == Err(TryRecvError::Empty));
        if !waits {
            *last = None;
        }
        waits
    }

    /// Queues an append behind the connection's earlier ones: what to wait
    /// for before appending, and the sender to drop once appended.
    pub(crate) fn queue_append(
        &self,
    ) -> (
        Option<tokio::sync::oneshot::Receiver<()>>,
        tokio::sync::oneshot::Sender<()>,
    ) {
        let (appended, waiting) = tokio::sync::oneshot::channel();
        (self.last_waiting_append.lock().replace(waiting), appended)
    }

    /// The listener's name.
    pub(crate) fn listener(&self) -> &str {
        &self.listener
    }

    /// The client's principal, `Type:name`.
    pub(crate) fn principal(&self) -> Arc<str> {
        self.principal.read().clone()
    }

    /// The client authenticated (again) as `principal`.
    pub(crate) fn set_principal(&self, principal: &str) {
        if *self.principal.read().as_ref() != *principal {
            *self.principal.write() = Arc::from(principal);
        }
    }

    /// Reads nothing more from the client for `throttle_ms` from now (or
    /// longer, if it is muted longer already).
    pub(crate) fn throttle(&self, throttle_ms: u32) {
        if throttle_ms == 0 {
            return;
        }
        let until = Instant::now() + Duration::from_millis(u64::from(throttle_ms));
        let mut muted = self.muted_until.lock();
        *muted = Some(muted.map_or(until, |m| m.max(until)));
    }

    /// When the client may be read from again, if it is throttled now.
    pub(crate) fn muted_until(&self) -> Option<Instant> {
        let mut muted = self.muted_until.lock();
        match *muted {
            Some(until) if until > Instant::now() => Some(until),
            _ => {
                *muted = None;
                None
            }
        }
    }

    pub(crate) fn mark_inter_broker(&self) {
        self.inter_broker.store(true, Ordering::Relaxed);
    }

    pub(crate) fn is_inter_broker(&self) -> bool {
        self.inter_broker.load(Ordering::Relaxed)
    }
}

/// A principal's name (`alice` of `User:alice`): what quotas call the user.
pub(crate) fn principal_name(principal: &str) -> &str {
    principal
        .split_once(':')
        .map_or(principal, |(_, name)| name)
}
