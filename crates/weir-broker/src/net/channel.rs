//! What a connection's requests share: the client's throttling (KIP-219)
//! and whether the peer is another broker.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

#[derive(Debug, Default)]
pub(crate) struct Channel {
    /// No request is read before then: the client is over a quota.
    muted_until: Mutex<Option<Instant>>,
    /// The peer sent a follower's fetch or transaction markers: it is a
    /// broker, whose requests client quotas do not limit.
    inter_broker: AtomicBool,
}

impl Channel {
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
