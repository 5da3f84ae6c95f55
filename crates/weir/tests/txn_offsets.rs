//! Transactional offset commits against the real broker: TxnOffsetCommit
//! keeps offsets pending, invisible to OffsetFetch (UNSTABLE_OFFSET_COMMIT
//! for a read_committed consumer), across restarts too.

mod common;

use common::cli::block_on;
use common::Weir;
use kafka_protocol::messages::ApiKey;
use weir_client::{Client, ResponseError};

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

#[test]
fn pending_offsets_are_invisible_and_survive_restarts() {
    let mut weir = Weir::start(&[]);
    block_on(async {
        let mut client = Client::connect(&weir.kafka).await.unwrap();
        client.create_topic(TOPIC, 2, &[]).await.unwrap();
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
fn transactional_commits_are_refused_where_kafka_refuses_them() {
    let weir = Weir::start(&[]);
    block_on(async {
        let mut client = Client::connect(&weir.kafka).await.unwrap();
        client.create_topic(TOPIC, 1, &[]).await.unwrap();
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
            Some(3),
            "TxnOffsetCommit 0-3 is advertised"
        );
    });
}
