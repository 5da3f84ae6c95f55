//! Transactional offset commits against the real broker: TxnOffsetCommit
//! keeps offsets pending, invisible to OffsetFetch (UNSTABLE_OFFSET_COMMIT
//! for a read_committed consumer), until a WriteTxnMarkers to the group's
//! `__consumer_offsets` partition commits or aborts them; committed and
//! pending offsets both survive restarts. A group a transaction commits
//! offsets for exists from the commit on, Empty, until the offsets
//! retention check finds it without offsets or open transactions.

mod common;

use common::cli::block_on;
use common::Weir;
use kafka_protocol::messages::ApiKey;
use weir_broker::groups::offsets::OFFSETS_TOPIC;
use weir_client::{Client, GroupDescription, ListedGroup, ResponseError, TxnMarker, DEAD};
use weir_coord::records::offsets::partition_for;

const GROUP: &str = "copier";
const TOPIC: &str = "input";

fn topics() -> Vec<(String, Vec<i32>)> {
    vec![(TOPIC.to_owned(), vec![0, 1])]
}

/// The committed offsets of the group, as `(partition, offset)`.
async fn committed(client: &mut Client) -> Vec<(i32, i64)> {
    client
        .offset_fetch(GROUP, Some(&topics()))
        .await
        .unwrap()
        .into_iter()
        .map(|c| (c.partition, c.offset))
        .collect()
}

/// What a read_committed consumer is told: the offsets, or the error.
async fn stable(client: &mut Client) -> Result<Vec<(i32, i64)>, ResponseError> {
    match client.offset_fetch_stable(GROUP, Some(&topics())).await {
        Ok(offsets) => Ok(offsets
            .into_iter()
            .map(|c| (c.partition, c.offset))
            .collect()),
        Err(error) => Err(error.kafka_error().expect("a Kafka error")),
    }
}

async fn txn_commit(client: &mut Client, producer_id: i64, offsets: &[(i32, i64)]) {
    let offsets: Vec<(String, i32, i64)> = offsets
        .iter()
        .map(|&(p, o)| (TOPIC.to_owned(), p, o))
        .collect();
    let transactional_id = format!("copier-{producer_id}");
    client
        .txn_offset_commit(&transactional_id, producer_id, 0, GROUP, &offsets)
        .await
        .unwrap();
}

/// Ends the producer's transaction in the group's `__consumer_offsets`
/// partition, as the transaction coordinator does.
async fn marker(client: &mut Client, producer_id: i64, commit: bool) {
    let count = client
        .metadata(Some(&[OFFSETS_TOPIC.to_owned()]))
        .await
        .unwrap()
        .topic(OFFSETS_TOPIC)
        .expect("__consumer_offsets exists")
        .partitions
        .len() as i32;
    let marker = TxnMarker {
        producer_id,
        producer_epoch: 0,
        commit,
        coordinator_epoch: 0,
        partitions: vec![(OFFSETS_TOPIC.to_owned(), partition_for(GROUP, count))],
    };
    for outcome in client.write_txn_markers(&[marker]).await.unwrap() {
        assert_eq!(outcome.error_code, 0, "{outcome:?}");
    }
}

#[test]
fn pending_offsets_are_invisible_and_survive_restarts() {
    let mut weir = Weir::start(&[]);
    block_on(async {
        let mut client = Client::connect(&weir.kafka).await.unwrap();
        client.create_topic(TOPIC, 2, &[]).await.unwrap();
        // As a client would: this creates __consumer_offsets.
        client.find_coordinator(GROUP).await.unwrap();
        client
            .offset_commit_simple(GROUP, &[(TOPIC.to_owned(), 0, 3)])
            .await
            .unwrap();
        txn_commit(&mut client, 1000, &[(0, 10), (1, 11)]).await;
        assert_eq!(committed(&mut client).await, vec![(0, 3)]);
        assert_eq!(
            stable(&mut client).await,
            Err(ResponseError::UnstableOffsetCommit)
        );
        // Partitions without an open transaction are answered as usual.
        let other = vec![("other".to_owned(), vec![0])];
        client.create_topic("other", 1, &[]).await.unwrap();
        assert_eq!(
            client
                .offset_fetch_stable(GROUP, Some(&other))
                .await
                .unwrap(),
            vec![]
        );
    });
    for clean in [true, false] {
        weir.restart(clean);
        block_on(async {
            let mut client = Client::connect(&weir.kafka).await.unwrap();
            assert_eq!(committed(&mut client).await, vec![(0, 3)]);
            assert_eq!(
                stable(&mut client).await,
                Err(ResponseError::UnstableOffsetCommit),
                "restart (clean: {clean})"
            );
        });
    }
}

#[test]
fn markers_commit_or_abort_pending_offsets_and_commits_survive_restarts() {
    markers_commit_or_abort_pending_offsets(&[]);
}

/// The same where every coordinator write and marker is synced before it
/// is answered, an fsync in the request's own path.
#[test]
fn markers_and_commits_work_with_every_message_synced() {
    markers_commit_or_abort_pending_offsets(&["--log-flush-interval-messages", "1"]);
}

fn markers_commit_or_abort_pending_offsets(broker_args: &[&str]) {
    let mut weir = Weir::start(broker_args);
    block_on(async {
        let mut client = Client::connect(&weir.kafka).await.unwrap();
        client.create_topic(TOPIC, 2, &[]).await.unwrap();
        // As a client would: this creates __consumer_offsets.
        client.find_coordinator(GROUP).await.unwrap();
        client
            .offset_commit_simple(GROUP, &[(TOPIC.to_owned(), 0, 3)])
            .await
            .unwrap();

        // Producer 1000 consumed up to 10 and 11: pending.
        txn_commit(&mut client, 1000, &[(0, 10), (1, 11)]).await;
        assert_eq!(committed(&mut client).await, vec![(0, 3)]);
        assert_eq!(
            stable(&mut client).await,
            Err(ResponseError::UnstableOffsetCommit)
        );
        marker(&mut client, 1000, true).await;
        assert_eq!(committed(&mut client).await, vec![(0, 10), (1, 11)]);
        assert_eq!(stable(&mut client).await, Ok(vec![(0, 10), (1, 11)]));

        // Its next transaction aborts: nothing changes.
        txn_commit(&mut client, 1000, &[(0, 20)]).await;
        marker(&mut client, 1000, false).await;
        assert_eq!(stable(&mut client).await, Ok(vec![(0, 10), (1, 11)]));

        // Producer 1001's transaction is still open at the restart.
        txn_commit(&mut client, 1001, &[(1, 30)]).await;
    });
    for clean in [true, false] {
        weir.restart(clean);
        block_on(async {
            let mut client = Client::connect(&weir.kafka).await.unwrap();
            assert_eq!(committed(&mut client).await, vec![(0, 10), (1, 11)]);
            assert_eq!(
                stable(&mut client).await,
                Err(ResponseError::UnstableOffsetCommit),
                "restart (clean: {clean})"
            );
        });
    }
    block_on(async {
        let mut client = Client::connect(&weir.kafka).await.unwrap();
        marker(&mut client, 1001, true).await;
        assert_eq!(stable(&mut client).await, Ok(vec![(0, 10), (1, 30)]));
    });
    weir.restart(false);
    block_on(async {
        let mut client = Client::connect(&weir.kafka).await.unwrap();
        assert_eq!(stable(&mut client).await, Ok(vec![(0, 10), (1, 30)]));
    });
}

#[test]
fn transactional_commits_are_refused_where_kafka_refuses_them() {
    let weir = Weir::start(&[]);
    block_on(async {
        let mut client = Client::connect(&weir.kafka).await.unwrap();
        client.create_topic(TOPIC, 1, &[]).await.unwrap();
        // As a client would: this creates __consumer_offsets.
        client.find_coordinator(GROUP).await.unwrap();
        let offsets = vec![(TOPIC.to_owned(), 0, 5)];
        let error = client
            .txn_offset_commit("t", 7, 0, "", &offsets)
            .await
            .unwrap_err();
        assert!(error.is(ResponseError::InvalidGroupId), "{error}");
        let missing = vec![("missing".to_owned(), 0, 5)];
        let error = client
            .txn_offset_commit("t", 7, 0, GROUP, &missing)
            .await
            .unwrap_err();
        assert!(error.is(ResponseError::UnknownTopicOrPartition), "{error}");

        // A newer epoch of the producer fences the older one.
        client
            .txn_offset_commit("t", 7, 2, GROUP, &offsets)
            .await
            .unwrap();
        let error = client
            .txn_offset_commit("t", 7, 1, GROUP, &offsets)
            .await
            .unwrap_err();
        assert!(error.is(ResponseError::InvalidProducerEpoch), "{error}");
        assert_eq!(
            client.version(ApiKey::TxnOffsetCommit),
            Some(4),
            "TxnOffsetCommit 0-4 is advertised"
        );
    });
}

/// What a read_committed consumer (librdkafka) reads as the group's
/// committed offsets once no transaction has them pending.
fn committed_read_committed(weir: &Weir) -> Vec<(i32, rdkafka::Offset)> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &weir.kafka)
        .set("group.id", GROUP)
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .create()
        .unwrap();
    let mut asked = rdkafka::TopicPartitionList::new();
    asked.add_partition(TOPIC, 0);
    asked.add_partition(TOPIC, 1);
    let found = consumer
        .committed_offsets(asked, std::time::Duration::from_secs(20))
        .unwrap();
    (0..2)
        .map(|p| (p, found.find_partition(TOPIC, p).unwrap().offset()))
        .collect()
}

#[test]
fn a_transactional_producer_commits_consumed_offsets_with_its_transaction() {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::producer::{BaseProducer, Producer};
    use rdkafka::Offset;
    let timeout = std::time::Duration::from_secs(30);
    let weir = Weir::start(&[]);
    block_on(async {
        let mut client = Client::connect(&weir.kafka).await.unwrap();
        client.create_topic(TOPIC, 2, &[]).await.unwrap();
        // As a client would: this creates __consumer_offsets.
        client.find_coordinator(GROUP).await.unwrap();
    });
    let producer: BaseProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &weir.kafka)
        .set("transactional.id", "copier-rdkafka")
        .create()
        .unwrap();
    producer.init_transactions(timeout).unwrap();
    // The consumer whose position the transaction commits; outside group
    // management, as a consumer that assigns itself partitions is.
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &weir.kafka)
        .set("group.id", GROUP)
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let group = consumer.group_metadata().unwrap();
    let offsets = |positions: &[(i32, i64)]| {
        let mut tpl = rdkafka::TopicPartitionList::new();
        for &(p, o) in positions {
            tpl.add_partition_offset(TOPIC, p, Offset::Offset(o))
                .unwrap();
        }
        tpl
    };

    producer.begin_transaction().unwrap();
    producer
        .send_offsets_to_transaction(&offsets(&[(0, 7), (1, 9)]), &group, timeout)
        .unwrap();
    producer.commit_transaction(timeout).unwrap();
    let committed = vec![(0, Offset::Offset(7)), (1, Offset::Offset(9))];
    assert_eq!(committed_read_committed(&weir), committed);

    producer.begin_transaction().unwrap();
    producer
        .send_offsets_to_transaction(&offsets(&[(0, 70)]), &group, timeout)
        .unwrap();
    producer.abort_transaction(timeout).unwrap();
    assert_eq!(committed_read_committed(&weir), committed);
}

/// The group as ListGroups lists it (`None`: not listed) and as
/// DescribeGroups describes it: `(state, protocol type, members)`.
async fn listed_and_described(
    client: &mut Client,
) -> (Option<ListedGroup>, (String, String, usize)) {
    let listed = client
        .list_groups()
        .await
        .unwrap()
        .into_iter()
        .find(|g| g.group_id == GROUP);
    let described: GroupDescription = client.describe_groups(&[GROUP]).await.unwrap().remove(0);
    (
        listed,
        (
            described.state,
            described.protocol_type,
            described.members.len(),
        ),
    )
}

/// How Kafka lists and describes a group it knows with no members.
fn empty() -> (Option<ListedGroup>, (String, String, usize)) {
    let listed = ListedGroup {
        group_id: GROUP.to_owned(),
        protocol_type: String::new(),
        state: Some("Empty".to_owned()),
        group_type: Some("classic".to_owned()),
    };
    (Some(listed), ("Empty".to_owned(), String::new(), 0))
}

#[test]
fn a_group_with_only_pending_offsets_is_empty_not_dead() {
    let mut weir = Weir::start(&[]);
    block_on(async {
        let mut client = Client::connect(&weir.kafka).await.unwrap();
        client.create_topic(TOPIC, 2, &[]).await.unwrap();
        // As a client would: this creates __consumer_offsets.
        client.find_coordinator(GROUP).await.unwrap();
        txn_commit(&mut client, 1000, &[(0, 10)]).await;
        assert_eq!(listed_and_described(&mut client).await, empty());
        // The transaction aborts: no offsets are left, but the group stays
        // until the offsets retention check (10 minutes by default).
        marker(&mut client, 1000, false).await;
        assert!(committed(&mut client).await.is_empty());
        assert_eq!(listed_and_described(&mut client).await, empty());

        // Another transaction commits offsets and is open at a restart.
        txn_commit(&mut client, 1001, &[(1, 20)]).await;
    });
    weir.restart(false);
    block_on(async {
        let mut client = Client::connect(&weir.kafka).await.unwrap();
        assert_eq!(listed_and_described(&mut client).await, empty());
        marker(&mut client, 1001, true).await;
        assert_eq!(committed(&mut client).await, vec![(1, 20)]);
        assert_eq!(listed_and_described(&mut client).await, empty());
    });
}

#[test]
fn the_offsets_retention_check_removes_a_group_an_aborted_transaction_left_empty() {
    let weir = Weir::start(&["--offsets-retention-check-interval-ms", "100"]);
    block_on(async {
        let mut client = Client::connect(&weir.kafka).await.unwrap();
        client.create_topic(TOPIC, 2, &[]).await.unwrap();
        // As a client would: this creates __consumer_offsets.
        client.find_coordinator(GROUP).await.unwrap();
        txn_commit(&mut client, 1000, &[(0, 10), (1, 11)]).await;
        // An open transaction keeps the group through the checks.
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        assert_eq!(listed_and_described(&mut client).await, empty());

        marker(&mut client, 1000, false).await;
        let gone = (None, (DEAD.to_owned(), String::new(), 0));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while listed_and_described(&mut client).await != gone {
            assert!(
                std::time::Instant::now() < deadline,
                "the group outlived its transaction"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let deleted = client.delete_groups(&[GROUP]).await.unwrap().remove(0).1;
        assert!(
            deleted
                .as_ref()
                .is_err_and(|e| e.is(ResponseError::GroupIdNotFound)),
            "{deleted:?}"
        );
    });
}
