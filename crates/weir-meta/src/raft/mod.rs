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
//! - `network` and `server`: controller RPC over TCP.
//!
//! Nothing outside this module names an openraft type.

mod log_store;
mod network;
mod server;
mod state_machine;
mod types;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{ClientWriteError, InitializeError, RaftError};
use openraft::{ServerState, SnapshotPolicy};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::info;

use crate::command::{Applied, Command};
use crate::error::MetaError;
use crate::image::MetadataImage;

use self::log_store::LogStore;
use self::network::Network;
use self::state_machine::StateMachine;
use self::types::{ControllerNode, Raft};

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
    /// committed and applied.
    pub submit_timeout: Duration,
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
        }
    }
}

impl ControllerConfig {
    fn to_openraft(&self) -> Result<openraft::Config, ControllerError> {
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
}

/// Why [`Controller::submit`] did not apply a command.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SubmitError {
    /// This controller is not the leader; the leader's id and controller
    /// address, when known. Nothing was proposed.
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
    /// The quorum is not working (shut down, or storage failed); retry on
    /// another controller.
    #[error("the controller quorum is unavailable: {0}")]
    Unavailable(String),
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

/// One member of the controller quorum: its Raft node, its controller
/// listener, and the metadata image it has applied.
///
/// [`Controller::shutdown`] stops it and waits; dropping it without that
/// stops the listener at once and Raft in the background.
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use weir_meta::{Command, Controller, SubmitError};
///
/// let voters = [(1, "127.0.0.1:9093".parse()?)];
/// let controller =
///     Controller::start(1, "weir-data/controller".as_ref(), voters[0].1, &voters).await?;
/// controller.wait_for_leader(Duration::from_secs(10)).await;
/// match controller.submit(Command::AllocateProducerIds { count: 1000 }).await {
///     Ok(applied) => println!("{applied:?}"),
///     Err(SubmitError::NotLeader { leader }) => println!("ask {leader:?}"),
///     Err(SubmitError::Rejected(e)) => println!("{} {e}", e.kafka_error_code()),
///     Err(e) => println!("retry later: {e}"),
/// }
/// let image = controller.image().borrow().clone();
/// println!("{} topics", image.topic_count());
/// controller.shutdown().await?;
/// # Ok(())
/// # }
/// ```
pub struct Controller {
    node_id: u64,
    raft: Raft,
    image: watch::Receiver<Arc<MetadataImage>>,
    server: Mutex<Option<JoinHandle<()>>>,
    stopped: AtomicBool,
    local_addr: SocketAddr,
    submit_timeout: Duration,
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
    /// start in any order, and a single voter makes a one-node quorum.
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
        let local_addr = listener
            .local_addr()
            .map_err(|e| ControllerError::Config(format!("the listener has no address: {e}")))?;
        let raft_config = Arc::new(config.to_openraft()?);
        let log_store = LogStore::open(dir)?;
        let (state_machine, image) = StateMachine::open(dir)?;
        let network = Network {
            node_id,
            connect_timeout: config.rpc_timeout,
        };
        let raft = Raft::new(node_id, raft_config, network, log_store, state_machine)
            .await
            .map_err(|e| ControllerError::Raft(e.to_string()))?;
        let server = server::spawn(listener, raft.clone(), config.rpc_timeout);
        let controller = Controller {
            node_id,
            raft,
            image,
            server: Mutex::new(Some(server)),
            stopped: AtomicBool::new(false),
            local_addr,
            submit_timeout: config.submit_timeout,
        };

        let initializer = members.keys().next().copied();
        if initializer == Some(node_id) {
            let initialized = controller
                .raft
                .is_initialized()
                .await
                .map_err(|e| ControllerError::Raft(e.to_string()))?;
            if !initialized {
                info!(node_id, voters = ?members.keys().collect::<Vec<_>>(), "initializing the controller quorum");
                match controller.raft.initialize(members).await {
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
        info!(node_id, addr = %local_addr, dir = %dir.display(), "controller started");
        Ok(controller)
    }

    /// Proposes `cmd` to the quorum and waits until it is committed and
    /// applied here. Only the leader accepts commands.
    pub async fn submit(&self, cmd: Command) -> Result<Applied, SubmitError> {
        let write = tokio::time::timeout(self.submit_timeout, self.raft.client_write(cmd)).await;
        match write {
            Err(_) => Err(SubmitError::Timeout(self.submit_timeout)),
            Ok(Ok(response)) => response.data.0.map_err(|r| SubmitError::Rejected(r.into())),
            Ok(Err(e)) => Err(self.write_error(e)),
        }
    }

    /// Adds controller `id`, listening on `addr`, as a learner: it
    /// replicates the log without voting. Waits until it has caught up
    /// (within the submit timeout). Only the leader accepts this.
    pub async fn add_learner(&self, id: u64, addr: SocketAddr) -> Result<(), SubmitError> {
        let node = ControllerNode {
            addr: addr.to_string(),
        };
        let change = self.raft.add_learner(id, node, true);
        match tokio::time::timeout(self.submit_timeout, change).await {
            Err(_) => Err(SubmitError::Timeout(self.submit_timeout)),
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
        let change = self.raft.change_membership(voters, false);
        match tokio::time::timeout(self.submit_timeout, change).await {
            Err(_) => Err(SubmitError::Timeout(self.submit_timeout)),
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
        self.image.clone()
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
        let m = self.raft.metrics().borrow().clone();
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
        let id = self.raft.metrics().borrow().current_leader?;
        Some((id, self.address_of(id).unwrap_or_default()))
    }

    /// Waits up to `timeout` until a leader is known; returns its id.
    pub async fn wait_for_leader(&self, timeout: Duration) -> Option<u64> {
        let mut metrics = self.raft.metrics();
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

    /// Stops Raft and the controller listener. Idempotent.
    pub async fn shutdown(&self) -> Result<(), ControllerError> {
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
        self.raft
            .shutdown()
            .await
            .map_err(|e| ControllerError::Raft(e.to_string()))?;
        info!(node_id = self.node_id, "controller stopped");
        Ok(())
    }

    fn address_of(&self, id: u64) -> Option<String> {
        self.raft
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
                let raft = self.raft.clone();
                runtime.spawn(async move {
                    let _ = raft.shutdown().await;
                });
            }
        }
    }
}
