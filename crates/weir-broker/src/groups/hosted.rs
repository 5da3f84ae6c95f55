//! The groups of one kind (consumer or share) that a `__consumer_offsets`
//! shard hosts: each one's engine with its timers, the image it last saw
//! and its last write. Only groups whose engine exists are kept.

use std::collections::HashMap;

use weir_coord::consumer::ConsumerGroupEngine;
use weir_coord::share::ShareGroupEngine;

use crate::coordinator::Timers;
use crate::partition::ReplicatedWrite;

/// An engine a shard hosts while its group exists.
pub trait GroupEngine {
    /// False once the group is deleted (or, for a consumer group, turned
    /// into a classic one).
    fn exists(&self) -> bool;
}

impl GroupEngine for ConsumerGroupEngine {
    fn exists(&self) -> bool {
        ConsumerGroupEngine::exists(self)
    }
}

impl GroupEngine for ShareGroupEngine {
    fn exists(&self) -> bool {
        ShareGroupEngine::exists(self)
    }
}

pub(crate) struct HostedGroup<E, K> {
    pub(crate) engine: E,
    /// Disarmed when the group is dropped (removed, converted, or its
    /// partition unloaded).
    pub(crate) timers: Timers<K>,
    /// The metadata image the engine last saw (its applied index).
    pub(crate) image_seen: u64,
    /// The group's last write: an answer that writes nothing still waits
    /// for it, since it may tell what that write decided.
    pub(crate) last_write: Option<ReplicatedWrite>,
}

impl<E, K> HostedGroup<E, K> {
    pub(crate) fn new(engine: E) -> Self {
        Self {
            engine,
            timers: Timers::default(),
            image_seen: 0,
            last_write: None,
        }
    }
}

pub struct HostedGroups<E, K>(HashMap<String, HostedGroup<E, K>>);

impl<E, K> Default for HostedGroups<E, K> {
    fn default() -> Self {
        Self(HashMap::new())
    }
}

impl<E: GroupEngine, K> HostedGroups<E, K> {
    /// The groups built from a partition's records, those that exist.
    pub(crate) fn of(engines: impl IntoIterator<Item = (String, E)>) -> Self {
        Self(
            engines
                .into_iter()
                .filter(|(_, engine)| engine.exists())
                .map(|(group, engine)| (group, HostedGroup::new(engine)))
                .collect(),
        )
    }

    /// Whether `group` is hosted here.
    pub(crate) fn hosts(&self, group: &str) -> bool {
        self.0.contains_key(group)
    }

    pub(crate) fn get(&self, group: &str) -> Option<&HostedGroup<E, K>> {
        self.0.get(group)
    }

    /// The groups hosted here, by name.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&String, &HostedGroup<E, K>)> {
        self.0.iter()
    }

    /// The names of the groups hosted here.
    pub(crate) fn names(&self) -> Vec<String> {
        self.0.keys().cloned().collect()
    }

    pub(crate) fn get_mut(&mut self, group: &str) -> Option<&mut HostedGroup<E, K>> {
        self.0.get_mut(group)
    }

    /// Takes `group` out while an event changes it, with the rest of the
    /// shard at hand; [`put_back`](Self::put_back) returns it before what
    /// the event produced is written.
    pub(crate) fn take(&mut self, group: &str) -> Option<HostedGroup<E, K>> {
        self.0.remove(group)
    }

    /// Returns a group taken out, unless it no longer exists: then it is
    /// dropped with its timers.
    pub(crate) fn put_back(&mut self, group: &str, hosted: HostedGroup<E, K>) {
        if hosted.engine.exists() {
            self.0.insert(group.to_owned(), hosted);
        }
    }
}
