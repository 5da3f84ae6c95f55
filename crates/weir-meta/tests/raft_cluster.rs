//! The controller quorum end to end: real controllers on loopback TCP with
//! their files in temporary directories.
//!
//! No timing assertions: every wait is bounded generously and polls.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tempfile::TempDir;
use tokio::net::TcpListener;
use uuid::Uuid;
use weir_meta::{
    Applied, BrokerInfo, Command, Controller, ControllerConfig, ControllerError, HeartbeatReply,
    MetaError, MetadataImage, PeerAuthorization, Role, SubmitError,
};

/// The longest any single wait may take.
const WAIT: Duration = Duration::from_secs(20);

/// Short Raft timings; broker sessions long enough that brokers which
/// never heartbeat are not fenced during a test.
fn config() -> ControllerConfig {
    ControllerConfig {
        heartbeat_interval: Duration::from_millis(150),
        election_timeout_min: Duration::from_millis(600),
        election_timeout_max: Duration::from_millis(1200),
        rpc_timeout: Duration::from_secs(2),
        snapshot_every: 8,
        logs_to_keep: 2,
        submit_timeout: Duration::from_secs(10),
        broker_session_timeout: Duration::from_secs(3600),
        leader_imbalance_check_interval: None,
        ..ControllerConfig::default()
    }
}

/// `config` with short broker sessions and frequent preferred leader
/// elections, for the tests of fencing.
fn membership_config() -> ControllerConfig {
    ControllerConfig {
        broker_session_timeout: SESSION,
        leader_imbalance_check_interval: Some(Duration::from_secs(1)),
        ..config()
    }
}

/// The broker session timeout of `membership_config`.
const SESSION: Duration = Duration::from_secs(2);

fn incarnation(id: i32) -> Uuid {
    Uuid::from_u128(1000 + id as u128)
}

fn broker(id: i32) -> Command {
    Command::RegisterBroker(BrokerInfo {
        id,
        host: format!("broker-{id}"),
        port: 9092,
        rack: None,
        incarnation: incarnation(id),
        previous_incarnation: None,
        listeners: Vec::new(),
    })
}

struct Node {
    id: u64,
    dir: PathBuf,
    addr: SocketAddr,
    controller: Option<Controller>,
}

struct Cluster {
    _tmp: TempDir,
    config: ControllerConfig,
    voters: Vec<(u64, SocketAddr)>,
    nodes: Vec<Node>,
}

impl Cluster {
    /// Starts voters `1..=n`, in reverse id order (the initializer last).
    async fn start(n: u64) -> Cluster {
        Self::start_with(n, config()).await
    }

    /// `start` with these settings.
    async fn start_with(n: u64, config: ControllerConfig) -> Cluster {
        let order: Vec<u64> = (1..=n).rev().collect();
        Self::start_in_order_with(&order, Duration::ZERO, config).await
    }

    /// Starts voters `1..=order.len()` in this order, pausing between
    /// starts.
    async fn start_in_order(order: &[u64], pause: Duration) -> Cluster {
        Self::start_in_order_with(order, pause, config()).await
    }

    async fn start_in_order_with(
        order: &[u64],
        pause: Duration,
        config: ControllerConfig,
    ) -> Cluster {
        let n = order.len() as u64;
        // RUST_LOG=info (or debug) shows what the controllers do.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let tmp = tempfile::tempdir().unwrap();
        let mut listeners = Vec::new();
        for id in 1..=n {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            listeners.push((id, listener));
        }
        let voters: Vec<(u64, SocketAddr)> = listeners
            .iter()
            .map(|(id, l)| (*id, l.local_addr().unwrap()))
            .collect();
        let mut nodes = Vec::new();
        let mut listeners: std::collections::BTreeMap<u64, TcpListener> =
            listeners.into_iter().collect();
        for id in order {
            let (id, listener) = (*id, listeners.remove(id).unwrap());
            tokio::time::sleep(pause).await;
            let dir = tmp.path().join(format!("controller-{id}"));
            let addr = listener.local_addr().unwrap();
            let controller = Controller::start_on(config.clone(), id, &dir, listener, &voters)
                .await
                .unwrap();
            nodes.push(Node {
                id,
                dir,
                addr,
                controller: Some(controller),
            });
        }
        nodes.sort_by_key(|n| n.id);
        Cluster {
            _tmp: tmp,
            config,
            voters,
            nodes,
        }
    }

    fn node(&self, id: u64) -> &Controller {
        self.nodes[(id - 1) as usize]
            .controller
            .as_ref()
            .expect("node is running")
    }

    fn running(&self) -> impl Iterator<Item = &Controller> {
        self.nodes.iter().filter_map(|n| n.controller.as_ref())
    }

    async fn stop(&mut self, id: u64) {
        let controller = self.nodes[(id - 1) as usize].controller.take().unwrap();
        controller.shutdown().await.unwrap();
    }

    /// Restarts a stopped node on its old address and directory.
    async fn restart(&mut self, id: u64) {
        let node = &self.nodes[(id - 1) as usize];
        let (dir, addr) = (node.dir.clone(), node.addr);
        let deadline = tokio::time::Instant::now() + WAIT;
        let controller = loop {
            match Controller::start_with(self.config.clone(), id, &dir, addr, &self.voters).await {
                Ok(c) => break c,
                Err(e) if tokio::time::Instant::now() < deadline => {
                    eprintln!("restart of {id} failed, retrying: {e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("restart of {id} failed: {e}"),
            }
        };
        self.nodes[(id - 1) as usize].controller = Some(controller);
    }

    /// Starts learner `id` (the next id after the voters and earlier
    /// learners) on a fresh port, or restarts it on its directory and a
    /// new port. Returns once it has joined and caught up.
    async fn start_learner(&mut self, id: u64) -> &Controller {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let dir = self._tmp.path().join(format!("controller-{id}"));
        let controller =
            Controller::start_learner(self.config.clone(), id, &dir, listener, &self.voters)
                .await
                .unwrap();
        let node = Node {
            id,
            dir,
            addr,
            controller: Some(controller),
        };
        let at = (id - 1) as usize;
        if at == self.nodes.len() {
            self.nodes.push(node);
        } else {
            assert!(self.nodes[at].controller.is_none(), "{id} is running");
            assert_eq!(self.nodes[at].id, id);
            self.nodes[at] = node;
        }
        self.node(id)
    }

    /// Waits until every running node names the same leader, and that
    /// leader says it leads.
    async fn wait_leader(&self) -> u64 {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let leaders: Vec<Option<u64>> = self.running().map(|c| c.status().leader_id).collect();
            if let Some(Some(leader)) = leaders.first() {
                let agreed = leaders.iter().all(|l| *l == Some(*leader));
                let running = self.nodes[(*leader - 1) as usize].controller.as_ref();
                if agreed && running.is_some_and(|c| c.status().role == Role::Leader) {
                    return *leader;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no agreed leader within {WAIT:?}: {leaders:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Submits to the current leader, retrying while leadership moves.
    /// Only for idempotent commands (a timed-out attempt may have applied).
    async fn submit(&self, cmd: Command) -> Result<Applied, MetaError> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let leader = self.wait_leader().await;
            match self.node(leader).submit(cmd.clone()).await {
                Ok(applied) => return Ok(applied),
                Err(SubmitError::Rejected(e)) => return Err(e),
                Err(e) => {
                    assert!(e.is_retriable());
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "submit kept failing: {e}"
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
}

/// Waits until the controller's image satisfies `pred`.
async fn wait_image(c: &Controller, what: &str, pred: impl Fn(&MetadataImage) -> bool) {
    let mut rx = c.image();
    let waited = tokio::time::timeout(WAIT, rx.wait_for(|image| pred(image))).await;
    assert!(
        matches!(waited, Ok(Ok(_))),
        "controller {}: {what} not seen within {WAIT:?}; status {:?}",
        c.node_id(),
        c.status()
    );
}

fn broker_count(image: &MetadataImage) -> usize {
    image.brokers().count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_voter_elects_itself_and_applies_commands() {
    let cluster = Cluster::start(1).await;
    assert_eq!(cluster.wait_leader().await, 1);
    let c = cluster.node(1);
    assert_eq!(c.submit(broker(7)).await.unwrap(), Applied::Done);
    assert_eq!(
        c.submit(Command::AllocateProducerIds { count: 10 })
            .await
            .unwrap(),
        Applied::ProducerIds {
            first: 0,
            count: 10
        }
    );
    let image = c.image().borrow().clone();
    assert_eq!(image.broker(7).unwrap().host, "broker-7");
    assert_eq!(image.next_producer_id(), 10);
    assert_eq!(image.applied_index(), 2);

    let status = c.status();
    assert_eq!(status.role, Role::Leader);
    assert_eq!(status.leader_id, Some(1));
    assert!(status.term >= 1);
    assert_eq!(status.voters, vec![(1, cluster.voters[0].1.to_string())]);
    assert!(status.applied_index >= Some(2));
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_voters_elect_one_leader_and_replicate_to_every_image() {
    let cluster = Cluster::start(3).await;
    let leader = cluster.wait_leader().await;
    for id in 1..=5 {
        cluster.submit(broker(id)).await.unwrap();
    }
    for c in cluster.running() {
        wait_image(c, "5 brokers", |i| broker_count(i) == 5).await;
    }
    let images: Vec<MetadataImage> = cluster
        .running()
        .map(|c| (**c.image().borrow()).clone())
        .collect();
    assert!(images.windows(2).all(|w| w[0] == w[1]));
    for c in cluster.running() {
        let status = c.status();
        let voters: Vec<u64> = status.voters.iter().map(|(id, _)| *id).collect();
        assert_eq!(voters, vec![1, 2, 3]);
        if status.node_id != leader {
            assert_ne!(status.role, Role::Leader);
        }
    }
    for c in cluster.running() {
        c.shutdown().await.unwrap();
    }
}

/// One broker heartbeat written on a fresh connection to `addr`, as raw
/// controller RPC; the bytes that come back before the peer closes or goes
/// quiet.
async fn raw_heartbeat(addr: SocketAddr) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body =
        br#"{"Heartbeat":{"broker_id":7,"incarnation":"00000000-0000-0000-0000-000000000000"}}"#;
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(body);
    let _ = stream.write_all(&frame).await;
    let mut answer = vec![0u8; 4096];
    match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut answer)).await {
        Ok(Ok(n)) => answer[..n].to_vec(),
        _ => Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_authorizer_only_peers_with_cluster_action_are_served() {
    // Every peer of a plaintext link is anonymous: as a super user it is
    // served, and the voters elect and forward as usual.
    let allowed = ControllerConfig {
        peer_authorization: Some(PeerAuthorization {
            super_users: vec!["User:ANONYMOUS".to_owned()],
            allow_everyone_if_no_acl_found: false,
        }),
        ..config()
    };
    let cluster = Cluster::start_with(3, allowed).await;
    let leader = cluster.wait_leader().await;
    let follower = cluster.running().find(|c| c.node_id() != leader).unwrap();
    assert_eq!(follower.submit(broker(1)).await.unwrap(), Applied::Done);
    assert!(!raw_heartbeat(cluster.nodes[0].addr).await.is_empty());
    for c in cluster.running() {
        c.shutdown().await.unwrap();
    }
    // Without ClusterAction (no ACL, nobody super): closed unanswered.
    let refused = ControllerConfig {
        peer_authorization: Some(PeerAuthorization::default()),
        ..config()
    };
    let cluster = Cluster::start_with(1, refused).await;
    cluster.wait_leader().await;
    assert_eq!(raw_heartbeat(cluster.nodes[0].addr).await, Vec::<u8>::new());
    cluster.node(1).shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_voters_start_in_any_order() {
    for order in [[1, 2, 3], [2, 1, 3]] {
        let cluster = Cluster::start_in_order(&order, Duration::from_millis(700)).await;
        cluster.submit(broker(1)).await.unwrap();
        for c in cluster.running() {
            wait_image(c, "broker 1", |i| broker_count(i) == 1).await;
        }
        for c in cluster.running() {
            c.shutdown().await.unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_on_a_follower_is_forwarded_and_visible_there_on_return() {
    let cluster = Cluster::start(3).await;
    let leader = cluster.wait_leader().await;
    assert!(cluster.node(leader).is_leader());
    let follower = cluster.running().find(|c| c.node_id() != leader).unwrap();
    assert!(!follower.is_leader());
    for id in 1..=5 {
        assert_eq!(follower.submit(broker(id)).await.unwrap(), Applied::Done);
        // No waiting: the follower applied it before answering.
        assert!(
            follower.image().borrow().broker(id).is_some(),
            "broker {id} not in the follower's image"
        );
    }
    assert_eq!(
        follower
            .submit(Command::AllocateProducerIds { count: 10 })
            .await
            .unwrap(),
        Applied::ProducerIds {
            first: 0,
            count: 10
        }
    );
    assert_eq!(follower.image().borrow().next_producer_id(), 10);
    // Exactly once: the leader's image agrees.
    let leader = cluster.node(leader);
    wait_image(leader, "5 brokers", |i| broker_count(i) == 5).await;
    assert_eq!(leader.image().borrow().next_producer_id(), 10);
    assert_eq!(leader.image().borrow().applied_index(), 6);
    for c in cluster.running() {
        c.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_rejection_keeps_its_error_code_and_message() {
    let cluster = Cluster::start(3).await;
    let leader = cluster.wait_leader().await;
    let follower = cluster.running().find(|c| c.node_id() != leader).unwrap();
    follower.submit(broker(1)).await.unwrap();
    let before = follower.image().borrow().clone();

    let table: Vec<(Command, i16, &str)> =
        vec![
        (
            Command::DeleteTopic {
                name: "missing".into(),
            },
            3,
            "Topic 'missing' does not exist.",
        ),
        (
            Command::CreateTopic {
                name: "orders".into(),
                id: Uuid::from_u128(9),
                partitions: 1,
                replicas: vec![vec![1, 2]],
                configs: Default::default(),
                internal: false,
            },
            39,
            "The manual partition assignment includes broker 2, but no such broker is registered.",
        ),
        (Command::FenceBroker { id: 5 }, 42, "Broker 5 is not registered."),
    ];
    for (cmd, code, message) in table {
        match follower.submit(cmd.clone()).await {
            Err(SubmitError::Rejected(e)) => {
                assert_eq!(e.kafka_error_code(), code, "{cmd:?}: {e}");
                assert_eq!(e.to_string(), message, "{cmd:?}");
            }
            other => panic!("{cmd:?}: want a rejection, got {other:?}"),
        }
    }
    assert_eq!(**follower.image().borrow(), *before);
    for c in cluster.running() {
        c.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_survivor_forwards_to_the_new_leader_after_the_leader_stops() {
    let mut cluster = Cluster::start(3).await;
    cluster.submit(broker(1)).await.unwrap();
    let old = cluster.wait_leader().await;
    cluster.stop(old).await;

    // At once, before any new election: the survivor still names the old
    // leader, finds it gone, and keeps trying until a new one takes it.
    let survivor = cluster.running().next().unwrap();
    let started = tokio::time::Instant::now();
    survivor.submit(broker(2)).await.unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(survivor.image().borrow().broker(2).is_some());
    let new = cluster.wait_leader().await;
    assert_ne!(new, old);
    // Every node first: one stopped early could keep another from
    // learning that the last entry committed.
    for c in cluster.running() {
        wait_image(c, "2 brokers", |i| broker_count(i) == 2).await;
    }
    for c in cluster.running() {
        c.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_on_a_follower_are_answered_by_the_leader() {
    let cluster = Cluster::start(3).await;
    let leader = cluster.wait_leader().await;
    let follower = cluster.running().find(|c| c.node_id() != leader).unwrap();
    cluster.submit(broker(7)).await.unwrap();
    wait_image(follower, "broker 7", |i| i.broker(7).is_some()).await;

    let table = [
        (7, incarnation(7), HeartbeatReply::Alive),
        (7, Uuid::from_u128(1), HeartbeatReply::UnknownBroker),
        (8, incarnation(8), HeartbeatReply::UnknownBroker),
    ];
    for (id, inc, want) in table {
        assert_eq!(
            follower.heartbeat(id, inc).await.unwrap(),
            want,
            "{id} {inc}"
        );
        assert_eq!(cluster.node(leader).heartbeat(id, inc).await.unwrap(), want);
    }
    follower
        .submit(Command::FenceBroker { id: 7 })
        .await
        .unwrap();
    assert_eq!(
        follower.heartbeat(7, incarnation(7)).await.unwrap(),
        HeartbeatReply::Fenced
    );
    // Registering again (the broker's answer to `Fenced`) unfences it.
    follower.submit(broker(7)).await.unwrap();
    assert_eq!(
        follower.heartbeat(7, incarnation(7)).await.unwrap(),
        HeartbeatReply::Alive
    );
    for c in cluster.running() {
        c.shutdown().await.unwrap();
    }
}

/// Heartbeats `live` brokers every 200 ms, through the running controllers
/// in turn (followers included), for at least `at_least` and until `pred`
/// holds on every running controller's image. Every heartbeat must be
/// answered `Alive`: a broker that keeps heartbeating is never fenced.
/// Returns how long it took.
async fn heartbeat_until(
    cluster: &Cluster,
    live: &[i32],
    at_least: Duration,
    what: &str,
    pred: impl Fn(&MetadataImage) -> bool,
) -> Duration {
    let started = tokio::time::Instant::now();
    let controllers: Vec<&Controller> = cluster.running().collect();
    let mut turn = 0;
    loop {
        for &id in live {
            let via = controllers[turn % controllers.len()];
            turn += 1;
            let reply = via.heartbeat(id, incarnation(id)).await.unwrap();
            assert_eq!(
                reply,
                HeartbeatReply::Alive,
                "broker {id} through controller {}",
                via.node_id()
            );
        }
        let elapsed = started.elapsed();
        if elapsed >= at_least && controllers.iter().all(|c| pred(&c.image().borrow())) {
            return elapsed;
        }
        assert!(elapsed < WAIT, "{what} not seen within {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_broker_is_fenced_and_its_leaderships_move() {
    let cluster = Cluster::start_with(3, membership_config()).await;
    let leader = cluster.wait_leader().await;
    let follower = cluster.running().find(|c| c.node_id() != leader).unwrap();
    for id in 1..=3 {
        follower.submit(broker(id)).await.unwrap();
    }
    let replicas = follower
        .image()
        .borrow()
        .assign_replicas(0, 3, 3, 0)
        .unwrap();
    follower
        .submit(Command::CreateTopic {
            name: "t".into(),
            id: Uuid::from_u128(1),
            partitions: 3,
            replicas,
            configs: Default::default(),
            internal: false,
        })
        .await
        .unwrap();
    let p0 = |image: &MetadataImage| image.topic("t").unwrap().partitions[0].clone();
    let before = p0(&follower.image().borrow());
    let silent = before.leader;
    let others: Vec<i32> = (1..=3).filter(|id| *id != silent).collect();

    // Heartbeating brokers stay live for several sessions.
    heartbeat_until(&cluster, &[1, 2, 3], 2 * SESSION, "two sessions", |i| {
        i.fenced_brokers().count() == 0
    })
    .await;

    // One goes silent: fenced after a session, and partition 0, which it
    // led, gets a new leader from its ISR.
    let took = heartbeat_until(&cluster, &others, Duration::ZERO, "the fence", |i| {
        let p = p0(i);
        i.is_fenced(silent) && p.leader != silent && p.leader != -1
    })
    .await;
    let tick = SESSION / 8;
    assert!(
        took + Duration::from_millis(500) >= SESSION,
        "fenced after {took:?}, before the session of {SESSION:?} ended"
    );
    assert!(
        took <= SESSION + tick + Duration::from_secs(3),
        "fenced only after {took:?}"
    );
    let image = follower.image().borrow().clone();
    let after = p0(&image);
    assert!(others.contains(&after.leader), "{after:?}");
    assert!(after.leader_epoch > before.leader_epoch, "{after:?}");
    assert!(after.partition_epoch > before.partition_epoch, "{after:?}");
    assert!(!after.isr.contains(&silent), "{after:?}");
    assert_eq!(image.partitions_led_by(silent), 0);
    assert_eq!(image.live_brokers().count(), 2);
    assert_eq!(
        follower
            .heartbeat(silent, incarnation(silent))
            .await
            .unwrap(),
        HeartbeatReply::Fenced
    );

    // It comes back: registering unfences it, its leader puts it back in
    // the ISR once caught up, and the periodic preferred leader election
    // gives partition 0 back to it.
    follower.submit(broker(silent)).await.unwrap();
    let now = p0(&follower.image().borrow());
    let mut isr = now.isr.clone();
    isr.push(silent);
    follower
        .submit(Command::AlterPartition {
            topic: "t".into(),
            partition: 0,
            leader: now.leader,
            leader_epoch: now.leader_epoch,
            partition_epoch: now.partition_epoch,
            isr,
        })
        .await
        .unwrap();
    heartbeat_until(
        &cluster,
        &[1, 2, 3],
        Duration::ZERO,
        "leadership back",
        |i| {
            let p = p0(i);
            p.leader == silent && p.isr.len() == 3 && i.preferred_leader_imbalance() == 0
        },
    )
    .await;
    let back = p0(&follower.image().borrow());
    assert!(back.leader_epoch > after.leader_epoch, "{back:?}");
    for c in cluster.running() {
        c.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_command_returns_its_error_and_changes_nothing() {
    let cluster = Cluster::start(3).await;
    cluster.submit(broker(1)).await.unwrap();
    let leader = cluster.node(cluster.wait_leader().await);
    wait_image(leader, "broker 1", |i| broker_count(i) == 1).await;
    let before = leader.image().borrow().clone();

    let err = cluster
        .submit(Command::DeleteTopic {
            name: "missing".into(),
        })
        .await
        .unwrap_err();
    assert!(matches!(err, MetaError::UnknownTopic(ref n) if n == "missing"));
    assert_eq!(err.kafka_error_code(), 3);
    assert_eq!(err.to_string(), "Topic 'missing' does not exist.");

    // Two partitions, the second on an unregistered broker: neither is
    // created.
    let err = cluster
        .submit(Command::CreateTopic {
            name: "orders".into(),
            id: uuid::Uuid::from_u128(9),
            partitions: 2,
            replicas: vec![vec![1], vec![2]],
            configs: Default::default(),
            internal: false,
        })
        .await
        .unwrap_err();
    assert_eq!(err.kafka_error_code(), 39, "{err}");
    let leader = cluster.node(cluster.wait_leader().await);
    assert_eq!(*leader.image().borrow().as_ref(), *before.as_ref());

    // The quorum goes on: a valid command after the rejected ones applies
    // on every node, and no node applied the rejected ones.
    cluster
        .submit(Command::CreateTopic {
            name: "orders".into(),
            id: uuid::Uuid::from_u128(9),
            partitions: 1,
            replicas: vec![vec![1]],
            configs: Default::default(),
            internal: false,
        })
        .await
        .unwrap();
    for c in cluster.running() {
        wait_image(c, "topic orders", |i| i.topic("orders").is_some()).await;
        let image = c.image().borrow().clone();
        assert_eq!(image.topic("orders").unwrap().partitions.len(), 1);
        assert_eq!(image.applied_index(), before.applied_index() + 1);
    }
    for c in cluster.running() {
        c.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_leader_elects_another_and_keeps_earlier_commits() {
    let mut cluster = Cluster::start(3).await;
    for id in 1..=3 {
        cluster.submit(broker(id)).await.unwrap();
    }
    let old = cluster.wait_leader().await;
    cluster.stop(old).await;

    let new = cluster.wait_leader().await;
    assert_ne!(new, old);
    let c = cluster.node(new);
    wait_image(c, "3 brokers", |i| broker_count(i) == 3).await;
    cluster.submit(broker(4)).await.unwrap();
    for c in cluster.running() {
        wait_image(c, "4 brokers", |i| broker_count(i) == 4).await;
    }

    // The old leader comes back as a follower and catches up.
    cluster.restart(old).await;
    wait_image(cluster.node(old), "4 brokers", |i| broker_count(i) == 4).await;
    for c in cluster.running() {
        c.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_follower_recovers_from_disk_and_catches_up() {
    let mut cluster = Cluster::start(3).await;
    for id in 1..=20 {
        cluster.submit(broker(id)).await.unwrap();
    }
    let leader = cluster.wait_leader().await;
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    {
        let c = cluster.node(follower);
        wait_image(c, "20 brokers", |i| broker_count(i) == 20).await;
        let deadline = tokio::time::Instant::now() + WAIT;
        while c.status().snapshot_index.is_none() {
            assert!(tokio::time::Instant::now() < deadline, "no snapshot built");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    cluster.stop(follower).await;

    // Enough commands while it is away that the leader snapshots and
    // purges past its log end.
    for id in 21..=40 {
        cluster.submit(broker(id)).await.unwrap();
    }

    cluster.restart(follower).await;
    let c = cluster.node(follower);
    // The snapshot on disk is loaded before anything is replicated.
    assert!(broker_count(&c.image().borrow()) > 0);
    wait_image(c, "40 brokers", |i| broker_count(i) == 40).await;
    let leader = cluster.node(cluster.wait_leader().await);
    wait_image(leader, "40 brokers", |i| broker_count(i) == 40).await;
    assert_eq!(
        *c.image().borrow().as_ref(),
        *leader.image().borrow().as_ref()
    );
    for c in cluster.running() {
        c.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_single_voter_recovers_everything_from_disk() {
    let mut cluster = Cluster::start(1).await;
    let mut expected_ids = 0;
    for id in 1..=19 {
        cluster.submit(broker(id)).await.unwrap();
    }
    let c = cluster.node(1);
    assert_eq!(
        c.submit(Command::AllocateProducerIds { count: 5 })
            .await
            .unwrap(),
        Applied::ProducerIds { first: 0, count: 5 }
    );
    expected_ids += 5;
    let before = (**c.image().borrow()).clone();
    cluster.stop(1).await;

    cluster.restart(1).await;
    // The recorded commit point lets the log after the snapshot be applied
    // at start, before any election.
    assert_eq!(**cluster.node(1).image().borrow(), before);
    assert_eq!(cluster.wait_leader().await, 1);
    let c = cluster.node(1);
    wait_image(c, "the image before the restart", |i| *i == before).await;
    assert_eq!(
        c.submit(Command::AllocateProducerIds { count: 1 })
            .await
            .unwrap(),
        Applied::ProducerIds {
            first: expected_ids,
            count: 1
        }
    );
    c.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_the_controller_port_is_dropped_and_the_quorum_goes_on() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let cluster = Cluster::start(1).await;
    cluster.wait_leader().await;
    let addr = cluster.node(1).local_addr();
    for garbage in [
        &[0xff, 0xff, 0xff, 0xff][..],
        &[0, 0, 0, 5, b'h', b'e', b'l', b'l', b'o'][..],
    ] {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(garbage).await.unwrap();
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(WAIT, stream.read(&mut buf)).await;
        assert!(
            matches!(read, Ok(Ok(0)) | Ok(Err(_))),
            "the connection stays open: {read:?}"
        );
    }
    cluster.submit(broker(1)).await.unwrap();
    cluster.node(1).shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_joins_becomes_a_voter_and_a_voter_leaves() {
    let mut cluster = Cluster::start(3).await;
    cluster.submit(broker(1)).await.unwrap();

    // Node 4 knows the original voters but is not one: it waits.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let dir = cluster._tmp.path().join("controller-4");
    let controller = Controller::start_on(config(), 4, &dir, listener, &cluster.voters)
        .await
        .unwrap();

    let leader = cluster.wait_leader().await;
    cluster.node(leader).add_learner(4, addr).await.unwrap();
    // Only now does node 4 hear of the leader.
    cluster.nodes.push(Node {
        id: 4,
        dir,
        addr,
        controller: Some(controller),
    });
    wait_image(cluster.node(4), "broker 1", |i| broker_count(i) == 1).await;
    assert_eq!(cluster.node(4).status().role, Role::Learner);

    let leader = cluster.wait_leader().await;
    cluster
        .node(leader)
        .change_voters(&[1, 2, 3, 4])
        .await
        .unwrap();
    let gone = (1..=3).find(|id| *id != leader).unwrap();
    let remaining: Vec<u64> = (1..=4).filter(|id| *id != gone).collect();
    cluster
        .node(cluster.wait_leader().await)
        .change_voters(&remaining)
        .await
        .unwrap();
    cluster.stop(gone).await;

    cluster.submit(broker(2)).await.unwrap();
    for c in cluster.running() {
        wait_image(c, "2 brokers", |i| broker_count(i) == 2).await;
    }
    let deadline = tokio::time::Instant::now() + WAIT;
    for c in cluster.running() {
        loop {
            let voters: Vec<u64> = c.status().voters.iter().map(|(id, _)| *id).collect();
            if voters == remaining {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "controller {}: voters {voters:?}",
                c.node_id()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let err = cluster
        .node(cluster.wait_leader().await)
        .change_voters(&[1, 2, 3, 4, 9])
        .await
        .unwrap_err();
    assert!(matches!(err, SubmitError::MembershipChange(_)), "{err}");
    for c in cluster.running() {
        c.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_quorum_restarts_from_disk() {
    let mut cluster = Cluster::start(3).await;
    for id in 1..=12 {
        cluster.submit(broker(id)).await.unwrap();
    }
    for c in cluster.running() {
        wait_image(c, "12 brokers", |i| broker_count(i) == 12).await;
    }
    let before = (**cluster.node(1).image().borrow()).clone();
    for id in 1..=3 {
        cluster.stop(id).await;
    }
    for id in [2, 3, 1] {
        cluster.restart(id).await;
    }
    cluster.wait_leader().await;
    for c in cluster.running() {
        wait_image(c, "the image before the restart", |i| *i == before).await;
    }
    cluster.submit(broker(13)).await.unwrap();
    // Every node first: one stopped early could keep another from
    // learning that the last entry committed.
    for c in cluster.running() {
        wait_image(c, "13 brokers", |i| broker_count(i) == 13).await;
    }
    for c in cluster.running() {
        c.shutdown().await.unwrap();
    }
}

fn voter_ids(c: &Controller) -> Vec<u64> {
    c.status().voters.iter().map(|(id, _)| *id).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_holds_every_command_committed_before_and_after_it_joined() {
    let mut cluster = Cluster::start(3).await;
    // Enough that the leader has snapshotted and purged: the learner
    // starts from a snapshot, then the log.
    for id in 1..=12 {
        cluster.submit(broker(id)).await.unwrap();
    }
    let learner = cluster.start_learner(4).await;
    // No waiting: it returns once caught up.
    assert_eq!(broker_count(&learner.image().borrow()), 12);
    let status = learner.status();
    assert_eq!(status.role, Role::Learner);
    assert_eq!(status.voters.len(), 3);
    assert!(!learner.is_leader());

    for id in 13..=20 {
        cluster.submit(broker(id)).await.unwrap();
    }
    let leader = cluster.node(cluster.wait_leader().await);
    wait_image(leader, "20 brokers", |i| broker_count(i) == 20).await;
    let learner = cluster.node(4);
    wait_image(learner, "20 brokers", |i| broker_count(i) == 20).await;
    assert_eq!(
        *learner.image().borrow().as_ref(),
        *leader.image().borrow().as_ref()
    );
    // Joining never made it a voter.
    for c in cluster.running() {
        assert_eq!(voter_ids(c), vec![1, 2, 3], "controller {}", c.node_id());
    }
    assert_eq!(cluster.node(4).status().role, Role::Learner);
    for c in cluster.running() {
        c.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submit_and_a_heartbeat_on_a_learner_go_to_the_leader() {
    let mut cluster = Cluster::start(3).await;
    cluster.wait_leader().await;
    let learner = cluster.start_learner(4).await;
    for id in 1..=3 {
        assert_eq!(learner.submit(broker(id)).await.unwrap(), Applied::Done);
        // Applied here before the answer.
        assert!(learner.image().borrow().broker(id).is_some());
    }
    assert_eq!(
        learner
            .submit(Command::AllocateProducerIds { count: 10 })
            .await
            .unwrap(),
        Applied::ProducerIds {
            first: 0,
            count: 10
        }
    );
    match learner.submit(Command::FenceBroker { id: 9 }).await {
        Err(SubmitError::Rejected(e)) => {
            assert_eq!(e.kafka_error_code(), 42);
            assert_eq!(e.to_string(), "Broker 9 is not registered.");
        }
        other => panic!("want a rejection, got {other:?}"),
    }
    assert_eq!(
        learner.heartbeat(1, incarnation(1)).await.unwrap(),
        HeartbeatReply::Alive
    );
    assert_eq!(
        learner.heartbeat(8, incarnation(8)).await.unwrap(),
        HeartbeatReply::UnknownBroker
    );
    let before = learner.image().borrow().clone();
    // Exactly once: the leader holds the same image.
    let leader = cluster.node(cluster.wait_leader().await);
    wait_image(leader, "3 brokers", |i| broker_count(i) == 3).await;
    assert_eq!(*leader.image().borrow().as_ref(), *before);
    assert_eq!(before.applied_index(), 4);
    for c in cluster.running() {
        c.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_learner_catches_up_on_a_new_address() {
    let mut cluster = Cluster::start(3).await;
    cluster.submit(broker(1)).await.unwrap();
    let old_addr = cluster.start_learner(4).await.local_addr();
    cluster.stop(4).await;

    // While it is away, enough commands that the leader purges past the
    // learner's log end.
    for id in 2..=20 {
        cluster.submit(broker(id)).await.unwrap();
    }
    // Hold the old port so the kernel cannot hand it out again: the
    // learner must come back on a different address.
    let _old_port_taken = TcpListener::bind(old_addr).await.unwrap();
    let learner = cluster.start_learner(4).await;
    assert_ne!(learner.local_addr(), old_addr);
    assert_eq!(broker_count(&learner.image().borrow()), 20);
    assert_eq!(learner.status().role, Role::Learner);
    // The leader replicates to the new address.
    cluster.submit(broker(21)).await.unwrap();
    wait_image(cluster.node(4), "21 brokers", |i| broker_count(i) == 21).await;

    // Restarting on the same address joins again at once: the learner is
    // re-added as it is.
    let addr = cluster.node(4).local_addr();
    cluster.stop(4).await;
    let listener = TcpListener::bind(addr).await.unwrap();
    let started = tokio::time::Instant::now();
    let learner = Controller::start_learner(
        cluster.config.clone(),
        4,
        &cluster.nodes[3].dir,
        listener,
        &cluster.voters,
    )
    .await
    .unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(broker_count(&learner.image().borrow()), 21);
    cluster.nodes[3].controller = Some(learner);
    cluster.submit(broker(22)).await.unwrap();
    wait_image(cluster.node(4), "22 brokers", |i| broker_count(i) == 22).await;
    for c in cluster.running() {
        assert_eq!(voter_ids(c), vec![1, 2, 3], "controller {}", c.node_id());
        c.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_follows_the_new_leader_when_the_leader_stops() {
    let mut cluster = Cluster::start(3).await;
    cluster.submit(broker(1)).await.unwrap();
    cluster.start_learner(4).await;
    let old = cluster.wait_leader().await;
    cluster.stop(old).await;

    let survivor = (1..=3).find(|id| *id != old).unwrap();
    cluster.node(survivor).submit(broker(2)).await.unwrap();
    wait_image(cluster.node(4), "broker 2", |i| i.broker(2).is_some()).await;
    // The learner names the new leader, and its commands reach it.
    let new = cluster.wait_leader().await;
    assert_ne!(new, old);
    assert_eq!(cluster.node(4).status().leader_id, Some(new));
    cluster.node(4).submit(broker(3)).await.unwrap();
    for c in cluster.running() {
        wait_image(c, "3 brokers", |i| broker_count(i) == 3).await;
    }
    assert_eq!(cluster.node(4).status().role, Role::Learner);
    for c in cluster.running() {
        c.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_that_is_a_voter_or_unreachable_is_refused() {
    let cluster = Cluster::start(3).await;
    cluster.submit(broker(1)).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();

    // In its own voter list: refused before anything is opened.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dir = tmp.path().join("as-voter-2");
    let err = Controller::start_learner(config(), 2, &dir, listener, &cluster.voters)
        .await
        .unwrap_err();
    assert!(matches!(err, ControllerError::Config(_)), "{err}");
    assert!(err.to_string().contains("voter list"), "{err}");
    assert!(!dir.exists());

    // A voter of the running quorum, left out of the list it was given:
    // the leader refuses, and the voter stays one.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dir = tmp.path().join("as-voter-3");
    let err = Controller::start_learner(config(), 3, &dir, listener, &cluster.voters[..2])
        .await
        .unwrap_err();
    assert!(matches!(err, ControllerError::Config(_)), "{err}");
    assert!(err.to_string().contains("is a voter"), "{err}");

    // A wildcard address cannot be replicated to.
    let listener = TcpListener::bind("0.0.0.0:0").await.unwrap();
    let dir = tmp.path().join("wildcard");
    let err = Controller::start_learner(config(), 4, &dir, listener, &cluster.voters)
        .await
        .unwrap_err();
    assert!(matches!(err, ControllerError::Config(_)), "{err}");
    assert!(err.to_string().contains("--controller-listen"), "{err}");

    cluster.submit(broker(2)).await.unwrap();
    for c in cluster.running() {
        wait_image(c, "2 brokers", |i| broker_count(i) == 2).await;
        assert_eq!(voter_ids(c), vec![1, 2, 3], "controller {}", c.node_id());
        assert_ne!(c.status().role, Role::Learner);
    }
    for c in cluster.running() {
        c.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_with_no_voter_answering_gives_up_naming_them() {
    let tmp = tempfile::tempdir().unwrap();
    let mut voters = Vec::new();
    for id in 1..=2 {
        // Bound, then closed: nobody listens there.
        let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
        voters.push((id, closed.local_addr().unwrap()));
    }
    let config = ControllerConfig {
        submit_timeout: Duration::from_secs(1),
        ..config()
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let started = tokio::time::Instant::now();
    let err = Controller::start_learner(config, 4, &tmp.path().join("learner"), listener, &voters)
        .await
        .unwrap_err();
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert!(matches!(err, ControllerError::Raft(_)), "{err}");
    let message = err.to_string();
    for (_, voter) in &voters {
        assert!(message.contains(&voter.to_string()), "{message}");
    }
    // It shut down: its listener is free again.
    TcpListener::bind(addr).await.unwrap();
}
