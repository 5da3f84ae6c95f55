//! DescribeLogDirs: this broker's log directories, each with its volume's
//! size and the partitions it holds, as `kafka-log-dirs.sh --describe` and
//! `kafka-reassign-partitions.sh` ask for them.
//!
//! As Kafka's `ReplicaManager.describeLogDirs`: every directory of
//! `log.dirs` is listed, an unreadable one with KAFKA_STORAGE_ERROR and
//! nothing else; the topics filter (null: all) keeps the partitions named
//! that are hosted here, and leaves the others out without an error; a
//! topic with no partition left is left out too. A current log's offset
//! lag is its high watermark less its log end, never below 0.
//!
//! Reads the file system (the directories and their volumes), so it is
//! dispatched on the blocking pool.

use std::collections::{BTreeMap, HashSet};

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::broker::Broker;

pub(super) fn describe_log_dirs(
    broker: &Broker,
    _ctx: &RequestContext,
    request: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    let wanted: Option<HashSet<(String, i32)>> = request.topics.map(|topics| {
        topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| (t.topic.0.to_string(), *p))
            })
            .collect()
    });
    let log_dirs = broker.log_dirs();
    // Per directory, topic → partitions, in name and index order.
    let mut hosted: Vec<BTreeMap<String, Vec<DescribeLogDirsPartition>>> =
        vec![BTreeMap::new(); log_dirs.dirs().len()];
    for partition in broker.all_partitions() {
        if wanted
            .as_ref()
            .is_some_and(|w| !w.contains(&(partition.topic.clone(), partition.index)))
        {
            continue;
        }
        let log = partition.log();
        let Some(dir) = log
            .dir()
            .parent()
            .and_then(|parent| log_dirs.dirs().iter().position(|d| d == parent))
        else {
            continue;
        };
        let lag = partition
            .high_watermark()
            .saturating_sub(log.log_end_offset());
        hosted[dir]
            .entry(partition.topic.clone())
            .or_default()
            .push(
                DescribeLogDirsPartition::default()
                    .with_partition_index(partition.index)
                    .with_partition_size(log.size_bytes() as i64)
                    .with_offset_lag(lag as i64)
                    .with_is_future_key(false),
            );
    }
    let results = log_dirs
        .usage()
        .into_iter()
        .zip(hosted)
        .map(|(usage, topics)| {
            let result = DescribeLogDirsResult::default()
                .with_log_dir(StrBytes::from_string(usage.path.display().to_string()));
            match usage.space {
                Ok((total, usable)) => result
                    .with_error_code(0)
                    .with_total_bytes(i64::try_from(total).unwrap_or(i64::MAX))
                    .with_usable_bytes(i64::try_from(usable).unwrap_or(i64::MAX))
                    .with_topics(
                        topics
                            .into_iter()
                            .map(|(name, mut partitions)| {
                                partitions.sort_by_key(|p| p.partition_index);
                                DescribeLogDirsTopic::default()
                                    .with_name(TopicName(StrBytes::from_string(name)))
                                    .with_partitions(partitions)
                            })
                            .collect(),
                    ),
                Err(error) => {
                    tracing::warn!(dir = %usage.path.display(), %error, "cannot describe log directory");
                    result
                        .with_error_code(ResponseError::KafkaStorageError.code())
                        .with_total_bytes(-1)
                        .with_usable_bytes(-1)
                }
            }
        })
        .collect();
    DescribeLogDirsResponse::default()
        .with_error_code(0)
        .with_results(results)
}
