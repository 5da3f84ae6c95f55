//! The timers of a hosted group: each armed timer sleeps on the runtime
//! and, when it fires, only submits an event to its shard, so the work it
//! starts runs in the shard's turn, off the runtime's workers.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::task::JoinHandle;

/// Tells a firing timer from the one that replaced it under the same key.
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

/// The armed timers of one group, by key: one per key at most. Dropping
/// them (the group removed, its partition unloaded) disarms them all.
pub struct Timers<K> {
    armed: HashMap<K, (u64, JoinHandle<()>)>,
}

impl<K> Default for Timers<K> {
    fn default() -> Self {
        Self {
            armed: HashMap::new(),
        }
    }
}

impl<K: Hash + Eq> Timers<K> {
    /// Arms `key` to call `fire` with its token after `delay`, replacing
    /// the timer armed under `key` before. Needs the Tokio runtime.
    pub fn schedule(&mut self, key: K, delay: Duration, fire: impl FnOnce(u64) + Send + 'static) {
        let token = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
        let handle = tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            fire(token);
        });
        if let Some((_, previous)) = self.armed.insert(key, (token, handle)) {
            previous.abort();
        }
    }

    /// Disarms `key` if it is armed.
    pub fn cancel(&mut self, key: &K) {
        if let Some((_, handle)) = self.armed.remove(key) {
            handle.abort();
        }
    }

    /// The timer of `key` with `token` has fired: forgets it, unless it was
    /// replaced meanwhile. True if it was still the one armed.
    pub fn fired(&mut self, key: &K, token: u64) -> bool {
        let current = self
            .armed
            .get(key)
            .is_some_and(|(armed, _)| *armed == token);
        if current {
            self.armed.remove(key);
        }
        current
    }

    /// Disarms every timer.
    pub fn clear(&mut self) {
        for (_, (_, handle)) in self.armed.drain() {
            handle.abort();
        }
    }
}

impl<K> Drop for Timers<K> {
    fn drop(&mut self) {
        for (_, (_, handle)) in self.armed.drain() {
            handle.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::mpsc;

    use super::*;

    #[tokio::test]
    async fn a_replaced_or_cancelled_timer_does_not_fire_and_a_dropped_set_fires_none() {
        let (fired, mut firings) = mpsc::unbounded_channel();
        let mut timers = Timers::default();
        let arm = |timers: &mut Timers<&str>, key: &'static str, ms: u64| {
            let fired = fired.clone();
            timers.schedule(key, Duration::from_millis(ms), move |token| {
                let _ = fired.send((key, token));
            });
        };
        arm(&mut timers, "a", 10);
        arm(&mut timers, "a", 30);
        arm(&mut timers, "b", 20);
        arm(&mut timers, "c", 5);
        timers.cancel(&"c");
        let mut fired_keys = Vec::new();
        for _ in 0..2 {
            let (key, token) = firings.recv().await.unwrap();
            assert!(
                timers.fired(&key, token),
                "{key} fired with its current token"
            );
            assert!(!timers.fired(&key, token), "{key} is forgotten once fired");
            fired_keys.push(key);
        }
        fired_keys.sort_unstable();
        assert_eq!(fired_keys, ["a", "b"]);
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert!(
            firings.try_recv().is_err(),
            "the replaced a and the cancelled c never fire"
        );

        arm(&mut timers, "d", 10);
        drop(timers);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(firings.try_recv().is_err(), "dropped timers never fire");
    }
}
