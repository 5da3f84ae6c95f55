//! The broker as the share-partitions' host: the narrow view of it they get.

use std::sync::Arc;

use weir_client::SecurityConfig;

use super::Broker;
use crate::config::groups::{share_settings, ShareSettings};
use crate::coordinator::Environment;
use crate::metrics::Metrics;
use crate::partition::Partition;
use crate::replica::manager::NotServed;
use crate::share::leader::SharePartitions;
use crate::share::state_coordinator::ShareStateStore;
use crate::share::ShareHost;

impl ShareHost for Broker {
    fn environment(&self) -> &Environment {
        &self.coordinator_env
    }

    fn leader_partition(&self, topic: &str, index: i32) -> Result<Arc<Partition>, NotServed> {
        Broker::leader_partition(self, topic, index)
    }

    fn share_settings(&self, group: &str) -> ShareSettings {
        let config = self.config();
        let image = self.image();
        share_settings(&config.share_group, image.group_configs(group))
            .or_else(|_| share_settings(&config.share_group, &Default::default()))
            .expect("the broker's own share settings are valid")
    }

    fn share_state(&self) -> &ShareStateStore {
        Broker::share_state(self)
    }

    fn share_partitions(&self) -> &SharePartitions {
        Broker::share_partitions(self)
    }

    fn create_share_state_topic(&self) {
        if let Err(error) =
            self.auto_create_topic(crate::share::state_coordinator::SHARE_STATE_TOPIC)
        {
            tracing::debug!(%error, "cannot create the share-state topic yet");
        }
    }

    fn inter_broker_security(&self) -> &SecurityConfig {
        Broker::inter_broker_security(self)
    }

    fn metrics(&self) -> &Metrics {
        Broker::metrics(self)
    }
}
