//! Share groups (KIP-932) on the wire, request by request: membership,
//! acquisition, acknowledgement, share sessions and their errors, and
//! share-partition state that outlives the broker.

mod common;

use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckBatch,
};
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition, FetchTopic,
};
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, GroupId,
    HeartbeatRequest, HeartbeatResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest,
    ShareFetchResponse, ShareGroupDescribeRequest, ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse, SyncGroupRequest, SyncGroupResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use std::time::{Duration, Instant};
use uuid::Uuid;
use weir_log::testing::BatchBuilder;

const TOPIC: &str = "jobs";
const GROUP: &str = "workers";
const GROUP_RESOURCE: i8 = 32;
const ACCEPT: i8 = 1;
const RELEASE: i8 = 2;
const REJECT: i8 = 3;

fn str(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn create_topic(raw: &mut Raw, replicas: i16) -> Uuid {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
    let response: CreateTopicsResponse = raw.call(
        ApiKey::CreateTopics,
        7,
        &CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(str(TOPIC)))
            .with_num_partitions(1)
            .with_replication_factor(replicas)]),
    );
    assert_eq!(response.topics[0].error_code, 0);
    response.topics[0].topic_id
}

fn set_group_config(raw: &mut Raw, name: &str, value: &str) {
    set_config_of_group(raw, GROUP, name, value);
}

fn set_config_of_group(raw: &mut Raw, group: &str, name: &str, value: &str) {
    let response: IncrementalAlterConfigsResponse = raw.call(
        ApiKey::IncrementalAlterConfigs,
        1,
        &IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(GROUP_RESOURCE)
                .with_resource_name(str(group))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(str(name))
                    .with_config_operation(0)
                    .with_value(Some(str(value)))]),
        ]),
    );
    assert_eq!(response.responses[0].error_code, 0, "{response:?}");
}

/// Joins the group as a new member; its id.
fn join(raw: &mut Raw) -> String {
    assert_eq!(raw.find_coordinator(0, GROUP).error_code, 0);
    let (member, response) = heartbeat_new_member(raw, GROUP);
    assert!(response.member_epoch > 0);
    let assignment = response
        .assignment
        .expect("a joining member gets its assignment");
    assert_eq!(assignment.topic_partitions[0].partitions, vec![0]);
    member
}

/// A first heartbeat of a new member of `group`, asked again while the
/// coordinator is still loading (as clients do); the member id and the
/// answer.
fn heartbeat_new_member(raw: &mut Raw, group: &str) -> (String, ShareGroupHeartbeatResponse) {
    let member = Uuid::new_v4().to_string();
    let request = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(str(group)))
        .with_member_id(str(&member))
        .with_member_epoch(0)
        .with_subscribed_topic_names(Some(vec![TopicName(str(TOPIC))]));
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let response: ShareGroupHeartbeatResponse =
            raw.call(ApiKey::ShareGroupHeartbeat, 1, &request);
        let loading = response.error_code == ResponseError::CoordinatorLoadInProgress.code();
        if !loading || Instant::now() > deadline {
            assert_eq!(response.error_code, 0, "{response:?}");
            return (member, response);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn share_fetch(
    raw: &mut Raw,
    member: &str,
    epoch: i32,
    topic_id: Uuid,
    acks: Vec<AcknowledgementBatch>,
    max_wait_ms: i32,
) -> ShareFetchResponse {
    raw.call(
        ApiKey::ShareFetch,
        1,
        &ShareFetchRequest::default()
            .with_group_id(Some(GroupId(str(GROUP))))
            .with_member_id(Some(str(member)))
            .with_share_session_epoch(epoch)
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_max_records(100)
            .with_batch_size(100)
            .with_topics(vec![FetchTopic::default()
                .with_topic_id(topic_id)
                .with_partitions(vec![FetchPartition::default()
                    .with_partition_index(0)
                    .with_acknowledgement_batches(acks)])]),
    )
}

/// The (first, last, delivery count) ranges a ShareFetch acquired.
fn acquired(response: &ShareFetchResponse) -> Vec<(i64, i64, i16)> {
    assert_eq!(response.error_code, 0, "{response:?}");
    response
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .inspect(|p| assert_eq!(p.error_code, 0, "{p:?}"))
        .flat_map(|p| p.acquired_records.iter())
        .map(|r| (r.first_offset, r.last_offset, r.delivery_count))
        .collect()
}

fn ack(first: i64, last: i64, kind: i8) -> AcknowledgementBatch {
    AcknowledgementBatch::default()
        .with_first_offset(first)
        .with_last_offset(last)
        .with_acknowledge_types(vec![kind])
}

fn share_acknowledge(
    raw: &mut Raw,
    member: &str,
    epoch: i32,
    topic_id: Uuid,
    batches: Vec<AckBatch>,
) -> ShareAcknowledgeResponse {
    raw.call(
        ApiKey::ShareAcknowledge,
        1,
        &ShareAcknowledgeRequest::default()
            .with_group_id(Some(GroupId(str(GROUP))))
            .with_member_id(Some(str(member)))
            .with_share_session_epoch(epoch)
            .with_topics(vec![AcknowledgeTopic::default()
                .with_topic_id(topic_id)
                .with_partitions(vec![AcknowledgePartition::default()
                    .with_partition_index(0)
                    .with_acknowledgement_batches(batches)])]),
    )
}

fn started() -> (Weir, Raw, Uuid) {
    started_with(&[])
}

/// A broker started with `args`, a topic of ten records, and a group that
/// starts at the earliest: a raw connection to its first listener.
fn started_with(args: &[&str]) -> (Weir, Raw, Uuid) {
    let weir = Weir::start(args);
    let mut raw = Raw::connect(&weir.kafka);
    let topic_id = create_topic(&mut raw, 1);
    set_group_config(&mut raw, "share.auto.offset.reset", "earliest");
    let (code, _) = raw.produce(TOPIC, 0, BatchBuilder::new(10).build());
    assert_eq!(code, 0);
    (weir, raw, topic_id)
}

#[test]
fn acknowledged_records_survive_a_crash_and_only_those_in_flight_come_back() {
    let (mut weir, mut raw, topic_id) = started();
    let member = join(&mut raw);
    // The first fetch waits while __share_group_state is being created.
    let first = share_fetch(&mut raw, &member, 0, topic_id, vec![], 10_000);
    assert_eq!(acquired(&first), vec![(0, 9, 1)]);
    let records = first.responses[0].partitions[0].records.as_ref().unwrap();
    assert!(
        !records.is_empty(),
        "the acquired records come with their batch"
    );
    // Accept 0..=4 and release 5; 6..=9 stay acquired.
    let acked = share_acknowledge(
        &mut raw,
        &member,
        1,
        topic_id,
        vec![
            AckBatch::default()
                .with_first_offset(0)
                .with_last_offset(4)
                .with_acknowledge_types(vec![ACCEPT]),
            AckBatch::default()
                .with_first_offset(5)
                .with_last_offset(5)
                .with_acknowledge_types(vec![RELEASE]),
        ],
    );
    assert_eq!(acked.error_code, 0, "{acked:?}");
    assert_eq!(acked.responses[0].partitions[0].error_code, 0);

    weir.restart(false); // kill -9
    let mut raw = Raw::connect(&weir.kafka);
    let member = join(&mut raw);
    let again = share_fetch(&mut raw, &member, 0, topic_id, vec![], 10_000);
    // Nothing accepted comes back; what was in flight does, its delivery
    // counted.
    assert_eq!(acquired(&again), vec![(5, 9, 2)]);
    let done = share_fetch(&mut raw, &member, 1, topic_id, vec![ack(5, 9, ACCEPT)], 300);
    assert_eq!(done.responses[0].partitions[0].acknowledge_error_code, 0);
    assert_eq!(acquired(&done), vec![]);
}

/// Asserts the values of share-group metrics of the group's partition.
fn assert_metrics(weir: &Weir, expected: &[(&str, u64)]) {
    let (_, metrics) = weir.http_get("/metrics");
    let labels = r#"{group="workers",topic="jobs",partition="0"}"#;
    for (name, value) in expected {
        let line = format!("{name}{labels} {value}");
        assert!(
            metrics.lines().any(|l| l == line),
            "no {line} in\n{metrics}"
        );
    }
}

/// Runs `weir ARGS` against `weir` until its output contains `wanted`.
fn cli_until(weir: &Weir, args: &[&str], wanted: &str) -> String {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--bootstrap", &weir.kafka]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let out = common::cli::run(&all, b"");
        if out.stdout.contains(wanted) || std::time::Instant::now() > deadline {
            assert!(
                out.stdout.contains(wanted),
                "{all:?}: {}\n{}",
                out.stdout,
                out.stderr
            );
            return out.stdout;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[test]
fn rejected_records_are_dead_lettered_once_and_weir_dlq_lists_and_replays_them() {
    let (mut weir, mut raw, topic_id) = started();
    let out = common::cli::run(
        &[
            "topic",
            "create",
            "dlq.jobs",
            "--partitions",
            "3",
            "--config",
            "errors.deadletterqueue.group.enable=true",
            "--bootstrap",
            &weir.kafka,
        ],
        b"",
    );
    out.ok();
    set_group_config(&mut raw, "errors.deadletterqueue.topic.name", "dlq.jobs");
    set_group_config(
        &mut raw,
        "errors.deadletterqueue.copy.record.enable",
        "true",
    );
    let member = join(&mut raw);
    let first = share_fetch(&mut raw, &member, 0, topic_id, vec![], 10_000);
    assert_eq!(acquired(&first), vec![(0, 9, 1)]);
    // Reject 2 and 3, accept the rest.
    let acks = vec![ack(0, 1, ACCEPT), ack(2, 3, REJECT), ack(4, 9, ACCEPT)];
    let done = share_fetch(&mut raw, &member, 1, topic_id, acks, 300);
    assert_eq!(done.responses[0].partitions[0].acknowledge_error_code, 0);
    let listed = cli_until(&weir, &["dlq", "list", "dlq.jobs"], "2 dead letters");
    assert!(
        listed.contains("jobs-0@2") && listed.contains("jobs-0@3"),
        "{listed}"
    );
    assert!(listed.contains("REJECTED"), "{listed}");
    assert_metrics(
        &weir,
        &[
            ("weir_share_group_dead_lettered_total", 2),
            ("weir_share_group_records_archived_total", 2),
        ],
    );
    // Everything settled: the share-partition starts after the last record.
    let described = common::cli::run(
        &["share-group", "describe", GROUP, "--bootstrap", &weir.kafka],
        b"",
    )
    .ok();
    let rows = described.table("TOPIC");
    assert_eq!(rows[1][..5], ["jobs", "0", "10", "10", "0"], "{rows:?}");
    let groups = common::cli::run(&["share-group", "list", "--bootstrap", &weir.kafka], b"").ok();
    assert_eq!(groups.table("GROUP")[1], ["workers", "Stable"]);

    // Archived once written: a crash and a new load write nothing again.
    weir.restart(false); // kill -9
    let mut raw = Raw::connect(&weir.kafka);
    let member = join(&mut raw);
    assert_eq!(
        acquired(&share_fetch(&mut raw, &member, 0, topic_id, vec![], 500)),
        vec![]
    );
    std::thread::sleep(std::time::Duration::from_secs(1));
    cli_until(&weir, &["dlq", "list", "dlq.jobs"], "2 dead letters");

    // Replayed to the source partition: the share group gets it again.
    let row = listed
        .lines()
        .find(|l| l.contains("jobs-0@2"))
        .expect("the dead letter of offset 2");
    let cells: Vec<&str> = row.split_whitespace().collect();
    let position = format!("{}:{}", cells[0], cells[1]);
    cli_until(
        &weir,
        &["dlq", "replay", "dlq.jobs", "--offset", &position],
        "to jobs-0 at offset 10",
    );
    let again = share_fetch(&mut raw, &member, 1, topic_id, vec![], 5_000);
    assert_eq!(acquired(&again), vec![(10, 10, 1)]);
}

#[test]
fn describe_reads_the_leader_over_https_as_the_sasl_user_of_the_command_config() {
    let pki = common::pki::Pki::new("weir");
    let keystore = pki.server("broker", &["localhost", "127.0.0.1"]).keystore;
    let keystore = keystore.display().to_string();
    let (weir, mut raw, topic_id) = started_with(&[
        "--listeners",
        "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "--http-listen",
        "https://127.0.0.1:0",
        "--ssl-keystore-location",
        &keystore,
        "--add-scram",
        "SCRAM-SHA-512=[name=admin,password=admin-secret]",
    ]);
    let member = join(&mut raw);
    let first = share_fetch(&mut raw, &member, 0, topic_id, vec![], 10_000);
    assert_eq!(acquired(&first), vec![(0, 9, 1)]);
    let describe = |listener: &str, properties: &str| {
        let config = pki.write("client.properties", properties);
        let config = config.display().to_string();
        common::cli::run(
            &[
                "share-group",
                "describe",
                GROUP,
                "--bootstrap",
                listener,
                "--command-config",
                &config,
            ],
            b"",
        )
        .ok()
    };
    let described = describe(
        weir.listener("SASL_SSL"),
        &format!(
            "security.protocol=SASL_SSL\n\
             ssl.ca.location={}\n\
             sasl.mechanism=SCRAM-SHA-512\n\
             sasl.username=admin\n\
             sasl.password=admin-secret\n",
            pki.ca.display()
        ),
    );
    assert_eq!(described.stderr, "");
    assert_eq!(
        described.table("TOPIC")[1][..7],
        ["jobs", "0", "0", "10", "10", "0", "10"]
    );
    // Without the CA the endpoint is not trusted: the counts are missing
    // and a warning says why; the rest is shown.
    let described = describe(&weir.kafka, "security.protocol=PLAINTEXT\n");
    assert!(
        described
            .stderr
            .starts_with("warning: cannot read the records in flight from broker 1: "),
        "{}",
        described.stderr
    );
    assert!(
        described.stderr.contains("UnknownIssuer"),
        "{}",
        described.stderr
    );
    assert_eq!(
        described.table("TOPIC")[1][..9],
        ["jobs", "0", "0", "10", "-", "-", "-", "-", "1"]
    );
}

/// `member` leaves the group.
fn leave(raw: &mut Raw, member: &str) {
    let response: ShareGroupHeartbeatResponse = raw.call(
        ApiKey::ShareGroupHeartbeat,
        1,
        &ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(str(GROUP)))
            .with_member_id(str(member))
            .with_member_epoch(-1),
    );
    assert_eq!(response.error_code, 0, "{response:?}");
}

#[test]
fn reset_offsets_and_delete_need_an_empty_group_and_start_the_partition_over() {
    let (mut weir, mut raw, topic_id) = started();
    let bootstrap = ["--bootstrap", weir.kafka.as_str()];
    let cli = |args: &[&str]| common::cli::run(&[args, &bootstrap[..]].concat(), b"");
    let member = join(&mut raw);
    assert_eq!(
        acquired(&share_fetch(&mut raw, &member, 0, topic_id, vec![], 10_000)),
        vec![(0, 9, 1)]
    );
    let done = share_fetch(&mut raw, &member, 1, topic_id, vec![ack(0, 4, ACCEPT)], 100);
    assert_eq!(done.responses[0].partitions[0].acknowledge_error_code, 0);
    // The leader's view: 5..=9 held by the member, nothing else to deliver.
    let (status, body) = weir.http_get("/v1/groups/workers");
    assert_eq!(status, 200, "{body}");
    let view: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(view["type"], "share", "{body}");
    let partition = &view["share_partitions"][0];
    assert_eq!(
        (&partition["start_offset"], &partition["in_flight"]),
        (&5.into(), &5.into()),
        "{body}"
    );
    assert_eq!(
        (&partition["acquired"], &partition["available"]),
        (&5.into(), &0.into()),
        "{body}"
    );
    assert_metrics(
        &weir,
        &[
            ("weir_share_group_records_acquired", 5),
            ("weir_share_group_records_available", 0),
        ],
    );
    // `weir share-group describe` reads the same from the leader.
    let described = cli(&["share-group", "describe", GROUP]).ok();
    let rows = described.table("TOPIC");
    assert_eq!(
        rows[0][4..8],
        ["IN-FLIGHT", "AVAILABLE", "ACQUIRED", "OLDEST-AVAILABLE-AGE"]
    );
    assert_eq!(
        rows[1][..8],
        ["jobs", "0", "5", "10", "5", "0", "5", "0.0s"],
        "{rows:?}"
    );
    let reset = [
        "share-group",
        "reset-offsets",
        GROUP,
        "--topic",
        TOPIC,
        "--to-offset",
        "2",
    ];
    let refused = cli(&reset).failed_with_one_line();
    assert!(refused.contains("has no members (1 now)"), "{refused}");
    let refused = cli(&["share-group", "delete", GROUP]).failed_with_one_line();
    assert!(refused.contains("has active members"), "{refused}");

    // Empty, the group starts over at 2: what was accepted or held by the
    // member that left is delivered again, as a first delivery.
    leave(&mut raw, &member);
    cli(&reset).ok();
    let rows = cli(&["share-group", "describe", GROUP]).ok().table("TOPIC")[1]
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>();
    assert_eq!(rows[..3], ["jobs", "0", "2"]);
    // A topic the group never subscribed to: its offsets set, it is listed
    // with the group's, after a restart too.
    cli(&["topic", "create", "later"]).ok();
    cli(&[
        "share-group",
        "reset-offsets",
        GROUP,
        "--topic",
        "later",
        "--to-earliest",
    ])
    .ok();
    weir.restart(false); // kill -9
    let bootstrap = ["--bootstrap", weir.kafka.as_str()];
    let cli = |args: &[&str]| common::cli::run(&[args, &bootstrap[..]].concat(), b"");
    let described = cli(&["share-group", "describe", GROUP]).ok();
    let starts: Vec<[&str; 3]> = described.table("TOPIC")[1..]
        .iter()
        .map(|row| [row[0], row[1], row[2]])
        .collect();
    assert_eq!(starts, [["jobs", "0", "2"], ["later", "0", "0"]]);
    let mut raw = Raw::connect(&weir.kafka);
    let member = join(&mut raw);
    let again = share_fetch(&mut raw, &member, 0, topic_id, vec![], 5_000);
    assert_eq!(acquired(&again), vec![(2, 9, 1)]);

    leave(&mut raw, &member);
    cli(&["share-group", "delete", GROUP]).ok();
    let listed = cli(&["share-group", "list"]).ok();
    assert_eq!(listed.table("GROUP").len(), 1, "{}", listed.stdout);
    let gone = cli(&["share-group", "describe", GROUP]).failed_with_one_line();
    assert!(gone.contains("does not exist"), "{gone}");
}

#[test]
fn two_members_of_one_partition_never_hold_the_same_record() {
    let (_weir, mut raw, topic_id) = started();
    let (a, b) = (join(&mut raw), join(&mut raw));
    let mut raw_b = Raw::connect(&_weir.kafka);
    let from_a = share_fetch(&mut raw, &a, 0, topic_id, vec![], 10_000);
    let from_b = share_fetch(&mut raw_b, &b, 0, topic_id, vec![], 300);
    assert_eq!(acquired(&from_a), vec![(0, 9, 1)]);
    assert_eq!(acquired(&from_b), vec![], "b gets nothing a holds");
    // a gives back 3..=9: b gets them, a may not acknowledge them now.
    let released = share_acknowledge(
        &mut raw,
        &a,
        1,
        topic_id,
        vec![AckBatch::default()
            .with_first_offset(3)
            .with_last_offset(9)
            .with_acknowledge_types(vec![RELEASE])],
    );
    assert_eq!(released.responses[0].partitions[0].error_code, 0);
    let from_b = share_fetch(&mut raw_b, &b, 1, topic_id, vec![], 5_000);
    assert_eq!(acquired(&from_b), vec![(3, 9, 2)]);
    let late = share_acknowledge(
        &mut raw,
        &a,
        2,
        topic_id,
        vec![AckBatch::default()
            .with_first_offset(3)
            .with_last_offset(3)
            .with_acknowledge_types(vec![ACCEPT])],
    );
    assert_eq!(
        late.responses[0].partitions[0].error_code,
        ResponseError::InvalidRecordState.code()
    );
}

#[test]
fn a_share_fetch_carrying_acknowledgements_writes_the_state_once() {
    let (mut weir, mut raw, topic_id) = started();
    let member = join(&mut raw);
    let first = share_fetch(&mut raw, &member, 0, topic_id, vec![], 10_000);
    assert_eq!(acquired(&first), vec![(0, 9, 1)]);
    let (code, _) = raw.produce(TOPIC, 0, BatchBuilder::new(10).build());
    assert_eq!(code, 0);
    let state_partitions = raw.topic_metadata(SHARE_STATE_TOPIC).topics[0]
        .partitions
        .len();
    let key = SharePartitionKey {
        group: GROUP.into(),
        topic_id,
        partition: 0,
    };
    let state = state_partition_for(&key, state_partitions as i32);
    let before = raw.latest_offset(SHARE_STATE_TOPIC, state);
    // Accepts 0..=9 and acquires 10..=19.
    let next = share_fetch(
        &mut raw,
        &member,
        1,
        topic_id,
        vec![ack(0, 9, ACCEPT)],
        5_000,
    );
    assert_eq!(next.responses[0].partitions[0].acknowledge_error_code, 0);
    assert_eq!(acquired(&next), vec![(10, 19, 1)]);
    assert_eq!(
        raw.latest_offset(SHARE_STATE_TOPIC, state),
        before + 1,
        "one state record for the acknowledgements and the acquisition"
    );
    // It holds both: after a crash, what was accepted never comes back,
    // what was acquired does.
    weir.restart(false);
    let mut raw = Raw::connect(&weir.kafka);
    let member = join(&mut raw);
    let again = share_fetch(&mut raw, &member, 0, topic_id, vec![], 10_000);
    assert_eq!(acquired(&again), vec![(10, 19, 2)]);
}

#[test]
fn first_fetches_at_once_on_a_fresh_share_partition_never_acquire_the_same_records() {
    let (weir, mut raw, topic_id) = started();
    // __share_group_state exists once a first share-partition is loaded.
    let member = join(&mut raw);
    assert_eq!(
        acquired(&share_fetch(&mut raw, &member, 0, topic_id, vec![], 10_000)),
        vec![(0, 9, 1)]
    );
    for round in 0..6 {
        let group = format!("racers-{round}");
        set_config_of_group(&mut raw, &group, "share.auto.offset.reset", "earliest");
        let members = [join_group(&mut raw, &group), join_group(&mut raw, &group)];
        // Each member's first fetch finds the share-partition unloaded.
        let fetched: Vec<Vec<i64>> = std::thread::scope(|s| {
            let fetches: Vec<_> = members
                .iter()
                .map(|member| {
                    let (weir, group) = (&weir, &group);
                    s.spawn(move || {
                        let mut raw = Raw::connect(&weir.kafka);
                        offsets_of(&fetch_in(&mut raw, group, member, 0, topic_id, vec![]))
                    })
                })
                .collect();
            fetches.into_iter().map(|f| f.join().unwrap()).collect()
        });
        let all: Vec<i64> = fetched.concat();
        let distinct: BTreeSet<i64> = all.iter().copied().collect();
        assert_eq!(all.len(), distinct.len(), "round {round}: {fetched:?}");
        assert_eq!(distinct, (0..10).collect(), "round {round}: {fetched:?}");
    }
}

#[test]
fn share_sessions_and_groups_refuse_what_kafka_refuses() {
    let (weir, mut raw, topic_id) = started();
    let member = join(&mut raw);
    // Acknowledgements on the request that opens a session.
    let opening = share_fetch(&mut raw, &member, 0, topic_id, vec![ack(0, 0, ACCEPT)], 0);
    assert_eq!(opening.error_code, ResponseError::InvalidRequest.code());
    // A session that does not exist, and an epoch out of step.
    let unknown = share_fetch(
        &mut raw,
        &Uuid::new_v4().to_string(),
        4,
        topic_id,
        vec![],
        0,
    );
    assert_eq!(
        unknown.error_code,
        ResponseError::ShareSessionNotFound.code()
    );
    let opened = share_fetch(&mut raw, &member, 0, topic_id, vec![], 10_000);
    assert_eq!(acquired(&opened), vec![(0, 9, 1)]);
    let skipped = share_fetch(&mut raw, &member, 3, topic_id, vec![], 0);
    assert_eq!(
        skipped.error_code,
        ResponseError::InvalidShareSessionEpoch.code()
    );
    // A ShareAcknowledge cannot open a session.
    let no_open = share_acknowledge(&mut raw, &member, 0, topic_id, vec![]);
    assert_eq!(
        no_open.error_code,
        ResponseError::InvalidShareSessionEpoch.code()
    );
    // Closing the session gives back what the member held.
    let closed = share_acknowledge(&mut raw, &member, -1, topic_id, vec![]);
    assert_eq!(closed.error_code, 0);
    let other = join(&mut raw);
    let mut raw_other = Raw::connect(&weir.kafka);
    let taken = share_fetch(&mut raw_other, &other, 0, topic_id, vec![], 5_000);
    assert_eq!(acquired(&taken), vec![(0, 9, 2)]);

    // A heartbeat with an unknown member, and one at a stale epoch.
    let heartbeat = |raw: &mut Raw, member: &str, epoch: i32| -> i16 {
        let response: ShareGroupHeartbeatResponse = raw.call(
            ApiKey::ShareGroupHeartbeat,
            1,
            &ShareGroupHeartbeatRequest::default()
                .with_group_id(GroupId(str(GROUP)))
                .with_member_id(str(member))
                .with_member_epoch(epoch),
        );
        response.error_code
    };
    assert_eq!(
        heartbeat(&mut raw, "nobody", 1),
        ResponseError::UnknownMemberId.code()
    );
    assert_eq!(
        heartbeat(&mut raw, &other, 99),
        ResponseError::FencedMemberEpoch.code()
    );

    let described: ShareGroupDescribeResponse = raw.call(
        ApiKey::ShareGroupDescribe,
        1,
        &ShareGroupDescribeRequest::default()
            .with_group_ids(vec![GroupId(str(GROUP)), GroupId(str("no-such-group"))]),
    );
    let group = &described.groups[0];
    assert_eq!(group.error_code, 0);
    assert_eq!(group.group_state.as_str(), "Stable");
    assert_eq!(group.assignor_name.as_str(), "simple");
    assert_eq!(group.members.len(), 2);
    assert!(group
        .members
        .iter()
        .all(|m| m.assignment.topic_partitions[0].topic_name.as_str() == TOPIC));
    assert_eq!(
        described.groups[1].error_code,
        ResponseError::GroupIdNotFound.code()
    );

    // A group id names one group: the share group's is not a consumer
    // group's, and it stays a share group.
    let consumer: ConsumerGroupHeartbeatResponse = raw.call(
        ApiKey::ConsumerGroupHeartbeat,
        0,
        &ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(str(GROUP)))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![TopicName(str(TOPIC))]))
            .with_topic_partitions(Some(vec![])),
    );
    assert_eq!(
        consumer.error_code,
        ResponseError::GroupIdNotFound.code(),
        "{consumer:?}"
    );
    // Nor a classic group's: a join is INCONSISTENT_GROUP_PROTOCOL with no
    // member id, the other classic requests UNKNOWN_MEMBER_ID, as Kafka's
    // coordinator answers them.
    let joined: JoinGroupResponse = raw.call(
        ApiKey::JoinGroup,
        9,
        &JoinGroupRequest::default()
            .with_group_id(GroupId(str(GROUP)))
            .with_session_timeout_ms(30_000)
            .with_rebalance_timeout_ms(30_000)
            .with_protocol_type(str("consumer"))
            .with_protocols(
                [JoinGroupRequestProtocol::default().with_name(str("range"))]
                    .into_iter()
                    .collect(),
            ),
    );
    assert_eq!(
        joined.error_code,
        ResponseError::InconsistentGroupProtocol.code(),
        "{joined:?}"
    );
    assert_eq!(joined.member_id.as_str(), "");
    let synced: SyncGroupResponse = raw.call(
        ApiKey::SyncGroup,
        5,
        &SyncGroupRequest::default()
            .with_group_id(GroupId(str(GROUP)))
            .with_member_id(str(&other))
            .with_generation_id(1),
    );
    assert_eq!(synced.error_code, ResponseError::UnknownMemberId.code());
    let beat: HeartbeatResponse = raw.call(
        ApiKey::Heartbeat,
        4,
        &HeartbeatRequest::default()
            .with_group_id(GroupId(str(GROUP)))
            .with_member_id(str(&other))
            .with_generation_id(1),
    );
    assert_eq!(beat.error_code, ResponseError::UnknownMemberId.code());
    let left: LeaveGroupResponse = raw.call(
        ApiKey::LeaveGroup,
        5,
        &LeaveGroupRequest::default()
            .with_group_id(GroupId(str(GROUP)))
            .with_members(vec![MemberIdentity::default().with_member_id(str(&other))]),
    );
    assert_eq!(left.error_code, ResponseError::UnknownMemberId.code());
    assert_eq!(
        heartbeat(&mut raw, &other, 99),
        ResponseError::FencedMemberEpoch.code()
    );
}

// ---- a three-node cluster ----

use common::cluster::{partitions, send_acked, wait_until, Cluster};
use std::collections::BTreeSet;
use weir_broker::share::state_coordinator::{state_partition_for, SHARE_STATE_TOPIC};
use weir_coord::records::share_state::SharePartitionKey;

/// A connection to the coordinator of `group` (found through `any`).
fn coordinator_of(cluster: &Cluster, any: i32, group: &str) -> Raw {
    let mut raw = Raw::connect(&cluster.node(any).kafka);
    let found = raw.find_coordinator(0, group);
    assert_eq!(found.error_code, 0, "{found:?}");
    Raw::connect(&cluster.node(found.node_id.0).kafka)
}

fn join_group(raw: &mut Raw, group: &str) -> String {
    heartbeat_new_member(raw, group).0
}

fn fetch_in(
    raw: &mut Raw,
    group: &str,
    member: &str,
    epoch: i32,
    topic_id: Uuid,
    acks: Vec<AcknowledgementBatch>,
) -> ShareFetchResponse {
    raw.call(
        ApiKey::ShareFetch,
        1,
        &ShareFetchRequest::default()
            .with_group_id(Some(GroupId(str(group))))
            .with_member_id(Some(str(member)))
            .with_share_session_epoch(epoch)
            .with_max_wait_ms(2_000)
            .with_max_bytes(1 << 20)
            .with_max_records(100)
            .with_topics(vec![FetchTopic::default()
                .with_topic_id(topic_id)
                .with_partitions(vec![FetchPartition::default()
                    .with_partition_index(0)
                    .with_acknowledgement_batches(acks)])]),
    )
}

fn offsets_of(response: &ShareFetchResponse) -> Vec<i64> {
    response
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .flat_map(|p| p.acquired_records.iter())
        .flat_map(|r| r.first_offset..=r.last_offset)
        .collect()
}

fn accepted_ok(response: &ShareFetchResponse) -> bool {
    response.error_code == 0
        && response
            .responses
            .iter()
            .flat_map(|t| t.partitions.iter())
            .all(|p| p.acknowledge_error_code == 0)
}

#[test]
fn a_share_group_loses_no_acknowledgement_when_its_share_coordinator_and_then_its_leader_die() {
    let mut cluster = Cluster::start(&[]);
    let bootstrap = cluster.bootstrap();
    let topic_id = create_topic(&mut Raw::connect(&cluster.node(1).kafka), 3);
    send_acked(&bootstrap, TOPIC, "r", 20);
    let leader = partitions(&bootstrap, TOPIC)[0].leader;

    // A first share group creates __share_group_state; then a group whose
    // share-partition state another broker than the leader keeps.
    let mut probe = coordinator_of(&cluster, 1, "probe");
    join_group(&mut probe, "probe");
    let state_leaders = wait_until("__share_group_state", Duration::from_secs(30), || {
        let views = partitions(&bootstrap, SHARE_STATE_TOPIC);
        (views.iter().all(|v| v.leader > 0))
            .then(|| views.iter().map(|v| v.leader).collect::<Vec<_>>())
    });
    let (group, state_index) = (0..)
        .map(|i| format!("workers-{i}"))
        .map(|group| {
            let key = SharePartitionKey {
                group: group.clone(),
                topic_id,
                partition: 0,
            };
            let index = state_partition_for(&key, state_leaders.len() as i32);
            (group, index)
        })
        .find(|(_, index)| state_leaders[*index as usize] != leader)
        .unwrap();
    let share_coordinator = state_leaders[state_index as usize];
    let mut admin = Raw::connect(&cluster.node(leader).kafka);
    let configure: IncrementalAlterConfigsResponse = admin.call(
        ApiKey::IncrementalAlterConfigs,
        1,
        &IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(GROUP_RESOURCE)
                .with_resource_name(str(&group))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(str("share.auto.offset.reset"))
                    .with_config_operation(0)
                    .with_value(Some(str("earliest")))]),
        ]),
    );
    assert_eq!(configure.responses[0].error_code, 0);

    let mut coordinator = coordinator_of(&cluster, leader, &group);
    let member = join_group(&mut coordinator, &group);
    let mut on_leader = Raw::connect(&cluster.node(leader).kafka);
    let mut accepted: BTreeSet<i64> = BTreeSet::new();
    let first = wait_until("the first records", Duration::from_secs(30), || {
        let response = fetch_in(&mut on_leader, &group, &member, 0, topic_id, vec![]);
        let got = offsets_of(&response);
        (!got.is_empty()).then_some(got)
    });
    assert_eq!(
        first,
        (0..20).collect::<Vec<_>>(),
        "records acquired (state kept on broker {share_coordinator})"
    );
    let acked = fetch_in(
        &mut on_leader,
        &group,
        &member,
        1,
        topic_id,
        vec![ack(0, 9, ACCEPT)],
    );
    assert!(accepted_ok(&acked), "{acked:?}");
    accepted.extend(0..10);
    // Asked through another broker, `weir share-group describe` finds the
    // leader's HTTP endpoint and reads what it holds in flight there.
    let other = (1..=3).find(|n| *n != leader).unwrap();
    let described = common::cli::run(
        &[
            "share-group",
            "describe",
            &group,
            "--bootstrap",
            &cluster.node(other).kafka,
        ],
        b"",
    )
    .ok();
    let rows = described.table("TOPIC");
    assert_eq!(
        rows[1][..7],
        ["jobs", "0", "10", "20", "10", "0", "10"],
        "{}",
        described.stderr
    );

    // The share coordinator dies; the leader writes to its successor.
    cluster.node_mut(share_coordinator).kill();
    wait_until(
        "a new leader of the state partition",
        Duration::from_secs(30),
        || {
            let view =
                &partitions(&cluster.node(leader).kafka, SHARE_STATE_TOPIC)[state_index as usize];
            (view.leader > 0 && view.leader != share_coordinator).then_some(())
        },
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut epoch = 2;
    loop {
        let acked = fetch_in(
            &mut on_leader,
            &group,
            &member,
            epoch,
            topic_id,
            vec![ack(10, 14, ACCEPT)],
        );
        epoch += 1;
        if accepted_ok(&acked) {
            accepted.extend(10..15);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "acknowledgements refused after the failover: {acked:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // The coordinator comes back; the leader dies: the new leader loads
    // the state, and only what was not accepted comes back.
    cluster.node_mut(share_coordinator).restart(false);
    cluster.node_mut(leader).kill();
    let survivor = (1..=3).find(|n| *n != leader).unwrap();
    let new_leader = wait_until("a new leader of the topic", Duration::from_secs(30), || {
        let view = &partitions(&cluster.node(survivor).kafka, TOPIC)[0];
        (view.leader > 0 && view.leader != leader).then_some(view.leader)
    });
    let mut coordinator = coordinator_of(&cluster, survivor, &group);
    let member = join_group(&mut coordinator, &group);
    let mut on_new_leader = Raw::connect(&cluster.node(new_leader).kafka);
    let mut redelivered: BTreeSet<i64> = BTreeSet::new();
    let mut epoch = 0;
    let mut pending: Vec<AcknowledgementBatch> = vec![];
    let deadline = Instant::now() + Duration::from_secs(40);
    while redelivered.len() + accepted.len() < 20 && Instant::now() < deadline {
        let response = fetch_in(
            &mut on_new_leader,
            &group,
            &member,
            epoch,
            topic_id,
            std::mem::take(&mut pending),
        );
        if response.error_code != 0 {
            epoch = 0; // a fresh session after an error
            continue;
        }
        epoch += 1;
        for offset in offsets_of(&response) {
            assert!(
                !accepted.contains(&offset),
                "offset {offset} was accepted before the failovers, and came back"
            );
            redelivered.insert(offset);
            pending.push(ack(offset, offset, ACCEPT));
        }
    }
    assert_eq!(
        redelivered,
        (15..20).collect::<BTreeSet<_>>(),
        "what was in flight comes back"
    );
}
