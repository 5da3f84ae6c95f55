//! Three `weir serve` processes forming one cluster on loopback: replica
//! placement, clients following partition leaders, controller failover,
//! fencing of a killed broker and its return, the leadership handover
//! of a clean shutdown, and operators' leader elections (ElectLeaders).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::cluster::{
    admin, assert_all_in_order, brokers, create_topic, create_topic_with, partitions, send_acked,
    wait_until, Cluster, BOTH, SESSION_TIMEOUT_MS,
};
use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;

fn producer(bootstrap: &str, acks: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", acks)
        .set("enable.idempotence", "false")
        .set("message.timeout.ms", "10000")
        .set("linger.ms", "0")
        .create()
        .expect("producer")
}

/// Sends one record to each partition; returns the error of each.
fn send_each(producer: &FutureProducer, topic: &str, partitions: i32, value: &str) -> Vec<String> {
    let sends: Vec<_> = (0..partitions)
        .map(|p| {
            producer.send(
                FutureRecord::<(), str>::to(topic)
                    .partition(p)
                    .payload(value),
                Duration::from_secs(10),
            )
        })
        .collect();
    sends
        .into_iter()
        .filter_map(|send| {
            common::cli::block_on(send)
                .err()
                .map(|(e, _)| e.to_string())
        })
        .collect()
}

/// Reads every partition of `topic` from the start; returns the values.
fn read_all(bootstrap: &str, topic: &str, partitions: i32, expected: usize) -> Vec<String> {
    use rdkafka::message::Message;
    use rdkafka::TopicPartitionList;
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "cluster-reader")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions {
        assignment
            .add_partition_offset(topic, p, rdkafka::Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&assignment).unwrap();
    let mut values = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while values.len() < expected && Instant::now() < deadline {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(200)) {
            let value = message
                .payload()
                .map(|v| String::from_utf8_lossy(v).into_owned());
            values.push(value.unwrap_or_default());
        }
    }
    values
}

#[test]
fn replicas_and_leaders_spread_over_three_brokers_and_clients_follow_leaders() {
    let cluster = Cluster::start(&[]);
    let bootstrap = cluster.bootstrap();
    assert_eq!(brokers(&bootstrap), BTreeSet::from([1, 2, 3]));
    create_topic(&cluster.node(1).kafka, "spread", 6, 3);
    let views = partitions(&bootstrap, "spread");
    assert_eq!(views.len(), 6);
    let mut leads: BTreeMap<i32, usize> = BTreeMap::new();
    for view in &views {
        let replicas: BTreeSet<i32> = view.replicas.iter().copied().collect();
        assert_eq!(replicas, BTreeSet::from([1, 2, 3]), "{view:?}");
        assert_eq!(view.leader, view.replicas[0], "preferred leader: {view:?}");
        *leads.entry(view.leader).or_default() += 1;
    }
    assert_eq!(leads, BTreeMap::from([(1, 2), (2, 2), (3, 2)]));

    // librdkafka bootstraps from one node and sends each partition's
    // records to its leader.
    let loose = producer(&cluster.node(2).kafka, "1");
    assert_eq!(send_each(&loose, "spread", 6, "v1"), Vec::<String>::new());
    let values = read_all(&cluster.node(3).kafka, "spread", 6, 6);
    assert_eq!(values.len(), 6, "{values:?}");

    // acks=all is answered once the followers have the records.
    let strict = producer(&cluster.node(1).kafka, "all");
    assert_eq!(send_each(&strict, "spread", 6, "v2"), Vec::<String>::new());
    assert_eq!(read_all(&cluster.node(3).kafka, "spread", 6, 12).len(), 12);

    // A topic with more replicas than brokers is refused.
    let admin = admin(&bootstrap);
    let results = common::cli::block_on(admin.create_topics(
        &[NewTopic::new("too-wide", 1, TopicReplication::Fixed(4))],
        &AdminOptions::new(),
    ))
    .unwrap();
    let error = results[0].as_ref().unwrap_err();
    assert_eq!(
        error.1,
        rdkafka::types::RDKafkaErrorCode::InvalidReplicationFactor
    );
}

#[test]
fn killing_the_active_controller_elects_another_that_serves() {
    let mut cluster = Cluster::start(&[]);
    let controller = cluster.controller(1) as i32;
    assert!((1..=3).contains(&controller), "controller {controller}");
    let survivor = if controller == 1 { 2 } else { 1 };
    let killed = Instant::now();
    cluster.node_mut(controller).kill();
    let new_controller = wait_until("a new controller", Duration::from_secs(15), || {
        let id = cluster.controller(survivor) as i32;
        (id > 0 && id != controller).then_some(id)
    });
    eprintln!(
        "controller {controller} killed; controller {new_controller} elected after {:?}",
        killed.elapsed()
    );
    // A metadata change after the failover works. The new controller
    // gives every broker a full session before fencing it, as Kafka does;
    // once the dead one is fenced, placement leaves it out.
    let bootstrap = cluster.bootstrap();
    wait_until(
        "the killed broker to be fenced",
        Duration::from_millis(SESSION_TIMEOUT_MS + 10_000),
        || (!brokers(&bootstrap).contains(&controller)).then_some(()),
    );
    eprintln!("broker {controller} fenced after {:?}", killed.elapsed());
    create_topic(&cluster.node(survivor).kafka, "after-failover", 2, 2);
    for view in partitions(&bootstrap, "after-failover") {
        assert!(!view.replicas.contains(&controller), "{view:?}");
    }
    let producer = producer(&bootstrap, "1");
    assert_eq!(
        send_each(&producer, "after-failover", 2, "x"),
        Vec::<String>::new()
    );
}

/// Every registered broker, fenced or not, as DescribeCluster v2 lists
/// them when asked to (KIP-1073).
fn described_brokers(bootstrap: &str) -> Vec<(i32, bool)> {
    use kafka_protocol::messages::{ApiKey, DescribeClusterRequest, DescribeClusterResponse};
    let mut raw = common::raw::Raw::connect(bootstrap);
    let described: DescribeClusterResponse = raw.call(
        ApiKey::DescribeCluster,
        2,
        &DescribeClusterRequest::default().with_include_fenced_brokers(true),
    );
    let mut brokers: Vec<(i32, bool)> = described
        .brokers
        .iter()
        .map(|b| (b.broker_id.0, b.is_fenced))
        .collect();
    brokers.sort();
    brokers
}

#[test]
fn a_killed_broker_is_fenced_its_leaderships_move_and_it_rejoins() {
    let mut cluster = Cluster::start(&["--leader-imbalance-check-interval-seconds", "1"]);
    create_topic(&cluster.node(1).kafka, "moving", 3, 3);
    let controller = cluster.controller(1) as i32;
    // Kill a broker that is not the active controller, so that this
    // measures fencing, not controller failover.
    let victim = (1..=3).find(|id| *id != controller).unwrap();
    let watcher = (1..=3).find(|id| *id != victim).unwrap();
    let before = partitions(&cluster.bootstrap(), "moving");
    let led: Vec<usize> = (0..3).filter(|p| before[*p].leader == victim).collect();
    assert!(!led.is_empty(), "{before:?}");
    // A partition whose only replica is the victim's: leaderless after.
    let only_the_victim: &[&[i32]] = &[&[victim]];
    let alone = NewTopic::new("alone", 1, TopicReplication::Variable(only_the_victim));
    let created = common::cli::block_on(
        admin(&cluster.bootstrap()).create_topics(&[alone], &AdminOptions::new()),
    )
    .expect("create topics");
    created.into_iter().for_each(|r| drop(r.expect("created")));

    let killed = Instant::now();
    cluster.node_mut(victim).kill();
    let bootstrap = cluster.node(watcher).kafka.clone();
    let after = wait_until(
        "leaderships to move",
        Duration::from_millis(SESSION_TIMEOUT_MS + 10_000),
        || {
            let views = partitions(&bootstrap, "moving");
            views
                .iter()
                .all(|v| v.leader >= 0 && v.leader != victim && !v.isr.contains(&victim))
                .then_some(views)
        },
    );
    eprintln!(
        "broker {victim} killed; its leaderships moved after {:?}",
        killed.elapsed()
    );
    assert!(!brokers(&bootstrap).contains(&victim));
    assert_eq!(
        described_brokers(&bootstrap),
        (1..=3).map(|id| (id, id == victim)).collect::<Vec<_>>(),
        "DescribeCluster v2 with fenced brokers"
    );
    for p in &led {
        assert!(before[*p].isr.contains(&after[*p].leader));
    }
    let producer = producer(&bootstrap, "1");
    assert_eq!(send_each(&producer, "moving", 3, "y"), Vec::<String>::new());
    // Described as leaderless, with no offsets to show, not an error; its
    // ISR is empty (the cell left blank), the victim waiting in the
    // eligible leader replicas (KIP-966).
    let described = common::cli::run(
        &["topic", "describe", "alone", "--bootstrap", &bootstrap],
        b"",
    )
    .ok();
    let table = described.table("PARTITION");
    assert_eq!(
        table[1],
        ["0", "none", &victim.to_string(), "-", "-"],
        "{}",
        described.stdout
    );

    // It comes back under the same id: registered, in the ISR again, and
    // the preferred leader of its partitions once more.
    cluster.node_mut(victim).restart(false);
    wait_until(
        "the broker to lead its partitions again",
        Duration::from_secs(20),
        || {
            let views = partitions(&bootstrap, "moving");
            views
                .iter()
                .all(|v| v.isr.len() == 3 && v.leader == v.replicas[0])
                .then_some(())
        },
    );
    assert!(brokers(&bootstrap).contains(&victim));
}

#[test]
fn a_failed_log_dir_moves_its_leaderships_to_in_sync_replicas() {
    let cluster = Cluster::start(&[]);
    let bootstrap = cluster.bootstrap();
    create_topic_with(
        &bootstrap,
        "disk",
        1,
        3,
        &[("segment.bytes", "1024"), ("min.insync.replicas", "2")],
    );
    let before = partitions(&bootstrap, "disk");
    let victim = before[0].leader;
    let acked = send_acked(&bootstrap, "disk", "before", 20);
    assert_eq!(acked.len(), 20);
    wait_until("every replica in sync", Duration::from_secs(10), || {
        (partitions(&bootstrap, "disk")[0].isr.len() == 3).then_some(())
    });

    // The leader's disk goes: its next segment cannot be made, its log
    // directory fails, and the controller moves the leadership.
    std::fs::remove_dir_all(cluster.node(victim).data_dir.join("disk-0")).unwrap();
    let producer = producer(&bootstrap, "all");
    let mut sent = Vec::new();
    let after = wait_until(
        "the leadership to leave the failed directory",
        Duration::from_secs(30),
        || {
            let value = format!("during-{}", sent.len());
            if send_each(&producer, "disk", 1, &value).is_empty() {
                sent.push(value);
            }
            let view = partitions(&bootstrap, "disk").remove(0);
            (view.leader >= 0 && view.leader != victim && !view.isr.contains(&victim))
                .then_some(view)
        },
    );
    assert!(before[0].isr.contains(&after.leader));
    // The broker is not fenced: only the failed directory's replicas moved.
    assert!(brokers(&bootstrap).contains(&victim));

    // Writes go on at the new leader, and nothing acknowledged is lost.
    assert_eq!(
        send_each(&producer, "disk", 1, "after"),
        Vec::<String>::new()
    );
    let expected: Vec<String> = acked
        .into_iter()
        .chain(sent)
        .chain(["after".to_owned()])
        .collect();
    let read = read_all(&bootstrap, "disk", 1, expected.len());
    assert_all_in_order(&read, &expected);
}

/// Fills `path`'s volume to the last byte.
fn fill_volume(path: &std::path::Path) {
    use std::io::Write;
    let mut ballast = std::fs::File::create(path).unwrap();
    let chunk = vec![1u8; 1 << 20];
    while ballast.write_all(&chunk).is_ok() {}
    while ballast.write_all(&[1]).is_ok() {}
}

/// A leader whose volume fills hands its leadership to an in-sync replica
/// instead of refusing every write until someone frees space. Its log
/// directory is reported as Kafka reports an offline one. It fetches
/// nothing into the full volume, so it neither retries writes that cannot
/// succeed nor looks caught up (its idle partition would otherwise rejoin
/// the ISR and come back to it at every preferred election). Once space is
/// freed it catches up, rejoins the ISR and gets its leadership back.
#[test]
fn a_leader_on_a_full_disk_hands_over_its_leadership_and_takes_it_back_once_space_is_freed() {
    use kafka_protocol::messages::{ApiKey, DescribeLogDirsRequest, DescribeLogDirsResponse};
    use weir_log::testing::BatchBuilder;

    let disk = common::SmallDisk::mount(64);
    let logs = disk.dir.join("logs");
    let logs_arg = logs.display().to_string();
    let cluster = Cluster::start_each(
        &["--leader-imbalance-check-interval-seconds", "1"],
        &[&["--log-dirs", &logs_arg]],
    );
    let bootstrap = cluster.bootstrap();
    let topic = NewTopic::new("full", 1, TopicReplication::Variable(&[&[1, 2, 3]]))
        .set("min.insync.replicas", "2");
    let created = common::cli::block_on(admin(&bootstrap).create_topics(
        &[topic],
        &AdminOptions::new().operation_timeout(Some(Duration::from_secs(20))),
    ))
    .expect("create topics");
    created.into_iter().for_each(|r| {
        r.expect("topic created");
    });
    let in_sync_under = |leader: i32| {
        let bootstrap = &bootstrap;
        move || {
            let view = partitions(bootstrap, "full").remove(0);
            (view.leader == leader && view.isr.len() == 3).then_some(())
        }
    };
    wait_until("node 1 to lead", Duration::from_secs(20), in_sync_under(1));
    let mut acked = send_acked(&bootstrap, "full", "before", 20);
    wait_until(
        "every replica in sync",
        Duration::from_secs(20),
        in_sync_under(1),
    );

    // Node 1's volume fills; its next write fails.
    let ballast = disk.dir.join("ballast");
    fill_volume(&ballast);
    let mut leader = common::raw::Raw::connect(&cluster.node(1).kafka);
    let batch = BatchBuilder::new(1).value_size(64 << 10).build();
    assert_eq!(
        leader.produce("full", 0, batch).0,
        56,
        "KAFKA_STORAGE_ERROR"
    );

    // With nothing more written, the leadership moves to an in-sync replica.
    let moved = wait_until(
        "the leadership to leave the full disk",
        Duration::from_secs(30),
        || {
            let view = partitions(&bootstrap, "full").remove(0);
            (view.leader > 1 && !view.isr.contains(&1)).then_some(view)
        },
    );
    // The broker is not fenced: only the full directory's replicas moved.
    assert!(brokers(&bootstrap).contains(&1));
    let described: DescribeLogDirsResponse = leader.call(
        ApiKey::DescribeLogDirs,
        4,
        &DescribeLogDirsRequest::default().with_topics(None),
    );
    let codes: Vec<(String, i16)> = described
        .results
        .iter()
        .map(|r| (r.log_dir.to_string(), r.error_code))
        .collect();
    assert_eq!(codes, vec![(logs_arg.clone(), 56)]);
    // Node 1 holds every acknowledged record, yet stays out of the ISR
    // while its volume is full, through several preferred elections.
    std::thread::sleep(Duration::from_secs(5));
    let view = partitions(&bootstrap, "full").remove(0);
    assert_eq!(view.leader, moved.leader, "{view:?}");
    assert!(!view.isr.contains(&1), "{view:?}");
    // Writes go on at the new leader.
    acked.extend(send_acked(&bootstrap, "full", "during", 20));

    // Space is freed: node 1 catches up, rejoins and leads again.
    std::fs::remove_file(&ballast).unwrap();
    wait_until(
        "node 1 to lead again",
        Duration::from_secs(60),
        in_sync_under(1),
    );
    acked.extend(send_acked(&bootstrap, "full", "after", 20));
    let read = read_all(&bootstrap, "full", 1, acked.len());
    assert_all_in_order(&read, &acked);
}

#[test]
fn sigterm_hands_leadership_over_before_exit() {
    // A session far longer than the test: only the handover can move the
    // leaderships in time.
    let mut cluster = Cluster::start(&["--broker-session-timeout-ms", "60000"]);
    create_topic(&cluster.node(1).kafka, "handover", 3, 3);
    let controller = cluster.controller(1) as i32;
    let leaving = (1..=3).find(|id| *id != controller).unwrap();
    let watcher = (1..=3).find(|id| *id != leaving).unwrap();
    let before = partitions(&cluster.bootstrap(), "handover");
    assert!(before.iter().any(|v| v.leader == leaving), "{before:?}");

    assert!(cluster.node_mut(leaving).stop().success());
    let stopped = Instant::now();
    let views = partitions(&cluster.node(watcher).kafka, "handover");
    assert!(
        stopped.elapsed() < Duration::from_secs(30),
        "metadata took too long"
    );
    for view in &views {
        assert_ne!(view.leader, leaving, "{views:?}");
        assert!(view.leader >= 0, "{views:?}");
        assert!(!view.isr.contains(&leaving), "{views:?}");
    }
}

#[test]
fn cluster_status_and_a_consumer_group_work_across_nodes() {
    use rdkafka::consumer::CommitMode;
    use rdkafka::message::Message;
    let mut cluster = Cluster::start(&[]);
    common::cli::run(
        &[
            "topic",
            "create",
            "work",
            "-p",
            "3",
            "-r",
            "3",
            "--bootstrap",
            &cluster.node(1).kafka,
        ],
        b"",
    )
    .ok();
    // The change committed through node 1 reaches node 3's metadata.
    let created = Instant::now();
    wait_until("node 3 to know the topic", Duration::from_secs(5), || {
        (partitions(&cluster.node(3).kafka, "work").len() == 3).then_some(())
    });
    eprintln!("topic visible on node 3 after {:?}", created.elapsed());

    let status = common::cli::run(
        &["cluster", "status", "--bootstrap", &cluster.node(2).kafka],
        b"",
    )
    .ok();
    let controller = cluster.controller(2);
    assert!(
        status
            .stdout
            .contains(&format!("Active controller: {controller} (Raft term ")),
        "{}",
        status.stdout
    );
    assert!(status.stdout.contains("voters 1,2,3"), "{}", status.stdout);
    assert!(
        status.stdout.contains("Brokers (3 live, 0 fenced)"),
        "{}",
        status.stdout
    );
    assert!(
        status.stdout.contains("Partitions without a leader: 0"),
        "{}",
        status.stdout
    );
    assert!(
        status.stdout.contains("Under-replicated partitions: 0"),
        "{}",
        status.stdout
    );
    // One cluster, one id, whichever node is asked.
    let ids: BTreeSet<String> = (1..=3)
        .map(|id| {
            let (_, body) = cluster.node(id).http_get("/v1/cluster");
            let at = body.find("\"cluster_id\":\"").unwrap() + 14;
            body[at..].split('"').next().unwrap().to_owned()
        })
        .collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert!(status.stdout.contains(ids.first().unwrap().as_str()));
    let brokers = status.table("ID");
    assert_eq!(brokers.len(), 4, "header and 3 brokers: {}", status.stdout);
    assert_eq!(brokers[0][4..6], ["STATE", "LEADERS"], "{}", status.stdout);
    for row in &brokers[1..] {
        assert_eq!(
            row[4..6],
            ["live", "1"],
            "each broker leads one partition: {row:?}"
        );
    }

    let producer = producer(&cluster.node(1).kafka, "1");
    for round in 0..10 {
        assert_eq!(
            send_each(&producer, "work", 3, &format!("r{round}")),
            Vec::<String>::new()
        );
    }
    // The group's coordinator is the leader of its __consumer_offsets
    // partition, wherever that is; librdkafka finds it.
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &cluster.node(3).kafka)
        .set("group.id", "workers")
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    consumer.subscribe(&["work"]).unwrap();
    let mut read = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while read < 30 && Instant::now() < deadline {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(200)) {
            assert!(message.payload().is_some());
            read += 1;
        }
    }
    assert_eq!(read, 30);
    consumer.commit_consumer_state(CommitMode::Sync).unwrap();
    let committed = consumer
        .committed(Timeout::After(Duration::from_secs(10)))
        .unwrap();
    let offsets: Vec<i64> = committed
        .elements()
        .iter()
        .map(|e| e.offset().to_raw().unwrap_or(-1))
        .collect();
    assert_eq!(offsets, vec![10, 10, 10]);

    // The coordinator dies: the group moves with the leadership of its
    // __consumer_offsets partition, commits included.
    let coordinator = common::cli::block_on(async {
        let mut client = weir_client::Client::connect(&cluster.node(1).kafka)
            .await
            .unwrap();
        client.find_coordinator("workers").await.unwrap().node_id
    });
    cluster.node_mut(coordinator).kill();
    let survivor = (1..=3).find(|id| *id != coordinator).unwrap();
    let bootstrap = cluster.node(survivor).kafka.clone();
    wait_until(
        "the group to have a new coordinator",
        Duration::from_millis(SESSION_TIMEOUT_MS + 20_000),
        || {
            common::cli::block_on(async {
                let mut client = weir_client::Client::connect(&bootstrap).await.ok()?;
                let found = client.find_coordinator("workers").await.ok()?;
                (found.node_id != coordinator).then_some(())
            })
        },
    );
    // Another client of the group asks the new coordinator.
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "workers")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut wanted = rdkafka::TopicPartitionList::new();
    for p in 0..3 {
        wanted.add_partition("work", p);
    }
    let offsets: Vec<i64> = wait_until(
        "the commits at the new coordinator",
        Duration::from_secs(20),
        || {
            let committed = reader
                .committed_offsets(wanted.clone(), Timeout::After(Duration::from_secs(5)))
                .ok()?;
            let offsets: Vec<i64> = committed
                .elements()
                .iter()
                .map(|e| e.offset().to_raw().unwrap_or(-1))
                .collect();
            (offsets.iter().all(|o| *o >= 0)).then_some(offsets)
        },
    );
    assert_eq!(offsets, vec![10, 10, 10], "commits survive the coordinator");
}

/// Kafka writes offset commits with acks=all: with both followers of the
/// group's `__consumer_offsets` partition paused, a commit (or the group's
/// deletion) is not acknowledged, and once the coordinator dies the new one
/// still has the last commit that was.
#[test]
fn an_offset_commit_is_acknowledged_only_once_the_in_sync_replicas_hold_it() {
    use weir_client::{Client, ResponseError};
    let mut cluster = Cluster::start(&[]);
    create_topic(&cluster.node(1).kafka, "work", 1, 3);
    let commit = |addr: String, offset: i64| {
        common::cli::block_on(async move {
            let mut client = Client::connect(&addr).await.unwrap();
            client
                .offset_commit_simple("ledger", &[("work".to_owned(), 0, offset)])
                .await
        })
    };
    let coordinator = common::cli::block_on(async {
        let mut client = Client::connect(&cluster.node(1).kafka).await.unwrap();
        client.find_coordinator("ledger").await.unwrap()
    });
    // The coordinator may still be taking up the partition created a
    // moment ago: retried, as clients do.
    wait_until("a first commit", Duration::from_secs(20), || {
        commit(coordinator.addr(), 5).ok()
    });

    let followers: Vec<i32> = (1..=3).filter(|id| *id != coordinator.node_id).collect();
    for id in &followers {
        cluster.node(*id).pause();
    }
    let unreplicated = commit(coordinator.addr(), 10);
    let refused = unreplicated.as_ref().err().and_then(|e| e.kafka_error());
    assert!(
        matches!(
            refused,
            Some(ResponseError::CoordinatorNotAvailable | ResponseError::NotCoordinator)
        ),
        "a commit its followers do not hold was answered {unreplicated:?}"
    );
    // Nor is the deletion of the group (empty, with offsets) acknowledged.
    let deleted = common::cli::block_on(async {
        let mut client = Client::connect(&coordinator.addr()).await.unwrap();
        client.delete_groups(&["ledger"]).await.unwrap()
    });
    let refused = deleted[0].1.as_ref().err().and_then(|e| e.kafka_error());
    assert!(
        matches!(
            refused,
            Some(ResponseError::CoordinatorNotAvailable | ResponseError::NotCoordinator)
        ),
        "a deletion its followers do not hold was answered {deleted:?}"
    );

    cluster.node_mut(coordinator.node_id).kill();
    for id in &followers {
        cluster.node(*id).resume();
    }
    let bootstrap = cluster.node(followers[0]).kafka.clone();
    let successor = wait_until(
        "the group to have a new coordinator",
        Duration::from_millis(SESSION_TIMEOUT_MS + 30_000),
        || {
            common::cli::block_on(async {
                let mut client = Client::connect(&bootstrap).await.ok()?;
                let found = client.find_coordinator("ledger").await.ok()?;
                (found.node_id != coordinator.node_id && found.node_id >= 0).then_some(found)
            })
        },
    );
    let served = wait_until(
        "the offsets at the new coordinator",
        Duration::from_secs(20),
        || {
            common::cli::block_on(async {
                let mut client = Client::connect(&successor.addr()).await.ok()?;
                let wanted = vec![("work".to_owned(), vec![0])];
                let committed = client.offset_fetch("ledger", Some(&wanted)).await.ok()?;
                committed.first().map(|c| c.offset)
            })
        },
    );
    // The refused commit may have reached a follower's socket before the
    // pause (as in Kafka, a failed write may survive); the acknowledged one
    // must.
    assert!(
        served == 5 || served == 10,
        "the new coordinator serves {served}, neither the acknowledged commit nor the refused one"
    );
}

#[test]
fn pending_transactional_offsets_move_with_their_coordinator() {
    use weir_client::{Client, ResponseError, TxnMarker};
    let mut cluster = Cluster::start(&[]);
    create_topic(&cluster.node(1).kafka, "consumed", 2, 3);
    let input = || vec![("consumed".to_owned(), vec![0, 1])];
    // A plain commit, then a transaction's, pending at the coordinator.
    let coordinator = common::cli::block_on(async {
        let mut client = Client::connect(&cluster.node(1).kafka).await.unwrap();
        let found = client.find_coordinator("copier").await.unwrap();
        let mut client = Client::connect(&found.addr()).await.unwrap();
        // The coordinator may still be taking up the __consumer_offsets
        // partition created a moment ago: retried, as clients do.
        for attempt in 0.. {
            let outcome = client
                .offset_commit_simple("copier", &[("consumed".to_owned(), 0, 3)])
                .await;
            let retriable = matches!(
                outcome.as_ref().err().and_then(|e| e.kafka_error()),
                Some(
                    ResponseError::CoordinatorNotAvailable
                        | ResponseError::CoordinatorLoadInProgress
                        | ResponseError::NotCoordinator
                )
            );
            if !retriable || attempt == 50 {
                outcome.unwrap();
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let offsets = [
            ("consumed".to_owned(), 0, 10),
            ("consumed".to_owned(), 1, 11),
        ];
        client
            .txn_offset_commit("copier-1", 4000, 0, "copier", &offsets)
            .await
            .unwrap();
        found.node_id
    });
    cluster.node_mut(coordinator).kill();
    let survivor = (1..=3).find(|id| *id != coordinator).unwrap();
    let bootstrap = cluster.node(survivor).kafka.clone();
    let successor = wait_until(
        "the group to have a new coordinator",
        Duration::from_millis(SESSION_TIMEOUT_MS + 20_000),
        || {
            common::cli::block_on(async {
                let mut client = Client::connect(&bootstrap).await.ok()?;
                let found = client.find_coordinator("copier").await.ok()?;
                (found.node_id != coordinator).then_some(found)
            })
        },
    );
    common::cli::block_on(async {
        let mut client = Client::connect(&successor.addr()).await.unwrap();
        // The new coordinator read the transaction's offsets from its
        // replica: still pending.
        let committed = client.offset_fetch("copier", Some(&input())).await.unwrap();
        let committed: Vec<(i32, i64)> =
            committed.iter().map(|c| (c.partition, c.offset)).collect();
        assert_eq!(committed, vec![(0, 3)]);
        let unstable = client
            .offset_fetch_stable("copier", Some(&input()))
            .await
            .unwrap_err();
        assert!(
            unstable.is(ResponseError::UnstableOffsetCommit),
            "{unstable}"
        );
        // Its commit marker reaches the new leader of the partition.
        let count = client
            .metadata(Some(&["__consumer_offsets".to_owned()]))
            .await
            .unwrap()
            .topic("__consumer_offsets")
            .unwrap()
            .partitions
            .len() as i32;
        let index = weir_coord::records::offsets::partition_for("copier", count);
        let marker = TxnMarker {
            producer_id: 4000,
            producer_epoch: 0,
            commit: true,
            coordinator_epoch: 0,
            partitions: vec![("__consumer_offsets".to_owned(), index)],
        };
        for outcome in client.write_txn_markers(&[marker]).await.unwrap() {
            assert_eq!(outcome.error_code, 0, "{outcome:?}");
        }
        let committed = client
            .offset_fetch_stable("copier", Some(&input()))
            .await
            .unwrap();
        let committed: Vec<(i32, i64)> =
            committed.iter().map(|c| (c.partition, c.offset)).collect();
        assert_eq!(committed, vec![(0, 10), (1, 11)]);
    });
}

#[test]
fn brokers_without_the_controller_role_follow_the_metadata_as_learners() {
    // Nodes 1 and 2 do both, 3 is a controller only, 4 a broker only.
    let cluster = Cluster::start_with(&[BOTH, BOTH, "controller", "broker"], &[]);
    let learner = &cluster.node(4).kafka;
    assert_eq!(brokers(learner), BTreeSet::from([1, 2, 4]));
    // Every broker reports one cluster id, and a controller that clients
    // can reach: admin clients send their requests to it.
    let answers: Vec<(Option<String>, i32)> = [1, 2, 4]
        .into_iter()
        .map(|id| {
            let metadata = common::cli::block_on(async {
                let mut client = weir_client::Client::connect(&cluster.node(id).kafka)
                    .await
                    .unwrap();
                client.metadata(None).await.unwrap()
            });
            (metadata.cluster_id, metadata.controller_id)
        })
        .collect();
    for (cluster_id, controller_id) in &answers {
        assert!(
            cluster_id.is_some() && *cluster_id == answers[0].0,
            "{answers:?}"
        );
        assert!([1, 2, 4].contains(controller_id), "{answers:?}");
    }
    create_topic(learner, "learned", 3, 3);
    for view in partitions(&cluster.node(1).kafka, "learned") {
        let replicas: BTreeSet<i32> = view.replicas.iter().copied().collect();
        assert_eq!(replicas, BTreeSet::from([1, 2, 4]), "{view:?}");
    }
    let producer = producer(learner, "1");
    assert_eq!(
        send_each(&producer, "learned", 3, "z"),
        Vec::<String>::new()
    );
    assert_eq!(read_all(learner, "learned", 3, 3).len(), 3);
    let status = common::cli::run(&["cluster", "status", "--bootstrap", learner], b"").ok();
    assert!(status.stdout.contains("voters 1,2,3"), "{}", status.stdout);
    assert!(
        status.stdout.contains("Brokers (3 live, 0 fenced)"),
        "{}",
        status.stdout
    );
}

#[test]
fn acknowledged_records_survive_their_leader_being_killed() {
    let mut cluster = Cluster::start(&[]);
    create_topic_with(
        &cluster.node(1).kafka,
        "durable",
        3,
        3,
        &[("min.insync.replicas", "2")],
    );
    let acked = send_acked(&cluster.bootstrap(), "durable", "before", 300);
    assert_eq!(acked.len(), 300, "every record acknowledged");

    let controller = cluster.controller(1) as i32;
    let before = partitions(&cluster.bootstrap(), "durable");
    let victim = before
        .iter()
        .map(|v| v.leader)
        .find(|l| *l != controller)
        .expect("a leader that is not the controller");
    let survivor = (1..=3).find(|id| *id != victim).unwrap();
    cluster.node_mut(victim).kill();
    let bootstrap = cluster.node(survivor).kafka.clone();
    wait_until(
        "leaderships to move",
        Duration::from_millis(SESSION_TIMEOUT_MS + 10_000),
        || {
            partitions(&bootstrap, "durable")
                .iter()
                .all(|v| v.leader >= 0 && v.leader != victim)
                .then_some(())
        },
    );
    // Two in-sync replicas left: acks=all still works.
    let after = send_acked(&bootstrap, "durable", "after", 100);
    assert_eq!(after.len(), 100);

    let read: BTreeSet<String> = read_all(&bootstrap, "durable", 3, 400)
        .into_iter()
        .collect();
    let lost: Vec<&String> = acked
        .iter()
        .chain(&after)
        .filter(|v| !read.contains(*v))
        .collect();
    assert!(lost.is_empty(), "acknowledged but lost: {lost:?}");

    // The killed broker comes back, catches up and rejoins every ISR.
    cluster.node_mut(victim).restart(false);
    wait_until(
        "the ISRs to be whole again",
        Duration::from_secs(30),
        || {
            partitions(&bootstrap, "durable")
                .iter()
                .all(|v| v.isr.len() == 3)
                .then_some(())
        },
    );
}

#[test]
fn draining_a_broker_moves_its_replicas_without_losing_records() {
    let cluster = Cluster::start(&[]);
    create_topic_with(
        &cluster.node(1).kafka,
        "moved",
        3,
        2,
        &[("min.insync.replicas", "2")],
    );
    let acked = send_acked(&cluster.bootstrap(), "moved", "before", 300);
    assert_eq!(acked.len(), 300);
    let drained = 1;
    let held = partitions(&cluster.bootstrap(), "moved")
        .iter()
        .filter(|v| v.replicas.contains(&drained))
        .count();
    assert!(held > 0);

    let out = common::cli::run(
        &[
            "topic",
            "reassign",
            "moved",
            "--drain",
            "1",
            "--bootstrap",
            &cluster.node(2).kafka,
        ],
        b"",
    )
    .ok();
    assert_eq!(out.lines().len(), held, "{}", out.stdout);
    let bootstrap = cluster.node(2).kafka.clone();
    wait_until("the moves to finish", Duration::from_secs(30), || {
        let views = partitions(&bootstrap, "moved");
        views
            .iter()
            .all(|v| !v.replicas.contains(&drained) && v.replicas.len() == 2 && v.isr.len() == 2)
            .then_some(())
    });
    let listed = common::cli::run(&["topic", "reassignments", "--bootstrap", &bootstrap], b"").ok();
    assert_eq!(
        listed.lines().len(),
        1,
        "only the header: {}",
        listed.stdout
    );
    // The drained broker dropped its copies.
    wait_until(
        "the old replicas' data to go",
        Duration::from_secs(10),
        || {
            let dirs: Vec<String> = std::fs::read_dir(&cluster.node(drained).data_dir)
                .unwrap()
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("moved-"))
                .collect();
            dirs.is_empty().then_some(())
        },
    );
    let after = send_acked(&bootstrap, "moved", "after", 50);
    assert_eq!(after.len(), 50);
    let read: BTreeSet<String> = read_all(&bootstrap, "moved", 3, 350).into_iter().collect();
    let lost: Vec<&String> = acked
        .iter()
        .chain(&after)
        .filter(|v| !read.contains(*v))
        .collect();
    assert!(lost.is_empty(), "acknowledged but lost: {lost:?}");
}

/// Dynamic broker configs go through the metadata: a change made through
/// one broker reaches every broker, and a broker's own value only that one.
#[test]
fn dynamic_broker_configs_reach_every_broker_and_an_override_only_its_own() {
    use rdkafka::admin::{ConfigSource, ResourceSpecifier};
    let cluster = Cluster::start(&[]);
    let via_one = cluster.node(1).kafka.clone();
    for args in [
        &["alter-config", "--set", "log.retention.ms=3600000"][..],
        &[
            "alter-config",
            "--broker",
            "3",
            "--set",
            "log.retention.ms=7200000",
        ],
    ] {
        let mut all = vec!["cluster", "--bootstrap", via_one.as_str()];
        all.extend_from_slice(args);
        common::cli::run(&all, b"").ok();
    }
    let admin = admin(&cluster.bootstrap());
    for (id, value, source) in [
        (1, "3600000", ConfigSource::DynamicDefaultBroker),
        (2, "3600000", ConfigSource::DynamicDefaultBroker),
        (3, "7200000", ConfigSource::DynamicBroker),
    ] {
        // Each broker describes itself, once it has applied the change.
        wait_until(
            &format!("broker {id} to apply the change"),
            Duration::from_secs(10),
            || {
                let described = common::cli::block_on(
                    admin.describe_configs([&ResourceSpecifier::Broker(id)], &AdminOptions::new()),
                )
                .ok()?;
                let resource = described.into_iter().next()?.ok()?;
                let entry = resource
                    .entries
                    .into_iter()
                    .find(|e| e.name == "log.retention.ms")?;
                (entry.value.as_deref() == Some(value) && entry.source == source).then_some(())
            },
        );
    }
    // The CLI asks the broker itself, whichever it was pointed at.
    let out = common::cli::run(
        &[
            "cluster",
            "--bootstrap",
            &via_one,
            "describe-config",
            "--broker",
            "3",
        ],
        b"",
    )
    .ok();
    let rows = out.table("NAME");
    let row = rows.iter().find(|r| r[0] == "log.retention.ms").unwrap();
    assert_eq!(
        row[1..],
        ["7200000", "dynamic", "(this", "broker)", "dynamic"]
    );
}

#[test]
fn a_transaction_survives_its_coordinator_being_killed() {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
    let mut cluster = Cluster::start(&[]);
    let bootstrap = cluster.bootstrap();
    create_topic(&cluster.node(1).kafka, "payments", 3, 3);
    let timeout = Duration::from_secs(60);
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("transactional.id", "payer")
        .set("linger.ms", "0")
        .create()
        .unwrap();
    producer.init_transactions(timeout).unwrap();
    producer.begin_transaction().unwrap();
    for i in 0..30 {
        let key = format!("k{i}");
        let value = format!("v{i}");
        producer
            .send(BaseRecord::to("payments").key(&key).payload(&value))
            .unwrap();
    }
    producer.flush(timeout).unwrap();

    // The transaction's coordinator dies with the transaction open; the
    // leader of its __transaction_state partition after it has the
    // transaction's state, and the commit goes through there.
    let coordinator = common::cli::block_on(async {
        let mut client = weir_client::Client::connect(&cluster.node(1).kafka)
            .await
            .unwrap();
        client
            .find_transaction_coordinator("payer")
            .await
            .unwrap()
            .node_id
    });
    cluster.node_mut(coordinator).kill();
    producer.commit_transaction(timeout).unwrap();

    let survivor = (1..=3).find(|id| *id != coordinator).unwrap();
    let values = read_all(&cluster.node(survivor).kafka, "payments", 3, 30);
    let distinct: BTreeSet<&String> = values.iter().collect();
    assert_eq!(
        (values.len(), distinct.len()),
        (30, 30),
        "every record of the transaction, once: {values:?}"
    );
}

/// With two of three controllers paused (no quorum), requests that need the
/// controller are answered at once while the change waits (auto-creation,
/// a new block of producer ids) or within their own timeout (CreateTopics),
/// and meanwhile produce to a partition the broker leads goes on: nothing
/// waiting for the quorum holds a runtime worker or a lock the data path
/// needs.
#[test]
fn produce_goes_on_while_requests_wait_for_a_lost_controller_quorum() {
    use common::raw::Raw;
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{
        ApiKey, CreateTopicsRequest, CreateTopicsResponse, ElectLeadersRequest,
        ElectLeadersResponse, InitProducerIdRequest, InitProducerIdResponse, MetadataRequest,
        MetadataResponse, TopicName,
    };
    use kafka_protocol::protocol::StrBytes;
    use weir_log::testing::BatchBuilder;

    const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    const REQUEST_TIMED_OUT: i16 = 7;
    const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
    let cluster = Cluster::start_with(&[BOTH, "controller", "controller"], &[]);
    let broker = cluster.node(1);
    create_topic(&broker.kafka, "steady", 1, 1);
    let mut producer = Raw::connect(&broker.kafka);
    wait_until(
        "the partition to take appends",
        Duration::from_secs(20),
        || {
            (producer
                .produce("steady", 0, BatchBuilder::new(1).build())
                .0
                == 0)
                .then_some(())
        },
    );

    cluster.node(2).pause();
    cluster.node(3).pause();
    // An unknown topic needs the controller to create it.
    let mut metadata = Raw::connect(&broker.kafka);
    let asked = metadata.send(
        ApiKey::Metadata,
        9,
        &MetadataRequest::default()
            .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(
                TopicName(StrBytes::from_static_str("appears-later")),
            ))]))
            .with_allow_auto_topic_creation(true),
    );
    // As in Kafka, the creation goes on in the background and the client
    // is told at once that the topic is unknown for now.
    let answered: MetadataResponse = metadata.receive(ApiKey::Metadata, 9, asked);
    assert_eq!(answered.topics[0].error_code, UNKNOWN_TOPIC_OR_PARTITION);

    for _ in 0..20 {
        let (code, _) = producer.produce("steady", 0, BatchBuilder::new(5).build());
        assert_eq!(code, 0, "produce while the controller is unreachable");
    }
    // Idempotent producers get ids from the block on hand; once it runs
    // out, the next block cannot come, and they are told to retry rather
    // than kept waiting.
    let mut init = Raw::connect(&broker.kafka);
    let init_producer_id = |init: &mut Raw| -> i16 {
        let response: InitProducerIdResponse = init.call(
            ApiKey::InitProducerId,
            4,
            &InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(kafka_protocol::messages::ProducerId(-1))
                .with_producer_epoch(-1),
        );
        response.error_code
    };
    let mut codes = Vec::new();
    while codes.last() != Some(&COORDINATOR_LOAD_IN_PROGRESS) && codes.len() < 2000 {
        codes.push(init_producer_id(&mut init));
    }
    assert_eq!(
        codes.last(),
        Some(&COORDINATOR_LOAD_IN_PROGRESS),
        "the block on hand ran out"
    );
    assert!(
        codes[..codes.len() - 1].iter().all(|code| *code == 0),
        "{codes:?}"
    );
    // CreateTopics waits no longer than the request allows.
    let waited = Instant::now();
    let created: CreateTopicsResponse = metadata.call(
        ApiKey::CreateTopics,
        7,
        &CreateTopicsRequest::default()
            .with_timeout_ms(500)
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("not-now")))
                .with_num_partitions(1)
                .with_replication_factor(1)]),
    );
    assert_eq!(created.topics[0].error_code, REQUEST_TIMED_OUT);
    assert!(
        waited.elapsed() < Duration::from_secs(5),
        "{:?}",
        waited.elapsed()
    );
    // So does ElectLeaders: the error on top and on every partition.
    let waited = Instant::now();
    let elected: ElectLeadersResponse = metadata.call(
        ApiKey::ElectLeaders,
        2,
        &ElectLeadersRequest::default()
            .with_timeout_ms(500)
            .with_topic_partitions(Some(vec![TopicPartitions::default()
                .with_topic(TopicName(StrBytes::from_static_str("steady")))
                .with_partitions(vec![0])])),
    );
    assert_eq!(elected.error_code, REQUEST_TIMED_OUT);
    let result = &elected.replica_election_results[0].partition_result[0];
    assert_eq!(
        (result.error_code, &result.error_message),
        (REQUEST_TIMED_OUT, &None)
    );
    assert!(
        waited.elapsed() < Duration::from_secs(5),
        "{:?}",
        waited.elapsed()
    );

    cluster.node(2).resume();
    cluster.node(3).resume();
    // Once the quorum is back, producers get ids again and the topic asked
    // for is there.
    wait_until(
        "a producer id once the quorum is back",
        Duration::from_secs(30),
        || (init_producer_id(&mut init) == 0).then_some(()),
    );
    let created = metadata.topic_metadata("appears-later");
    assert_eq!(created.topics[0].error_code, 0);
    assert_eq!(created.topics[0].partitions.len(), 1);
}

/// The `weir` CLI pointed at one node of a cluster sends each partition's
/// requests to the partition's leader, as Kafka's clients do: produce,
/// consume, `topic describe`'s offsets, `group reset-offsets` and
/// `group describe`'s lag all work for partitions other nodes lead.
#[test]
fn the_cli_sends_each_partitions_requests_to_its_leader() {
    use common::cli::run;
    let cluster = Cluster::start(&[]);
    let node1 = cluster.node(1).kafka.clone();
    create_topic(&node1, "spread", 6, 1);
    let leaders: Vec<i32> = partitions(&node1, "spread")
        .iter()
        .map(|p| p.leader)
        .collect();
    assert!(
        leaders.iter().any(|l| *l != 1),
        "every partition on node 1: {leaders:?}"
    );
    let cli = |args: &[&str], input: &[u8]| {
        let mut all = args.to_vec();
        all.extend(["--bootstrap", node1.as_str()]);
        run(&all, input)
    };
    for partition in 0..6 {
        let p = partition.to_string();
        cli(&["produce", "spread", "--partition", &p], b"a\nb\n").ok();
    }

    let described = cli(&["topic", "describe", "spread"], b"").ok();
    let rows = described.table("PARTITION");
    assert_eq!(rows.len(), 7, "{}", described.stdout);
    for row in &rows[1..] {
        assert_eq!(row[4..], ["0", "2"], "{}", described.stdout);
    }

    let consumed = cli(
        &["consume", "spread", "--offset", "earliest", "--count", "12"],
        b"",
    )
    .ok();
    assert_eq!(consumed.lines().len(), 12, "{}", consumed.stdout);

    cli(
        &[
            "group",
            "reset-offsets",
            "readers",
            "--topic",
            "spread",
            "--to-earliest",
        ],
        b"",
    )
    .ok();
    let described = cli(&["group", "describe", "readers"], b"").ok();
    let lags: Vec<&str> = described.table("TOPIC")[1..]
        .iter()
        .map(|row| row[4])
        .collect();
    assert_eq!(lags, ["2"; 6], "{}", described.stdout);
}

/// KIP-951: a v16+ fetch sent to a broker that does not lead the partition
/// is told who does, and where to reach it, without a metadata round trip.
#[test]
fn a_fetch_sent_to_the_wrong_broker_names_the_leader() {
    use common::raw::Raw;
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{
        ApiKey, FetchRequest, FetchResponse, MetadataRequest, MetadataResponse, TopicName,
    };
    use kafka_protocol::protocol::StrBytes;
    const NOT_LEADER_OR_FOLLOWER: i16 = 6;

    let cluster = Cluster::start(&[]);
    create_topic(&cluster.bootstrap(), "hinted", 1, 1);
    let leader = partitions(&cluster.bootstrap(), "hinted")[0].leader;
    let other = if leader == 1 { 2 } else { 1 };
    let mut raw = Raw::connect(&cluster.node(other).kafka);
    let metadata: MetadataResponse = raw.call(
        ApiKey::Metadata,
        12,
        &MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("hinted"))))])),
    );
    let topic = &metadata.topics[0];
    let leader_epoch = topic.partitions[0].leader_epoch;
    let request = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(topic.topic_id)
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_partition_max_bytes(1 << 20)])]);
    for version in [15, 16, 17] {
        let response: FetchResponse = raw.call(ApiKey::Fetch, version, &request);
        let data = &response.responses[0].partitions[0];
        assert_eq!(data.error_code, NOT_LEADER_OR_FOLLOWER, "v{version}");
        let named = (
            data.current_leader.leader_id.0,
            data.current_leader.leader_epoch,
        );
        let endpoints: Vec<String> = response
            .node_endpoints
            .iter()
            .map(|n| format!("{}:{}", n.host.as_str(), n.port))
            .collect();
        if version < 16 {
            assert_eq!(named, (-1, -1), "v{version}: no hint before v16");
            assert!(endpoints.is_empty(), "v{version}");
        } else {
            assert_eq!(named, (leader, leader_epoch), "v{version}");
            assert_eq!(
                endpoints,
                [cluster.node(leader).kafka.clone()],
                "v{version}"
            );
            assert_eq!(response.node_endpoints[0].node_id.0, leader);
        }
    }
}

/// ElectLeaders (v2) sent to `bootstrap`: preferred (type 0) or unclean
/// (type 1), for `asked` (`None`: every partition); per topic in the
/// answer, its partitions' (partition, error code, message).
fn elect_leaders(
    bootstrap: &str,
    election_type: i8,
    asked: Option<&[(&str, &[i32])]>,
) -> common::raw::Elections {
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    use kafka_protocol::messages::{ApiKey, ElectLeadersRequest, ElectLeadersResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let topics = asked.map(|asked| {
        asked
            .iter()
            .map(|(topic, partitions)| {
                TopicPartitions::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                    .with_partitions(partitions.to_vec())
            })
            .collect()
    });
    let request = ElectLeadersRequest::default()
        .with_election_type(election_type)
        .with_topic_partitions(topics)
        .with_timeout_ms(20_000);
    let response: ElectLeadersResponse =
        common::raw::Raw::connect(bootstrap).call(ApiKey::ElectLeaders, 2, &request);
    assert_eq!(response.error_code, 0, "{response:?}");
    common::raw::elections(&response)
}

const NOT_NEEDED: &str = "Leader election not needed for topic partition.";

/// A broker stopped and started again rejoins the ISRs but leads nothing
/// (the automatic rebalance is off); a preferred election gives it back its
/// partitions, and then is not needed.
#[test]
fn elect_leaders_preferred_moves_leadership_back() {
    let mut cluster = Cluster::start(&["--auto-leader-rebalance-enable", "false"]);
    create_topic(&cluster.node(1).kafka, "pref", 3, 3);
    let controller = cluster.controller(1) as i32;
    let restarted = (1..=3).find(|id| *id != controller).unwrap();
    let via = cluster.node(controller).kafka.clone();
    let before = partitions(&via, "pref");
    let preferred: Vec<i32> = (0..3)
        .filter(|p| before[*p as usize].replicas[0] == restarted)
        .collect();
    assert!(!preferred.is_empty(), "{before:?}");
    assert!(
        before.iter().all(|v| v.leader == v.replicas[0]),
        "{before:?}"
    );

    cluster.node_mut(restarted).restart(true);
    let back = wait_until(
        "the restarted broker back in every ISR",
        Duration::from_secs(30),
        || {
            let views = partitions(&via, "pref");
            views.iter().all(|v| v.isr.len() == 3).then_some(views)
        },
    );
    assert!(
        back.iter().all(|v| v.leader != restarted && v.leader >= 0),
        "leadership stays elsewhere: {back:?}"
    );

    let all: &[(&str, &[i32])] = &[("pref", &[0, 1, 2])];
    let elected = elect_leaders(&via, 0, Some(all));
    let want: Vec<(i32, i16, Option<String>)> = (0..3)
        .map(|p| match preferred.contains(&p) {
            true => (p, 0, None),
            false => (p, 84, Some(NOT_NEEDED.to_owned())),
        })
        .collect();
    assert_eq!(elected, vec![("pref".to_owned(), want)]);
    // Answered once committed: the broker that answered already shows it.
    let after = partitions(&via, "pref");
    assert!(after.iter().all(|v| v.leader == v.replicas[0]), "{after:?}");

    let again = elect_leaders(&via, 0, Some(all));
    let not_needed: Vec<(i32, i16, Option<String>)> = (0..3)
        .map(|p| (p, 84, Some(NOT_NEEDED.to_owned())))
        .collect();
    assert_eq!(again, vec![("pref".to_owned(), not_needed)]);
    // Every partition: each topic named, those not needing an election
    // left out.
    let everything = elect_leaders(&via, 0, None);
    assert!(
        everything.contains(&("pref".to_owned(), Vec::new())),
        "{everything:?}"
    );
    assert!(
        everything
            .iter()
            .all(|(_, partitions)| partitions.is_empty()),
        "{everything:?}"
    );

    let unknown = elect_leaders(&via, 0, Some(&[("pref", &[7]), ("nope", &[0])]));
    assert_eq!(
        unknown,
        vec![
            (
                "pref".to_owned(),
                vec![(7, 3, Some("No such partition as pref-7".to_owned()))]
            ),
            (
                "nope".to_owned(),
                vec![(0, 3, Some("No such topic as nope".to_owned()))]
            ),
        ]
    );
}

/// A partition whose in-sync replicas are all down stays without a leader
/// when an out-of-sync replica returns; a preferred election cannot help,
/// an unclean one elects that replica, alone in the ISR. With no replica
/// live, no leader is eligible.
#[test]
fn elect_leaders_unclean_elects_a_live_replica_out_of_sync() {
    let mut cluster = Cluster::start(&["--auto-leader-rebalance-enable", "false"]);
    let controller = cluster.controller(1) as i32;
    let others: Vec<i32> = (1..=3).filter(|id| *id != controller).collect();
    let (in_sync, lagging) = (others[0], others[1]);
    let via = cluster.node(controller).kafka.clone();
    let placements: [(&str, &[&[i32]]); 2] = [
        ("stranded", &[&[in_sync, lagging]]),
        ("gone", &[&[in_sync]]),
    ];
    let topics: Vec<NewTopic> = placements
        .iter()
        .map(|(name, replicas)| NewTopic::new(name, 1, TopicReplication::Variable(replicas)))
        .collect();
    let created = common::cli::block_on(admin(&via).create_topics(&topics, &AdminOptions::new()))
        .expect("create topics");
    created.into_iter().for_each(|r| drop(r.expect("created")));
    let view = |topic: &str| partitions(&via, topic)[0].clone();
    wait_until("both replicas in sync", Duration::from_secs(20), || {
        (view("stranded").isr.len() == 2).then_some(())
    });

    // The lagging replica goes first: fenced, it leaves the ISR. Then the
    // last in-sync replica goes, and the lagging one comes back at once
    // (two of the three controllers again) while nothing it could catch up
    // from is up: once the in-sync replica is fenced, no leader.
    cluster.node_mut(lagging).kill();
    wait_until("the ISR to shrink", Duration::from_secs(30), || {
        (view("stranded").isr == [in_sync]).then_some(())
    });
    cluster.node_mut(in_sync).kill();
    cluster.node_mut(lagging).restart(false);
    wait_until("no leader", Duration::from_secs(30), || {
        (view("stranded").leader == -1).then_some(())
    });
    wait_until(
        "the lagging broker registered",
        Duration::from_secs(30),
        || brokers(&via).contains(&lagging).then_some(()),
    );
    assert_eq!(view("stranded").leader, -1, "no clean leader");

    let stranded: &[(&str, &[i32])] = &[("stranded", &[0])];
    let preferred = elect_leaders(&via, 0, Some(stranded));
    let unavailable = Some("The preferred leader was not available.".to_owned());
    assert_eq!(
        preferred,
        vec![("stranded".to_owned(), vec![(0, 80, unavailable)])]
    );

    let unclean = elect_leaders(&via, 1, Some(stranded));
    assert_eq!(unclean, vec![("stranded".to_owned(), vec![(0, 0, None)])]);
    let after = view("stranded");
    assert_eq!((after.leader, after.isr), (lagging, vec![lagging]));

    let again = elect_leaders(&via, 1, Some(stranded));
    assert_eq!(
        again,
        vec![(
            "stranded".to_owned(),
            vec![(0, 84, Some(NOT_NEEDED.to_owned()))]
        )]
    );
    let gone = elect_leaders(&via, 1, Some(&[("gone", &[0])]));
    let ineligible = Some("Eligible topic partition leaders are not available.".to_owned());
    assert_eq!(gone, vec![("gone".to_owned(), vec![(0, 83, ineligible)])]);
    assert_eq!(view("gone").leader, -1);
}

/// The bytes of `topic`-0's segments on `node`: how far its replica got.
fn replica_bytes(cluster: &Cluster, node: i32, topic: &str) -> u64 {
    let dir = cluster.node(node).data_dir.join(format!("{topic}-0"));
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Sends `count` records of `size` bytes to partition 0, acks=all.
fn send_sized(bootstrap: &str, topic: &str, count: usize, size: usize) {
    let producer = producer(bootstrap, "all");
    let payload = vec![b'x'; size];
    let sends: Vec<_> = (0..count)
        .map(|_| {
            producer
                .send_result(
                    FutureRecord::<(), [u8]>::to(topic)
                        .partition(0)
                        .payload(&payload[..]),
                )
                .map_err(|(e, _)| e)
                .expect("queued")
        })
        .collect();
    for send in sends {
        assert!(
            matches!(common::cli::block_on(send), Ok(Ok(_))),
            "acknowledged"
        );
    }
}

/// Replication throttles (KIP-73): a replica catching up after a restart
/// replicates a throttled partition no faster than the throttle allows,
/// while an unthrottled partition catches up at once. `side` is the
/// throttle's side, leader or follower.
fn a_throttled_replica_catches_up_at_the_throttled_rate(side: &str) {
    use rdkafka::admin::ResourceSpecifier;
    const RATE: u64 = 256 * 1024;
    const DATA: usize = 3 << 20;
    let mut cluster = Cluster::start(&[]);
    let via = cluster.node(1).kafka.clone();
    for topic in ["throttled", "free"] {
        create_topic(&via, topic, 1, 3);
    }
    let rate = format!("{side}.replication.throttled.rate");
    let replicas = format!("{side}.replication.throttled.replicas");
    common::cli::run(
        &[
            "cluster",
            "--bootstrap",
            &via,
            "alter-config",
            "--set",
            &format!("{rate}={RATE}"),
        ],
        b"",
    )
    .ok();
    common::cli::run(
        &[
            "topic",
            "alter-config",
            "throttled",
            "--set",
            &format!("{replicas}=*"),
            "--bootstrap",
            &via,
        ],
        b"",
    )
    .ok();
    // Both round-trip through DescribeConfigs.
    let admin = admin(&via);
    let described = |resource: ResourceSpecifier, name: &str| -> Option<String> {
        let described =
            common::cli::block_on(admin.describe_configs([&resource], &AdminOptions::new()))
                .ok()?;
        let resource = described.into_iter().next()?.ok()?;
        resource.entries.into_iter().find(|e| e.name == name)?.value
    };
    for id in 1..=3 {
        wait_until(
            "the throttle rate to apply",
            Duration::from_secs(10),
            || {
                (described(ResourceSpecifier::Broker(id), &rate) == Some(RATE.to_string()))
                    .then_some(())
            },
        );
    }
    assert_eq!(
        described(ResourceSpecifier::Topic("throttled"), &replicas).as_deref(),
        Some("*")
    );
    assert_eq!(
        described(ResourceSpecifier::Topic("free"), &replicas).as_deref(),
        Some("")
    );

    // A follower (not the controller, which keeps the test simpler) goes
    // away while both partitions take 3 MiB.
    let controller = cluster.controller(1) as i32;
    let victim = (1..=3).find(|id| *id != controller).unwrap();
    let survivor = (1..=3).find(|id| *id != victim).unwrap();
    let bootstrap = cluster.node(survivor).kafka.clone();
    cluster.node_mut(victim).kill();
    wait_until(
        "the victim to leave the ISRs",
        Duration::from_millis(SESSION_TIMEOUT_MS + 10_000),
        || {
            ["throttled", "free"]
                .iter()
                .all(|t| {
                    partitions(&bootstrap, t)
                        .iter()
                        .all(|v| v.leader >= 0 && !v.isr.contains(&victim))
                })
                .then_some(())
        },
    );
    for topic in ["throttled", "free"] {
        send_sized(&bootstrap, topic, DATA / 10_000, 10_000);
    }
    let leader_bytes = |topic: &str| {
        let leader = partitions(&bootstrap, topic)[0].leader;
        replica_bytes(&cluster, leader, topic)
    };
    let (throttled_total, free_total) = (leader_bytes("throttled"), leader_bytes("free"));
    let throttled_before = replica_bytes(&cluster, victim, "throttled");

    cluster.node_mut(victim).restart(false);
    let restarted = Instant::now();
    wait_until(
        "the unthrottled partition to catch up",
        Duration::from_secs(20),
        || (replica_bytes(&cluster, victim, "free") >= free_total).then_some(()),
    );
    let free_after = restarted.elapsed();
    let throttled_then = replica_bytes(&cluster, victim, "throttled");
    eprintln!(
        "{side}: unthrottled caught up after {free_after:?}; throttled at {throttled_then} of {throttled_total}"
    );
    // (On a machine so loaded that the unthrottled copy took longer than
    // the throttled one needs, this says nothing.)
    assert!(
        throttled_then < throttled_total || free_after > Duration::from_secs(6),
        "the throttled partition held back"
    );
    // Then the throttled one, no faster than the rate allows: one fetch
    // (at most 1 MiB) may go before the rate is over the limit.
    let mut over_rate = Vec::new();
    wait_until(
        "the throttled partition to catch up",
        Duration::from_secs(60),
        || {
            let copied = replica_bytes(&cluster, victim, "throttled") - throttled_before;
            let allowed =
                (1 << 20) + (restarted.elapsed().as_secs_f64() * RATE as f64 * 1.25) as u64;
            if copied > allowed {
                over_rate.push((restarted.elapsed(), copied, allowed));
            }
            (replica_bytes(&cluster, victim, "throttled") >= throttled_total).then_some(())
        },
    );
    let took = restarted.elapsed();
    eprintln!("{side}: throttled caught up after {took:?}");
    assert!(
        over_rate.is_empty(),
        "faster than the throttle: {over_rate:?}"
    );
    let least = (throttled_total - throttled_before).saturating_sub(1 << 20) as f64 / RATE as f64;
    assert!(
        took.as_secs_f64() >= least * 0.8,
        "{took:?} for what takes {least} s at the throttled rate"
    );
    // Caught up, it is back in the ISR.
    wait_until("the ISR to be whole again", Duration::from_secs(30), || {
        (partitions(&bootstrap, "throttled")[0].isr.len() == 3).then_some(())
    });
}

#[test]
fn throttle_on_the_leader_holds_back_a_catching_up_follower() {
    a_throttled_replica_catches_up_at_the_throttled_rate("leader");
}

#[test]
fn throttle_on_the_follower_holds_back_its_own_catching_up() {
    a_throttled_replica_catches_up_at_the_throttled_rate("follower");
}

/// A consumer of the consumer group protocol (KIP-848) polling on its own
/// thread, noting its assignment.
struct ModernConsumer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    assignment: std::sync::Arc<std::sync::Mutex<BTreeSet<i32>>>,
}

impl ModernConsumer {
    fn start(bootstrap: &str, group: &str, topic: &str) -> Self {
        use std::sync::atomic::Ordering;
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", group)
            .set("group.protocol", "consumer")
            .set("auto.offset.reset", "earliest")
            .create()
            .expect("consumer");
        consumer.subscribe(&[topic]).expect("subscribe");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let assignment = std::sync::Arc::new(std::sync::Mutex::new(BTreeSet::new()));
        let thread = std::thread::spawn({
            let (stop, assignment) = (stop.clone(), assignment.clone());
            move || {
                while !stop.load(Ordering::SeqCst) {
                    let _ = consumer.poll(Duration::from_millis(100));
                    let current: BTreeSet<i32> = consumer
                        .assignment()
                        .map(|a| a.elements().iter().map(|e| e.partition()).collect())
                        .unwrap_or_default();
                    *assignment.lock().unwrap() = current;
                }
            }
        });
        Self {
            stop,
            thread: Some(thread),
            assignment,
        }
    }

    fn assignment(&self) -> BTreeSet<i32> {
        self.assignment.lock().unwrap().clone()
    }
}

impl Drop for ModernConsumer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The consumer group `group` as its coordinator describes it.
fn describe_consumer_group(
    bootstrap: &str,
    group: &str,
) -> Option<weir_client::ConsumerGroupDescription> {
    common::cli::block_on(async {
        let mut client = weir_client::Client::connect(bootstrap).await.ok()?;
        let found = client.find_coordinator(group).await.ok()?;
        let mut coordinator = client.connect_to_broker(&found.addr()).await.ok()?;
        coordinator
            .describe_consumer_groups(&[group])
            .await
            .ok()?
            .pop()
            .flatten()
    })
}

#[test]
fn a_consumer_group_carries_on_at_a_new_coordinator_when_the_old_one_is_killed() {
    let mut cluster = Cluster::start(&[
        "--group-consumer-heartbeat-interval-ms",
        "500",
        "--group-consumer-min-heartbeat-interval-ms",
        "500",
        // Longer than the failover: members are not expired meanwhile.
        "--group-consumer-session-timeout-ms",
        "45000",
    ]);
    let bootstrap = cluster.bootstrap();
    create_topic(&bootstrap, "tasks", 4, 3);
    let coordinator = common::cli::block_on(async {
        let mut client = weir_client::Client::connect(&bootstrap).await.unwrap();
        loop {
            match client.find_coordinator("crew").await {
                Ok(found) => break found.node_id,
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    });
    // The members connect to the nodes that survive.
    let survivors: Vec<String> = (1..=3)
        .filter(|id| *id != coordinator)
        .map(|id| cluster.node(id).kafka.clone())
        .collect();
    let survivors = survivors.join(",");
    let first = ModernConsumer::start(&survivors, "crew", "tasks");
    let second = ModernConsumer::start(&survivors, "crew", "tasks");
    let stable = wait_until("the group to be stable", Duration::from_secs(30), || {
        let described = describe_consumer_group(&survivors, "crew")?;
        let split = first.assignment().len() == 2 && second.assignment().len() == 2;
        (described.state == "Stable" && described.members.len() == 2 && split).then_some(described)
    });
    let (first_had, second_had) = (first.assignment(), second.assignment());

    // A third member joins and the coordinator is killed while the group
    // reconciles: partitions move from the first members to it.
    let third = ModernConsumer::start(&survivors, "crew", "tasks");
    wait_until("the third member to join", Duration::from_secs(20), || {
        let described = describe_consumer_group(&survivors, "crew")?;
        (described.members.len() == 3).then_some(())
    });
    cluster.node_mut(coordinator).kill();
    let moved = wait_until(
        "the group stable at a new coordinator",
        Duration::from_millis(SESSION_TIMEOUT_MS + 30_000),
        || {
            let described = describe_consumer_group(&survivors, "crew")?;
            let split = [&first, &second, &third]
                .iter()
                .all(|m| !m.assignment().is_empty());
            (described.state == "Stable" && split).then_some(described)
        },
    );
    // The first two members were continued, not fenced: the same ids,
    // each keeping part of what it had; every partition has exactly one
    // owner.
    let ids = |d: &weir_client::ConsumerGroupDescription| {
        d.members
            .iter()
            .map(|m| m.member_id.clone())
            .collect::<BTreeSet<_>>()
    };
    assert!(
        ids(&stable).is_subset(&ids(&moved)),
        "{stable:?} -> {moved:?}"
    );
    assert_eq!(moved.members.len(), 3);
    assert!(moved.group_epoch > stable.group_epoch);
    let (a, b, c) = (first.assignment(), second.assignment(), third.assignment());
    assert!(
        a.is_subset(&first_had) && b.is_subset(&second_had),
        "{a:?} {b:?}"
    );
    assert!(a.is_disjoint(&b) && a.is_disjoint(&c) && b.is_disjoint(&c));
    let union: BTreeSet<i32> = a.union(&b).chain(&c).copied().collect();
    assert_eq!(union, (0..4).collect());
}

/// Kafka's `initial.broker.registration.timeout.ms` (60 s): a node that
/// starts while its controller quorum has no majority waits for one,
/// trying again, rather than exiting and leaving its partitions without a
/// replica for longer.
#[test]
fn a_node_started_without_a_quorum_waits_for_one_instead_of_exiting() {
    let mut cluster = Cluster::start(&[]);
    for id in 1..=3 {
        cluster.node_mut(id).kill();
    }
    let (first, others) = cluster.nodes_mut().split_at_mut(1);
    std::thread::scope(|scope| {
        // Alone, node 1 has no majority; it used to give up after 30 s.
        let waiting = scope.spawn(|| first[0].restart(false));
        std::thread::sleep(Duration::from_secs(35));
        others[0].restart(false);
        waiting
            .join()
            .expect("node 1 became ready once node 2 was back");
    });
    let bootstrap = cluster.node(1).kafka.clone();
    wait_until("both brokers registered", Duration::from_secs(20), || {
        let known = brokers(&bootstrap);
        (known.contains(&1) && known.contains(&2)).then_some(())
    });
}

/// `weir produce` reading a stream carries on through its partition
/// leader's kill -9, the first of its bootstrap addresses: every line is
/// written exactly once (the producer is idempotent), in order. A
/// `weir consume` started with the same bootstrap list reads them all
/// meanwhile.
#[test]
fn the_cli_produces_a_stream_through_a_leader_kill_writing_every_line_once() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut cluster = Cluster::start(&[]);
    create_topic_with(
        &cluster.node(1).kafka,
        "stream",
        1,
        3,
        &[("min.insync.replicas", "2")],
    );
    let leader = partitions(&cluster.node(1).kafka, "stream")[0].leader;
    // The leader is the first address tried.
    let bootstrap: Vec<String> = std::iter::once(leader)
        .chain((1..=3).filter(|id| *id != leader))
        .map(|id| cluster.node(id).kafka.clone())
        .collect();
    let bootstrap = bootstrap.join(",");
    const LINES: usize = 600;
    let weir = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(args)
            .args(["--bootstrap", &bootstrap])
            .env("WEIR_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run weir")
    };
    let count = LINES.to_string();
    let consumer = weir(&["consume", "stream", "-n", &count]);
    let mut producer = weir(&[
        "produce",
        "stream",
        "--linger-ms",
        "5",
        "--batch-records",
        "10",
    ]);
    let mut stdin = producer.stdin.take().expect("stdin");
    for i in 0..LINES {
        writeln!(stdin, "line-{i}").expect("write a line");
        stdin.flush().expect("flush");
        std::thread::sleep(Duration::from_millis(5));
        if i == LINES / 3 {
            cluster.node_mut(leader).kill();
        }
    }
    drop(stdin);
    let produced = producer.wait_with_output().expect("weir produce");
    assert!(
        produced.status.success(),
        "weir produce failed: {}",
        String::from_utf8_lossy(&produced.stderr)
    );

    let survivor = (1..=3).find(|id| *id != leader).unwrap();
    let read = common::cli::run(
        &[
            "consume",
            "stream",
            "-e",
            "--bootstrap",
            &cluster.node(survivor).kafka,
        ],
        b"",
    )
    .ok();
    let expected: Vec<String> = (0..LINES).map(|i| format!("line-{i}")).collect();
    assert_eq!(read.lines(), expected, "every line once, in order");

    // A consumer that misses a line would wait for it forever.
    let pid = consumer.id().to_string();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(60));
        let _ = Command::new("kill").args(["-9", &pid]).status();
    });
    let consumed = consumer.wait_with_output().expect("weir consume");
    assert!(
        consumed.status.success(),
        "weir consume failed: {}",
        String::from_utf8_lossy(&consumed.stderr)
    );
    let consumed: Vec<&str> = std::str::from_utf8(&consumed.stdout)
        .expect("utf-8")
        .lines()
        .collect();
    assert_eq!(consumed, expected, "the consumer read through the kill too");
}

/// After a broker's restart its partitions are led by others until
/// `weir cluster elect-leaders --preferred` hands leadership back.
#[test]
fn elect_leaders_moves_leadership_back_to_preferred_replicas() {
    let mut cluster = Cluster::start(&[]);
    create_topic(&cluster.node(1).kafka, "home", 3, 3);
    let before = partitions(&cluster.node(1).kafka, "home");
    let victim = before[0].replicas[0];
    let survivor = (1..=3).find(|id| *id != victim).unwrap();
    let bootstrap = cluster.node(survivor).kafka.clone();
    cluster.node_mut(victim).kill();
    wait_until(
        "leaderships to move",
        Duration::from_millis(SESSION_TIMEOUT_MS + 10_000),
        || {
            partitions(&bootstrap, "home")
                .iter()
                .all(|v| v.leader >= 0 && v.leader != victim)
                .then_some(())
        },
    );
    cluster.node_mut(victim).restart(false);
    wait_until(
        "the ISRs to be whole again",
        Duration::from_secs(30),
        || {
            partitions(&bootstrap, "home")
                .iter()
                .all(|v| v.isr.len() == 3)
                .then_some(())
        },
    );
    let elect = || {
        common::cli::run(
            &[
                "cluster",
                "elect-leaders",
                "--preferred",
                "--topic",
                "home",
                "--bootstrap",
                &bootstrap,
            ],
            b"",
        )
        .ok()
        .stdout
    };
    let moved = elect();
    assert!(
        moved.starts_with(
            "Successfully completed leader election (PREFERRED) for partitions home-0"
        ),
        "{moved}"
    );
    // The survivor's metadata follows the controller's commit.
    wait_until(
        "preferred replicas to lead",
        Duration::from_secs(10),
        || {
            partitions(&bootstrap, "home")
                .iter()
                .all(|v| v.leader == v.replicas[0])
                .then_some(())
        },
    );
    assert_eq!(
        elect(),
        "Valid replica already elected for partitions home-0, home-1, home-2\n"
    );
}

/// `weir consume --group` carries on when its group's coordinator (also
/// its first bootstrap address) is killed: it finds the new coordinator,
/// reads every record, and its commit on exit lands there.
#[test]
fn a_group_consumer_survives_its_coordinator_being_killed() {
    use std::process::{Command, Stdio};
    let mut cluster = Cluster::start(&[]);
    create_topic(&cluster.node(1).kafka, "followed", 3, 3);
    let before = send_acked(&cluster.bootstrap(), "followed", "before", 300);
    assert_eq!(before.len(), 300);
    let coordinator = common::cli::block_on(async {
        let mut client = weir_client::Client::connect(&cluster.node(1).kafka)
            .await
            .unwrap();
        client.find_coordinator("followers").await.unwrap().node_id
    });
    let bootstrap: Vec<String> = std::iter::once(coordinator)
        .chain((1..=3).filter(|id| *id != coordinator))
        .map(|id| cluster.node(id).kafka.clone())
        .collect();
    let mut consumer = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["consume", "followed", "--group", "followers", "-n", "600"])
        .args(["--bootstrap", &bootstrap.join(",")])
        .env("WEIR_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run weir");
    // Once it has read the first records, its coordinator goes.
    std::thread::sleep(Duration::from_secs(3));
    cluster.node_mut(coordinator).kill();
    let survivor = (1..=3).find(|id| *id != coordinator).unwrap();
    let survivor_addr = cluster.node(survivor).kafka.clone();
    let after = send_acked(&survivor_addr, "followed", "after", 300);
    assert_eq!(after.len(), 300);
    let pid = consumer.id().to_string();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(90));
        let _ = Command::new("kill").args(["-9", &pid]).status();
    });
    let stdout = consumer.stdout.take().unwrap();
    let read: Vec<String> = std::io::BufRead::lines(std::io::BufReader::new(stdout))
        .map(Result::unwrap)
        .collect();
    let status = consumer.wait().unwrap();
    assert!(status.success(), "weir consume failed");
    let read: BTreeSet<String> = read.into_iter().collect();
    let missing: Vec<&String> = before
        .iter()
        .chain(&after)
        .filter(|v| !read.contains(*v))
        .collect();
    assert!(missing.is_empty(), "not read: {missing:?}");
    // Its last commit reached the new coordinator: nothing left to read.
    wait_until("the group's lag to be 0", Duration::from_secs(20), || {
        let described = common::cli::run(
            &[
                "group",
                "describe",
                "followers",
                "--bootstrap",
                &survivor_addr,
            ],
            b"",
        );
        let rows = described.table("TOPIC");
        (described.code == Some(0) && rows.len() == 4 && rows[1..].iter().all(|r| r[4] == "0"))
            .then_some(())
    });
}
