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
//! Reads the file system (the directories and their volumes), on the
//! blocking pool.
//!
//! AlterReplicaLogDirs moves replicas between this broker's directories,
//! as Kafka's `ReplicaManager.alterReplicaLogDirs`: LOG_DIR_NOT_FOUND for
//! a path not in `log.dirs`, KAFKA_STORAGE_ERROR for an unreadable one,
//! REPLICA_NOT_AVAILABLE for a partition not hosted here (Kafka also
//! remembers the directory for a replica created later; Weir does not),
//! NONE once the move has started or when the replica is there already.
//! The move itself runs on a thread of its own ([`crate::replica::dir_move`]);
//! until it is done DescribeLogDirs lists the copy under its target
//! directory as a future replica.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, DescribeLogDirsRequest,
    DescribeLogDirsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_meta::AclOperation;

use super::RequestContext;
use crate::broker::Broker;
use crate::partition::file_io::on_the_blocking_pool;

pub(super) async fn describe_log_dirs(
    broker: Arc<Broker>,
    ctx: &RequestContext,
    request: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    if !ctx.authorized_on_cluster(&broker, AclOperation::Describe) {
        return DescribeLogDirsResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    on_the_blocking_pool(move || describe_dirs(&broker, request)).await
}

/// What DescribeLogDirs answers an authorized principal.
fn describe_dirs(broker: &Broker, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse {
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
        let Some(dir) = log_dirs.index_holding(log.dir()) else {
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
    // Copies under way, in their target directories.
    for ((topic, index), job) in log_dirs.moving() {
        if wanted
            .as_ref()
            .is_some_and(|w| !w.contains(&(topic.clone(), index)))
        {
            continue;
        }
        let Some(partition) = broker.partition(&topic, index) else {
            continue;
        };
        let lag = partition
            .log()
            .log_end_offset()
            .saturating_sub(job.copied_end());
        hosted[job.target].entry(topic).or_default().push(
            DescribeLogDirsPartition::default()
                .with_partition_index(index)
                .with_partition_size(job.copied_bytes() as i64)
                .with_offset_lag(lag as i64)
                .with_is_future_key(true),
        );
    }
    let results = log_dirs
        .usage()
        .into_iter()
        .zip(hosted)
        .enumerate()
        .map(|(index, (usage, topics))| {
            let result = DescribeLogDirsResult::default()
                .with_log_dir(StrBytes::from_string(usage.path.display().to_string()));
            // A failed directory is offline until the broker restarts, a
            // full one until space is freed: Kafka reports both (a full
            // disk takes its directory offline there) as a storage error.
            let space = match log_dirs.failure(index) {
                Some(why) => Err(std::io::Error::other(why)),
                None => usage.space,
            };
            match space {
                Ok((total, usable)) => result
                    .with_error_code(0)
                    .with_total_bytes(i64::try_from(total).unwrap_or(i64::MAX))
                    .with_usable_bytes(i64::try_from(usable).unwrap_or(i64::MAX))
                    .with_topics(
                        topics
                            .into_iter()
                            .map(|(name, mut partitions)| {
                                partitions.sort_by_key(|p| (p.partition_index, p.is_future_key));
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

pub(super) async fn alter_replica_log_dirs(
    broker: Arc<Broker>,
    ctx: &RequestContext,
    request: AlterReplicaLogDirsRequest,
) -> AlterReplicaLogDirsResponse {
    if !ctx.authorized_on_cluster(&broker, AclOperation::Alter) {
        // As Kafka: every partition asked for fails, a topic once per
        // directory it is named under.
        let results = request
            .dirs
            .iter()
            .flat_map(|dir| &dir.topics)
            .map(|topic| {
                let partitions = topic.partitions.iter().map(|&index| {
                    AlterReplicaLogDirPartitionResult::default()
                        .with_partition_index(index)
                        .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
                });
                AlterReplicaLogDirTopicResult::default()
                    .with_topic_name(topic.name.clone())
                    .with_partitions(partitions.collect())
            })
            .collect();
        return AlterReplicaLogDirsResponse::default().with_results(results);
    }
    // The targets are read, and the moves started, on the blocking pool.
    on_the_blocking_pool(move || start_moves(&broker, request)).await
}

/// AlterReplicaLogDirs for an authorized principal.
fn start_moves(
    broker: &Arc<Broker>,
    request: AlterReplicaLogDirsRequest,
) -> AlterReplicaLogDirsResponse {
    // Topic → partition results, in the order the topics first come.
    let mut results: Vec<AlterReplicaLogDirTopicResult> = Vec::new();
    for dir in &request.dirs {
        let error = target_error(broker, Path::new(dir.path.as_str()));
        for topic in &dir.topics {
            let position = match results.iter().position(|r| r.topic_name == topic.name) {
                Some(position) => position,
                None => {
                    results.push(
                        AlterReplicaLogDirTopicResult::default()
                            .with_topic_name(topic.name.clone()),
                    );
                    results.len() - 1
                }
            };
            for &index in &topic.partitions {
                let code = match error {
                    Err(error) => error.code(),
                    Ok(target) => start_move(broker, &topic.name.0, index, target),
                };
                results[position].partitions.push(
                    AlterReplicaLogDirPartitionResult::default()
                        .with_partition_index(index)
                        .with_error_code(code),
                );
            }
        }
    }
    AlterReplicaLogDirsResponse::default()
        .with_throttle_time_ms(0)
        .with_results(results)
}

/// The index in `log.dirs` of a move's target, or why none can go there.
fn target_error(broker: &Broker, path: &Path) -> Result<usize, ResponseError> {
    let log_dirs = broker.log_dirs();
    let Some(target) = log_dirs.index_of(path) else {
        return Err(ResponseError::LogDirNotFound);
    };
    if log_dirs.failure(target).is_some() || std::fs::read_dir(path).is_err() {
        return Err(ResponseError::KafkaStorageError);
    }
    Ok(target)
}

/// Starts moving the partition to directory `target`, if it is hosted
/// here and not there already; the partition's error code. A partition
/// not hosted here is REPLICA_NOT_AVAILABLE, and its replica goes to
/// `target` if one is created later, as in Kafka.
fn start_move(broker: &Arc<Broker>, topic: &str, index: i32, target: usize) -> i16 {
    let log_dirs = broker.log_dirs();
    let Some(partition) = broker.partition(topic, index) else {
        log_dirs.prefer(topic, index, target);
        return ResponseError::ReplicaNotAvailable.code();
    };
    let Some(current) = log_dirs.index_holding(partition.log().dir()) else {
        return ResponseError::KafkaStorageError.code();
    };
    if partition.is_offline() {
        return ResponseError::KafkaStorageError.code();
    }
    let Some(job) = log_dirs.begin_move(topic, index, current, target) else {
        return 0;
    };
    let mover = broker.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("move-{topic}-{index}"))
        .spawn(move || crate::replica::dir_move::run(mover.replicas(), &partition, &job));
    match spawned {
        Ok(_) => 0,
        Err(error) => {
            tracing::warn!(topic, partition = index, %error, "cannot start moving a replica");
            ResponseError::KafkaStorageError.code()
        }
    }
}
