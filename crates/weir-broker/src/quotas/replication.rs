//! Replication throttles (KIP-73), as Kafka's `ReplicationQuotaManager`:
//! one byte rate for what this broker sends to followers as a leader
//! (`leader.replication.throttled.rate`), one for what it fetches as a
//! follower (`follower.replication.throttled.rate`). Only the replicas a
//! topic names in `leader.replication.throttled.replicas` or
//! `follower.replication.throttled.replicas` count and are held back.
//!
//! Kafka's rules, kept here:
//! - the bytes of every throttled replica count, in sync or not, so that
//!   the whole of throttled replication stays under the rate;
//! - while the rate is over its limit, a throttled replica that is not in
//!   sync gets no records (on the leader) or is not fetched (on the
//!   follower); an in-sync one never waits, so that throttling cannot push
//!   replicas out of the ISR;
//! - the rate is a `SimpleRate` over `replication.quota.window.num`
//!   windows of `replication.quota.window.size.seconds`.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use weir_log::Clock;

use crate::quotas::rate::{QuotaWindows, Rate};

/// No limit: Kafka's default of the throttled rates, `Long.MAX_VALUE`.
pub const UNLIMITED: i64 = i64::MAX;

/// One side's replication throttle: its limit and the throttled bytes
/// measured against it.
pub struct ReplicationQuota {
    windows: QuotaWindows,
    clock: Arc<dyn Clock>,
    /// Bytes per second; [`UNLIMITED`] (read without the lock) when unset.
    limit: AtomicI64,
    rate: Mutex<Rate>,
}

impl ReplicationQuota {
    pub fn new(windows: QuotaWindows, clock: Arc<dyn Clock>) -> Self {
        ReplicationQuota {
            windows,
            clock,
            limit: AtomicI64::new(UNLIMITED),
            rate: Mutex::new(Rate::new(windows.samples)),
        }
    }

    /// Takes a new limit, in bytes per second. The bytes measured so far
    /// are kept: the new limit judges the same recent traffic.
    pub fn set_limit(&self, bytes_per_second: i64) {
        let old = self.limit.swap(bytes_per_second, Ordering::Relaxed);
        if old != bytes_per_second {
            tracing::info!(
                limit = bytes_per_second,
                "replication throttle rate changed"
            );
        }
    }

    /// Whether a limit is set.
    pub fn is_limited(&self) -> bool {
        self.limit.load(Ordering::Relaxed) != UNLIMITED
    }

    /// Counts bytes of throttled replicas sent or fetched.
    pub fn record(&self, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let now = self.clock.now_ms();
        self.rate.lock().record(self.windows, bytes as f64, now);
    }

    /// Whether the measured rate is over the limit.
    pub fn is_exceeded(&self) -> bool {
        let limit = self.limit.load(Ordering::Relaxed);
        if limit == UNLIMITED {
            return false;
        }
        let now = self.clock.now_ms();
        self.rate.lock().measure_simple(self.windows, now) > limit as f64
    }

    /// Whether a replica is held back now: it is throttled, not in sync,
    /// and the rate is over the limit (Kafka's `shouldLeaderThrottle` and
    /// `shouldFollowerThrottle`).
    pub fn holds_back(&self, throttled: bool, in_sync: bool) -> bool {
        throttled && !in_sync && self.is_exceeded()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_log::ManualClock;

    fn quota(limit: i64) -> (ReplicationQuota, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(1_000_000));
        let quota = ReplicationQuota::new(
            QuotaWindows {
                samples: 11,
                window_ms: 1000,
            },
            clock.clone(),
        );
        quota.set_limit(limit);
        (quota, clock)
    }

    #[test]
    fn unlimited_by_default() {
        let clock = Arc::new(ManualClock::new(0));
        let quota = ReplicationQuota::new(
            QuotaWindows {
                samples: 11,
                window_ms: 1000,
            },
            clock,
        );
        quota.record(usize::MAX / 2);
        assert!(!quota.is_exceeded());
        assert!(!quota.holds_back(true, false));
    }

    #[test]
    fn over_the_limit_holds_back_throttled_replicas_not_in_sync() {
        let (quota, _) = quota(1000);
        quota.record(1000);
        // At the limit is within it.
        assert!(!quota.is_exceeded());
        quota.record(1);
        assert!(quota.is_exceeded());
        assert!(quota.holds_back(true, false));
        // Never an unthrottled replica, nor an in-sync one.
        assert!(!quota.holds_back(false, false));
        assert!(!quota.holds_back(true, true));
    }

    #[test]
    fn the_rate_falls_back_under_the_limit_as_time_passes() {
        let (quota, clock) = quota(1000);
        quota.record(3000);
        assert!(quota.is_exceeded());
        // 3000 bytes over 2 s: still over 1000/s.
        clock.advance(2000);
        assert!(quota.is_exceeded());
        // Over 3 s: back at the limit, released.
        clock.advance(1000);
        assert!(!quota.is_exceeded());
        // Steady traffic at the limit stays released; above it, held.
        for _ in 0..5 {
            clock.advance(1000);
            quota.record(1000);
        }
        assert!(!quota.is_exceeded());
        quota.record(5000);
        assert!(quota.is_exceeded());
    }

    #[test]
    fn a_changed_limit_judges_the_same_traffic() {
        let (quota, _) = quota(1000);
        quota.record(5000);
        assert!(quota.is_exceeded());
        quota.set_limit(10_000);
        assert!(!quota.is_exceeded());
        quota.set_limit(0);
        assert!(quota.is_exceeded());
        quota.set_limit(UNLIMITED);
        assert!(!quota.is_exceeded());
    }

    #[test]
    fn a_zero_limit_lets_one_fetch_through_then_holds() {
        let (quota, clock) = quota(0);
        assert!(!quota.holds_back(true, false));
        quota.record(10);
        assert!(quota.holds_back(true, false));
        // Forgotten once the windows have passed.
        clock.advance(11_000);
        assert!(!quota.holds_back(true, false));
    }
}
