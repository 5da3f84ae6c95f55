//! The health gauges `/metrics` works out at each scrape
//! (`metrics::health`): the partitions this broker leads by ISR, the
//! active controller's view of the cluster, and the logs' sizes and their
//! directories' space. Reads file sizes and the file systems: call it off
//! the runtime's workers.

use std::collections::BTreeMap;
use std::path::PathBuf;

use weir_meta::Role;

use crate::broker::Broker;
use crate::metrics::{LogDirLabels, PartitionLabels};

pub(super) fn refresh(broker: &Broker) {
    let health = &broker.metrics().health;
    let (mut under_replicated, mut under_min_isr, mut at_min_isr) = (0, 0, 0);
    let mut dir_bytes: BTreeMap<PathBuf, u64> = BTreeMap::new();
    health.log_size_bytes.clear();
    for partition in broker.all_partitions() {
        let log = partition.log();
        let size = log.size_bytes();
        health
            .log_size_bytes
            .get_or_create(&PartitionLabels {
                topic: partition.topic.clone(),
                partition: partition.index.to_string(),
            })
            .set(i64::try_from(size).unwrap_or(i64::MAX));
        if let Some(dir) = log.dir().parent() {
            *dir_bytes.entry(dir.to_path_buf()).or_default() += size;
        }
        if let Some((replicas, isr, min_isr)) = partition.leader_health() {
            under_replicated += i64::from(isr < replicas);
            under_min_isr += i64::from(isr < min_isr);
            at_min_isr += i64::from(isr == min_isr);
        }
    }
    health.under_replicated_partitions.set(under_replicated);
    health.under_min_isr_partitions.set(under_min_isr);
    health.at_min_isr_partitions.set(at_min_isr);

    let status = broker.controller_status();
    let active = status.role == Role::Leader;
    let image = broker.image();
    let (offline, fenced, registered) = if active {
        let registered = image.brokers().count();
        let fenced = image.brokers().filter(|b| image.is_fenced(b.id)).count();
        (image.offline_partitions().len(), fenced, registered)
    } else {
        (0, 0, 0)
    };
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    health.active_controller.set(i64::from(active));
    health.offline_partitions.set(count(offline));
    health.fenced_brokers.set(count(fenced));
    health.active_brokers.set(count(registered - fenced));
    let unapplied = status
        .last_log_index
        .unwrap_or(0)
        .saturating_sub(status.applied_index.unwrap_or(0));
    health
        .metadata_unapplied_entries
        .set(i64::try_from(unapplied).unwrap_or(i64::MAX));

    for usage in broker.log_dirs().usage() {
        let labels = LogDirLabels {
            dir: usage.path.display().to_string(),
        };
        let bytes = dir_bytes.get(&usage.path).copied().unwrap_or(0);
        health
            .log_dir_size_bytes
            .get_or_create(&labels)
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
        // A directory that cannot be read shows no space: its series go.
        match usage.space {
            Ok((total, free)) => {
                health
                    .log_dir_total_bytes
                    .get_or_create(&labels)
                    .set(i64::try_from(total).unwrap_or(i64::MAX));
                health
                    .log_dir_free_bytes
                    .get_or_create(&labels)
                    .set(i64::try_from(free).unwrap_or(i64::MAX));
            }
            Err(_) => {
                health.log_dir_total_bytes.remove(&labels);
                health.log_dir_free_bytes.remove(&labels);
            }
        }
    }
}
