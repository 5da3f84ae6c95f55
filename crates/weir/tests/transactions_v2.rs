//! Transactions v2 (KIP-890 part 2) against the real broker, at the
//! protocol level a Kafka 4.x Java producer speaks when the cluster
//! finalizes `transaction.version` 2: Produce v12 adds its partition to the
//! transaction through the partition's leader, TxnOffsetCommit v5 adds the
//! group's offsets partition, EndTxn v5 bumps the epoch at every end and
//! hands it back, and a write of an ended transaction arriving late is
//! fenced. Also Produce v13, which names topics by id.

mod common;

use std::time::{Duration, Instant};

use common::cluster::{self, Cluster};
use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, ApiVersionsRequest,
    ApiVersionsResponse, DescribeProducersRequest, DescribeProducersResponse,
    DescribeTransactionsRequest, DescribeTransactionsResponse, EndTxnRequest, EndTxnResponse,
    GroupId, InitProducerIdRequest, InitProducerIdResponse, OffsetFetchRequest,
    OffsetFetchResponse, ProduceRequest, ProduceResponse, ProducerId, TopicName, TransactionalId,
    TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use weir_log::testing::BatchBuilder;

const WAIT: Duration = Duration::from_secs(20);

fn name(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn txn_id(id: &str) -> TransactionalId {
    TransactionalId(name(id))
}

fn init_transactional(raw: &mut Raw, id: &str) -> (i64, i16) {
    assert_eq!(raw.find_coordinator(1, id).error_code, 0);
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(txn_id(id)))
        .with_transaction_timeout_ms(60_000);
    let deadline = Instant::now() + WAIT;
    loop {
        let r: InitProducerIdResponse = raw.call(ApiKey::InitProducerId, 5, &request);
        if r.error_code == 0 {
            return (r.producer_id.0, r.producer_epoch);
        }
        assert!(
            Instant::now() < deadline,
            "InitProducerId: {}",
            r.error_code
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One transactional record for partition 0 of `topic`, in Produce v12:
/// no AddPartitionsToTxn before it.
fn produce_v12(raw: &mut Raw, id: &str, producer: (i64, i16), sequence: i32, topic: &str) -> i16 {
    raw.produce_transactional(id, producer, sequence, topic, 12)
}

/// [`produce_v12`], asked again while the coordinator is still writing the
/// last transaction's markers (NOT_ENOUGH_REPLICAS, as Kafka answers).
fn produce_v12_retried(
    raw: &mut Raw,
    id: &str,
    producer: (i64, i16),
    sequence: i32,
    topic: &str,
) -> i16 {
    let deadline = Instant::now() + WAIT;
    loop {
        let code = produce_v12(raw, id, producer, sequence, topic);
        if code != ResponseError::NotEnoughReplicas.code() || Instant::now() > deadline {
            return code;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// EndTxn v5: the error, and the producer id and epoch to go on with.
fn end_txn_v5(raw: &mut Raw, id: &str, producer: (i64, i16), commit: bool) -> (i16, i64, i16) {
    let request = EndTxnRequest::default()
        .with_transactional_id(txn_id(id))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_committed(commit);
    let r: EndTxnResponse = raw.call(ApiKey::EndTxn, 5, &request);
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

/// The partitions of `id`'s transaction and its state, per its coordinator.
fn described(raw: &mut Raw, id: &str) -> (String, Vec<(String, i32)>, i16) {
    let request = DescribeTransactionsRequest::default().with_transactional_ids(vec![txn_id(id)]);
    let r: DescribeTransactionsResponse = raw.call(ApiKey::DescribeTransactions, 0, &request);
    let state = &r.transaction_states[0];
    assert_eq!(state.error_code, 0);
    let partitions = state
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.topic.0.to_string(), *p)))
        .collect();
    (
        state.transaction_state.to_string(),
        partitions,
        state.producer_epoch,
    )
}

/// The epoch partition 0 of `topic` holds for `producer_id`.
fn partition_epoch(raw: &mut Raw, topic: &str, producer_id: i64) -> i32 {
    use kafka_protocol::messages::describe_producers_request::TopicRequest;
    let request = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(TopicName(name(topic)))
        .with_partition_indexes(vec![0])]);
    let r: DescribeProducersResponse = raw.call(ApiKey::DescribeProducers, 0, &request);
    let partition = &r.topics[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    partition
        .active_producers
        .iter()
        .find(|p| p.producer_id.0 == producer_id)
        .map(|p| p.producer_epoch)
        .expect("the producer is known to the partition")
}

#[test]
fn the_cluster_finalizes_transactions_v2_and_serves_its_versions() {
    let weir = Weir::start(&[]);
    let mut raw = Raw::connect(&weir.kafka);
    let r: ApiVersionsResponse = raw.call(ApiKey::ApiVersions, 4, &ApiVersionsRequest::default());
    let max = |key: ApiKey| {
        r.api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .map(|k| k.max_version)
    };
    assert_eq!(max(ApiKey::Produce), Some(13));
    assert_eq!(max(ApiKey::EndTxn), Some(5));
    assert_eq!(max(ApiKey::InitProducerId), Some(5));
    assert_eq!(max(ApiKey::AddPartitionsToTxn), Some(5));
    assert_eq!(max(ApiKey::TxnOffsetCommit), Some(5));
    let finalized = r
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == "transaction.version")
        .map(|f| (f.min_version_level, f.max_version_level));
    assert_eq!(finalized, Some((2, 2)));
    let supported = r
        .supported_features
        .iter()
        .find(|f| f.name.as_str() == "transaction.version")
        .map(|f| (f.min_version, f.max_version));
    assert_eq!(supported, Some((0, 2)));
}

#[test]
fn the_leader_adds_its_partition_and_every_end_bumps_the_epoch() {
    let weir = Weir::start(&[]);
    cluster::create_topic(&weir.kafka, "ledger", 1, 1);
    let mut raw = Raw::connect(&weir.kafka);
    let id = "ledger-writer";
    let (producer_id, epoch) = init_transactional(&mut raw, id);

    // No AddPartitionsToTxn: the Produce itself puts ledger-0 in the
    // transaction.
    assert_eq!(
        produce_v12(&mut raw, id, (producer_id, epoch), 0, "ledger"),
        0
    );
    let (state, partitions, _) = described(&mut raw, id);
    assert_eq!(state, "Ongoing");
    assert_eq!(partitions, [("ledger".to_owned(), 0)]);
    assert_eq!(
        produce_v12(&mut raw, id, (producer_id, epoch), 1, "ledger"),
        0
    );

    // The commit bumps the epoch and says so.
    let committed = end_txn_v5(&mut raw, id, (producer_id, epoch), true);
    assert_eq!(committed, (0, producer_id, epoch + 1));
    let bumped = (producer_id, epoch + 1);

    // A retried EndTxn (the answer was lost) gets the same answer, once
    // the markers are written.
    let deadline = Instant::now() + WAIT;
    loop {
        let retried = end_txn_v5(&mut raw, id, (producer_id, epoch), true);
        if retried.0 != ResponseError::ConcurrentTransactions.code() {
            assert_eq!(retried, (0, producer_id, epoch + 1));
            break;
        }
        assert!(Instant::now() < deadline, "the markers were never written");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A write of the ended transaction arriving after its markers is
    // fenced (before them, as in Kafka, it joins the transaction it
    // belongs to).
    assert_eq!(
        produce_v12(&mut raw, id, (producer_id, epoch), 2, "ledger"),
        ResponseError::InvalidProducerEpoch.code()
    );
    // The commit marker carries the bumped epoch.
    assert_eq!(
        partition_epoch(&mut raw, "ledger", producer_id),
        i32::from(epoch + 1)
    );

    // The next transaction runs at the new epoch, from sequence 0, and its
    // abort bumps the epoch again.
    assert_eq!(produce_v12_retried(&mut raw, id, bumped, 0, "ledger"), 0);
    assert_eq!(
        end_txn_v5(&mut raw, id, bumped, false),
        (0, producer_id, epoch + 2)
    );
    // Aborting a transaction nothing was added to is allowed too.
    let deadline = Instant::now() + WAIT;
    loop {
        let aborted = end_txn_v5(&mut raw, id, (producer_id, epoch + 2), false);
        if aborted.0 != ResponseError::ConcurrentTransactions.code() {
            assert_eq!(aborted, (0, producer_id, epoch + 3));
            break;
        }
        assert!(Instant::now() < deadline, "the markers were never written");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Two committed records and their marker, one aborted record and its
    // marker; the empty transaction wrote none.
    let stable = cluster::wait_until("the last stable offset", WAIT, || {
        let lso = raw.last_stable_offset("ledger");
        (lso == 5).then_some(lso)
    });
    assert_eq!(stable, 5);
    assert_eq!(raw.latest_offset("ledger", 0), 5);
}

#[test]
fn txn_offset_commit_v5_adds_the_offsets_partition() {
    let weir = Weir::start(&[]);
    cluster::create_topic(&weir.kafka, "source", 1, 1);
    let mut raw = Raw::connect(&weir.kafka);
    let id = "offsets-writer";
    let group = "eos-readers";
    let producer = init_transactional(&mut raw, id);
    assert_eq!(raw.find_coordinator(0, group).error_code, 0);
    let request = TxnOffsetCommitRequest::default()
        .with_transactional_id(txn_id(id))
        .with_group_id(GroupId(name(group)))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(TopicName(name("source")))
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(42)])]);
    // Asked again while the group's coordinator loads, as clients do.
    let code = cluster::wait_until("the offsets commit", WAIT, || {
        let r: TxnOffsetCommitResponse = raw.call(ApiKey::TxnOffsetCommit, 5, &request);
        let code = r.topics[0].partitions[0].error_code;
        (code != ResponseError::CoordinatorLoadInProgress.code()).then_some(code)
    });
    assert_eq!(code, 0);
    let (state, partitions, _) = described(&mut raw, id);
    assert_eq!(state, "Ongoing");
    assert_eq!(partitions.len(), 1);
    assert_eq!(partitions[0].0, "__consumer_offsets");

    assert_eq!(end_txn_v5(&mut raw, id, producer, true).0, 0);
    let committed = cluster::wait_until("the committed offset", WAIT, || {
        let request = OffsetFetchRequest::default()
            .with_group_id(GroupId(name(group)))
            .with_topics(None);
        let r: OffsetFetchResponse = raw.call(ApiKey::OffsetFetch, 7, &request);
        let offset = r
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .map_or(-1, |p| p.committed_offset);
        (offset >= 0).then_some(offset)
    });
    assert_eq!(committed, 42);
}

#[test]
fn add_partitions_to_txn_v4_verifies_for_the_leaders() {
    let weir = Weir::start(&[]);
    cluster::create_topic(&weir.kafka, "checked", 1, 1);
    let mut raw = Raw::connect(&weir.kafka);
    let id = "verified";
    let producer = init_transactional(&mut raw, id);
    let verify = |raw: &mut Raw, verify_only: bool| {
        let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
            AddPartitionsToTxnTransaction::default()
                .with_transactional_id(txn_id(id))
                .with_producer_id(ProducerId(producer.0))
                .with_producer_epoch(producer.1)
                .with_verify_only(verify_only)
                .with_topics(vec![AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(name("checked")))
                    .with_partitions(vec![0])]),
        ]);
        let r: AddPartitionsToTxnResponse = raw.call(ApiKey::AddPartitionsToTxn, 4, &request);
        assert_eq!(r.error_code, 0);
        r.results_by_transaction[0].topic_results[0].results_by_partition[0].partition_error_code
    };
    assert_eq!(
        verify(&mut raw, true),
        ResponseError::InvalidTxnState.code(),
        "not in the transaction yet"
    );
    assert_eq!(verify(&mut raw, false), 0);
    assert_eq!(verify(&mut raw, true), 0);
}

#[test]
fn produce_v13_names_topics_by_id() {
    let weir = Weir::start(&[]);
    cluster::create_topic(&weir.kafka, "by-id", 1, 1);
    let mut raw = Raw::connect(&weir.kafka);
    let topic_id = {
        use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
        use kafka_protocol::messages::{MetadataRequest, MetadataResponse};
        let request = MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(TopicName(name("by-id")))),
        ]));
        let r: MetadataResponse = raw.call(ApiKey::Metadata, 12, &request);
        r.topics[0].topic_id
    };
    let produce = |raw: &mut Raw, topic_id| {
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(5_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_topic_id(topic_id)
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(BatchBuilder::new(3).build().into()))])]);
        let mut r: ProduceResponse = raw.call(ApiKey::Produce, 13, &request);
        r.responses.remove(0)
    };
    let answered = produce(&mut raw, topic_id);
    assert_eq!(answered.topic_id, topic_id);
    assert_eq!(answered.partition_responses[0].error_code, 0);
    assert_eq!(raw.latest_offset("by-id", 0), 3);
    let unknown = produce(&mut raw, uuid::Uuid::from_u128(7));
    assert_eq!(
        unknown.partition_responses[0].error_code,
        ResponseError::UnknownTopicId.code()
    );
}

/// The partition's leader and the producer's coordinator on different
/// brokers: the leader asks over AddPartitionsToTxn v5.
#[test]
fn a_leader_adds_its_partition_through_another_brokers_coordinator() {
    let cluster = Cluster::start(&[]);
    let bootstrap = cluster.bootstrap();
    cluster::create_topic(&bootstrap, "spread", 1, 1);
    let leader = cluster::wait_until("a leader", WAIT, || {
        cluster::partitions(&bootstrap, "spread")
            .first()
            .map(|p| p.leader)
            .filter(|l| *l > 0)
    });
    let mut to_leader = Raw::connect(&cluster.node(leader).kafka);
    let id = (0..)
        .map(|i| format!("spread-writer-{i}"))
        .find(|id| to_leader.find_coordinator(1, id).node_id.0 != leader)
        .unwrap();
    let coordinator = to_leader.find_coordinator(1, &id).node_id.0;
    let mut to_coordinator = Raw::connect(&cluster.node(coordinator).kafka);
    let producer = init_transactional(&mut to_coordinator, &id);

    assert_eq!(
        produce_v12_retried(&mut to_leader, &id, producer, 0, "spread"),
        0
    );
    let (state, partitions, _) = described(&mut to_coordinator, &id);
    assert_eq!(state, "Ongoing");
    assert_eq!(partitions, [("spread".to_owned(), 0)]);
    assert_eq!(
        end_txn_v5(&mut to_coordinator, &id, producer, true),
        (0, producer.0, producer.1 + 1)
    );
    let stable = cluster::wait_until("the commit", WAIT, || {
        let lso = to_leader.last_stable_offset("spread");
        (lso == 2).then_some(lso)
    });
    assert_eq!(stable, 2);
}
