//! One turn at a time per key, with no entry left behind: a key's lock
//! lives only while someone holds or awaits it, so a map of them costs
//! nothing for the keys no one is using.
//!
//! Blocking: take turns only off the runtime's workers.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use parking_lot::Mutex;

pub(crate) struct KeyedTurns<K> {
    locks: Mutex<HashMap<K, Arc<Mutex<()>>>>,
}

impl<K> Default for KeyedTurns<K> {
    fn default() -> Self {
        Self {
            locks: Mutex::default(),
        }
    }
}

impl<K: Eq + Hash + Clone> KeyedTurns<K> {
    /// Runs `f` once no other turn of `key` runs, and returns what it did.
    pub(crate) fn run<T>(&self, key: &K, f: impl FnOnce() -> T) -> T {
        let lock = self.locks.lock().entry(key.clone()).or_default().clone();
        let done = {
            let _turn = lock.lock();
            f()
        };
        let mut locks = self.locks.lock();
        // Clones are made only under `locks`: if the map's and this one are
        // the only ones left, no one else holds or awaits the key.
        if Arc::strong_count(&lock) == 2 {
            locks.remove(key);
        }
        done
    }

    #[cfg(test)]
    fn keys(&self) -> usize {
        self.locks.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Barrier;
    use std::thread;
    use std::time::Duration;

    use super::*;

    #[test]
    fn turns_of_one_key_never_overlap_and_leave_no_entry() {
        let turns = KeyedTurns::<&str>::default();
        let inside = AtomicUsize::new(0);
        let most_inside = AtomicUsize::new(0);
        let start = Barrier::new(8);
        thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    start.wait();
                    for _ in 0..50 {
                        turns.run(&"p", || {
                            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                            most_inside.fetch_max(now, Ordering::SeqCst);
                            thread::yield_now();
                            inside.fetch_sub(1, Ordering::SeqCst);
                        });
                    }
                });
            }
        });
        assert_eq!(most_inside.load(Ordering::SeqCst), 1);
        assert_eq!(turns.keys(), 0);
    }

    #[test]
    fn other_keys_do_not_wait() {
        let turns = KeyedTurns::<&str>::default();
        let holding = Barrier::new(2);
        let release = Barrier::new(2);
        let (b, keys_while_a_held) = thread::scope(|s| {
            s.spawn(|| {
                turns.run(&"a", || {
                    holding.wait();
                    release.wait();
                })
            });
            holding.wait();
            // "a" is held: a turn of "b" runs at once.
            let b = turns.run(&"b", || 7);
            let keys = turns.keys();
            release.wait();
            (b, keys)
        });
        assert_eq!(b, 7);
        assert_eq!(keys_while_a_held, 1);
        assert_eq!(turns.keys(), 0);
    }

    #[test]
    fn a_waiter_keeps_the_key_until_its_own_turn_ends() {
        let turns = KeyedTurns::<&str>::default();
        let holding = Barrier::new(2);
        let order = Mutex::new(Vec::new());
        thread::scope(|s| {
            s.spawn(|| {
                turns.run(&"a", || {
                    holding.wait();
                    // Long enough for the other thread to be waiting.
                    thread::sleep(Duration::from_millis(50));
                    order.lock().push("first");
                })
            });
            holding.wait();
            turns.run(&"a", || order.lock().push("second"));
        });
        assert_eq!(*order.lock(), ["first", "second"]);
        assert_eq!(turns.keys(), 0);
    }
}
