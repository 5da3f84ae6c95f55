//! The ends of partitions a group's coordinator does not host, asked of
//! their leaders: a group's coordinator reports the lag of every partition
//! the group committed, wherever it is led. Per leader, one ListOffsets
//! (the log start) and one Fetch from the committed offsets (high
//! watermark, last stable offset, and the timestamp of the first record
//! not yet consumed), as Kafka's lag exporters ask them.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use weir_client::{Client, ClientConfig, ClientError, EARLIEST};

use crate::broker::Broker;

/// How long one leader may take to answer, all requests included.
const LEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// Bytes per partition: enough for the first batch to be read.
const PARTITION_MAX_BYTES: i32 = 16 << 10;
/// Bytes per leader's response: a bound on what a scrape costs.
const RESPONSE_MAX_BYTES: i32 = 1 << 20;

/// A partition of another broker, and the offset a group committed in it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Wanted {
    pub topic: String,
    pub partition: i32,
    pub committed: i64,
}

/// What the leader said of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RemoteEnd {
    pub log_start: u64,
    pub high_watermark: u64,
    pub last_stable: u64,
    /// The timestamp of the first record at or after the committed offset
    /// (or the log start), if the leader returned one.
    pub first_unconsumed_timestamp: Option<i64>,
}

/// The ends of `wanted`, by (topic, partition, committed offset); a
/// partition whose leader did not answer is left out (and logged).
pub(super) async fn ask_leaders(
    broker: &Broker,
    wanted: Vec<Wanted>,
) -> HashMap<(String, i32, i64), RemoteEnd> {
    // Leader address → its partitions.
    let mut by_leader: BTreeMap<String, Vec<Wanted>> = BTreeMap::new();
    broker.with_image(|image| {
        for w in wanted {
            let leader = image
                .topic(&w.topic)
                .and_then(|t| t.partition(w.partition))
                .map_or(-1, |p| p.leader);
            if let Some(b) = image.broker(leader).filter(|_| !image.is_fenced(leader)) {
                by_leader
                    .entry(format!("{}:{}", b.host, b.port))
                    .or_default()
                    .push(w);
            }
        }
    });
    let security = broker.inter_broker_security().clone();
    let asks = by_leader.into_iter().map(|(addr, wanted)| {
        let security = security.clone();
        async move {
            let asked = tokio::time::timeout(LEADER_TIMEOUT, async {
                let mut client =
                    Client::connect_with_security(&addr, ClientConfig::default(), security).await?;
                ends_from(&mut client, &wanted).await
            })
            .await;
            match asked {
                Ok(Ok(ends)) => ends,
                Ok(Err(error)) => {
                    tracing::debug!(leader = %addr, %error, "cannot read partition ends for lag");
                    Vec::new()
                }
                Err(_) => {
                    tracing::debug!(leader = %addr, "partition ends for lag timed out");
                    Vec::new()
                }
            }
        }
    });
    futures::future::join_all(asks)
        .await
        .into_iter()
        .flatten()
        .map(|(w, end)| ((w.topic, w.partition, w.committed), end))
        .collect()
}

/// One leader's answers for `wanted`, each partition it could answer for.
async fn ends_from(
    client: &mut Client,
    wanted: &[Wanted],
) -> Result<Vec<(Wanted, RemoteEnd)>, ClientError> {
    let starts = log_starts(client, wanted).await?;
    // A Fetch names a partition once: groups at different offsets of the
    // same partition go in rounds.
    let mut rounds: Vec<Vec<Wanted>> = Vec::new();
    for w in wanted {
        match rounds.iter_mut().find(|round| {
            !round
                .iter()
                .any(|o| o.topic == w.topic && o.partition == w.partition)
        }) {
            Some(round) => round.push(w.clone()),
            None => rounds.push(vec![w.clone()]),
        }
    }
    let mut ends = Vec::with_capacity(wanted.len());
    for round in rounds {
        ends.extend(fetch_ends(client, &round, &starts).await?);
    }
    Ok(ends)
}

/// One Fetch for `wanted` (each partition once) from their committed
/// offsets, or their log start if that is above.
async fn fetch_ends(
    client: &mut Client,
    wanted: &[Wanted],
    starts: &HashMap<(String, i32), i64>,
) -> Result<Vec<(Wanted, RemoteEnd)>, ClientError> {
    let mut topics: Vec<FetchTopic> = Vec::new();
    let mut asked = Vec::new();
    for w in wanted {
        let Some(&start) = starts.get(&(w.topic.clone(), w.partition)) else {
            continue;
        };
        let from = w.committed.max(start);
        asked.push((w.clone(), start, from));
        let partition = FetchPartition::default()
            .with_partition(w.partition)
            .with_fetch_offset(from)
            .with_partition_max_bytes(PARTITION_MAX_BYTES);
        match topics.iter_mut().find(|t| t.topic.0.as_str() == w.topic) {
            Some(topic) => topic.partitions.push(partition),
            None => topics.push(
                FetchTopic::default()
                    .with_topic(topic_name(&w.topic))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    let request = FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(RESPONSE_MAX_BYTES)
        .with_isolation_level(0)
        .with_topics(topics);
    // Version 12: topics by name, and the last stable offset.
    let response: FetchResponse = client.call_version(ApiKey::Fetch, 12, &request).await?;
    let mut ends = Vec::with_capacity(asked.len());
    for (w, start, from) in asked {
        let Some(data) = response
            .responses
            .iter()
            .filter(|t| t.topic.0.as_str() == w.topic)
            .flat_map(|t| &t.partitions)
            .find(|p| p.partition_index == w.partition && p.error_code == 0)
        else {
            continue;
        };
        let first_unconsumed_timestamp = data
            .records
            .clone()
            .and_then(|bytes| weir_client::decode_records(bytes, from).ok())
            .and_then(|decoded| decoded.records.first().map(|r| r.timestamp));
        let end = RemoteEnd {
            log_start: data.log_start_offset.max(start).max(0) as u64,
            high_watermark: data.high_watermark.max(0) as u64,
            last_stable: data.last_stable_offset.max(0) as u64,
            first_unconsumed_timestamp,
        };
        ends.push((w, end));
    }
    Ok(ends)
}

/// The log start of each of `wanted`'s partitions the leader answered for.
async fn log_starts(
    client: &mut Client,
    wanted: &[Wanted],
) -> Result<HashMap<(String, i32), i64>, ClientError> {
    let mut topics: Vec<ListOffsetsTopic> = Vec::new();
    for w in wanted {
        let partition = ListOffsetsPartition::default()
            .with_partition_index(w.partition)
            .with_timestamp(EARLIEST);
        match topics.iter_mut().find(|t| t.name.0.as_str() == w.topic) {
            Some(topic) => {
                if !topic
                    .partitions
                    .iter()
                    .any(|p| p.partition_index == w.partition)
                {
                    topic.partitions.push(partition);
                }
            }
            None => topics.push(
                ListOffsetsTopic::default()
                    .with_name(topic_name(&w.topic))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    let request = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_topics(topics);
    let response: ListOffsetsResponse = client.call(ApiKey::ListOffsets, &request).await?;
    Ok(response
        .topics
        .into_iter()
        .flat_map(|t| {
            let topic = t.name.0.to_string();
            t.partitions
                .into_iter()
                .filter(|p| p.error_code == 0)
                .map(move |p| ((topic.clone(), p.partition_index), p.offset))
        })
        .collect())
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}
