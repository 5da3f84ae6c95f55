//! One turn at a time per key, with no entry left behind: a key's lock
//! lives only while someone holds or awaits it, so a map of them costs
//! nothing for the keys no one is using. A turn is a future: waiting for
//! one holds up no thread.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;

use parking_lot::Mutex;

pub(crate) struct KeyedTurns<K> {
    locks: Mutex<HashMap<K, Arc<tokio::sync::Mutex<()>>>>,
}

impl<K> Default for KeyedTurns<K> {
    fn default() -> Self {
        Self {
            locks: Mutex::default(),
        }
    }
}

impl<K: Eq + Hash + Clone> KeyedTurns<K> {
    /// Runs `turn` once no other turn of `key` runs, and returns what it
    /// gave.
    pub(crate) async fn run<T>(&self, key: &K, turn: impl Future<Output = T>) -> T {
        let lock = self.locks.lock().entry(key.clone()).or_default().clone();
        // Declared first, dropped last: after the turn, or when a caller
        // gives up waiting for it.
        let _entry = Entry {
            turns: self,
            key,
            lock: &lock,
        };
        let _turn = lock.lock().await;
        turn.await
    }

    #[cfg(test)]
    fn keys(&self) -> usize {
        self.locks.lock().len()
    }
}

/// A caller's hold on a key's entry: the last one to let go removes it.
struct Entry<'a, K: Eq + Hash> {
    turns: &'a KeyedTurns<K>,
    key: &'a K,
    lock: &'a Arc<tokio::sync::Mutex<()>>,
}

impl<K: Eq + Hash> Drop for Entry<'_, K> {
    fn drop(&mut self) {
        let mut locks = self.turns.locks.lock();
        // Clones are made only under `locks`: if the map's and this one are
        // the only ones left, no one else holds or awaits the key.
        if Arc::strong_count(self.lock) == 2 {
            locks.remove(self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tokio::sync::oneshot;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn turns_of_one_key_never_overlap_and_leave_no_entry() {
        let turns = Arc::new(KeyedTurns::<&str>::default());
        let inside = Arc::new(AtomicUsize::new(0));
        let most_inside = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let (turns, inside, most_inside) =
                    (turns.clone(), inside.clone(), most_inside.clone());
                tokio::spawn(async move {
                    for _ in 0..50 {
                        turns
                            .run(&"p", async {
                                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                                most_inside.fetch_max(now, Ordering::SeqCst);
                                tokio::task::yield_now().await;
                                inside.fetch_sub(1, Ordering::SeqCst);
                            })
                            .await;
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(most_inside.load(Ordering::SeqCst), 1);
        assert_eq!(turns.keys(), 0);
    }

    /// Holds `key`'s turn on a task of its own until `release` is used.
    async fn hold(
        turns: &Arc<KeyedTurns<&'static str>>,
        key: &'static str,
    ) -> (oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
        let (held_tx, held) = oneshot::channel();
        let (release, release_rx) = oneshot::channel::<()>();
        let turns = turns.clone();
        let holder = tokio::spawn(async move {
            turns
                .run(&key, async {
                    held_tx.send(()).unwrap();
                    release_rx.await.unwrap();
                })
                .await
        });
        held.await.unwrap();
        (release, holder)
    }

    #[tokio::test]
    async fn other_keys_do_not_wait() {
        let turns = Arc::new(KeyedTurns::<&str>::default());
        let (release, holder) = hold(&turns, "a").await;
        // "a" is held: a turn of "b" runs at once.
        assert_eq!(turns.run(&"b", async { 7 }).await, 7);
        assert_eq!(turns.keys(), 1);
        release.send(()).unwrap();
        holder.await.unwrap();
        assert_eq!(turns.keys(), 0);
    }

    #[tokio::test]
    async fn a_waiter_keeps_the_key_until_its_own_turn_ends() {
        let turns = Arc::new(KeyedTurns::<&str>::default());
        let order = Arc::new(Mutex::new(Vec::new()));
        let (held_tx, held) = oneshot::channel();
        let first = {
            let (turns, order) = (turns.clone(), order.clone());
            tokio::spawn(async move {
                turns
                    .run(&"a", async {
                        held_tx.send(()).unwrap();
                        // Long enough for the other turn to be waiting.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        order.lock().push("first");
                    })
                    .await
            })
        };
        held.await.unwrap();
        turns.run(&"a", async { order.lock().push("second") }).await;
        first.await.unwrap();
        assert_eq!(*order.lock(), ["first", "second"]);
        assert_eq!(turns.keys(), 0);
    }

    #[tokio::test]
    async fn a_caller_that_gives_up_waiting_leaves_no_entry() {
        let turns = Arc::new(KeyedTurns::<&str>::default());
        let (release, holder) = hold(&turns, "a").await;
        let waited =
            tokio::time::timeout(Duration::from_millis(20), turns.run(&"a", async {})).await;
        assert!(waited.is_err(), "the key is held");
        release.send(()).unwrap();
        holder.await.unwrap();
        assert_eq!(turns.keys(), 0);
    }
}
