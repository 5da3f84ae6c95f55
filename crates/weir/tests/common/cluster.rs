//! A cluster of three `weir serve` processes on loopback (each broker and
//! controller), and what the tests ask of it through librdkafka: topics,
//! partition leaders and ISRs, acknowledged writes.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;

use super::Weir;

/// Short enough to keep the tests quick, long enough for a loaded machine.
pub const SESSION_TIMEOUT_MS: u64 = 4000;

pub const BOTH: &str = "broker,controller";

pub struct Cluster {
    nodes: Vec<Weir>,
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Cluster {
    /// Starts nodes 1..=3, each broker and controller, all at once (a node
    /// is ready only once a majority of the controllers is up). The
    /// controller ports are picked free beforehand, so another process may
    /// take one in between: then the whole cluster starts again.
    pub fn start(extra: &[&str]) -> Self {
        for _ in 0..3 {
            if let Some(cluster) = Self::try_start(extra) {
                return cluster;
            }
        }
        panic!("the cluster did not start");
    }

    pub fn try_start(extra: &[&str]) -> Option<Self> {
        Self::try_start_with(&[BOTH, BOTH, BOTH], extra)
    }

    /// Starts nodes 1..=n with these roles; the nodes with the controller
    /// role are the voters.
    pub fn start_with(roles: &[&str], extra: &[&str]) -> Self {
        for _ in 0..3 {
            if let Some(cluster) = Self::try_start_with(roles, extra) {
                return cluster;
            }
        }
        panic!("the cluster did not start");
    }

    pub fn try_start_with(roles: &[&str], extra: &[&str]) -> Option<Self> {
        Self::try_start_each(roles, extra, &[])
    }

    /// [`start`](Self::start), node `i + 1` also given `own[i]`.
    pub fn start_each(extra: &[&str], own: &[&[&str]]) -> Self {
        for _ in 0..3 {
            if let Some(cluster) = Self::try_start_each(&[BOTH, BOTH, BOTH], extra, own) {
                return cluster;
            }
        }
        panic!("the cluster did not start");
    }

    fn try_start_each(roles: &[&str], extra: &[&str], own: &[&[&str]]) -> Option<Self> {
        let controller_ports: Vec<u16> = roles.iter().map(|_| free_port()).collect();
        let voters = controller_ports
            .iter()
            .zip(roles)
            .enumerate()
            .filter(|(_, (_, role))| role.contains("controller"))
            .map(|(i, (port, _))| format!("{}@127.0.0.1:{port}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let session = SESSION_TIMEOUT_MS.to_string();
        let own_session = extra.contains(&"--broker-session-timeout-ms");
        let launches: Vec<_> = controller_ports
            .iter()
            .zip(roles)
            .enumerate()
            .map(|(i, (port, role))| {
                let mut args: Vec<String> = [
                    "--node-id",
                    &(i + 1).to_string(),
                    "--roles",
                    role,
                    "--controllers",
                    &voters,
                    "--controller-listen",
                    &format!("127.0.0.1:{port}"),
                    "--broker-heartbeat-interval-ms",
                    "500",
                ]
                .iter()
                .map(|s| s.to_string())
                .collect();
                if !own_session {
                    args.extend(["--broker-session-timeout-ms".to_owned(), session.clone()]);
                }
                args.extend(extra.iter().map(|s| s.to_string()));
                args.extend(
                    own.get(i)
                        .into_iter()
                        .flat_map(|o| o.iter().map(|s| s.to_string())),
                );
                Weir::launch(&args)
            })
            .collect();
        let started: Vec<Result<Weir, String>> =
            launches.into_iter().map(|l| l.try_ready()).collect();
        if let Some(Err(line)) = started.iter().find(|s| s.is_err()) {
            eprintln!("a node did not start ({line:?}); starting the cluster again");
            return None;
        }
        let cluster = Self {
            nodes: started.into_iter().map(|s| s.ok().unwrap()).collect(),
        };
        // Followers learn of a commit with the leader's next message: wait
        // until every broker knows every broker.
        let ids: BTreeSet<i32> = roles
            .iter()
            .enumerate()
            .filter(|(_, r)| r.contains("broker"))
            .map(|(i, _)| i as i32 + 1)
            .collect();
        for node in cluster.nodes.iter().filter(|n| !n.kafka.is_empty()) {
            wait_until("every broker to be known", Duration::from_secs(10), || {
                (brokers(&node.kafka) == ids).then_some(())
            });
        }
        Some(cluster)
    }

    /// Every node, in id order.
    pub fn nodes_mut(&mut self) -> &mut [Weir] {
        &mut self.nodes
    }

    pub fn node(&self, id: i32) -> &Weir {
        &self.nodes[(id - 1) as usize]
    }

    pub fn node_mut(&mut self, id: i32) -> &mut Weir {
        &mut self.nodes[(id - 1) as usize]
    }

    pub fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .filter(|n| n.is_running() && !n.kafka.is_empty())
            .map(|n| n.kafka.clone())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The active controller as node `via` reports it.
    pub fn controller(&self, via: i32) -> i64 {
        assert!(
            !self.node(via).http.is_empty(),
            "node {via} is not a broker"
        );
        let (_, body) = self.node(via).http_get("/v1/cluster");
        json_number(&body, "controller_id")
    }
}

pub fn json_number(body: &str, field: &str) -> i64 {
    let key = format!("\"{field}\":");
    let at = body
        .find(&key)
        .unwrap_or_else(|| panic!("{field} in {body}"))
        + key.len();
    body[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '-')
        .collect::<String>()
        .parse()
        .unwrap()
}

pub fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client")
}

pub fn create_topic(bootstrap: &str, name: &str, partitions: i32, replicas: i32) {
    create_topic_with(bootstrap, name, partitions, replicas, &[]);
}

pub fn create_topic_with(
    bootstrap: &str,
    name: &str,
    partitions: i32,
    replicas: i32,
    configs: &[(&str, &str)],
) {
    let admin = admin(bootstrap);
    let mut topic = NewTopic::new(name, partitions, TopicReplication::Fixed(replicas));
    for (key, value) in configs {
        topic = topic.set(key, value);
    }
    let results = super::cli::block_on(admin.create_topics(
        &[topic],
        &AdminOptions::new().operation_timeout(Some(Duration::from_secs(20))),
    ))
    .expect("create topics");
    for result in results {
        result.expect("topic created");
    }
}

/// Leader, replicas and ISR of each partition of `topic`, per the cluster
/// metadata seen through `bootstrap`.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionView {
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

pub fn partitions(bootstrap: &str, topic: &str) -> Vec<PartitionView> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("consumer");
    // A broker that has not applied the topic's creation yet answers
    // without it for a moment.
    let metadata = wait_until("the topic's metadata", Duration::from_secs(10), || {
        let metadata = consumer
            .fetch_metadata(Some(topic), Timeout::After(Duration::from_secs(10)))
            .expect("metadata");
        (!metadata.topics()[0].partitions().is_empty()).then_some(metadata)
    });
    let topic = &metadata.topics()[0];
    let mut views: Vec<(i32, PartitionView)> = topic
        .partitions()
        .iter()
        .map(|p| {
            (
                p.id(),
                PartitionView {
                    leader: p.leader(),
                    replicas: p.replicas().to_vec(),
                    isr: p.isr().to_vec(),
                },
            )
        })
        .collect();
    views.sort_by_key(|(id, _)| *id);
    views.into_iter().map(|(_, v)| v).collect()
}

pub fn brokers(bootstrap: &str) -> BTreeSet<i32> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("consumer");
    let metadata = consumer
        .fetch_metadata(None, Timeout::After(Duration::from_secs(10)))
        .expect("metadata");
    metadata.brokers().iter().map(|b| b.id()).collect()
}

pub fn wait_until<T>(what: &str, timeout: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Sends `count` keyed records with acks=all and idempotence, all queued
/// at once; returns the values acknowledged.
pub fn send_acked(bootstrap: &str, topic: &str, prefix: &str, count: usize) -> Vec<String> {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("message.timeout.ms", "20000")
        .set("linger.ms", "5")
        .create()
        .expect("producer");
    let values: Vec<String> = (0..count).map(|i| format!("{prefix}-{i}")).collect();
    // `send_result` queues the record before returning (`send` would only
    // once awaited, one record at a time).
    let sends: Vec<_> = values
        .iter()
        .map(|value| {
            producer
                .send_result(FutureRecord::to(topic).key(value).payload(value))
                .map_err(|(e, _)| e)
        })
        .collect();
    let acked = super::cli::block_on(futures::future::join_all(sends.into_iter().map(
        |send| async move {
            match send {
                Ok(delivery) => matches!(delivery.await, Ok(Ok(_))),
                Err(_) => false,
            }
        },
    )));
    values
        .into_iter()
        .zip(acked)
        .filter_map(|(value, acked)| acked.then_some(value))
        .collect()
}

/// Asserts that `read` holds every value of `acked` in that order (other
/// values may come between them: records sent but not acknowledged).
pub fn assert_all_in_order(read: &[String], acked: &[String]) {
    let mut unread = acked.iter().peekable();
    for value in read {
        if unread.peek() == Some(&value) {
            unread.next();
        }
    }
    assert!(
        unread.peek().is_none(),
        "lost or reordered from {:?}",
        unread.peek()
    );
}
