//! What a connection's requests share: the listener it came in on, who the
//! client is, the client's throttling (KIP-219) and whether the peer is
//! another broker.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

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
}

impl Channel {
    pub(crate) fn new(listener: &str, principal: &str) -> Self {
        Self {
            listener: listener.to_owned(),
            principal: RwLock::new(Arc::from(principal)),
            muted_until: Mutex::new(None),
            inter_broker: AtomicBool::new(false),
        }
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
