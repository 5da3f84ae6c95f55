//! Consumer groups through librdkafka: partitions shared among members,
//! rebalances when members come and go, static membership, cooperative
//! rebalancing, and groups that survive broker restarts.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::raw::Raw;
use common::Weir;
use kafka_protocol::messages::{
    ApiKey, DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest,
    DescribeGroupsResponse, GroupId, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest,
    JoinGroupResponse, ListGroupsRequest, ListGroupsResponse, OffsetDeleteRequest,
    OffsetDeleteResponse, SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::Message;
use weir_log::testing::BatchBuilder;

/// Brokers in these tests start the first rebalance at once instead of
/// waiting `group.initial.rebalance.delay.ms` for more members.
const BROKER_ARGS: &[&str] = &["--group-initial-rebalance-delay-ms", "0"];

fn str(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// Creates `topic` with `partitions` partitions of `per_partition` records.
fn create_topic(weir: &Weir, topic: &str, partitions: i32, per_partition: usize) {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
    let mut raw = Raw::connect(&weir.kafka);
    let response: CreateTopicsResponse = raw.call(
        ApiKey::CreateTopics,
        5,
        &CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(str(topic)))
            .with_num_partitions(partitions)
            .with_replication_factor(1)]),
    );
    assert_eq!(response.topics[0].error_code, 0);
    produce_each(weir, topic, partitions, per_partition);
}

/// Appends `per_partition` records to each partition of `topic`.
fn produce_each(weir: &Weir, topic: &str, partitions: i32, per_partition: usize) {
    if per_partition == 0 {
        return;
    }
    let mut raw = Raw::connect(&weir.kafka);
    for p in 0..partitions {
        let (error, _) = raw.produce(topic, p, BatchBuilder::new(per_partition).build());
        assert_eq!(error, 0);
    }
}

/// Counts the rebalances a member goes through.
#[derive(Default, Clone)]
struct Rebalances {
    revocations: Arc<AtomicUsize>,
    assignments: Arc<AtomicUsize>,
    /// How many partitions each revocation took away.
    revoked: Arc<Mutex<Vec<usize>>>,
}

impl ClientContext for Rebalances {}

impl ConsumerContext for Rebalances {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Revoke(partitions) => {
                self.revoked.lock().unwrap().push(partitions.count());
                self.revocations.fetch_add(1, Ordering::SeqCst)
            }
            Rebalance::Assign(_) => self.assignments.fetch_add(1, Ordering::SeqCst),
            Rebalance::Error(_) => 0,
        };
    }
}

fn consumer_config(weir: &Weir, group: &str, extra: &[(&str, &str)]) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &weir.kafka)
        .set("group.id", group)
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false");
    // With the consumer protocol the broker sets these.
    if !extra.contains(&("group.protocol", "consumer")) {
        config
            .set("session.timeout.ms", "6000")
            .set("heartbeat.interval.ms", "500");
    }
    for (k, v) in extra {
        config.set(*k, *v);
    }
    config
}

/// A group member polling on its own thread, recording what it reads.
struct Member {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    rebalances: Rebalances,
    /// (partition, offset) of every record read.
    read: Arc<Mutex<Vec<(i32, i64)>>>,
    assignment: Arc<Mutex<BTreeSet<i32>>>,
}

impl Member {
    fn start(weir: &Weir, group: &str, topic: &str, extra: &[(&str, &str)]) -> Self {
        let rebalances = Rebalances::default();
        let consumer: BaseConsumer<Rebalances> = consumer_config(weir, group, extra)
            .create_with_context(rebalances.clone())
            .expect("consumer");
        consumer.subscribe(&[topic]).expect("subscribe");
        let stop = Arc::new(AtomicBool::new(false));
        let read = Arc::new(Mutex::new(Vec::new()));
        let assignment = Arc::new(Mutex::new(BTreeSet::new()));
        let thread = std::thread::spawn({
            let (stop, read, assignment) = (stop.clone(), read.clone(), assignment.clone());
            move || {
                while !stop.load(Ordering::SeqCst) {
                    // Errors (a restarting broker) are transient: librdkafka retries.
                    if let Some(Ok(message)) = consumer.poll(Duration::from_millis(100)) {
                        read.lock()
                            .unwrap()
                            .push((message.partition(), message.offset()));
                    }
                    if let Ok(current) = consumer.assignment() {
                        *assignment.lock().unwrap() =
                            current.elements().iter().map(|e| e.partition()).collect();
                    }
                }
                let _ = consumer.commit_consumer_state(CommitMode::Sync);
                // Dropping the consumer closes it: a dynamic member leaves
                // the group, a static one does not.
            }
        });
        Self {
            stop,
            thread: Some(thread),
            rebalances,
            read,
            assignment,
        }
    }

    fn assignment(&self) -> BTreeSet<i32> {
        self.assignment.lock().unwrap().clone()
    }

    fn read(&self) -> Vec<(i32, i64)> {
        self.read.lock().unwrap().clone()
    }

    fn close(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until the members' assignments split `0..partitions` among them
/// as evenly as the counts allow (members beyond the partition count idle),
/// and returns them. Members joining one after another may pass through
/// uneven splits on the way.
fn wait_for_split(members: &[&Member], partitions: i32) -> Vec<BTreeSet<i32>> {
    let busy = members.len().min(partitions as usize);
    let most = (partitions as usize).div_ceil(busy);
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let split = members.iter().map(|m| m.assignment()).collect::<Vec<_>>();
        let total: usize = split.iter().map(BTreeSet::len).sum();
        let union: BTreeSet<i32> = split.iter().flatten().copied().collect();
        let balanced = split.iter().filter(|s| !s.is_empty()).count() == busy
            && split.iter().all(|s| s.len() <= most);
        if total == partitions as usize && union == (0..partitions).collect() && balanced {
            return split;
        }
        assert!(
            Instant::now() < deadline,
            "partitions never split evenly among the members: {split:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn describe(weir: &Weir, group: &str) -> DescribeGroupsResponse {
    Raw::connect(&weir.kafka).call(
        ApiKey::DescribeGroups,
        5,
        &DescribeGroupsRequest::default().with_groups(vec![GroupId(str(group))]),
    )
}

fn every_record_read_once(members: &[&Member], partitions: i32, per_partition: i64) {
    let reads: Vec<Vec<(i32, i64)>> = members.iter().map(|m| m.read()).collect();
    every_record_in_reads_once(&reads, partitions, per_partition);
}

fn every_record_in_reads_once(reads: &[Vec<(i32, i64)>], partitions: i32, per_partition: i64) {
    let mut seen: BTreeMap<(i32, i64), usize> = BTreeMap::new();
    for record in reads.iter().flatten() {
        *seen.entry(*record).or_default() += 1;
    }
    let expected: BTreeSet<(i32, i64)> = (0..partitions)
        .flat_map(|p| (0..per_partition).map(move |o| (p, o)))
        .collect();
    assert_eq!(seen.keys().copied().collect::<BTreeSet<_>>(), expected);
    let duplicates: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(duplicates.is_empty(), "records read twice: {duplicates:?}");
}

fn group_shares_partitions(members: usize) {
    let weir = Weir::start(BROKER_ARGS);
    create_topic(&weir, "events", 6, 0);
    let started: Vec<Member> = (0..members)
        .map(|_| Member::start(&weir, "readers", "events", &[]))
        .collect();
    let refs: Vec<&Member> = started.iter().collect();
    wait_until("every member has joined", Duration::from_secs(30), || {
        let described = describe(&weir, "readers");
        let group = &described.groups[0];
        group.group_state.as_str() == "Stable" && group.members.len() == members
    });
    // Range assignment: as even as the counts allow; extra members idle.
    wait_for_split(&refs, 6);
    // Records written once the split is settled are each read by the one
    // member that owns their partition. (Written earlier, a partition could
    // be read by one member, then from the start again by the next owner:
    // nothing was committed, and that is at-least-once as it should be.)
    produce_each(&weir, "events", 6, 50);
    wait_until("every record is read", Duration::from_secs(30), || {
        refs.iter().map(|m| m.read().len()).sum::<usize>() >= 300
    });
    every_record_read_once(&refs, 6, 50);
    let described = describe(&weir, "readers");
    let group = &described.groups[0];
    assert_eq!(group.error_code, 0);
    assert_eq!(group.group_state.as_str(), "Stable");
    assert_eq!(group.protocol_type.as_str(), "consumer");
    assert_eq!(group.members.len(), members);
    for member in &group.members {
        assert!(member.client_host.starts_with("/127.0.0.1"), "{member:?}");
        assert!(!member.member_assignment.is_empty());
    }
}

#[test]
fn three_members_split_six_partitions() {
    group_shares_partitions(3);
}

#[test]
fn six_members_take_one_partition_each() {
    group_shares_partitions(6);
}

#[test]
fn eight_members_leave_two_idle() {
    group_shares_partitions(8);
}

#[test]
fn a_closed_member_hands_its_partitions_over_and_commits_carry_on() {
    let weir = Weir::start(BROKER_ARGS);
    create_topic(&weir, "jobs", 4, 0);
    let first = Member::start(&weir, "workers", "jobs", &[]);
    let second = Member::start(&weir, "workers", "jobs", &[]);
    wait_for_split(&[&first, &second], 4);
    let mut raw = Raw::connect(&weir.kafka);
    for p in 0..4 {
        raw.produce("jobs", p, BatchBuilder::new(10).build());
    }
    wait_until("the first batch is read", Duration::from_secs(20), || {
        first.read().len() + second.read().len() >= 40
    });
    let first_read = first.read();
    first.close(); // commits, then leaves the group
    wait_until(
        "the second member owns every partition",
        Duration::from_secs(20),
        || second.assignment().len() == 4,
    );
    for p in 0..4 {
        raw.produce("jobs", p, BatchBuilder::new(10).build());
    }
    wait_until("the second batch is read", Duration::from_secs(20), || {
        second.read().iter().filter(|(_, o)| *o >= 10).count() >= 40
    });
    // Nothing the first member committed is read again.
    let second_read: BTreeSet<(i32, i64)> = second.read().into_iter().collect();
    for record in &first_read {
        assert!(!second_read.contains(record), "{record:?} read twice");
    }
    assert_eq!(first_read.len() + second_read.len(), 80);
}

/// A member that joined with the raw protocol and then went silent.
/// As in Kafka, `__consumer_offsets` is created by the first
/// FindCoordinator, in the background: that request and group requests
/// meanwhile are answered COORDINATOR_NOT_AVAILABLE at once, and the client
/// asks again.
#[test]
fn the_first_find_coordinator_creates_the_offsets_topic_in_the_background() {
    const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    let weir = Weir::start(BROKER_ARGS);
    let mut raw = Raw::connect(&weir.kafka);
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(str("early")))
        .with_session_timeout_ms(6000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(str("consumer"))
        .with_protocols(vec![
            kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default()
                .with_name(str("range")),
        ]);
    let joined: JoinGroupResponse = raw.call(ApiKey::JoinGroup, 5, &join);
    assert_eq!(joined.error_code, COORDINATOR_NOT_AVAILABLE);
    let offsets_topic = || {
        let metadata: kafka_protocol::messages::MetadataResponse = Raw::connect(&weir.kafka).call(
            ApiKey::Metadata,
            9,
            &kafka_protocol::messages::MetadataRequest::default()
                .with_topics(None)
                .with_allow_auto_topic_creation(false),
        );
        metadata.topics.iter().any(|t| {
            t.name
                .as_ref()
                .is_some_and(|n| n.as_str() == "__consumer_offsets")
        })
    };
    assert!(!offsets_topic(), "a JoinGroup creates no topic");

    let first: kafka_protocol::messages::FindCoordinatorResponse = raw.call(
        ApiKey::FindCoordinator,
        3,
        &kafka_protocol::messages::FindCoordinatorRequest::default().with_key(str("early")),
    );
    assert_eq!(first.error_code, COORDINATOR_NOT_AVAILABLE);
    let found = raw.find_coordinator(0, "early");
    assert_eq!((found.error_code, found.node_id.0), (0, 1));
    assert!(offsets_topic());
    let joined = join_once_loaded(&mut raw, &join);
    assert_eq!(
        joined.error_code, 79,
        "MEMBER_ID_REQUIRED: the group is served"
    );
}

/// JoinGroup, asked again while the coordinator loads its partition
/// (COORDINATOR_LOAD_IN_PROGRESS), as clients do.
fn join_once_loaded(raw: &mut Raw, request: &JoinGroupRequest) -> JoinGroupResponse {
    for _ in 0..200 {
        let joined: JoinGroupResponse = raw.call(ApiKey::JoinGroup, 5, request);
        if joined.error_code != 14 {
            return joined;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the coordinator never loaded the group's partition");
}

fn join_silently(weir: &Weir, group: &str, topic: &str) -> (Raw, String, i32) {
    let mut raw = Raw::connect(&weir.kafka);
    let found = raw.find_coordinator(0, group);
    assert_eq!(found.error_code, 0);
    // ConsumerProtocolSubscription v0: version, topics, user data.
    let mut subscription = vec![0, 0, 0, 0, 0, 1];
    subscription.extend((topic.len() as i16).to_be_bytes());
    subscription.extend(topic.as_bytes());
    subscription.extend((-1i32).to_be_bytes());
    let join = |member_id: &str| {
        JoinGroupRequest::default()
            .with_group_id(GroupId(str(group)))
            .with_session_timeout_ms(6000)
            .with_rebalance_timeout_ms(10_000)
            .with_member_id(str(member_id))
            .with_protocol_type(str("consumer"))
            .with_protocols(vec![
                kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default()
                    .with_name(str("range"))
                    .with_metadata(subscription.clone().into()),
            ])
    };
    let first = join_once_loaded(&mut raw, &join(""));
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED first (KIP-394)");
    let member_id = first.member_id.to_string();
    let joined: JoinGroupResponse = raw.call(ApiKey::JoinGroup, 5, &join(&member_id));
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.leader, joined.member_id, "the only member leads");
    // Assign every partition to itself: ConsumerProtocolAssignment v0.
    let mut assignment = vec![0, 0, 0, 0, 0, 1];
    assignment.extend((topic.len() as i16).to_be_bytes());
    assignment.extend(topic.as_bytes());
    assignment.extend(2i32.to_be_bytes());
    assignment.extend(0i32.to_be_bytes());
    assignment.extend(1i32.to_be_bytes());
    assignment.extend((-1i32).to_be_bytes());
    let synced: SyncGroupResponse = raw.call(
        ApiKey::SyncGroup,
        3,
        &SyncGroupRequest::default()
            .with_group_id(GroupId(str(group)))
            .with_generation_id(joined.generation_id)
            .with_member_id(str(&member_id))
            .with_assignments(vec![
                kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment::default()
                    .with_member_id(str(&member_id))
                    .with_assignment(assignment.clone().into()),
            ]),
    );
    assert_eq!(synced.error_code, 0);
    assert_eq!(&synced.assignment[..], &assignment[..]);
    (raw, member_id, joined.generation_id)
}

#[test]
fn a_silent_member_expires_after_its_session_timeout() {
    let weir = Weir::start(BROKER_ARGS);
    create_topic(&weir, "tasks", 2, 5);
    let (mut raw, member_id, generation) = join_silently(&weir, "crew", "tasks");
    let heartbeat = |raw: &mut Raw, generation: i32| -> i16 {
        let response: HeartbeatResponse = raw.call(
            ApiKey::Heartbeat,
            3,
            &HeartbeatRequest::default()
                .with_group_id(GroupId(str("crew")))
                .with_generation_id(generation)
                .with_member_id(str(&member_id)),
        );
        response.error_code
    };
    assert_eq!(heartbeat(&mut raw, generation), 0);
    assert_eq!(
        heartbeat(&mut raw, generation + 1),
        22,
        "ILLEGAL_GENERATION"
    );
    // A librdkafka member joins: the group rebalances, waiting for the
    // silent member, which never rejoins and is dropped once its session
    // times out; then the new member owns both partitions.
    let joined_at = Instant::now();
    let member = Member::start(&weir, "crew", "tasks", &[]);
    wait_until(
        "the live member owns both partitions",
        Duration::from_secs(30),
        || member.assignment().len() == 2,
    );
    let took = joined_at.elapsed();
    assert!(
        took >= Duration::from_secs(5),
        "expired too early: {took:?}"
    );
    wait_until("every record is read", Duration::from_secs(20), || {
        member.read().len() == 10
    });
    assert_eq!(heartbeat(&mut raw, generation), 25, "UNKNOWN_MEMBER_ID");
    let described = describe(&weir, "crew");
    assert_eq!(described.groups[0].members.len(), 1);
}

#[test]
fn two_groups_read_the_same_topic_independently() {
    let weir = Weir::start(BROKER_ARGS);
    create_topic(&weir, "shared", 3, 20);
    let billing = Member::start(&weir, "billing", "shared", &[]);
    let audit = Member::start(&weir, "audit", "shared", &[]);
    wait_until(
        "both groups read everything",
        Duration::from_secs(30),
        || billing.read().len() == 60 && audit.read().len() == 60,
    );
    every_record_read_once(&[&billing], 3, 20);
    every_record_read_once(&[&audit], 3, 20);
    let listed: ListGroupsResponse =
        Raw::connect(&weir.kafka).call(ApiKey::ListGroups, 4, &ListGroupsRequest::default());
    let names: BTreeSet<String> = listed
        .groups
        .iter()
        .map(|g| g.group_id.to_string())
        .collect();
    assert!(
        names.contains("billing") && names.contains("audit"),
        "{names:?}"
    );
    for group in &listed.groups {
        assert_eq!(group.group_state.as_str(), "Stable");
        assert_eq!(group.protocol_type.as_str(), "consumer");
    }
    let stable_only: ListGroupsResponse = Raw::connect(&weir.kafka).call(
        ApiKey::ListGroups,
        4,
        &ListGroupsRequest::default().with_states_filter(vec![str("Empty")]),
    );
    assert!(stable_only.groups.is_empty());

    // v5 names each group's type, and filters by it as Kafka does: any
    // case; a type with no groups (or no such type) lists nothing.
    let typed = |filter: &[&str]| -> ListGroupsResponse {
        Raw::connect(&weir.kafka).call(
            ApiKey::ListGroups,
            5,
            &ListGroupsRequest::default()
                .with_types_filter(filter.iter().map(|t| str(t)).collect()),
        )
    };
    for filter in [&[][..], &["classic"], &["Classic", "consumer"]] {
        let listed = typed(filter);
        assert_eq!(listed.groups.len(), 2, "{filter:?}");
        assert!(
            listed
                .groups
                .iter()
                .all(|g| g.group_type.as_str() == "classic"),
            "{filter:?}"
        );
    }
    for filter in [&["consumer"][..], &["share"], &["no-such-type"]] {
        assert!(typed(filter).groups.is_empty(), "{filter:?}");
    }
}

#[test]
fn a_restarted_broker_keeps_the_group_and_its_offsets() {
    let mut weir = Weir::start(BROKER_ARGS);
    create_topic(&weir, "ledger", 2, 30);
    let member = Member::start(&weir, "bookkeepers", "ledger", &[]);
    wait_until("everything is read", Duration::from_secs(30), || {
        member.read().len() == 60
    });
    member.close(); // commits and leaves: the group is Empty
    let mut raw = Raw::connect(&weir.kafka);
    for p in 0..2 {
        raw.produce("ledger", p, BatchBuilder::new(5).build());
    }
    weir.restart(false); // kill -9
    let described = describe(&weir, "bookkeepers");
    assert_eq!(described.groups[0].group_state.as_str(), "Empty");
    assert_eq!(described.groups[0].protocol_type.as_str(), "consumer");
    let member = Member::start(&weir, "bookkeepers", "ledger", &[]);
    wait_until("the new records are read", Duration::from_secs(30), || {
        member.read().len() == 10
    });
    // It resumed from the commits: only the 5 new records per partition.
    assert!(
        member.read().iter().all(|(_, o)| *o >= 30),
        "{:?}",
        member.read()
    );
}

#[test]
fn a_member_keeps_its_generation_across_a_clean_broker_restart() {
    let mut weir = Weir::start(BROKER_ARGS);
    create_topic(&weir, "stream", 2, 0);
    let member = Member::start(&weir, "steady", "stream", &[]);
    wait_for_split(&[&member], 2);
    let assignments = member.rebalances.assignments.load(Ordering::SeqCst);
    weir.restart(true);
    // The group comes back Stable with its member; the member's heartbeats
    // carry on with the same generation, so there is no rebalance.
    assert_eq!(
        describe(&weir, "steady").groups[0].group_state.as_str(),
        "Stable"
    );
    let mut raw = Raw::connect(&weir.kafka);
    for p in 0..2 {
        raw.produce("stream", p, BatchBuilder::new(5).build());
    }
    wait_until("the new records are read", Duration::from_secs(30), || {
        member.read().len() == 10
    });
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        member.rebalances.assignments.load(Ordering::SeqCst),
        assignments
    );
}

#[test]
fn a_restarted_static_member_rejoins_without_a_rebalance() {
    let weir = Weir::start(BROKER_ARGS);
    create_topic(&weir, "orders", 4, 0);
    let other = Member::start(&weir, "static", "orders", &[("group.instance.id", "a")]);
    let restarted = Member::start(&weir, "static", "orders", &[("group.instance.id", "b")]);
    let before = wait_for_split(&[&other, &restarted], 4);
    std::thread::sleep(Duration::from_secs(1));
    let rebalances = other.rebalances.assignments.load(Ordering::SeqCst);
    // A static member does not leave the group on close (KIP-345)...
    restarted.close();
    let back = Member::start(&weir, "static", "orders", &[("group.instance.id", "b")]);
    // ...and coming back within the session timeout gets its old partitions.
    wait_until("the static member is back", Duration::from_secs(20), || {
        back.assignment() == before[1]
    });
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(other.assignment(), before[0]);
    assert_eq!(
        other.rebalances.assignments.load(Ordering::SeqCst),
        rebalances,
        "the other member saw a rebalance"
    );
}

#[test]
fn cooperative_sticky_members_move_only_what_they_must() {
    let weir = Weir::start(BROKER_ARGS);
    create_topic(&weir, "sticky", 6, 0);
    let cooperative = [("partition.assignment.strategy", "cooperative-sticky")];
    let first = Member::start(&weir, "coop", "sticky", &cooperative);
    wait_for_split(&[&first], 6);
    let second = Member::start(&weir, "coop", "sticky", &cooperative);
    wait_for_split(&[&first, &second], 6);
    // Incremental: the first member gave up only the three partitions that
    // moved, never all six, and kept the rest throughout.
    let revoked = first.rebalances.revoked.lock().unwrap().clone();
    assert!(revoked.iter().all(|&n| n > 0 && n <= 3), "{revoked:?}");
    assert_eq!(revoked.iter().sum::<usize>(), 3, "{revoked:?}");
    produce_each(&weir, "sticky", 6, 20);
    wait_until("every record is read", Duration::from_secs(30), || {
        first.read().len() + second.read().len() >= 120
    });
    every_record_read_once(&[&first, &second], 6, 20);
}

/// Waits until `members` own `0..partitions` between them, every member
/// some, asserting at every look that no partition has two owners; returns
/// the split.
fn wait_for_exclusive_split(members: &[&Member], partitions: i32) -> Vec<BTreeSet<i32>> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let split = members.iter().map(|m| m.assignment()).collect::<Vec<_>>();
        let mut owners: BTreeMap<i32, usize> = BTreeMap::new();
        for &p in split.iter().flatten() {
            *owners.entry(p).or_default() += 1;
        }
        assert!(
            owners.values().all(|&n| n == 1),
            "a partition has two owners: {split:?}"
        );
        if owners.len() == partitions as usize && split.iter().all(|s| !s.is_empty()) {
            return split;
        }
        assert!(
            Instant::now() < deadline,
            "partitions never split among the members: {split:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// KIP-429 over the classic protocol: the leader leaves out what must move
/// to a fourth member; its owner revokes it and rejoins, and that follow-up
/// rebalance hands it over. Nobody else gives up what it keeps.
#[test]
fn a_fourth_cooperative_member_gets_what_the_others_give_up() {
    let weir = Weir::start(BROKER_ARGS);
    create_topic(&weir, "sticky4", 6, 0);
    let cooperative = [("partition.assignment.strategy", "cooperative-sticky")];
    let originals: Vec<Member> = (0..3)
        .map(|_| Member::start(&weir, "coop4", "sticky4", &cooperative))
        .collect();
    let refs: Vec<&Member> = originals.iter().collect();
    let before = wait_for_split(&refs, 6);
    let revoked = |m: &Member| m.rebalances.revoked.lock().unwrap().iter().sum::<usize>();
    let revoked_before: usize = originals.iter().map(revoked).sum();

    let fourth = Member::start(&weir, "coop4", "sticky4", &cooperative);
    let all: Vec<&Member> = originals.iter().chain([&fourth]).collect();
    let after = wait_for_exclusive_split(&all, 6);
    let mut sizes: Vec<usize> = after.iter().map(BTreeSet::len).collect();
    sizes.sort_unstable();
    assert_eq!(sizes, [1, 1, 2, 2], "{before:?} -> {after:?}");
    // The originals kept what they did not give up, and revoked only what
    // moved to the fourth member.
    for (kept, had) in after.iter().zip(&before) {
        assert!(kept.is_subset(had), "{before:?} -> {after:?}");
    }
    let revoked_since = originals.iter().map(revoked).sum::<usize>() - revoked_before;
    assert_eq!(revoked_since, after[3].len(), "{before:?} -> {after:?}");

    produce_each(&weir, "sticky4", 6, 20);
    wait_until("every record is read", Duration::from_secs(30), || {
        all.iter().map(|m| m.read().len()).sum::<usize>() >= 120
    });
    every_record_read_once(&all, 6, 20);
    let now: Vec<BTreeSet<i32>> = all.iter().map(|m| m.assignment()).collect();
    assert_eq!(now, after, "the split changed while records were read");
}

#[test]
fn groups_with_members_are_described_and_protected_from_deletion() {
    let weir = Weir::start(BROKER_ARGS);
    create_topic(&weir, "audit", 2, 3);
    let member = Member::start(
        &weir,
        "inspectors",
        "audit",
        &[("client.id", "inspector-1")],
    );
    wait_until("everything is read", Duration::from_secs(30), || {
        member.read().len() == 6
    });
    let described = describe(&weir, "inspectors");
    let group = &described.groups[0];
    assert_eq!(group.protocol_data.as_str(), "range");
    assert_eq!(group.members[0].client_id.as_str(), "inspector-1");
    // The HTTP view shows the same group, with its lag.
    let (status, body) = weir.http_get("/v1/groups/inspectors");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""state":"Stable""#), "{body}");
    assert!(body.contains(r#""members":1"#), "{body}");
    let mut raw = Raw::connect(&weir.kafka);
    let delete = |raw: &mut Raw| -> i16 {
        let response: DeleteGroupsResponse = raw.call(
            ApiKey::DeleteGroups,
            2,
            &DeleteGroupsRequest::default().with_groups_names(vec![GroupId(str("inspectors"))]),
        );
        response.results[0].error_code
    };
    assert_eq!(delete(&mut raw), 68, "NON_EMPTY_GROUP");
    // OffsetDelete refuses the offsets of a subscribed topic.
    let offset_delete = |raw: &mut Raw| -> OffsetDeleteResponse {
        use kafka_protocol::messages::offset_delete_request::{
            OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
        };
        raw.call(
            ApiKey::OffsetDelete,
            0,
            &OffsetDeleteRequest::default()
                .with_group_id(GroupId(str("inspectors")))
                .with_topics(vec![OffsetDeleteRequestTopic::default()
                    .with_name(TopicName(str("audit")))
                    .with_partitions(vec![
                        OffsetDeleteRequestPartition::default().with_partition_index(0)
                    ])]),
        )
    };
    member.close();
    wait_until("the group is empty", Duration::from_secs(10), || {
        describe(&weir, "inspectors").groups[0].group_state.as_str() == "Empty"
    });
    let deleted = offset_delete(&mut raw);
    assert_eq!(deleted.error_code, 0);
    assert_eq!(deleted.topics[0].partitions[0].error_code, 0);
    assert_eq!(delete(&mut raw), 0);
    assert_eq!(
        describe(&weir, "inspectors").groups[0].group_state.as_str(),
        "Dead"
    );
    assert_eq!(delete(&mut raw), 69, "GROUP_ID_NOT_FOUND");
}

#[test]
fn offsets_of_a_subscribed_topic_cannot_be_deleted() {
    let weir = Weir::start(BROKER_ARGS);
    create_topic(&weir, "watched", 1, 2);
    let member = Member::start(&weir, "watchers", "watched", &[]);
    wait_until("everything is read", Duration::from_secs(30), || {
        member.read().len() == 2
    });
    use kafka_protocol::messages::offset_delete_request::{
        OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
    };
    let response: OffsetDeleteResponse = Raw::connect(&weir.kafka).call(
        ApiKey::OffsetDelete,
        0,
        &OffsetDeleteRequest::default()
            .with_group_id(GroupId(str("watchers")))
            .with_topics(vec![OffsetDeleteRequestTopic::default()
                .with_name(TopicName(str("watched")))
                .with_partitions(vec![
                    OffsetDeleteRequestPartition::default().with_partition_index(0)
                ])]),
    );
    assert_eq!(response.error_code, 0);
    assert_eq!(
        response.topics[0].partitions[0].error_code, 86,
        "GROUP_SUBSCRIBED_TO_TOPIC"
    );
}

#[test]
fn reset_to_earliest_replays_the_topic() {
    let weir = Weir::start(BROKER_ARGS);
    create_topic(&weir, "history", 2, 10);
    let member = Member::start(&weir, "replayers", "history", &[]);
    wait_until("everything is read", Duration::from_secs(30), || {
        member.read().len() == 20
    });
    member.close();
    wait_until("the group is empty", Duration::from_secs(10), || {
        describe(&weir, "replayers").groups[0].group_state.as_str() == "Empty"
    });
    let reset = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["group", "reset-offsets", "replayers", "--topic", "history"])
        .args(["--to-earliest", "--bootstrap", &weir.kafka])
        .output()
        .unwrap();
    assert!(reset.status.success(), "{reset:?}");
    let again = Member::start(&weir, "replayers", "history", &[]);
    wait_until("everything is read again", Duration::from_secs(30), || {
        again.read().len() == 20
    });
    every_record_read_once(&[&again], 2, 10);
}

/// librdkafka members of a consumer group (KIP-848).
const CONSUMER_PROTOCOL: &[(&str, &str)] = &[("group.protocol", "consumer")];

/// Consumer group members heartbeat every 500 ms and expire after 6 s
/// (below Kafka's default bounds, so the minimums come down too).
const CONSUMER_BROKER_ARGS: &[&str] = &[
    "--group-consumer-heartbeat-interval-ms",
    "500",
    "--group-consumer-min-heartbeat-interval-ms",
    "500",
    "--group-consumer-session-timeout-ms",
    "6000",
    "--group-consumer-min-session-timeout-ms",
    "6000",
];

#[test]
fn consumer_protocol_members_share_partitions_and_a_newcomer_takes_some_without_moving_the_rest() {
    let weir = Weir::start(CONSUMER_BROKER_ARGS);
    create_topic(&weir, "events", 6, 0);
    let first: Vec<Member> = (0..3)
        .map(|_| Member::start(&weir, "modern", "events", CONSUMER_PROTOCOL))
        .collect();
    let refs: Vec<&Member> = first.iter().collect();
    let before = wait_for_split(&refs, 6);
    assert!(before.iter().all(|s| s.len() == 2), "{before:?}");
    produce_each(&weir, "events", 6, 50);
    wait_until("every record is read", Duration::from_secs(30), || {
        refs.iter().map(|m| m.read().len()).sum::<usize>() >= 300
    });
    every_record_read_once(&refs, 6, 50);
    let revoked_before: Vec<usize> = first
        .iter()
        .map(|m| m.rebalances.revoked.lock().unwrap().iter().sum())
        .collect();

    // A fourth member: the uniform assignor gives it two partitions, taken
    // one each from two members; everyone else keeps what it had.
    let newcomer = Member::start(&weir, "modern", "events", CONSUMER_PROTOCOL);
    let mut all = refs.clone();
    all.push(&newcomer);
    let after = wait_for_split(&all, 6);
    for (kept, had) in after.iter().zip(&before) {
        assert!(
            kept.is_subset(had),
            "a member got a partition it did not have: {had:?} -> {kept:?}"
        );
    }
    let revoked_after: usize = first
        .iter()
        .map(|m| m.rebalances.revoked.lock().unwrap().iter().sum::<usize>())
        .sum::<usize>()
        - revoked_before.iter().sum::<usize>();
    assert_eq!(
        revoked_after,
        after[3].len(),
        "only the partitions that moved were revoked"
    );

    // Records written now are read by the partition's owner, the newcomer
    // included.
    produce_each(&weir, "events", 6, 10);
    wait_until("the second batch is read", Duration::from_secs(30), || {
        all.iter()
            .map(|m| m.read().iter().filter(|(_, o)| *o >= 50).count())
            .sum::<usize>()
            >= 60
    });
    assert!(newcomer
        .read()
        .iter()
        .any(|(p, o)| *o >= 50 && after[3].contains(p)));
}

/// One raw ConsumerGroupHeartbeat v1.
fn consumer_heartbeat(
    raw: &mut Raw,
    group: &str,
    member_id: &str,
    epoch: i32,
    topics: Option<&[&str]>,
) -> kafka_protocol::messages::ConsumerGroupHeartbeatResponse {
    use kafka_protocol::messages::ConsumerGroupHeartbeatRequest;
    let request = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(str(group)))
        .with_member_id(str(member_id))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(if epoch == 0 { 30_000 } else { -1 })
        .with_subscribed_topic_names(
            topics.map(|t| t.iter().map(|name| TopicName(str(name))).collect()),
        )
        .with_topic_partitions((epoch == 0).then(Vec::new));
    raw.call(ApiKey::ConsumerGroupHeartbeat, 1, &request)
}

/// Joins `group` as a consumer group member subscribed to `topic`: its
/// member id, epoch and assigned partitions.
fn consumer_join(raw: &mut Raw, group: &str, topic: &str) -> (String, i32, BTreeSet<i32>) {
    let member_id = uuid::Uuid::new_v4().to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let joined = consumer_heartbeat(raw, group, &member_id, 0, Some(&[topic]));
        // The offsets topic is created by the first request: retry until
        // it is loaded.
        if joined.error_code == 0 {
            let assigned = joined
                .assignment
                .map(|a| {
                    a.topic_partitions
                        .into_iter()
                        .flat_map(|t| t.partitions)
                        .collect()
                })
                .unwrap_or_default();
            return (member_id, joined.member_epoch, assigned);
        }
        assert!(Instant::now() < deadline, "cannot join: {joined:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn consumer_group_epochs_fence_offset_commits_and_a_silent_member_loses_its_partitions() {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};
    let weir = Weir::start(CONSUMER_BROKER_ARGS);
    create_topic(&weir, "work", 4, 5);
    let mut raw = Raw::connect(&weir.kafka);
    assert_eq!(raw.find_coordinator(0, "fenced").error_code, 0);
    let (member, epoch, assigned) = consumer_join(&mut raw, "fenced", "work");
    assert_eq!(
        assigned,
        (0..4).collect(),
        "the only member gets every partition"
    );
    // A wrong epoch is fenced; the member's own is accepted.
    assert_eq!(
        consumer_heartbeat(&mut raw, "fenced", &member, epoch + 5, None).error_code,
        110
    );
    assert_eq!(
        consumer_heartbeat(&mut raw, "fenced", &member, epoch, None).error_code,
        0
    );
    let commit = |raw: &mut Raw, epoch: i32, version: i16| -> i16 {
        let response: OffsetCommitResponse = raw.call(
            ApiKey::OffsetCommit,
            version,
            &OffsetCommitRequest::default()
                .with_group_id(GroupId(str("fenced")))
                .with_member_id(str(&member))
                .with_generation_id_or_member_epoch(epoch)
                .with_topics(vec![OffsetCommitRequestTopic::default()
                    .with_name(TopicName(str("work")))
                    .with_partitions(vec![OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(3)])]),
        );
        response.topics[0].partitions[0].error_code
    };
    assert_eq!(commit(&mut raw, epoch - 1, 9), 113, "STALE_MEMBER_EPOCH");
    assert_eq!(
        commit(&mut raw, epoch, 8),
        35,
        "UNSUPPORTED_VERSION before v9"
    );
    assert_eq!(commit(&mut raw, epoch, 9), 0);
    // A classic member joins a consumer group only with the consumer
    // protocol type and a protocol (assignor) to speak.
    let classic: JoinGroupResponse = raw.call(
        ApiKey::JoinGroup,
        5,
        &JoinGroupRequest::default()
            .with_group_id(GroupId(str("fenced")))
            .with_session_timeout_ms(6000)
            .with_rebalance_timeout_ms(6000)
            .with_member_id(str("classic"))
            .with_protocol_type(str("consumer")),
    );
    assert_eq!(classic.error_code, 23, "INCONSISTENT_GROUP_PROTOCOL");

    // A librdkafka member joins and gets nothing until the silent one's
    // session ends: then every partition, reading on from the commit.
    let reader = Member::start(&weir, "fenced", "work", CONSUMER_PROTOCOL);
    wait_until("the silent member expires", Duration::from_secs(30), || {
        reader.assignment().len() == 4
    });
    assert_eq!(
        consumer_heartbeat(&mut raw, "fenced", &member, epoch, None).error_code,
        25
    );
    wait_until("the reader reads", Duration::from_secs(20), || {
        reader.read().len() >= 17
    });
    let read: BTreeSet<(i32, i64)> = reader.read().into_iter().collect();
    assert!(
        !read.contains(&(0, 2)),
        "committed records are not read again"
    );
    assert!(read.contains(&(0, 3)) && read.contains(&(1, 0)));
}

#[test]
fn consumer_group_members_keep_their_epochs_and_assignments_across_a_broker_restart() {
    let mut weir = Weir::start(CONSUMER_BROKER_ARGS);
    create_topic(&weir, "kept", 3, 0);
    let mut raw = Raw::connect(&weir.kafka);
    assert_eq!(raw.find_coordinator(0, "durable").error_code, 0);
    let (member, epoch, assigned) = consumer_join(&mut raw, "durable", "kept");
    assert_eq!(assigned.len(), 3);
    drop(raw);
    weir.restart(false);
    let mut raw = Raw::connect(&weir.kafka);
    let deadline = Instant::now() + Duration::from_secs(20);
    let answer = loop {
        let answer = consumer_heartbeat(&mut raw, "durable", &member, epoch, None);
        // Until the coordinator has loaded __consumer_offsets again.
        if answer.error_code != 14 && answer.error_code != 15 && answer.error_code != 16 {
            break answer;
        }
        assert!(Instant::now() < deadline, "{answer:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        answer.error_code, 0,
        "the member is still known: {answer:?}"
    );
    assert_eq!(answer.member_epoch, epoch);
}

#[test]
fn a_classic_group_and_a_consumer_group_read_the_same_topic() {
    let weir = Weir::start(&[BROKER_ARGS, CONSUMER_BROKER_ARGS].concat());
    create_topic(&weir, "shared", 4, 25);
    let classic = Member::start(&weir, "old-style", "shared", &[]);
    let modern = Member::start(&weir, "new-style", "shared", CONSUMER_PROTOCOL);
    wait_until("both read everything", Duration::from_secs(30), || {
        classic.read().len() >= 100 && modern.read().len() >= 100
    });
    every_record_read_once(&[&classic], 4, 25);
    every_record_read_once(&[&modern], 4, 25);
}

#[test]
fn a_consumer_group_regex_subscription_picks_up_a_topic_created_later() {
    let weir = Weir::start(CONSUMER_BROKER_ARGS);
    create_topic(&weir, "metrics-cpu", 2, 5);
    let reader = Member::start(&weir, "by-pattern", "^metrics-.*", CONSUMER_PROTOCOL);
    wait_until("the first topic is read", Duration::from_secs(30), || {
        reader.read().len() >= 10
    });
    create_topic(&weir, "metrics-disk", 3, 4);
    create_topic(&weir, "logs", 1, 4);
    // The new matching topic's records arrive too (partitions 0..3 of a
    // second topic: 12 more records); the topic that does not match never.
    wait_until("the later topic is read", Duration::from_secs(30), || {
        reader.read().len() >= 22
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(reader.read().len(), 22);
}

#[test]
fn a_static_consumer_group_member_gets_its_partitions_back_when_it_returns() {
    let weir = Weir::start(CONSUMER_BROKER_ARGS);
    create_topic(&weir, "ledger", 4, 0);
    let static_member = |instance: &str| {
        Member::start(
            &weir,
            "statics",
            "ledger",
            &[
                ("group.protocol", "consumer"),
                ("group.instance.id", instance),
            ],
        )
    };
    let a = static_member("a");
    let b = static_member("b");
    let before = wait_for_split(&[&a, &b], 4);
    // `a` goes away for less than the session timeout: its partitions
    // wait for it rather than move to `b`.
    a.close();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(b.assignment(), before[1], "b did not take a's partitions");
    let a = static_member("a");
    let after = wait_for_split(&[&a, &b], 4);
    assert_eq!(after, before);
}

#[test]
fn a_consumer_group_takes_its_own_configs_from_the_group_config_resource() {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::{
        DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    };
    const GROUP_RESOURCE: i8 = 32;
    let weir = Weir::start(CONSUMER_BROKER_ARGS);
    create_topic(&weir, "tuned-topic", 1, 0);
    let mut raw = Raw::connect(&weir.kafka);
    let alter = |raw: &mut Raw, configs: &[(&str, &str)]| -> (i16, Option<String>) {
        let response: IncrementalAlterConfigsResponse = raw.call(
            ApiKey::IncrementalAlterConfigs,
            1,
            &IncrementalAlterConfigsRequest::default().with_resources(vec![
                AlterConfigsResource::default()
                    .with_resource_type(GROUP_RESOURCE)
                    .with_resource_name(str("tuned"))
                    .with_configs(
                        configs
                            .iter()
                            .map(|(name, value)| {
                                AlterableConfig::default()
                                    .with_name(str(name))
                                    .with_config_operation(0)
                                    .with_value(Some(str(value)))
                            })
                            .collect(),
                    ),
            ]),
        );
        let answer = &response.responses[0];
        (
            answer.error_code,
            answer.error_message.as_ref().map(|m| m.to_string()),
        )
    };
    // Unknown names and values that do not fit are refused (INVALID_CONFIG),
    // bounded by the broker's group.consumer.min/max.* as Kafka.
    assert_eq!(alter(&mut raw, &[("consumer.lunch.break.ms", "1")]).0, 40);
    assert_eq!(
        alter(&mut raw, &[("consumer.heartbeat.interval.ms", "60000")]),
        (
            40,
            Some(
                "consumer.heartbeat.interval.ms must be less than or equal to \
                 group.consumer.max.heartbeat.interval.ms (15000)"
                    .to_owned()
            )
        )
    );
    assert_eq!(
        alter(&mut raw, &[("consumer.session.timeout.ms", "5999")]).0,
        40
    );
    assert_eq!(
        alter(
            &mut raw,
            &[
                ("consumer.heartbeat.interval.ms", "1234"),
                ("consumer.session.timeout.ms", "7000")
            ]
        ),
        (0, None)
    );
    let described: DescribeConfigsResponse = raw.call(
        ApiKey::DescribeConfigs,
        4,
        &DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(GROUP_RESOURCE)
            .with_resource_name(str("tuned"))
            .with_configuration_keys(None)]),
    );
    let configs: BTreeMap<String, (String, i8)> = described.results[0]
        .configs
        .iter()
        .map(|c| {
            (
                c.name.to_string(),
                (
                    c.value.as_deref().unwrap_or_default().to_owned(),
                    c.config_source,
                ),
            )
        })
        .collect();
    assert_eq!(
        configs["consumer.heartbeat.interval.ms"],
        ("1234".to_owned(), 8)
    );
    assert_eq!(
        configs["consumer.session.timeout.ms"],
        ("7000".to_owned(), 8)
    );
    // The share group settings (KIP-932, and KIP-1191's dead-letter topic)
    // are group configs too, with Kafka's defaults and bounds.
    assert_eq!(
        configs["share.record.lock.duration.ms"],
        ("30000".to_owned(), 5)
    );
    assert_eq!(configs["share.auto.offset.reset"], ("latest".to_owned(), 5));
    assert_eq!(
        alter(
            &mut raw,
            &[
                ("errors.deadletterqueue.topic.name", "dlq.tuned"),
                ("share.delivery.count.limit", "3"),
            ]
        ),
        (0, None)
    );
    assert_eq!(
        alter(&mut raw, &[("share.delivery.count.limit", "11")]),
        (
            40,
            Some("share.delivery.count.limit must be between 2 and 10".to_owned())
        )
    );
    assert_eq!(alter(&mut raw, &[("share.isolation.level", "maybe")]).0, 40);
    // A member of the group is told the group's heartbeat interval; other
    // groups keep the broker's.
    assert_eq!(raw.find_coordinator(0, "tuned").error_code, 0);
    let member = uuid::Uuid::new_v4().to_string();
    let joined = wait_joined(&mut raw, "tuned", &member, "tuned-topic");
    assert_eq!(joined.heartbeat_interval_ms, 1234);
    let other = wait_joined(
        &mut raw,
        "untuned",
        &uuid::Uuid::new_v4().to_string(),
        "tuned-topic",
    );
    assert_eq!(other.heartbeat_interval_ms, 500);
}

/// Joins `group` as `member`, retrying while the coordinator loads.
fn wait_joined(
    raw: &mut Raw,
    group: &str,
    member: &str,
    topic: &str,
) -> kafka_protocol::messages::ConsumerGroupHeartbeatResponse {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let joined = consumer_heartbeat(raw, group, member, 0, Some(&[topic]));
        if joined.error_code == 0 {
            return joined;
        }
        assert!(Instant::now() < deadline, "cannot join: {joined:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The member types (0 classic, 1 consumer) of a consumer group, sorted,
/// as ConsumerGroupDescribe v1 sees them: `None` when it is not a
/// consumer group (GROUP_ID_NOT_FOUND).
fn consumer_group_members(weir: &Weir, group: &str) -> Option<Vec<i8>> {
    use kafka_protocol::messages::{ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse};
    let response: ConsumerGroupDescribeResponse = Raw::connect(&weir.kafka).call(
        ApiKey::ConsumerGroupDescribe,
        1,
        &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(str(group))]),
    );
    let described = &response.groups[0];
    let mut types: Vec<i8> = described.members.iter().map(|m| m.member_type).collect();
    types.sort_unstable();
    (described.error_code == 0).then_some(types)
}

#[test]
fn a_classic_group_becomes_a_consumer_group_and_back_while_its_members_keep_reading() {
    let weir = Weir::start(&[BROKER_ARGS, CONSUMER_BROKER_ARGS].concat());
    create_topic(&weir, "migrating", 6, 0);
    // Classic members commit as they go (and when they give a partition
    // up), so that a partition's next owner reads on from there.
    let classic: &[(&str, &str)] = &[
        ("partition.assignment.strategy", "cooperative-sticky"),
        ("enable.auto.commit", "true"),
        ("auto.commit.interval.ms", "100"),
    ];
    let a = Member::start(&weir, "migrating", "migrating", classic);
    let b = Member::start(&weir, "migrating", "migrating", classic);
    wait_for_split(&[&a, &b], 6);
    assert_eq!(consumer_group_members(&weir, "migrating"), None);
    produce_each(&weir, "migrating", 6, 10);
    wait_until("the classic group reads", Duration::from_secs(30), || {
        a.read().len() + b.read().len() >= 60
    });

    // A member of the consumer protocol joins: the group becomes a consumer
    // group with the two classic members in it, and the three share the
    // partitions.
    let c = Member::start(
        &weir,
        "migrating",
        "migrating",
        &[
            ("group.protocol", "consumer"),
            ("enable.auto.commit", "true"),
            ("auto.commit.interval.ms", "100"),
        ],
    );
    wait_for_split(&[&a, &b, &c], 6);
    // Two classic members and one of the consumer protocol.
    assert_eq!(
        consumer_group_members(&weir, "migrating"),
        Some(vec![0, 0, 1])
    );
    produce_each(&weir, "migrating", 6, 10);
    wait_until("the upgraded group reads", Duration::from_secs(30), || {
        a.read().len() + b.read().len() + c.read().len() >= 120
    });

    // The consumer-protocol member leaves: the group is classic again and
    // its two members take every partition.
    let read_by_c = c.read.clone();
    c.close();
    let read_by_c = move || read_by_c.lock().unwrap().clone();
    wait_until(
        "the group is classic again",
        Duration::from_secs(30),
        || consumer_group_members(&weir, "migrating").is_none(),
    );
    wait_for_split(&[&a, &b], 6);
    let described = describe(&weir, "migrating");
    assert_eq!(described.groups[0].protocol_type.as_str(), "consumer");
    assert_eq!(described.groups[0].members.len(), 2);
    produce_each(&weir, "migrating", 6, 10);
    wait_until(
        "the downgraded group reads",
        Duration::from_secs(30),
        || a.read().len() + b.read().len() + read_by_c().len() >= 180,
    );
    every_record_in_reads_once(&[a.read(), b.read(), read_by_c()], 6, 30);
}
