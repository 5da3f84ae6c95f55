//! Table-driven tests of broker membership in the image: fencing, controlled
//! shutdown, re-registration, leader election and the epochs they bump.
//!
//! Each row sets up an image, applies one command, and states every
//! partition of topic "t" afterwards as (leader, ISR, leader epoch,
//! partition epoch), plus the fenced brokers.

use std::collections::BTreeMap;

use uuid::Uuid;
use weir_meta::{
    Applied, BrokerInfo, Command, Election, ElectionOutcome, MetaError, MetadataImage,
};

fn broker(id: i32) -> Command {
    register(id, id as u128)
}

/// Broker `id` registering from a new process (a restart).
fn restarted(id: i32) -> Command {
    register(id, 100 + id as u128)
}

fn register(id: i32, incarnation: u128) -> Command {
    Command::RegisterBroker(BrokerInfo {
        id,
        host: format!("host{id}"),
        port: 9092,
        rack: None,
        incarnation: Uuid::from_u128(incarnation),
        previous_incarnation: None,
        listeners: Vec::new(),
    })
}

fn fence(id: i32) -> Command {
    Command::FenceBroker { id }
}

fn alter(
    partition: i32,
    leader: i32,
    leader_epoch: i32,
    partition_epoch: i32,
    isr: &[i32],
) -> Command {
    Command::AlterPartition {
        topic: "t".to_owned(),
        partition,
        leader,
        leader_epoch,
        partition_epoch,
        isr: isr.to_vec(),
    }
}

fn shutdown(id: i32) -> Command {
    Command::ControlledShutdown { id }
}

fn topic(name: &str, id: u128, replicas: &[&[i32]], configs: &[(&str, &str)]) -> Command {
    Command::CreateTopic {
        name: name.to_owned(),
        id: Uuid::from_u128(id),
        partitions: replicas.len() as i32,
        replicas: replicas.iter().map(|r| r.to_vec()).collect(),
        configs: configs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        internal: false,
    }
}

/// Brokers 1..=4 and topic "t": p0 [1,2,3], p1 [2,3,1], p2 [3,1,2].
fn base() -> Vec<Command> {
    vec![
        broker(1),
        broker(2),
        broker(3),
        broker(4),
        topic("t", 1, &[&[1, 2, 3], &[2, 3, 1], &[3, 1, 2]], &[]),
    ]
}

/// `base` with unclean leader election enabled on "t".
fn base_unclean() -> Vec<Command> {
    let mut cmds = base();
    cmds[4] = topic(
        "t",
        1,
        &[&[1, 2, 3], &[2, 3, 1], &[3, 1, 2]],
        &[("unclean.leader.election.enable", "true")],
    );
    cmds
}

fn then(mut setup: Vec<Command>, more: &[Command]) -> Vec<Command> {
    setup.extend_from_slice(more);
    setup
}

/// (leader, ISR, leader epoch, partition epoch)
type State = (i32, &'static [i32], i32, i32);

struct Row {
    name: &'static str,
    setup: Vec<Command>,
    cmd: Command,
    /// Topic "t", partition by partition.
    want: [State; 3],
    fenced: &'static [i32],
}

fn rows() -> Vec<Row> {
    let fresh: [State; 3] = [
        (1, &[1, 2, 3], 0, 0),
        (2, &[2, 3, 1], 0, 0),
        (3, &[3, 1, 2], 0, 0),
    ];
    let one_fenced: [State; 3] = [(2, &[2, 3], 1, 1), (2, &[2, 3], 0, 1), (3, &[3, 2], 0, 1)];
    let all_fenced: [State; 3] = [(-1, &[1], 1, 3), (-1, &[1], 3, 3), (-1, &[1], 2, 3)];
    vec![
        Row {
            name: "fence the leader of p0: the next in-sync replica leads, the ISRs shrink",
            setup: base(),
            cmd: fence(1),
            want: one_fenced,
            fenced: &[1],
        },
        Row {
            name: "controlled shutdown: the same as a fence",
            setup: base(),
            cmd: shutdown(1),
            want: one_fenced,
            fenced: &[1],
        },
        Row {
            name: "fence a broker with no replica: only fenced",
            setup: base(),
            cmd: fence(4),
            want: fresh,
            fenced: &[4],
        },
        Row {
            name: "fence an already fenced broker: nothing changes",
            setup: then(base(), &[fence(1)]),
            cmd: fence(1),
            want: one_fenced,
            fenced: &[1],
        },
        Row {
            name: "fence the last in-sync replica: no leader, the ISR keeps it",
            setup: then(base(), &[fence(2), fence(3)]),
            cmd: fence(1),
            want: all_fenced,
            fenced: &[1, 2, 3],
        },
        Row {
            name: "unclean enabled, but no replica left alive: no leader",
            setup: then(base_unclean(), &[fence(2), fence(3)]),
            cmd: fence(1),
            want: all_fenced,
            fenced: &[1, 2, 3],
        },
        Row {
            name: "re-register: unfenced, but no ISR rejoined before catching up",
            setup: then(base(), &[fence(1)]),
            cmd: broker(1),
            want: [(2, &[2, 3], 1, 1), (2, &[2, 3], 0, 1), (3, &[3, 2], 0, 1)],
            fenced: &[],
        },
        Row {
            name: "a new process of a broker never fenced: it leaves the ISRs first, as if fenced",
            setup: base(),
            cmd: restarted(1),
            want: [(2, &[2, 3], 1, 1), (2, &[2, 3], 0, 1), (3, &[3, 2], 0, 1)],
            fenced: &[],
        },
        Row {
            name:
                "a new process of a broker in no ISR: its partitions move to a new partition epoch",
            setup: then(base(), &[fence(1), broker(1)]),
            cmd: restarted(1),
            want: [(2, &[2, 3], 1, 2), (2, &[2, 3], 0, 2), (3, &[3, 2], 0, 2)],
            fenced: &[],
        },
        Row {
            name: "the same process registering again: nothing changes",
            setup: base(),
            cmd: broker(1),
            want: fresh,
            fenced: &[],
        },
        Row {
            name: "a new process of the last in-sync replica: it leads again, alone",
            setup: then(base(), &[fence(2), fence(3)]),
            cmd: restarted(1),
            want: [(1, &[1], 2, 4), (1, &[1], 4, 4), (1, &[1], 3, 4)],
            fenced: &[2, 3],
        },
        Row {
            name: "alter partition: the leader adds a caught-up follower",
            setup: then(base(), &[fence(1), broker(1)]),
            cmd: alter(0, 2, 1, 1, &[2, 3, 1]),
            want: [
                (2, &[2, 3, 1], 1, 2),
                (2, &[2, 3], 0, 1),
                (3, &[3, 2], 0, 1),
            ],
            fenced: &[],
        },
        Row {
            name: "alter partition: the leader drops a lagging follower",
            setup: base(),
            cmd: alter(2, 3, 0, 0, &[3, 2]),
            want: [
                (1, &[1, 2, 3], 0, 0),
                (2, &[2, 3, 1], 0, 0),
                (3, &[3, 2], 0, 1),
            ],
            fenced: &[],
        },
        Row {
            name: "re-register a broker that was not the last in-sync replica: still offline",
            setup: then(base(), &[fence(2), fence(3), fence(1)]),
            cmd: broker(2),
            want: all_fenced,
            fenced: &[1, 3],
        },
        Row {
            name: "re-register the last in-sync replica: it leads again, alone in the ISR",
            setup: then(base(), &[fence(2), fence(3), fence(1), broker(2)]),
            cmd: broker(1),
            want: [(1, &[1], 2, 4), (1, &[1], 4, 4), (1, &[1], 3, 4)],
            fenced: &[3],
        },
        Row {
            name: "unclean enabled: a returning replica that was not in sync leads alone",
            setup: then(base_unclean(), &[fence(2), fence(3), fence(1)]),
            cmd: broker(3),
            want: [(3, &[3], 2, 4), (3, &[3], 4, 4), (3, &[3], 3, 4)],
            fenced: &[1, 2],
        },
        Row {
            name: "elect preferred leaders: p0 goes back to broker 1 once in sync",
            setup: then(
                base(),
                &[fence(1), broker(1), alter(0, 2, 1, 1, &[2, 3, 1])],
            ),
            cmd: Command::ElectPreferredLeaders,
            want: [
                (1, &[2, 3, 1], 2, 3),
                (2, &[2, 3], 0, 1),
                (3, &[3, 2], 0, 1),
            ],
            fenced: &[],
        },
        Row {
            name: "elect preferred leaders: a fenced preferred replica stays out",
            setup: then(base(), &[fence(1)]),
            cmd: Command::ElectPreferredLeaders,
            want: one_fenced,
            fenced: &[1],
        },
        Row {
            name: "elect preferred leaders: balanced already, nothing changes",
            setup: base(),
            cmd: Command::ElectPreferredLeaders,
            want: fresh,
            fenced: &[],
        },
    ]
}

fn state(image: &MetadataImage) -> Vec<(i32, Vec<i32>, i32, i32)> {
    image
        .topic("t")
        .unwrap()
        .partitions
        .iter()
        .map(|p| (p.leader, p.isr.clone(), p.leader_epoch, p.partition_epoch))
        .collect()
}

#[test]
fn election_table() {
    let mut failures = Vec::new();
    for row in rows() {
        let mut image = MetadataImage::new();
        for (i, cmd) in row.setup.iter().enumerate() {
            image
                .apply(cmd)
                .unwrap_or_else(|e| panic!("{}: setup command {i} failed: {e}", row.name));
        }
        let index = image.applied_index();
        if let Err(e) = image.apply(&row.cmd) {
            failures.push(format!("{}: rejected: {e}", row.name));
            continue;
        }
        let want: Vec<(i32, Vec<i32>, i32, i32)> = row
            .want
            .iter()
            .map(|(l, isr, le, pe)| (*l, isr.to_vec(), *le, *pe))
            .collect();
        let got = state(&image);
        if got != want {
            failures.push(format!("{}:\n  want {want:?}\n  got  {got:?}", row.name));
        }
        let fenced: Vec<i32> = image.fenced_brokers().collect();
        if fenced != row.fenced {
            failures.push(format!(
                "{}: fenced {fenced:?}, want {:?}",
                row.name, row.fenced
            ));
        }
        if image.applied_index() != index + 1 {
            failures.push(format!(
                "{}: the applied index did not go up by one",
                row.name
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "failing rows:\n{}",
        failures.join("\n")
    );
}

/// Commands that are rejected leave the image as it was.
#[test]
fn rejections() {
    let table: &[(&str, Vec<Command>, Command, i16, &str)] = &[
        (
            "fence an unknown broker",
            base(),
            fence(9),
            42,
            "Broker 9 is not registered.",
        ),
        (
            "controlled shutdown of an unknown broker",
            base(),
            shutdown(9),
            42,
            "Broker 9 is not registered.",
        ),
        (
            "create a topic on a fenced broker",
            then(base(), &[fence(4)]),
            topic("u", 2, &[&[1, 4]], &[]),
            39,
            "The manual partition assignment includes broker 4, which is fenced or in controlled shutdown.",
        ),
        (
            "add a partition on a fenced broker",
            then(base(), &[shutdown(2)]),
            Command::CreatePartitions {
                name: "t".into(),
                new_replicas: vec![vec![1, 2, 3]],
            },
            39,
            "includes broker 2, which is fenced",
        ),
        (
            "add to the ISR a broker that restarted since its leader saw it catch up",
            then(base(), &[fence(1), broker(1), restarted(1)]),
            alter(0, 2, 1, 1, &[2, 3, 1]),
            108,
            "partition epoch",
        ),
    ];
    for (name, setup, cmd, code, message) in table {
        let mut image = MetadataImage::new();
        for cmd in setup {
            image.apply(cmd).unwrap();
        }
        let before = image.clone();
        let e: MetaError = image.apply(cmd).unwrap_err();
        assert_eq!(e.kafka_error_code(), *code, "{name}: {e}");
        assert!(e.to_string().contains(message), "{name}: {e}");
        assert_eq!(image, before, "{name}");
    }
}

/// Fencing and controlled shutdown give the same image from every state of
/// a sequence that fences, re-registers and re-elects.
#[test]
fn controlled_shutdown_equals_fence() {
    let steps = [
        fence(2),
        broker(2),
        fence(1),
        fence(3),
        Command::ElectPreferredLeaders,
        broker(3),
        broker(1),
    ];
    for unclean in [false, true] {
        let mut image = MetadataImage::new();
        for cmd in if unclean { base_unclean() } else { base() } {
            image.apply(&cmd).unwrap();
        }
        for step in &steps {
            for id in 1..=4 {
                let (mut a, mut b) = (image.clone(), image.clone());
                a.apply(&fence(id)).unwrap();
                b.apply(&shutdown(id)).unwrap();
                assert_eq!(a, b, "after {step:?}, broker {id}");
            }
            image.apply(step).unwrap();
        }
    }
}

/// An image with an ISR smaller than the live replicas: p0 [1,2,3] led by
/// 1 with ISR [1] while 2 and 3 are up (the state an ISR shrink by the
/// leader produces).
fn shrunk_isr(unclean: bool) -> MetadataImage {
    let mut image = MetadataImage::new();
    for cmd in if unclean { base_unclean() } else { base() } {
        image.apply(&cmd).unwrap();
    }
    let mut json = serde_json::to_value(&image).unwrap();
    json["topics"]["t"]["partitions"][0]["isr"] = serde_json::json!([1]);
    serde_json::from_value(json).unwrap()
}

#[test]
fn fencing_the_only_in_sync_leader() {
    // Clean only: the partition goes offline and keeps its ISR.
    let mut image = shrunk_isr(false);
    image.apply(&fence(1)).unwrap();
    let p0 = &image.topic("t").unwrap().partitions[0];
    assert_eq!((p0.leader, p0.isr.clone()), (-1, vec![1]));
    assert_eq!((p0.leader_epoch, p0.partition_epoch), (1, 1));
    assert_eq!(image.offline_partitions(), vec![("t".to_owned(), 0)]);

    // Unclean: the first live replica leads, alone in the ISR.
    let mut image = shrunk_isr(true);
    image.apply(&fence(1)).unwrap();
    let p0 = &image.topic("t").unwrap().partitions[0];
    assert_eq!((p0.leader, p0.isr.clone()), (2, vec![2]));
    assert_eq!((p0.leader_epoch, p0.partition_epoch), (1, 1));
    assert!(image.offline_partitions().is_empty());
}

#[test]
fn queries_follow_membership() {
    let mut image = MetadataImage::new();
    for cmd in base() {
        image.apply(&cmd).unwrap();
    }
    let live = |image: &MetadataImage| image.live_brokers().map(|b| b.id).collect::<Vec<_>>();
    let led = |image: &MetadataImage| {
        (1..=4)
            .map(|id| image.partitions_led_by(id))
            .collect::<Vec<_>>()
    };
    assert_eq!(live(&image), vec![1, 2, 3, 4]);
    assert_eq!(led(&image), vec![1, 1, 1, 0]);
    assert!(image.under_replicated_partitions().is_empty());
    assert_eq!(image.preferred_leader_imbalance(), 0);

    image.apply(&fence(1)).unwrap();
    assert!(image.is_fenced(1) && !image.is_fenced(2));
    assert_eq!(live(&image), vec![2, 3, 4]);
    assert_eq!(
        image.brokers().count(),
        4,
        "a fenced broker stays registered"
    );
    assert_eq!(led(&image), vec![0, 2, 1, 0]);
    let all: Vec<(String, i32)> = (0..3).map(|p| ("t".to_owned(), p)).collect();
    assert_eq!(image.under_replicated_partitions(), all);
    assert!(image.offline_partitions().is_empty());
    assert_eq!(image.preferred_leader_imbalance(), 0, "broker 1 is fenced");

    image.apply(&broker(1)).unwrap();
    assert!(!image.is_fenced(1));
    assert_eq!(
        image.under_replicated_partitions(),
        all,
        "not caught up yet"
    );
    assert_eq!(image.preferred_leader_imbalance(), 0);
    for (p, leader, isr) in [(0, 2, [2, 3, 1]), (1, 2, [2, 3, 1]), (2, 3, [3, 2, 1])] {
        let epochs = image.topic("t").unwrap().partitions[p as usize].clone();
        image
            .apply(&alter(
                p,
                leader,
                epochs.leader_epoch,
                epochs.partition_epoch,
                &isr,
            ))
            .unwrap();
    }
    assert!(image.under_replicated_partitions().is_empty());
    assert_eq!(image.preferred_leader_imbalance(), 1);
    image.apply(&Command::ElectPreferredLeaders).unwrap();
    assert_eq!(image.preferred_leader_imbalance(), 0);
    assert_eq!(led(&image), vec![1, 1, 1, 0]);

    for id in [2, 3, 1] {
        image.apply(&fence(id)).unwrap();
    }
    assert_eq!(image.offline_partitions(), all);
    assert_eq!(live(&image), vec![4]);
    // Broker 1 is the last in-sync replica everywhere; it is fenced, so
    // electing changes nothing.
    assert_eq!(image.preferred_leader_imbalance(), 0);
}

/// A leaderless partition with an unfenced in-sync replica (not reachable
/// by fencing alone) gets it as leader from `ElectPreferredLeaders`.
#[test]
fn elect_preferred_leaders_fills_leaderless_partitions() {
    let mut image = MetadataImage::new();
    for cmd in base() {
        image.apply(&cmd).unwrap();
    }
    let mut json = serde_json::to_value(&image).unwrap();
    json["topics"]["t"]["partitions"][1]["leader"] = serde_json::json!(-1);
    json["topics"]["t"]["partitions"][1]["isr"] = serde_json::json!([1, 3]);
    let mut image: MetadataImage = serde_json::from_value(json).unwrap();
    assert_eq!(image.preferred_leader_imbalance(), 1);
    image.apply(&Command::ElectPreferredLeaders).unwrap();
    let p1 = &image.topic("t").unwrap().partitions[1];
    // Replica order [2, 3, 1]: 3 is the first in sync; 2 rejoins only once
    // caught up.
    assert_eq!((p1.leader, p1.isr.clone()), (3, vec![1, 3]));
    assert_eq!((p1.leader_epoch, p1.partition_epoch), (1, 1));
    assert_eq!(
        image.preferred_leader_imbalance(),
        0,
        "2 is preferred but not in sync"
    );
}

#[test]
fn assignment_avoids_fenced_brokers() {
    let mut image = MetadataImage::new();
    for cmd in base() {
        image.apply(&cmd).unwrap();
    }
    image.apply(&fence(2)).unwrap();
    for start in 0..6 {
        let layout = image.assign_replicas(0, 6, 3, start).unwrap();
        assert!(layout.iter().flatten().all(|b| *b != 2), "{layout:?}");
        let mut copy = image.clone();
        copy.apply(&Command::CreateTopic {
            name: "u".into(),
            id: Uuid::from_u128(2),
            partitions: 6,
            replicas: layout,
            configs: BTreeMap::new(),
            internal: false,
        })
        .unwrap();
    }
    let e = image.assign_replicas(0, 1, 4, 0).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Replication factor: 4 larger than available brokers: 3."
    );
}

#[test]
fn rack_aware_assignment_spans_racks() {
    let mut image = MetadataImage::new();
    for (id, rack) in [(1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "c"), (6, "c")] {
        image
            .apply(&Command::RegisterBroker(BrokerInfo {
                id,
                host: format!("host{id}"),
                port: 9092,
                rack: Some(rack.to_owned()),
                incarnation: Uuid::from_u128(id as u128),
                previous_incarnation: None,
                listeners: Vec::new(),
            }))
            .unwrap();
    }
    let rack = |id: i32| image.broker(id).unwrap().rack.clone().unwrap();
    for start in 0..6 {
        for replicas in image.assign_replicas(0, 12, 3, start).unwrap() {
            let mut racks: Vec<String> = replicas.iter().map(|b| rack(*b)).collect();
            racks.sort();
            assert_eq!(racks, ["a", "b", "c"], "start {start}: {replicas:?}");
        }
    }
}

/// Images written before fencing and partition epochs existed still load.
#[test]
fn old_images_load() {
    let json = r#"{"brokers":{"1":{"id":1,"host":"h","port":9092,"rack":null}},
        "topics":{"t":{"name":"t","id":"00000000-0000-0000-0000-000000000001",
        "partitions":[{"partition":0,"leader":1,"leader_epoch":3,"replicas":[1],"isr":[1]}],
        "configs":{},"internal":false}},"next_producer_id":0,"applied_index":2}"#;
    let image: MetadataImage = serde_json::from_str(json).unwrap();
    assert_eq!(image.fenced_brokers().count(), 0);
    assert!(image.broker(1).unwrap().incarnation.is_nil());
    let p0 = &image.topic("t").unwrap().partitions[0];
    assert_eq!((p0.leader_epoch, p0.partition_epoch), (3, 0));

    let bad = json.replace("\"applied_index\":2", "\"applied_index\":2,\"fenced\":[7]");
    let e = serde_json::from_str::<MetadataImage>(&bad).unwrap_err();
    assert!(
        e.to_string()
            .contains("broker 7 is fenced but not registered"),
        "{e}"
    );
}

#[test]
fn alter_partition_is_checked_against_the_leader_and_the_epochs() {
    let mut image = MetadataImage::new();
    for cmd in then(base(), &[fence(1)]) {
        image.apply(&cmd).unwrap();
    }
    // p0: leader 2 at leader epoch 1, partition epoch 1, ISR [2, 3].
    let before = image.clone();
    for (cmd, code) in [
        (alter(0, 1, 0, 1, &[1, 2, 3]), 74), // the deposed leader
        (alter(0, 2, 0, 1, &[2, 3]), 74),    // an old leader epoch
        (alter(0, 2, 1, 0, &[2]), 108),      // an old partition epoch
        (alter(0, 2, 1, 1, &[3]), 42),       // without the leader
        (alter(0, 2, 1, 1, &[2, 4]), 42),    // not a replica
        (alter(0, 2, 1, 1, &[2, 2]), 42),    // twice
        (alter(0, 2, 1, 1, &[2, 3, 1]), 42), // broker 1 is fenced
    ] {
        let error = image.apply(&cmd).unwrap_err();
        assert_eq!(error.kafka_error_code(), code, "{cmd:?}: {error}");
        assert_eq!(image, before);
    }
}

fn reassign(partition: i32, replicas: Option<&[i32]>) -> Command {
    Command::ReassignPartition {
        topic: "t".to_owned(),
        partition,
        replicas: replicas.map(<[i32]>::to_vec),
    }
}

fn part(image: &MetadataImage, p: usize) -> weir_meta::PartitionInfo {
    image.topic("t").unwrap().partitions[p].clone()
}

#[test]
fn a_reassignment_adds_first_and_drops_once_caught_up() {
    let mut image = MetadataImage::new();
    for cmd in base() {
        image.apply(&cmd).unwrap();
    }
    // p0 [1,2,3] led by 1 moves to [2,3,4]: 4 is added, 1 will go.
    image.apply(&reassign(0, Some(&[2, 3, 4]))).unwrap();
    let p = part(&image, 0);
    assert_eq!(p.replicas, vec![2, 3, 4, 1]);
    assert_eq!((p.adding.clone(), p.removing.clone()), (vec![4], vec![1]));
    assert_eq!((p.leader, p.isr.clone()), (1, vec![1, 2, 3]));
    assert_eq!(image.reassignments().len(), 1);
    // The leader sees 4 caught up: the reassignment completes, leadership
    // leaves 1 for the first in-sync replica of the target.
    let cmd = alter(0, 1, p.leader_epoch, p.partition_epoch, &[1, 2, 3, 4]);
    image.apply(&cmd).unwrap();
    let p = part(&image, 0);
    assert_eq!(p.replicas, vec![2, 3, 4]);
    assert!(p.adding.is_empty() && p.removing.is_empty());
    assert_eq!((p.leader, p.isr.clone()), (2, vec![2, 3, 4]));
    assert_eq!(p.leader_epoch, 1);
    assert!(image.reassignments().is_empty());
}

#[test]
fn a_reassignment_that_adds_nothing_completes_at_once_and_one_can_be_cancelled() {
    let mut image = MetadataImage::new();
    for cmd in base() {
        image.apply(&cmd).unwrap();
    }
    image.apply(&reassign(1, Some(&[3, 1]))).unwrap();
    let p = part(&image, 1);
    assert_eq!(
        (p.replicas.clone(), p.leader, p.isr.clone()),
        (vec![3, 1], 3, vec![3, 1])
    );

    image.apply(&reassign(2, Some(&[4, 1, 2]))).unwrap();
    image.apply(&reassign(2, None)).unwrap();
    let p = part(&image, 2);
    // Back to the original replicas (as a set, as in Kafka), leader kept.
    let mut replicas = p.replicas.clone();
    replicas.sort_unstable();
    assert_eq!((replicas, p.leader), (vec![1, 2, 3], 3));
    assert!(p.adding.is_empty() && p.removing.is_empty());

    let before = image.clone();
    for (cmd, code) in [
        (reassign(2, None), 85),
        (reassign(2, Some(&[])), 39),
        (reassign(2, Some(&[1, 1])), 39),
        (reassign(2, Some(&[1, 9])), 39),
        (reassign(7, Some(&[1])), 3),
    ] {
        assert_eq!(
            image.apply(&cmd).unwrap_err().kafka_error_code(),
            code,
            "{cmd:?}"
        );
        assert_eq!(image, before);
    }
}

fn elect(unclean: bool, partitions: Option<&[(&str, i32)]>) -> Command {
    Command::ElectLeaders {
        unclean,
        partitions: partitions.map(|list| list.iter().map(|(t, p)| (t.to_string(), *p)).collect()),
    }
}

const PREFERRED: bool = false;
const UNCLEAN: bool = true;
const ALL_T: &[(&str, i32)] = &[("t", 0), ("t", 1), ("t", 2)];

struct ElectionRow {
    name: &'static str,
    setup: Vec<Command>,
    cmd: Command,
    /// Per partition of the result: (topic, partition, Kafka error code).
    outcomes: &'static [(&'static str, i32, i16)],
    /// Topic "t" afterwards, partition by partition.
    want: [State; 3],
}

fn election_rows() -> Vec<ElectionRow> {
    let fresh: [State; 3] = [
        (1, &[1, 2, 3], 0, 0),
        (2, &[2, 3, 1], 0, 0),
        (3, &[3, 1, 2], 0, 0),
    ];
    // Broker 1 fenced and back, not yet in sync anywhere.
    let returned: [State; 3] = [(2, &[2, 3], 1, 1), (2, &[2, 3], 0, 1), (3, &[3, 2], 0, 1)];
    // Broker 1 back in sync on p0 only, which broker 2 leads.
    let p0_in_sync = || {
        then(
            base(),
            &[fence(1), broker(1), alter(0, 2, 1, 1, &[2, 3, 1])],
        )
    };
    let all_offline: [State; 3] = [(-1, &[1], 1, 3), (-1, &[1], 3, 3), (-1, &[1], 2, 3)];
    vec![
        ElectionRow {
            name: "preferred: the in-sync preferred replica takes its partition back",
            setup: p0_in_sync(),
            cmd: elect(PREFERRED, Some(&[("t", 0)])),
            outcomes: &[("t", 0, 0)],
            want: [(1, &[2, 3, 1], 2, 3), returned[1], returned[2]],
        },
        ElectionRow {
            name: "preferred, every partition: each one's outcome, in order",
            setup: p0_in_sync(),
            cmd: elect(PREFERRED, None),
            outcomes: &[("t", 0, 0), ("t", 1, 84), ("t", 2, 84)],
            want: [(1, &[2, 3, 1], 2, 3), returned[1], returned[2]],
        },
        ElectionRow {
            name: "preferred: not needed where the preferred replica leads",
            setup: base(),
            cmd: elect(PREFERRED, Some(ALL_T)),
            outcomes: &[("t", 0, 84), ("t", 1, 84), ("t", 2, 84)],
            want: fresh,
        },
        ElectionRow {
            name: "preferred: a live preferred replica out of the ISR is not available",
            setup: then(base(), &[fence(1), broker(1)]),
            cmd: elect(PREFERRED, Some(&[("t", 0)])),
            outcomes: &[("t", 0, 80)],
            want: returned,
        },
        ElectionRow {
            name: "preferred: a fenced preferred replica is not available",
            setup: then(base(), &[fence(1)]),
            cmd: elect(PREFERRED, Some(&[("t", 0)])),
            outcomes: &[("t", 0, 80)],
            want: returned,
        },
        ElectionRow {
            name: "preferred: never unclean, an offline partition stays offline",
            setup: then(base(), &[fence(2), fence(3), fence(1), broker(3)]),
            cmd: elect(PREFERRED, Some(ALL_T)),
            outcomes: &[("t", 0, 80), ("t", 1, 80), ("t", 2, 80)],
            want: all_offline,
        },
        ElectionRow {
            name: "unknown topics and partitions; a partition named twice is elected once",
            setup: p0_in_sync(),
            cmd: elect(
                PREFERRED,
                Some(&[("u", 0), ("t", 3), ("t", -1), ("t", 0), ("t", 0)]),
            ),
            outcomes: &[
                ("u", 0, 3),
                ("t", 3, 3),
                ("t", -1, 3),
                ("t", 0, 0),
                ("t", 0, 84),
            ],
            want: [(1, &[2, 3, 1], 2, 3), returned[1], returned[2]],
        },
        ElectionRow {
            name: "unclean: the in-sync replicas are down, a live one out of sync leads alone",
            setup: then(base(), &[fence(2), fence(3), fence(1), broker(3)]),
            cmd: elect(UNCLEAN, Some(ALL_T)),
            outcomes: &[("t", 0, 0), ("t", 1, 0), ("t", 2, 0)],
            want: [(3, &[3], 2, 4), (3, &[3], 4, 4), (3, &[3], 3, 4)],
        },
        ElectionRow {
            name: "unclean, every partition: the same",
            setup: then(base(), &[fence(2), fence(3), fence(1), broker(3)]),
            cmd: elect(UNCLEAN, None),
            outcomes: &[("t", 0, 0), ("t", 1, 0), ("t", 2, 0)],
            want: [(3, &[3], 2, 4), (3, &[3], 4, 4), (3, &[3], 3, 4)],
        },
        ElectionRow {
            name: "unclean: not needed where the partition has a leader",
            setup: then(base(), &[fence(1)]),
            cmd: elect(UNCLEAN, Some(ALL_T)),
            outcomes: &[("t", 0, 84), ("t", 1, 84), ("t", 2, 84)],
            want: returned,
        },
        ElectionRow {
            name: "unclean: no replica alive, no leader eligible",
            setup: then(base(), &[fence(2), fence(3), fence(1)]),
            cmd: elect(UNCLEAN, Some(ALL_T)),
            outcomes: &[("t", 0, 83), ("t", 1, 83), ("t", 2, 83)],
            want: all_offline,
        },
    ]
}

#[test]
fn elect_leaders_table() {
    let mut failures = Vec::new();
    for row in election_rows() {
        let mut image = MetadataImage::new();
        for (i, cmd) in row.setup.iter().enumerate() {
            image
                .apply(cmd)
                .unwrap_or_else(|e| panic!("{}: setup command {i} failed: {e}", row.name));
        }
        let index = image.applied_index();
        let results = match image.apply(&row.cmd) {
            Ok(Applied::Elections(results)) => results,
            other => {
                failures.push(format!("{}: {other:?}", row.name));
                continue;
            }
        };
        let got: Vec<(&str, i32, i16)> = results
            .iter()
            .map(|e| (e.topic.as_str(), e.partition, e.outcome.kafka_error_code()))
            .collect();
        if got != row.outcomes {
            failures.push(format!(
                "{}: outcomes\n  want {:?}\n  got  {got:?}",
                row.name, row.outcomes
            ));
        }
        let want: Vec<(i32, Vec<i32>, i32, i32)> = row
            .want
            .iter()
            .map(|(l, isr, le, pe)| (*l, isr.to_vec(), *le, *pe))
            .collect();
        let state = state(&image);
        if state != want {
            failures.push(format!("{}:\n  want {want:?}\n  got  {state:?}", row.name));
        }
        if image.applied_index() != index + 1 {
            failures.push(format!(
                "{}: the applied index did not go up by one",
                row.name
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "failing rows:\n{}",
        failures.join("\n")
    );
}

/// The messages are Kafka's controller's: the error's own, or naming what
/// is unknown; none on success.
#[test]
fn elect_leaders_messages() {
    let mut image = MetadataImage::new();
    for cmd in then(
        base(),
        &[fence(1), broker(1), alter(0, 2, 1, 1, &[2, 3, 1])],
    ) {
        image.apply(&cmd).unwrap();
    }
    let Applied::Elections(results) = image
        .apply(&elect(
            PREFERRED,
            Some(&[("t", 0), ("t", 1), ("t", 9), ("nope", 0)]),
        ))
        .unwrap()
    else {
        panic!("not elections");
    };
    let messages: Vec<Option<String>> = results.iter().map(Election::message).collect();
    assert_eq!(
        messages,
        [
            None,
            Some("Leader election not needed for topic partition.".to_owned()),
            Some("No such partition as t-9".to_owned()),
            Some("No such topic as nope".to_owned()),
        ]
    );
    assert_eq!(results[0].outcome, ElectionOutcome::Elected);

    let mut image = MetadataImage::new();
    for cmd in then(base(), &[fence(2), fence(3), fence(1)]) {
        image.apply(&cmd).unwrap();
    }
    for (unclean, message) in [
        (PREFERRED, "The preferred leader was not available."),
        (
            UNCLEAN,
            "Eligible topic partition leaders are not available.",
        ),
    ] {
        let Applied::Elections(results) = image.apply(&elect(unclean, Some(&[("t", 1)]))).unwrap()
        else {
            panic!("not elections");
        };
        assert_eq!(results[0].message().as_deref(), Some(message));
    }
}

/// A leaderless partition with a live in-sync replica (not reachable by
/// fencing alone): a preferred election that cannot have the preferred
/// replica, and an unclean one, both elect that replica cleanly.
#[test]
fn elect_leaders_fills_a_leaderless_partition_cleanly() {
    let mut image = MetadataImage::new();
    for cmd in base() {
        image.apply(&cmd).unwrap();
    }
    let mut json = serde_json::to_value(&image).unwrap();
    json["topics"]["t"]["partitions"][1]["leader"] = serde_json::json!(-1);
    json["topics"]["t"]["partitions"][1]["isr"] = serde_json::json!([1, 3]);
    let image: MetadataImage = serde_json::from_value(json).unwrap();
    for unclean in [PREFERRED, UNCLEAN] {
        let mut image = image.clone();
        let applied = image.apply(&elect(unclean, Some(&[("t", 1)]))).unwrap();
        let Applied::Elections(results) = applied else {
            panic!("not elections");
        };
        assert_eq!(
            results[0].outcome,
            ElectionOutcome::Elected,
            "unclean {unclean}"
        );
        let p1 = &image.topic("t").unwrap().partitions[1];
        // Replica order [2, 3, 1]: 2 is out of sync, 3 is the first in sync.
        assert_eq!(
            (p1.leader, p1.isr.clone()),
            (3, vec![1, 3]),
            "unclean {unclean}"
        );
        assert_eq!((p1.leader_epoch, p1.partition_epoch), (1, 1));
    }
}

fn offline(broker: i32, partitions: &[i32]) -> Command {
    Command::ReplicasOffline {
        broker,
        partitions: partitions.iter().map(|&p| ("t".to_owned(), p)).collect(),
    }
}

/// Replicas offline with a failed log directory: in the partitions named,
/// the broker leaves the ISR and its leadership moves, as fencing would
/// do; elsewhere nothing changes and the broker stays unfenced.
#[test]
fn offline_replicas_leave_their_partitions_only() {
    let mut image = MetadataImage::new();
    for cmd in base() {
        image.apply(&cmd).unwrap();
    }
    // Broker 1 leads p0 and follows in p1 and p2; its replicas of p0 and
    // p1 went offline (and an unknown partition and topic are skipped).
    let mut cmd = offline(1, &[0, 1, 9]);
    if let Command::ReplicasOffline { partitions, .. } = &mut cmd {
        partitions.push(("nope".to_owned(), 0));
    }
    image.apply(&cmd).unwrap();
    assert_eq!(
        state(&image),
        vec![
            (2, vec![2, 3], 1, 1),
            (2, vec![2, 3], 0, 1),
            (3, vec![3, 1, 2], 0, 0),
        ]
    );
    assert_eq!(image.fenced_brokers().count(), 0);
    // The preferred election does not give p0 back to broker 1: it is not
    // in sync.
    image.apply(&Command::ElectPreferredLeaders).unwrap();
    assert_eq!(state(&image)[0], (2, vec![2, 3], 1, 1));
    // Reported again: nothing changes.
    let before = image.clone();
    image.apply(&offline(1, &[0, 1])).unwrap();
    assert_eq!(state(&image), state(&before));

    // An unregistered broker is refused.
    assert!(image.apply(&offline(7, &[0])).is_err());
}

/// The only in-sync replica keeps its partition unless the topic allows
/// unclean election: there is no clean leader to move to.
#[test]
fn an_offline_only_in_sync_replica_keeps_its_partition_unless_unclean() {
    let mut image = shrunk_isr(false);
    image.apply(&offline(1, &[0])).unwrap();
    let p0 = &image.topic("t").unwrap().partitions[0];
    assert_eq!(
        (p0.leader, p0.isr.clone(), p0.leader_epoch),
        (1, vec![1], 0)
    );

    let mut image = shrunk_isr(true);
    image.apply(&offline(1, &[0])).unwrap();
    let p0 = &image.topic("t").unwrap().partitions[0];
    assert_eq!((p0.leader, p0.isr.clone()), (2, vec![2]));
}
