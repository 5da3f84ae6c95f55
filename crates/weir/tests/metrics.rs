//! The health signals on `/metrics`, scraped from a real three-node
//! cluster and parsed: partitions under-replicated and at their minimum
//! ISR once a broker is lost, ISR shrinks, the active controller's broker
//! counts, connections, log sizes, log directories' space and the process.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::cluster::{create_topic_with, send_acked, wait_until, Cluster};

/// The samples of a Prometheus text page: `name{labels}` to value.
fn scrape(cluster: &Cluster, node: i32) -> BTreeMap<String, f64> {
    let (status, text) = cluster.node(node).http_get("/metrics");
    assert_eq!(status, 200, "{text}");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            Some((name.to_owned(), value.parse().ok()?))
        })
        .collect()
}

fn value(samples: &BTreeMap<String, f64>, name: &str) -> f64 {
    *samples
        .get(name)
        .unwrap_or_else(|| panic!("no {name} in {samples:?}"))
}

/// The sum of the samples of `name` whose labels contain `with`.
fn sum(samples: &BTreeMap<String, f64>, name: &str, with: &str) -> f64 {
    samples
        .iter()
        .filter(|(k, _)| k.starts_with(&format!("{name}{{")) && k.contains(with))
        .map(|(_, v)| v)
        .sum()
}

#[test]
fn a_lost_broker_shows_in_the_health_metrics_of_the_others() {
    // Followers drop out of ISRs after 1 s behind, long before the
    // controller fences their broker (15 s without heartbeats): the
    // leaders shrink their ISRs themselves.
    let mut cluster = Cluster::start(&[
        "--replica-lag-time-max-ms",
        "1000",
        "--broker-session-timeout-ms",
        "15000",
    ]);
    create_topic_with(
        &cluster.node(1).kafka,
        "health",
        3,
        3,
        &[("min.insync.replicas", "2")],
    );
    assert_eq!(
        send_acked(&cluster.bootstrap(), "health", "r", 30).len(),
        30
    );
    // Healthy: nothing under-replicated anywhere; one active controller,
    // which counts three brokers.
    let controller = cluster.controller(1) as i32;
    wait_until("a healthy cluster", Duration::from_secs(20), || {
        (1..=3)
            .all(|id| {
                let s = scrape(&cluster, id);
                value(&s, "weir_under_replicated_partitions") == 0.0
            })
            .then_some(())
    });
    for id in 1..=3 {
        let s = scrape(&cluster, id);
        let active = value(&s, "weir_active_controller");
        assert_eq!(active, f64::from(u8::from(id == controller)), "node {id}");
        if id == controller {
            assert_eq!(value(&s, "weir_active_brokers"), 3.0);
            assert_eq!(value(&s, "weir_fenced_brokers"), 0.0);
            assert_eq!(value(&s, "weir_offline_partitions"), 0.0);
        } else {
            assert_eq!(
                value(&s, "weir_active_brokers"),
                0.0,
                "only the controller counts"
            );
        }
        assert!(
            sum(&s, "weir_log_size_bytes", "topic=\"health\"") > 0.0,
            "{s:?}"
        );
        assert!(sum(&s, "weir_log_dir_free_bytes", "dir=") > 0.0);
        assert!(sum(&s, "weir_log_dir_total_bytes", "dir=") > 0.0);
        assert!(sum(&s, "weir_log_dir_size_bytes", "dir=") > 0.0);
        assert!(value(&s, "process_resident_memory_bytes") > 1e6);
        assert!(value(&s, "process_open_fds") > 3.0);
        assert!(value(&s, "process_cpu_seconds_total") > 0.0);
    }
    let leaders = scrape(&cluster, 1);
    assert!(
        sum(&leaders, "weir_connection_creations_total", "listener=") >= 1.0,
        "{leaders:?}"
    );
    assert!(sum(&leaders, "weir_producer_bytes_in_total", "topic=\"health\"") >= 0.0);

    // A broker that is not the controller goes: the others' partitions
    // drop it from their ISRs, at min.insync.replicas=2 now.
    let victim = (1..=3).find(|id| *id != controller).unwrap();
    cluster.node_mut(victim).kill();
    let survivors: Vec<i32> = (1..=3).filter(|id| *id != victim).collect();
    wait_until("the ISRs to shrink", Duration::from_secs(60), || {
        let totals: Vec<(f64, f64, f64)> = survivors
            .iter()
            .map(|id| {
                let s = scrape(&cluster, *id);
                (
                    value(&s, "weir_under_replicated_partitions"),
                    value(&s, "weir_at_min_isr_partitions"),
                    value(&s, "weir_isr_shrinks_total"),
                )
            })
            .collect();
        let led: f64 = totals.iter().map(|t| t.0).sum();
        let at_min: f64 = totals.iter().map(|t| t.1).sum();
        let shrinks: f64 = totals.iter().map(|t| t.2).sum();
        (led == 3.0 && at_min == 3.0 && shrinks >= 1.0).then_some(())
    });
    wait_until(
        "the controller to fence it",
        Duration::from_secs(60),
        || {
            let s = scrape(&cluster, controller);
            (value(&s, "weir_fenced_brokers") == 1.0 && value(&s, "weir_active_brokers") == 2.0)
                .then_some(())
        },
    );
    for id in &survivors {
        let s = scrape(&cluster, *id);
        assert_eq!(value(&s, "weir_under_min_isr_partitions"), 0.0, "node {id}");
    }
    // `weir cluster status` names the fenced broker too.
    let status = common::cli::run(
        &[
            "cluster",
            "status",
            "--bootstrap",
            &cluster.node(controller).kafka,
        ],
        b"",
    )
    .ok();
    assert!(
        status.stdout.contains("Brokers (2 live, 1 fenced)"),
        "{}",
        status.stdout
    );
    let row = status
        .stdout
        .lines()
        .find(|l| l.starts_with(&format!("{victim} ")))
        .unwrap_or_else(|| panic!("no row for {victim}: {}", status.stdout));
    assert!(row.contains("fenced"), "{row}");
}

/// Commits `offset` of `lagging`-0 for group `billing`, retried while the
/// coordinator moves.
fn commit(bootstrap: &str, offset: i64) {
    use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
    use rdkafka::{Offset, TopicPartitionList};
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "billing")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset("lagging", 0, Offset::Offset(offset))
        .unwrap();
    wait_until("the commit", Duration::from_secs(30), || {
        consumer.commit(&offsets, CommitMode::Sync).ok()
    });
}

/// The nodes whose `/metrics` have `billing`'s lag, with its value.
fn lag_exporters(cluster: &Cluster, nodes: &[i32]) -> Vec<(i32, f64)> {
    nodes
        .iter()
        .filter_map(|id| {
            let s = scrape(cluster, *id);
            s.iter()
                .find(|(k, _)| k.starts_with("weir_consumer_group_lag{group=\"billing\""))
                .map(|(_, v)| (*id, *v))
        })
        .collect()
}

#[test]
fn only_the_groups_coordinator_exports_its_lag_after_the_coordinator_moves() {
    let mut cluster = Cluster::start(&[]);
    create_topic_with(&cluster.node(1).kafka, "lagging", 1, 3, &[]);
    assert_eq!(
        send_acked(&cluster.bootstrap(), "lagging", "r", 10).len(),
        10
    );
    commit(&cluster.bootstrap(), 4);
    let all = [1, 2, 3];
    let first = wait_until(
        "one node to export the lag",
        Duration::from_secs(20),
        || match lag_exporters(&cluster, &all)[..] {
            [(id, 6.0)] => Some(id),
            _ => None,
        },
    );
    // The coordinator goes; another takes the group over; the old one
    // comes back, having loaded the group at its start.
    cluster.node_mut(first).kill();
    let others: Vec<i32> = all.iter().copied().filter(|id| *id != first).collect();
    let via = cluster.node(others[0]).kafka.clone();
    commit(&via, 7);
    cluster.node_mut(first).restart(false);
    std::thread::sleep(Duration::from_secs(5));
    wait_until(
        "one node to export the new lag",
        Duration::from_secs(30),
        || {
            let exporters = lag_exporters(&cluster, &all);
            (exporters.len() == 1 && exporters[0].1 == 3.0).then_some(())
        },
    );
    // And it stays so once leaderships settle.
    std::thread::sleep(Duration::from_secs(3));
    let exporters = lag_exporters(&cluster, &all);
    assert_eq!(exporters.len(), 1, "{exporters:?}");
}

/// A group's coordinator reports the lag of every partition the group
/// committed, those it holds no replica of included (asked of their
/// leaders): three partitions with one replica each, on three brokers.
#[test]
fn the_coordinator_reports_lag_of_partitions_led_by_other_brokers() {
    use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
    use rdkafka::{Offset, TopicPartitionList};
    let cluster = Cluster::start(&[]);
    create_topic_with(&cluster.node(1).kafka, "spread", 3, 1, &[]);
    let leaders: Vec<i32> = common::cluster::partitions(&cluster.node(1).kafka, "spread")
        .iter()
        .map(|p| p.leader)
        .collect();
    let mut distinct = leaders.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "one partition per broker: {leaders:?}");
    assert_eq!(
        send_acked(&cluster.bootstrap(), "spread", "r", 300).len(),
        300
    );
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap())
        .set("group.id", "spread-readers")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut offsets = TopicPartitionList::new();
    for partition in 0..3 {
        offsets
            .add_partition_offset("spread", partition, Offset::Offset(0))
            .unwrap();
    }
    wait_until("the commit", Duration::from_secs(30), || {
        consumer.commit(&offsets, CommitMode::Sync).ok()
    });
    // The coordinator's metrics have every partition's lag; together they
    // are the 300 records.
    let (coordinator, lags) =
        wait_until("the lag of 3 partitions", Duration::from_secs(20), || {
            (1..=3).find_map(|id| {
                let s = scrape(&cluster, id);
                let lags: Vec<f64> = s
                    .iter()
                    .filter(|(k, _)| {
                        k.starts_with("weir_consumer_group_lag{group=\"spread-readers\"")
                    })
                    .map(|(_, v)| *v)
                    .collect();
                (lags.len() == 3).then_some((id, lags))
            })
        });
    assert_eq!(lags.iter().sum::<f64>(), 300.0, "{lags:?}");
    let s = scrape(&cluster, coordinator);
    let mut lagging = 0;
    for partition in 0..3 {
        let age = sum(
            &s,
            "weir_consumer_group_lag_seconds",
            &format!("partition=\"{partition}\""),
        );
        let lag = sum(
            &s,
            "weir_consumer_group_lag",
            &format!("group=\"spread-readers\",topic=\"spread\",partition=\"{partition}\""),
        );
        if lag > 0.0 {
            lagging += 1;
            assert!(age > 0.0 && age < 120.0, "partition {partition}: {age} s");
        }
    }
    assert!(
        lagging >= 2,
        "the oldest unconsumed record's age of each lagging partition"
    );
    // The JSON endpoint tells the same.
    let (status, body) = cluster
        .node(coordinator)
        .http_get("/v1/groups/spread-readers");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"lag\":300"), "{body}");
}
