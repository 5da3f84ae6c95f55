//! The health signals on-call people alert on, under the names of Kafka's
//! well-known JMX metrics where one exists (README, "Metrics"): partitions
//! under-replicated, under or at their minimum ISR, or offline; ISR
//! changes; the controller and its brokers; connections; log sizes and
//! the space left in each log directory.
//!
//! The partition counts are of the partitions this broker leads, as
//! Kafka's `ReplicaManager` counts them; the offline partitions and the
//! broker counts come from the active controller only (0 elsewhere), as
//! Kafka's `KafkaController` metrics do, so that summing over brokers
//! counts each once.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListenerLabels {
    pub listener: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LogDirLabels {
    pub dir: String,
}

#[derive(Default)]
pub struct HealthMetrics {
    /// Led here with an ISR smaller than the replica set
    /// (`UnderReplicatedPartitions`).
    pub under_replicated_partitions: Gauge,
    /// Led here with an ISR below `min.insync.replicas`: acks=all writes
    /// are refused (`UnderMinIsrPartitionCount`).
    pub under_min_isr_partitions: Gauge,
    /// Led here with an ISR exactly at `min.insync.replicas`: one more
    /// replica lost refuses acks=all writes (`AtMinIsrPartitionCount`).
    pub at_min_isr_partitions: Gauge,
    /// Without a leader, on the active controller
    /// (`OfflinePartitionsCount`).
    pub offline_partitions: Gauge,
    /// 1 on the active controller (`ActiveControllerCount`).
    pub active_controller: Gauge,
    /// Registered and not fenced, on the active controller
    /// (`ActiveBrokerCount`).
    pub active_brokers: Gauge,
    /// Registered and fenced, on the active controller
    /// (`FencedBrokerCount`).
    pub fenced_brokers: Gauge,
    /// Metadata log entries this node holds and has not applied yet.
    pub metadata_unapplied_entries: Gauge,
    /// ISR changes of partitions led here that dropped replicas
    /// (`IsrShrinksPerSec`).
    pub isr_shrinks: Counter,
    /// ISR changes of partitions led here that took replicas back
    /// (`IsrExpandsPerSec`).
    pub isr_expands: Counter,
    /// Open client connections, by listener (`connection-count`).
    pub connections: Family<ListenerLabels, Gauge>,
    /// Connections accepted, by listener (`connection-creation-total`).
    pub connection_creations: Family<ListenerLabels, Counter>,
    /// Requests read and not yet answered.
    pub requests_in_flight: Gauge,
    /// Bytes of this broker's replica of each partition, both tiers'
    /// local part (`kafka.log:type=Log,name=Size`).
    pub log_size_bytes: Family<super::PartitionLabels, Gauge>,
    /// Bytes of the partition logs in each log directory.
    pub log_dir_size_bytes: Family<LogDirLabels, Gauge>,
    /// Bytes free for this process on each log directory's volume.
    pub log_dir_free_bytes: Family<LogDirLabels, Gauge>,
    /// Bytes of each log directory's volume.
    pub log_dir_total_bytes: Family<LogDirLabels, Gauge>,
}

impl HealthMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        let gauges: [(&str, &str, &Gauge); 9] = [
            (
                "under_replicated_partitions",
                "Partitions led here whose ISR is smaller than their replica set (Kafka's UnderReplicatedPartitions)",
                &m.under_replicated_partitions,
            ),
            (
                "under_min_isr_partitions",
                "Partitions led here whose ISR is below min.insync.replicas: acks=all writes are refused (Kafka's UnderMinIsrPartitionCount)",
                &m.under_min_isr_partitions,
            ),
            (
                "at_min_isr_partitions",
                "Partitions led here whose ISR is exactly min.insync.replicas (Kafka's AtMinIsrPartitionCount)",
                &m.at_min_isr_partitions,
            ),
            (
                "offline_partitions",
                "Partitions without a leader, counted by the active controller, 0 elsewhere (Kafka's OfflinePartitionsCount)",
                &m.offline_partitions,
            ),
            (
                "active_controller",
                "1 on the active controller, 0 elsewhere (Kafka's ActiveControllerCount)",
                &m.active_controller,
            ),
            (
                "active_brokers",
                "Registered brokers not fenced, counted by the active controller (Kafka's ActiveBrokerCount)",
                &m.active_brokers,
            ),
            (
                "fenced_brokers",
                "Registered brokers fenced (down, or not heartbeating), counted by the active controller (Kafka's FencedBrokerCount)",
                &m.fenced_brokers,
            ),
            (
                "metadata_unapplied_entries",
                "Metadata log entries this node holds and has not applied to its image yet",
                &m.metadata_unapplied_entries,
            ),
            (
                "requests_in_flight",
                "Requests read and not yet answered",
                &m.requests_in_flight,
            ),
        ];
        for (name, help, gauge) in gauges {
            registry.register(name, help, gauge.clone());
        }
        registry.register(
            "isr_shrinks",
            "ISR changes of partitions led here that dropped replicas (Kafka's IsrShrinksPerSec)",
            m.isr_shrinks.clone(),
        );
        registry.register(
            "isr_expands",
            "ISR changes of partitions led here that took replicas back (Kafka's IsrExpandsPerSec)",
            m.isr_expands.clone(),
        );
        registry.register(
            "connections",
            "Open client connections, by listener (Kafka's connection-count)",
            m.connections.clone(),
        );
        registry.register(
            "connection_creations",
            "Connections accepted, by listener (Kafka's connection-creation-total)",
            m.connection_creations.clone(),
        );
        registry.register(
            "log_size_bytes",
            "Bytes of this broker's local log of each partition (Kafka's kafka.log:type=Log,name=Size)",
            m.log_size_bytes.clone(),
        );
        registry.register(
            "log_dir_size_bytes",
            "Bytes of the partition logs in each log directory",
            m.log_dir_size_bytes.clone(),
        );
        registry.register(
            "log_dir_free_bytes",
            "Bytes free for this process on each log directory's volume",
            m.log_dir_free_bytes.clone(),
        );
        registry.register(
            "log_dir_total_bytes",
            "Bytes of each log directory's volume",
            m.log_dir_total_bytes.clone(),
        );
        m
    }
}
