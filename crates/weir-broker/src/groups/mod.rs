//! Groups hosted on `__consumer_offsets`: classic groups (JoinGroup and
//! SyncGroup), consumer groups (KIP-848), share groups' membership
//! (KIP-932), their committed offsets, and their configs.

pub mod classic;
pub mod consumer;
mod hosted;
pub mod offsets;
pub mod share;

use std::sync::Arc;

use weir_meta::MetadataImage;

use crate::coordinator::Environment;
use crate::partition::Partition;
use classic::GroupCoordinator;
use consumer::ConsumerGroupCoordinator;
use offsets::OffsetStore;
use share::ShareGroupCoordinator;

/// Everything stored in `__consumer_offsets` and what serves it: the
/// offsets, the classic, consumer and share group coordinators, and the
/// environment they run in. The coordinators reach each other (a classic
/// group upgraded to a consumer group, a timer firing) through this, never
/// through the broker.
pub struct GroupCoordinators {
    env: Environment,
    offsets: Arc<OffsetStore>,
    classic: GroupCoordinator,
    consumer: ConsumerGroupCoordinator,
    share: ShareGroupCoordinator,
}

impl GroupCoordinators {
    pub fn new(
        env: Environment,
        offsets: Arc<OffsetStore>,
        classic: GroupCoordinator,
        consumer: ConsumerGroupCoordinator,
        share: ShareGroupCoordinator,
    ) -> Arc<Self> {
        Arc::new(Self {
            env,
            offsets,
            classic,
            consumer,
            share,
        })
    }

    pub fn offsets(&self) -> &OffsetStore {
        &self.offsets
    }

    pub fn groups(&self) -> &GroupCoordinator {
        &self.classic
    }

    pub fn consumer_groups(&self) -> &ConsumerGroupCoordinator {
        &self.consumer
    }

    pub fn share_groups(&self) -> &ShareGroupCoordinator {
        &self.share
    }

    pub fn node_id(&self) -> i32 {
        self.env.node_id()
    }

    pub fn now_ms(&self) -> i64 {
        self.env.now_ms()
    }

    pub fn image(&self) -> Arc<MetadataImage> {
        self.env.image()
    }

    /// Loads `__consumer_offsets` partition `partition` (of `count`), led
    /// here now, with the engines of its classic, consumer and share groups
    /// built before any event reaches its shard; their timers are armed by
    /// [`take_over`](Self::take_over). Reads the log where it is called,
    /// which must not be a runtime worker. Returns the live records.
    pub fn load(
        &self,
        partition: Arc<Partition>,
        count: i32,
        image: &MetadataImage,
    ) -> Result<usize, weir_log::LogError> {
        let now_ms = self.now_ms();
        self.offsets.load(partition, count, |shard| {
            self.classic.load(shard, now_ms);
            self.consumer.load(shard, image);
            self.share.load(shard, image);
        })
    }

    /// This node now coordinates the groups of `__consumer_offsets`
    /// partition `index`, just loaded: their timers are armed. Needs the
    /// Tokio runtime.
    pub fn take_over(self: &Arc<Self>, index: i32) {
        self.classic.take_over(self, index);
        self.consumer.take_over(self, index);
        self.share.take_over(self, index);
    }
}
