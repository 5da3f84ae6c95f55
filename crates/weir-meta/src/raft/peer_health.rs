//! Whether each controller peer answers, told as an operator wants it:
//! once when a peer stops answering, once a minute while it stays away
//! (with how long and how many tries), and once when it is back. Raft
//! retries a missing peer every few hundred milliseconds; a line per try
//! would bury everything else during a rolling restart.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::{info, warn};

use super::types::NodeId;

/// How often a peer that stays away is told of again.
const RETELL_EVERY: Duration = Duration::from_secs(60);

#[derive(Debug, Default)]
pub(crate) struct PeerHealth {
    away: Mutex<HashMap<NodeId, Away>>,
}

#[derive(Debug)]
struct Away {
    since: Instant,
    tries: u64,
    told: Instant,
}

impl PeerHealth {
    /// A call to `peer` at `addr` failed with `error`.
    pub(crate) fn failed(&self, peer: NodeId, addr: &str, error: &dyn std::fmt::Display) {
        self.failed_at(peer, addr, error, Instant::now());
    }

    fn failed_at(
        &self,
        peer: NodeId,
        addr: &str,
        error: &dyn std::fmt::Display,
        now: Instant,
    ) -> bool {
        let mut away = self.away.lock().unwrap_or_else(|e| e.into_inner());
        match away.get_mut(&peer) {
            None => {
                away.insert(
                    peer,
                    Away {
                        since: now,
                        tries: 1,
                        told: now,
                    },
                );
                warn!(peer, addr, %error, "controller peer not answering; retrying (told again every minute while it stays away)");
                true
            }
            Some(state) => {
                state.tries += 1;
                if now.duration_since(state.told) < RETELL_EVERY {
                    return false;
                }
                state.told = now;
                let secs = now.duration_since(state.since).as_secs();
                warn!(peer, addr, %error, away_secs = secs, tries = state.tries, "controller peer still not answering");
                true
            }
        }
    }

    /// `peer` answered a call.
    pub(crate) fn answered(&self, peer: NodeId, addr: &str) {
        self.answered_at(peer, addr, Instant::now());
    }

    fn answered_at(&self, peer: NodeId, addr: &str, now: Instant) -> bool {
        let Some(state) = self
            .away
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&peer)
        else {
            return false;
        };
        let secs = now.duration_since(state.since).as_secs_f64();
        info!(
            peer,
            addr,
            away_secs = format!("{secs:.1}"),
            tries = state.tries,
            "controller peer answering again"
        );
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_away_is_told_once_then_once_a_minute_then_once_back() {
        let health = PeerHealth::default();
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let told: Vec<bool> = (0..240)
            .map(|i| health.failed_at(2, "h:9093", &"refused", at(i * 500)))
            .collect();
        // Two minutes of tries every 500 ms: told at the first and at 60 s.
        let when: Vec<usize> = (0..told.len()).filter(|i| told[*i]).collect();
        assert_eq!(when, [0, 120]);
        assert!(!health.answered_at(3, "h:9093", at(120_000)), "never away");
        assert!(health.answered_at(2, "h:9093", at(120_000)));
        assert!(!health.answered_at(2, "h:9093", at(120_500)), "told once");
        assert!(
            health.failed_at(2, "h:9093", &"refused", at(130_000)),
            "away again: told"
        );
    }
}
