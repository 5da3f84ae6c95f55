//! Background upkeep: retention, producer-state snapshots and time-based
//! flushes.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::broker::Broker;

/// How often `flush.ms` is checked.
const FLUSH_CHECK_INTERVAL: Duration = Duration::from_millis(500);

pub async fn run(broker: Arc<Broker>, mut shutdown: watch::Receiver<bool>) {
    let retention_every = Duration::from_millis(broker.config().log_retention_check_interval_ms);
    let mut retention = tokio::time::interval(retention_every);
    let mut flush = tokio::time::interval(FLUSH_CHECK_INTERVAL);
    retention.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = retention.tick() => {
                let broker = broker.clone();
                let _ = tokio::task::spawn_blocking(move || enforce_retention(&broker)).await;
            }
            _ = flush.tick() => {
                let broker = broker.clone();
                let _ = tokio::task::spawn_blocking(move || flush_due(&broker)).await;
            }
            _ = shutdown.changed() => return,
        }
    }
}

fn enforce_retention(broker: &Broker) {
    for partition in broker.all_partitions() {
        // Bounds how much log a restart after a crash replays to rebuild
        // idempotent-producer state.
        if let Err(error) = partition.snapshot_producer_state() {
            tracing::warn!(topic = %partition.topic, partition = partition.index, %error, "producer state snapshot failed");
        }
        let high_watermark = partition.high_watermark();
        match partition.log.enforce_retention(high_watermark) {
            Ok(outcome) if outcome.deleted_segments > 0 => tracing::info!(
                topic = %partition.topic,
                partition = partition.index,
                segments = outcome.deleted_segments,
                log_start_offset = outcome.log_start_offset,
                "retention deleted segments"
            ),
            Ok(_) => {}
            Err(error) => {
                tracing::error!(topic = %partition.topic, partition = partition.index, %error, "retention failed")
            }
        }
    }
}

fn flush_due(broker: &Broker) {
    for partition in broker.all_partitions() {
        if let Err(error) = partition.log.flush_if_due() {
            tracing::error!(topic = %partition.topic, partition = partition.index, %error, "flush failed");
        }
    }
}
