//! The controller quorum: the [`MetadataImage`] replicated by Raft
//! (openraft), behind a small handle, [`Controller`].
//!
//! Files, all in the controller's directory: `raft.log` (entries),
//! `raft.state` (vote, purge point), `raft.committed` (the last commit
//! point, a hint), `raft.snapshot` (the last snapshot).
//! The modules:
//!
//! - `types`: the openraft type configuration and the result of an apply;
//! - `log_store`: the durable Raft log;
//! - `state_machine`: applies entries to the image, builds and installs
//!   snapshots;
//! - `network` and `server`: controller RPC over TCP, secured by a
//!   `transport`;
//! - `forward`: commands and broker heartbeats sent on to the leader;
//! - `leader`: what the active controller does: proposing, broker
//!   sessions, admitting learners, fencing silent brokers, restoring
//!   preferred leaders.
//!
//! A node is a voter ([`Controller::start_on`]) or a learner
//! ([`Controller::start_learner`]), which replicates the log and applies
//! it to its image without voting.
//!
//! Nothing outside this module names an openraft type.

mod forward;
mod leader;
mod log_store;
mod network;
mod peer_health;
mod permission;
mod sasl;
mod server;
mod state_machine;
mod transport;
mod types;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{ClientWriteError, InitializeError, RaftError};
use openraft::{ServerState, SnapshotPolicy};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, info};

use crate::command::{Applied, Command};
use crate::error::MetaError;
use crate::image::MetadataImage;

use self::forward::{CallError, Forwarder, HeartbeatAttempt};
use self::leader::Shared;
use self::log_store::LogStore;
use self::network::{Network, RpcRequest, RpcResponse};
pub use self::sasl::ControllerSasl;
use self::state_machine::StateMachine;
pub use self::transport::{
    ControllerIo, ControllerStream, ControllerTransport, Handshake, PeerAuthorization, Plaintext,
    ANONYMOUS,
};
pub(crate) use self::types::Rejection;
use self::types::{ControllerNode, JoinOutcome, WriteOutcome};

/// How long a forwarded call waits before trying again when no leader is
/// known or the one it tried was not (or no longer) the leader.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Timing and snapshot settings of a [`Controller`].
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// How often the leader sends heartbeats; also the time a follower has
    /// to answer one `append_entries`.
    pub heartbeat_interval: Duration,
    /// A follower that hears from no leader for a random time between
    /// `election_timeout_min` and `election_timeout_max` starts an
    /// election. The minimum must exceed the heartbeat interval.
    pub election_timeout_min: Duration,
    /// See `election_timeout_min`.
    pub election_timeout_max: Duration,
    /// How long connecting to a peer, sending a snapshot chunk, or reading
    /// the rest of a started frame may take.
    pub rpc_timeout: Duration,
    /// Build a snapshot once this many entries were applied since the
    /// last one (0: never).
    pub snapshot_every: u64,
    /// How many entries before a snapshot stay in the log, so that a
    /// follower slightly behind catches up from the log rather than from a
    /// snapshot.
    pub logs_to_keep: u64,
    /// How long [`Controller::submit`] waits for its command to be
    /// committed and applied (finding the leader included), and
    /// [`Controller::heartbeat`] for an answer.
    pub submit_timeout: Duration,
    /// A broker that has not heartbeated to the active controller for this
    /// long is fenced (Kafka's `broker.session.timeout.ms`).
    pub broker_session_timeout: Duration,
    /// How often the active controller moves leadership back to preferred
    /// replicas when some partition is led by another replica (Kafka's
    /// `leader.imbalance.check.interval.seconds`); `None` never does
    /// (`auto.leader.rebalance.enable=false`).
    pub leader_imbalance_check_interval: Option<Duration>,
    /// How connections between controllers, and from brokers to them, are
    /// secured; the same on every node.
    pub transport: Arc<dyn ControllerTransport>,
    /// When an authorizer is on: each request is authorized against the
    /// peer's principal (Raft and the broker lifecycle need
    /// `ClusterAction`; a metadata change what the same change needs
    /// through the Kafka API).
    pub peer_authorization: Option<PeerAuthorization>,
    /// Cut off peers that prove no identity (set when the Kafka listeners
    /// authenticate their clients).
    pub refuse_anonymous: bool,
    /// SCRAM on every controller connection, over `transport`.
    pub sasl: Option<ControllerSasl>,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            heartbeat_interval: Duration::from_millis(250),
            election_timeout_min: Duration::from_millis(1000),
            election_timeout_max: Duration::from_millis(2000),
            rpc_timeout: Duration::from_secs(2),
            snapshot_every: 1000,
            logs_to_keep: 100,
            submit_timeout: Duration::from_secs(10),
            broker_session_timeout: Duration::from_secs(9),
            leader_imbalance_check_interval: Some(Duration::from_secs(300)),
            transport: Arc::new(Plaintext),
            peer_authorization: None,
            refuse_anonymous: false,
            sasl: None,
        }
    }
}

impl ControllerConfig {
    /// Checks the settings of this crate, then builds openraft's (which
    /// checks its own).
    fn to_openraft(&self) -> Result<openraft::Config, ControllerError> {
        if self.broker_session_timeout.is_zero() {
            return Err(ControllerError::Config(
                "the broker session timeout must be positive".to_owned(),
            ));
        }
        if self.leader_imbalance_check_interval == Some(Duration::ZERO) {
            return Err(ControllerError::Config(
                "the leader imbalance check interval must be positive".to_owned(),
            ));
        }
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let config = openraft::Config {
            cluster_name: "weir".to_owned(),
            heartbeat_interval: ms(self.heartbeat_interval),
            election_timeout_min: ms(self.election_timeout_min),
            election_timeout_max: ms(self.election_timeout_max),
            install_snapshot_timeout: ms(self.rpc_timeout),
            snapshot_policy: if self.snapshot_every == 0 {
                SnapshotPolicy::Never
            } else {
                SnapshotPolicy::LogsSinceLast(self.snapshot_every)
            },
            max_in_snapshot_log_to_keep: self.logs_to_keep,
            snapshot_max_chunk_size: 1 << 20,
            ..openraft::Config::default()
        };
        config
            .validate()
            .map_err(|e| ControllerError::Config(e.to_string()))
    }
}

/// Why a controller could not start or stop.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControllerError {
    /// The files in the controller's directory could not be read or
    /// written, or are damaged.
    #[error(transparent)]
    Storage(#[from] MetaError),
    /// The controller listener could not be bound.
    #[error("cannot listen for controller connections on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The settings or the voter list are invalid.
    #[error("invalid controller settings: {0}")]
    Config(String),
    /// Raft itself failed (a storage failure stops it).
    #[error("the controller quorum failed: {0}")]
    Raft(String),
    /// The controller's directory is in use by another node.
    #[error(transparent)]
    Locked(#[from] crate::DirLockError),
}

/// Why [`Controller::submit`] did not apply a command (or another call on
/// the quorum failed).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SubmitError {
    /// This controller is not the leader, for the calls only the leader
    /// takes ([`Controller::add_learner`], [`Controller::change_voters`]);
    /// the leader's id and controller address, when known. Nothing was
    /// proposed.
    #[error("this controller is not the leader{}", match leader {
        Some((id, addr)) => format!("; the leader is controller {id} at {addr}"),
        None => "; no leader is known".to_owned(),
    })]
    NotLeader {
        /// The leader's node id and controller address (`host:port`).
        leader: Option<(u64, String)>,
    },
    /// The command was committed but failed validation: the image is
    /// unchanged. The error carries the Kafka code and message.
    #[error(transparent)]
    Rejected(MetaError),
    /// A membership change that cannot be made (a voter that is not a
    /// member, another change still in progress, ...).
    #[error("the controller membership cannot be changed: {0}")]
    MembershipChange(String),
    /// The quorum is not working (shut down, or storage failed), or the
    /// connection to the leader failed after a command was forwarded: the
    /// command may or may not be applied.
    #[error("the controller quorum is unavailable: {0}")]
    Unavailable(String),
    /// No leader could be reached within the submit timeout (none elected,
    /// or none answering). Nothing was proposed.
    #[error("no controller leader could be reached within {0:?}; nothing was proposed")]
    NoLeader(Duration),
    /// No answer within the submit timeout (no quorum reachable, say). The
    /// command may still be applied later: the outcome is unknown.
    #[error(
        "no answer from the controller quorum within {0:?}; the command may or may not be applied"
    )]
    Timeout(Duration),
}

impl SubmitError {
    /// True when trying again (perhaps on the leader) may succeed.
    pub fn is_retriable(&self) -> bool {
        !matches!(
            self,
            SubmitError::Rejected(_) | SubmitError::MembershipChange(_)
        )
    }
}

/// What the active controller answered to a broker heartbeat.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeartbeatReply {
    /// The broker is registered with this incarnation and not fenced; its
    /// session is renewed.
    Alive,
    /// The broker is registered with this incarnation but fenced (it
    /// missed heartbeats, or shut down): it must register again.
    Fenced,
    /// No broker with this id is registered, or it registered with another
    /// incarnation (an older or newer process): it must register again.
    UnknownBroker,
}

/// The role of a controller in the quorum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Accepts commands and replicates them.
    Leader,
    /// A voter that follows the leader.
    Follower,
    /// A voter asking for votes.
    Candidate,
    /// Replicates the log without voting (not yet, or no longer, a voter).
    Learner,
    /// Stopped.
    Shutdown,
}

/// A snapshot of a controller's view of the quorum.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerStatus {
    /// This controller's node id.
    pub node_id: u64,
    /// Its role.
    pub role: Role,
    /// The leader it knows of.
    pub leader_id: Option<u64>,
    /// The current Raft term.
    pub term: u64,
    /// The index of the last entry in its log.
    pub last_log_index: Option<u64>,
    /// The index of the last entry applied to its image (committed entries
    /// are applied as soon as they are known to be committed).
    pub applied_index: Option<u64>,
    /// The last entry covered by its latest snapshot.
    pub snapshot_index: Option<u64>,
    /// The voters and their controller addresses.
    pub voters: Vec<(u64, String)>,
}

/// One member of the controller quorum, a voter or a learner: its Raft
/// node, its controller listener, and the metadata image it has applied.
///
/// Commands and broker heartbeats may be given to any member: one that is
/// not the leader (a learner included) sends them on to the leader. While a member is the leader
/// it also fences brokers that stop heartbeating and, periodically, moves
/// leadership back to preferred replicas.
///
/// [`Controller::shutdown`] stops it and waits; dropping it without that
/// stops the listener and the background task at once and Raft in the
/// background.
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use weir_meta::{Command, Controller, HeartbeatReply, SubmitError};
///
/// let voters = [(1, "127.0.0.1:9093".parse()?)];
/// let controller =
///     Controller::start(1, "weir-data/controller".as_ref(), voters[0].1, &voters).await?;
/// controller.wait_for_leader(Duration::from_secs(10)).await;
/// match controller.submit(Command::AllocateProducerIds { count: 1000 }).await {
///     Ok(applied) => println!("{applied:?}"),
///     Err(SubmitError::Rejected(e)) => println!("{} {e}", e.kafka_error_code()),
///     Err(e) => println!("retry later: {e}"),
/// }
/// let incarnation = uuid::Uuid::from_u128(42);
/// if controller.heartbeat(1, incarnation).await? != HeartbeatReply::Alive {
///     println!("register broker 1 again");
/// }
/// let image = controller.image().borrow().clone();
/// println!("{} topics", image.topic_count());
/// controller.shutdown().await?;
/// # Ok(())
/// # }
/// ```
pub struct Controller {
    node_id: u64,
    shared: Arc<Shared>,
    forwarder: Forwarder,
    /// How long one forwarded heartbeat may wait for its answer before
    /// the leader is looked up again (see [`heartbeat_attempt_timeout`]).
    heartbeat_attempt_timeout: Duration,
    server: Mutex<Option<JoinHandle<()>>>,
    monitor: Mutex<Option<JoinHandle<()>>>,
    stopped: AtomicBool,
    local_addr: SocketAddr,
    /// Held until the controller stops.
    dir_lock: Mutex<Option<crate::DirLock>>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("node_id", &self.node_id)
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

impl Controller {
    /// Starts controller `node_id` with default settings: opens (or
    /// creates) its files in `dir`, listens on `listen_addr`, and joins the
    /// quorum of `voters` (node id, controller address).
    ///
    /// If this node is a voter, has no Raft state yet, and has the
    /// smallest id among the voters, it initializes the quorum with all
    /// the voters as members; the others wait to hear from it. So nodes may
    /// start in any order, and a single voter makes a one-node quorum. A
    /// node that is not a voter waits until the leader adds it
    /// ([`add_learner`](Self::add_learner));
    /// [`start_learner`](Self::start_learner) asks for that itself.
    pub async fn start(
        node_id: u64,
        dir: &Path,
        listen_addr: SocketAddr,
        voters: &[(u64, SocketAddr)],
    ) -> Result<Controller, ControllerError> {
        Self::start_with(
            ControllerConfig::default(),
            node_id,
            dir,
            listen_addr,
            voters,
        )
        .await
    }

    /// [`start`](Self::start) with explicit settings.
    pub async fn start_with(
        config: ControllerConfig,
        node_id: u64,
        dir: &Path,
        listen_addr: SocketAddr,
        voters: &[(u64, SocketAddr)],
    ) -> Result<Controller, ControllerError> {
        let listener =
            TcpListener::bind(listen_addr)
                .await
                .map_err(|source| ControllerError::Bind {
                    addr: listen_addr,
                    source,
                })?;
        Self::start_on(config, node_id, dir, listener, voters).await
    }

    /// [`start_with`](Self::start_with) on a listener already bound (for
    /// ephemeral ports).
    pub async fn start_on(
        config: ControllerConfig,
        node_id: u64,
        dir: &Path,
        listener: TcpListener,
        voters: &[(u64, SocketAddr)],
    ) -> Result<Controller, ControllerError> {
        let members = voter_members(voters)?;
        let controller = Self::launch(config, node_id, dir, listener).await?;
        let initializer = members.keys().next().copied();
        if initializer == Some(node_id) {
            let initialized = controller
                .shared
                .raft
                .is_initialized()
                .await
                .map_err(|e| ControllerError::Raft(e.to_string()))?;
            if !initialized {
                info!(node_id, voters = ?members.keys().collect::<Vec<_>>(), "initializing the controller quorum");
                match controller.shared.raft.initialize(members).await {
                    Ok(()) => {}
                    // Another voter's entries or vote arrived first: the
                    // quorum exists already.
                    Err(RaftError::APIError(InitializeError::NotAllowed(e))) => {
                        info!(node_id, reason = %e, "the controller quorum is already initialized");
                    }
                    Err(e) => {
                        controller.shutdown().await.ok();
                        return Err(ControllerError::Raft(e.to_string()));
                    }
                }
            }
        }
        info!(node_id, addr = %controller.local_addr, dir = %dir.display(), "controller started");
        Ok(controller)
    }

    /// Starts node `node_id`, which is not one of `voters`, as a learner:
    /// it holds the metadata image, replicated from the leader, without
    /// voting. Its files are in `dir` and its controller listener is
    /// `listener`, as for a voter; it never initializes a quorum.
    ///
    /// It asks the voters (each in turn, following the leader they name)
    /// to add it as a learner at `listener`'s address, and returns once
    /// the leader has done so and this node has applied the log up to the
    /// leader's applied index at that moment: [`image`](Self::image) then
    /// shows every command committed before the join. A restart (on the
    /// same directory) joins again, with its new address if it changed.
    /// Within the submit timeout, else [`ControllerError::Raft`] naming
    /// the voters tried and their last answers.
    ///
    /// [`submit`](Self::submit) and [`heartbeat`](Self::heartbeat) on a
    /// learner go to the leader, like on a follower.
    ///
    /// Refused with [`ControllerError::Config`]: `node_id` among the
    /// voters (here, or in the leader's membership); a wildcard listener
    /// address (0.0.0.0, ::), which the leader could not connect to.
    pub async fn start_learner(
        config: ControllerConfig,
        node_id: u64,
        dir: &Path,
        listener: TcpListener,
        voters: &[(u64, SocketAddr)],
    ) -> Result<Controller, ControllerError> {
        let members = voter_members(voters)?;
        if members.is_empty() {
            return Err(ControllerError::Config(format!(
                "controller {node_id} cannot join as a learner: the voter list is empty"
            )));
        }
        if members.contains_key(&node_id) {
            return Err(ControllerError::Config(format!(
                "node {node_id} is in the voter list, so it cannot start as a learner; \
                 a broker that is not a controller needs an id no voter uses"
            )));
        }
        let local_addr = listener
            .local_addr()
            .map_err(|e| ControllerError::Config(format!("the listener has no address: {e}")))?;
        if local_addr.ip().is_unspecified() {
            // The leader replicates to the address given here.
            return Err(ControllerError::Config(format!(
                "the controller listener of learner {node_id} is bound to {local_addr}, which \
                 the controllers cannot connect to; --controller-listen must be an address the \
                 controllers can reach"
            )));
        }
        let submit_timeout = config.submit_timeout;
        let controller = Self::launch(config, node_id, dir, listener).await?;
        let deadline = Instant::now() + submit_timeout;
        let joined = match controller.join_as_learner(voters, deadline).await {
            Ok(index) => controller.wait_caught_up(index, deadline).await,
            Err(e) => Err(e),
        };
        if let Err(e) = joined {
            controller.shutdown().await.ok();
            return Err(e);
        }
        info!(node_id, addr = %local_addr, dir = %dir.display(), "learner started");
        Ok(controller)
    }

    /// Opens the files in `dir` and starts the Raft node, the RPC server
    /// on `listener` and the monitor: everything but bootstrapping or
    /// joining.
    async fn launch(
        config: ControllerConfig,
        node_id: u64,
        dir: &Path,
        listener: TcpListener,
    ) -> Result<Controller, ControllerError> {
        let local_addr = listener
            .local_addr()
            .map_err(|e| ControllerError::Config(format!("the listener has no address: {e}")))?;
        let raft_config = Arc::new(config.to_openraft()?);
        // Before any file is read: another node writing here would destroy it.
        let dir_lock = crate::DirLock::acquire(dir)?;
        let log_store = LogStore::open(dir)?;
        let (state_machine, image) = StateMachine::open(dir)?;
        let transport: Arc<dyn ControllerTransport> = match &config.sasl {
            Some(sasl) => Arc::new(sasl::SaslTransport::new(
                config.transport.clone(),
                sasl.clone(),
                image.clone(),
                config.rpc_timeout,
            )),
            None => config.transport.clone(),
        };
        let network = Network {
            node_id,
            health: Arc::default(),
            connect_timeout: config.rpc_timeout,
            transport: transport.clone(),
        };
        let raft = types::Raft::new(node_id, raft_config, network, log_store, state_machine)
            .await
            .map_err(|e| ControllerError::Raft(e.to_string()))?;
        let shared = Arc::new(Shared::new(node_id, raft, image, config.submit_timeout));
        let server = server::spawn(
            listener,
            shared.clone(),
            server::Admission {
                transport: transport.clone(),
                authorization: config.peer_authorization.clone(),
                refuse_anonymous: config.refuse_anonymous,
                handshake_timeout: config.rpc_timeout,
            },
            config.rpc_timeout,
        );
        let monitor = tokio::spawn(leader::monitor(
            shared.clone(),
            config.broker_session_timeout,
            config.leader_imbalance_check_interval,
        ));
        Ok(Controller {
            node_id,
            shared,
            forwarder: Forwarder::new(transport, config.rpc_timeout, config.rpc_timeout),
            heartbeat_attempt_timeout: heartbeat_attempt_timeout(
                config.rpc_timeout,
                config.broker_session_timeout,
            ),
            server: Mutex::new(Some(server)),
            monitor: Mutex::new(Some(monitor)),
            stopped: AtomicBool::new(false),
            local_addr,
            dir_lock: Mutex::new(Some(dir_lock)),
        })
    }

    /// Asks the voters to make this node a learner, until one that leads
    /// has (then returns the index to catch up to) or `deadline` passes.
    /// Every voter is tried in turn; a voter that names the leader sends
    /// the next try there.
    async fn join_as_learner(
        &self,
        voters: &[(u64, SocketAddr)],
        deadline: Instant,
    ) -> Result<u64, ControllerError> {
        let request = RpcRequest::JoinAsLearner {
            node_id: self.node_id,
            addr: self.local_addr.to_string(),
        };
        // The last answer from each address, for the error if none works.
        let mut last: BTreeMap<String, String> = BTreeMap::new();
        let mut hint: Option<String> = None;
        loop {
            // The leader named last, then the leader this node knows of
            // (after a restart), then every voter.
            let known = self.leader().map(|(_, addr)| addr);
            let mut targets: Vec<String> = Vec::new();
            let candidates = hint.take().into_iter().chain(known);
            for addr in candidates.chain(voters.iter().map(|(_, addr)| addr.to_string())) {
                if !addr.is_empty() && !targets.contains(&addr) {
                    targets.push(addr);
                }
            }
            for addr in targets {
                // Joining twice is harmless, so any failure is retried and
                // idle connections may be reused.
                let answer = match self.forwarder.call(&addr, &request, deadline, true).await {
                    Ok(RpcResponse::JoinAsLearner(outcome)) => outcome,
                    Ok(other) => JoinOutcome::Unavailable(format!("unexpected answer {other:?}")),
                    Err(CallError::NotSent(e)) => {
                        JoinOutcome::Unavailable(format!("unreachable: {e}"))
                    }
                    Err(CallError::NoAnswer(e)) => {
                        JoinOutcome::Unavailable(format!("no answer: {e}"))
                    }
                    Err(CallError::Timeout) => {
                        JoinOutcome::Unavailable("no answer in time".to_owned())
                    }
                };
                debug!(node_id = self.node_id, %addr, ?answer, "asked to join as a learner");
                match answer {
                    JoinOutcome::Joined { index } => {
                        info!(node_id = self.node_id, via = %addr, index, "joined the controller quorum as a learner");
                        return Ok(index);
                    }
                    JoinOutcome::Refused(reason) => {
                        return Err(ControllerError::Config(format!(
                            "controller {addr} refused node {} as a learner: {reason}",
                            self.node_id
                        )));
                    }
                    JoinOutcome::NotLeader { leader } => {
                        let named = match &leader {
                            Some((id, leader_addr)) => {
                                format!("not the leader; it names {id} at {leader_addr}")
                            }
                            None => "not the leader; it knows of none".to_owned(),
                        };
                        last.insert(addr.clone(), named);
                        if let Some((_, leader_addr)) = leader {
                            if !leader_addr.is_empty() && leader_addr != addr {
                                hint = Some(leader_addr);
                                break;
                            }
                        }
                    }
                    JoinOutcome::Unavailable(reason) => {
                        last.insert(addr.clone(), reason);
                    }
                }
                if Instant::now() >= deadline {
                    break;
                }
            }
            if !pause_before_retry(deadline).await {
                let mut tried: Vec<String> = voters
                    .iter()
                    .map(|(id, addr)| {
                        let answer = last.remove(&addr.to_string());
                        let answer = answer.as_deref().unwrap_or("not tried");
                        format!("controller {id} at {addr} ({answer})")
                    })
                    .collect();
                // Leaders named by the voters but not in the list.
                tried.extend(
                    last.iter()
                        .map(|(addr, answer)| format!("{addr} ({answer})")),
                );
                return Err(ControllerError::Raft(format!(
                    "node {} could not join the controller quorum as a learner within {:?}; \
                     tried {}",
                    self.node_id,
                    self.shared.submit_timeout,
                    tried.join(", ")
                )));
            }
        }
    }

    /// Waits until this node has applied the log up to `index` (the
    /// leader's applied index when it admitted this learner).
    async fn wait_caught_up(&self, index: u64, deadline: Instant) -> Result<(), ControllerError> {
        let mut metrics = self.shared.raft.metrics();
        let applied = metrics.wait_for(|m| m.last_applied.is_some_and(|id| id.index >= index));
        let waited = tokio::time::timeout_at(deadline, applied)
            .await
            .map(|r| r.map(|_| ()));
        match waited {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(ControllerError::Raft(format!(
                "learner {} stopped before catching up with the leader",
                self.node_id
            ))),
            Err(_) => {
                let applied = self.status().applied_index;
                Err(ControllerError::Raft(format!(
                    "learner {} joined the controller quorum but applied only up to {applied:?} \
                     of {index} within {:?}",
                    self.node_id, self.shared.submit_timeout
                )))
            }
        }
    }

    /// Proposes `cmd` to the quorum and waits until it is committed and
    /// applied on this node, so that [`image`](Self::image) shows it when
    /// this returns.
    ///
    /// Any controller takes commands (a learner too): one that is not the
    /// leader sends the command on to the leader, retrying while no leader
    /// is known or leadership moves, within the submit timeout. A command
    /// is retried only when it certainly was not proposed; if the outcome
    /// is unknown (the leader's connection failed after the command was
    /// sent, or no answer in time) the error says so
    /// ([`SubmitError::Unavailable`], [`SubmitError::Timeout`]) and the
    /// caller decides.
    pub async fn submit(&self, cmd: Command) -> Result<Applied, SubmitError> {
        self.check_running()?;
        let timeout = self.shared.submit_timeout;
        let deadline = Instant::now() + timeout;
        loop {
            let (outcome, forwarded) = match self.leader() {
                Some((id, _)) if id == self.node_id => {
                    (self.shared.write(cmd.clone(), deadline).await, false)
                }
                Some((id, addr)) => (self.forward(id, &addr, &cmd, deadline).await?, true),
                None => (WriteOutcome::NotLeader, false),
            };
            match outcome {
                WriteOutcome::Committed { index, result } => {
                    if forwarded && result.is_ok() {
                        self.wait_applied(index, deadline).await?;
                    }
                    return result.map_err(|r| SubmitError::Rejected(r.into()));
                }
                WriteOutcome::NotLeader => {}
                WriteOutcome::Unavailable(reason) => return Err(SubmitError::Unavailable(reason)),
                WriteOutcome::Timeout => return Err(SubmitError::Timeout(timeout)),
                WriteOutcome::Denied(reason) => {
                    return Err(SubmitError::Rejected(
                        MetaError::ClusterAuthorizationFailed(reason),
                    ))
                }
            }
            if !pause_before_retry(deadline).await {
                return Err(SubmitError::NoLeader(timeout));
            }
        }
    }

    /// Sends `cmd` to the leader `id` at `addr`. A call that failed before
    /// the command was sent whole is `NotLeader` (nothing was proposed:
    /// try again); one that failed after is an error.
    async fn forward(
        &self,
        id: u64,
        addr: &str,
        cmd: &Command,
        deadline: Instant,
    ) -> Result<WriteOutcome, SubmitError> {
        let request = RpcRequest::Submit(cmd.clone());
        match self.forwarder.call(addr, &request, deadline, false).await {
            Ok(RpcResponse::Submit(outcome)) => {
                debug!(leader = id, %addr, ?outcome, "forwarded a command");
                Ok(outcome)
            }
            Ok(other) => Err(SubmitError::Unavailable(format!(
                "controller {id} at {addr} answered a forwarded command with {other:?}; \
                 the command may or may not be applied"
            ))),
            Err(CallError::NotSent(e)) => {
                debug!(leader = id, %addr, error = %e, "could not forward a command; retrying");
                Ok(WriteOutcome::NotLeader)
            }
            Err(CallError::NoAnswer(e)) => Err(SubmitError::Unavailable(format!(
                "the connection to controller {id} at {addr} failed after a command was \
                 forwarded to it ({e}); the command may or may not be applied"
            ))),
            Err(CallError::Timeout) => Err(SubmitError::Timeout(self.shared.submit_timeout)),
        }
    }

    /// Waits until this node's image holds every change the quorum had
    /// committed when this was called (a linearizable read: Raft's
    /// ReadIndex, asked of the leader, then applied here), or `timeout`
    /// passes. What a node does before it checks a change against its own
    /// image: Kafka's brokers send such a change to the active controller,
    /// which holds every committed change, so a change that another node
    /// has just answered for must be seen here too.
    pub async fn catch_up(&self, timeout: Duration) -> Result<(), SubmitError> {
        self.check_running()?;
        let deadline = Instant::now() + timeout;
        loop {
            let index = match self.leader() {
                Some((id, _)) if id == self.node_id => self.shared.read_index(deadline).await,
                Some((id, addr)) => {
                    match self
                        .forwarder
                        .call(&addr, &RpcRequest::ReadIndex, deadline, true)
                        .await
                    {
                        Ok(RpcResponse::ReadIndex(index)) => index,
                        Ok(other) => {
                            return Err(SubmitError::Unavailable(format!(
                                "controller {id} at {addr} answered a read index request with \
                                 {other:?}"
                            )))
                        }
                        Err(error) => {
                            debug!(leader = id, %addr, ?error, "asking the leader for its read index failed");
                            None
                        }
                    }
                }
                None => None,
            };
            if let Some(index) = index {
                return self.wait_applied(index, deadline).await;
            }
            if !pause_before_retry(deadline).await {
                return Err(SubmitError::NoLeader(timeout));
            }
        }
    }

    /// Waits until this node has applied the log up to `index`.
    async fn wait_applied(&self, index: u64, deadline: Instant) -> Result<(), SubmitError> {
        let mut metrics = self.shared.raft.metrics();
        let applied = metrics.wait_for(|m| m.last_applied.is_some_and(|id| id.index >= index));
        let waited = tokio::time::timeout_at(deadline, applied)
            .await
            .map(|r| r.map(|_| ()));
        match waited {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(SubmitError::Unavailable(
                "this controller stopped before applying the committed command".to_owned(),
            )),
            // Committed, but not visible here yet: the caller cannot rely
            // on reading it back, so it is not reported as done.
            Err(_) => Err(SubmitError::Timeout(self.shared.submit_timeout)),
        }
    }

    /// A heartbeat of broker `broker_id`, running as `incarnation`, for the
    /// active controller; any controller takes it and sends it on to the
    /// leader, retrying within the submit timeout. On
    /// [`HeartbeatReply::Fenced`] or [`HeartbeatReply::UnknownBroker`] the
    /// broker should register again.
    pub async fn heartbeat(
        &self,
        broker_id: i32,
        incarnation: uuid::Uuid,
    ) -> Result<HeartbeatReply, SubmitError> {
        self.check_running()?;
        let timeout = self.shared.submit_timeout;
        let leader = || {
            self.leader()
                .map(|(id, addr)| if id == self.node_id { None } else { Some(addr) })
        };
        let attempt = HeartbeatAttempt {
            request: RpcRequest::Heartbeat {
                broker_id,
                incarnation,
            },
            forwarder: &self.forwarder,
            attempt_timeout: self.heartbeat_attempt_timeout,
        };
        attempt
            .until(Instant::now() + timeout, leader, || {
                self.shared.heartbeat(broker_id, incarnation)
            })
            .await
            .ok_or(SubmitError::NoLeader(timeout))
    }

    /// Refuses calls after [`shutdown`](Self::shutdown): forwarding would
    /// still work, but this node could not apply the result.
    fn check_running(&self) -> Result<(), SubmitError> {
        if self.stopped.load(Ordering::SeqCst) {
            return Err(SubmitError::Unavailable(format!(
                "controller {} is shut down",
                self.node_id
            )));
        }
        Ok(())
    }

    /// True while this controller is the Raft leader (the active
    /// controller).
    pub fn is_leader(&self) -> bool {
        self.shared.is_leader()
    }

    /// Adds controller `id`, listening on `addr`, as a learner: it
    /// replicates the log without voting. Waits until it has caught up
    /// (within the submit timeout). Only the leader accepts this.
    pub async fn add_learner(&self, id: u64, addr: SocketAddr) -> Result<(), SubmitError> {
        let node = ControllerNode {
            addr: addr.to_string(),
        };
        let change = self.shared.raft.add_learner(id, node, true);
        let timeout = self.shared.submit_timeout;
        match tokio::time::timeout(timeout, change).await {
            Err(_) => Err(SubmitError::Timeout(timeout)),
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(self.write_error(e)),
        }
    }

    /// Makes `voters` the voters of the quorum (through a joint
    /// configuration); each must already be a member, as a voter or a
    /// learner. Voters left out are removed from the membership. Only the
    /// leader accepts this.
    pub async fn change_voters(&self, voters: &[u64]) -> Result<(), SubmitError> {
        let voters: std::collections::BTreeSet<u64> = voters.iter().copied().collect();
        let change = self.shared.raft.change_membership(voters, false);
        let timeout = self.shared.submit_timeout;
        match tokio::time::timeout(timeout, change).await {
            Err(_) => Err(SubmitError::Timeout(timeout)),
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(self.write_error(e)),
        }
    }

    fn write_error(&self, e: RaftError<u64, ClientWriteError<u64, ControllerNode>>) -> SubmitError {
        match e {
            RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => {
                let leader = f.leader_id.map(|id| {
                    let addr = f
                        .leader_node
                        .map(|n| n.addr)
                        .or_else(|| self.address_of(id))
                        .unwrap_or_default();
                    (id, addr)
                });
                SubmitError::NotLeader { leader }
            }
            RaftError::APIError(ClientWriteError::ChangeMembershipError(e)) => {
                SubmitError::MembershipChange(e.to_string())
            }
            RaftError::Fatal(e) => SubmitError::Unavailable(e.to_string()),
        }
    }

    /// The image as of the last applied entry; `changed()` on the receiver
    /// wakes after each apply that changed it.
    pub fn image(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.shared.image.clone()
    }

    /// This controller's node id.
    pub fn node_id(&self) -> u64 {
        self.node_id
    }

    /// The address the controller listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// This controller's view of the quorum.
    pub fn status(&self) -> ControllerStatus {
        let m = self.shared.raft.metrics().borrow().clone();
        ControllerStatus {
            node_id: self.node_id,
            role: match m.state {
                ServerState::Leader => Role::Leader,
                ServerState::Follower => Role::Follower,
                ServerState::Candidate => Role::Candidate,
                ServerState::Learner => Role::Learner,
                ServerState::Shutdown => Role::Shutdown,
            },
            leader_id: m.current_leader,
            term: m.current_term,
            last_log_index: m.last_log_index,
            applied_index: m.last_applied.map(|id| id.index),
            snapshot_index: m.snapshot.map(|id| id.index),
            voters: m
                .membership_config
                .membership()
                .voter_ids()
                .map(|id| {
                    let addr = m
                        .membership_config
                        .membership()
                        .get_node(&id)
                        .map(|n| n.addr.clone())
                        .unwrap_or_default();
                    (id, addr)
                })
                .collect(),
        }
    }

    /// The leader this controller knows of, with its controller address.
    pub fn leader(&self) -> Option<(u64, String)> {
        let id = self.shared.raft.metrics().borrow().current_leader?;
        Some((id, self.address_of(id).unwrap_or_default()))
    }

    /// Waits up to `timeout` until a leader is known; returns its id.
    pub async fn wait_for_leader(&self, timeout: Duration) -> Option<u64> {
        let mut metrics = self.shared.raft.metrics();
        let wait = async {
            loop {
                if let Some(id) = metrics.borrow_and_update().current_leader {
                    return Some(id);
                }
                if metrics.changed().await.is_err() {
                    return None;
                }
            }
        };
        tokio::time::timeout(timeout, wait).await.ok().flatten()
    }

    /// Stops Raft, the controller listener and the leader's background
    /// task. Idempotent.
    pub async fn shutdown(&self) -> Result<(), ControllerError> {
        let monitor = self
            .monitor
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(monitor) = monitor {
            monitor.abort();
            let _ = monitor.await;
        }
        let server = self.server.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(server) = server {
            server.abort();
            // The listener closes when the task is dropped; wait for it so
            // that the address can be bound again at once.
            let _ = server.await;
        }
        if self.stopped.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        self.shared
            .raft
            .shutdown()
            .await
            .map_err(|e| ControllerError::Raft(e.to_string()))?;
        // Raft has stopped writing: another start may take the directory.
        self.dir_lock
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        info!(node_id = self.node_id, "controller stopped");
        Ok(())
    }

    fn address_of(&self, id: u64) -> Option<String> {
        self.shared
            .raft
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .get_node(&id)
            .map(|n| n.addr.clone())
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        if let Some(monitor) = self
            .monitor
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            monitor.abort();
        }
        if let Some(server) = self
            .server
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            server.abort();
        }
        if !self.stopped.swap(true, Ordering::SeqCst) {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let raft = self.shared.raft.clone();
                runtime.spawn(async move {
                    let _ = raft.shutdown().await;
                });
            }
        }
    }
}

/// The voter list as openraft's members; an id listed twice is refused.
fn voter_members(
    voters: &[(u64, SocketAddr)],
) -> Result<BTreeMap<u64, ControllerNode>, ControllerError> {
    let mut members = BTreeMap::new();
    for (id, addr) in voters {
        let node = ControllerNode {
            addr: addr.to_string(),
        };
        if members.insert(*id, node).is_some() {
            return Err(ControllerError::Config(format!(
                "controller {id} appears twice in the voter list"
            )));
        }
    }
    Ok(members)
}

/// How long one forwarded heartbeat waits for its answer. A leader answers
/// a heartbeat from memory, within a round trip; one that stays silent may
/// be cut off, and a new leader fences every broker it has not heard from
/// within the session timeout of its election. So an attempt gives up in a
/// quarter of the session, leaving time to find the new leader and reach
/// it: waiting out the whole call on the old leader got every broker,
/// the new leader's own included, fenced at once.
fn heartbeat_attempt_timeout(rpc_timeout: Duration, session_timeout: Duration) -> Duration {
    rpc_timeout.min(session_timeout / 4)
}

/// Sleeps a little before a forwarded call is tried again; false if the
/// deadline is reached first.
async fn pause_before_retry(deadline: Instant) -> bool {
    let now = Instant::now();
    if now >= deadline {
        return false;
    }
    tokio::time::sleep_until(deadline.min(now + RETRY_PAUSE)).await;
    Instant::now() < deadline
}
