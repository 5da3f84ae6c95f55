//! What only the active controller (the Raft leader) does: proposing
//! commands through its own Raft node, answering broker heartbeats,
//! admitting learners, and the monitor that fences silent brokers and
//! restores preferred leaders.
//!
//! Broker sessions live in memory on the leader only. A controller that
//! becomes leader gives every broker a full session from that moment, so a
//! change of leader never fences a broker that was heartbeating to the old
//! one.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::{ChangeMembers, ServerState};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::command::Command;
use crate::image::MetadataImage;

use super::types::{ControllerNode, JoinOutcome, Raft, WriteOutcome};
use super::HeartbeatReply;

/// The state a controller shares with its RPC server and its monitor.
pub(crate) struct Shared {
    pub(crate) node_id: u64,
    pub(crate) raft: Raft,
    pub(crate) image: watch::Receiver<Arc<MetadataImage>>,
    pub(crate) submit_timeout: Duration,
    sessions: Mutex<Sessions>,
}

/// Broker sessions, as the leader sees them.
#[derive(Default)]
struct Sessions {
    /// When each broker last heartbeated (or registered) here.
    last_seen: BTreeMap<i32, Instant>,
    /// The term this node leads in, and when it noticed.
    leading: Option<(u64, Instant)>,
}

impl Shared {
    pub(crate) fn new(
        node_id: u64,
        raft: Raft,
        image: watch::Receiver<Arc<MetadataImage>>,
        submit_timeout: Duration,
    ) -> Shared {
        Shared {
            node_id,
            raft,
            image,
            submit_timeout,
            sessions: Mutex::new(Sessions::default()),
        }
    }

    fn sessions(&self) -> MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True while this node is the Raft leader.
    pub(crate) fn is_leader(&self) -> bool {
        let m = self.raft.metrics();
        let m = m.borrow();
        m.state == ServerState::Leader && m.current_leader == Some(self.node_id)
    }

    /// Since when this node has been leading, or `None` if it is not the
    /// leader. The start is reset whenever the term changes, which is
    /// every time this node wins an election.
    fn leading_since(&self) -> Option<Instant> {
        let term = {
            let m = self.raft.metrics();
            let m = m.borrow();
            (m.state == ServerState::Leader && m.current_leader == Some(self.node_id))
                .then_some(m.current_term)
        };
        let mut sessions = self.sessions();
        match (term, sessions.leading) {
            (None, _) => {
                sessions.leading = None;
                None
            }
            (Some(term), Some((led, since))) if led == term => Some(since),
            (Some(term), _) => {
                let now = Instant::now();
                sessions.leading = Some((term, now));
                info!(
                    node_id = self.node_id,
                    term, "this controller is now the active controller"
                );
                Some(now)
            }
        }
    }

    /// Proposes `cmd` through this node's Raft and waits (until
    /// `deadline`) for it to be committed and applied here. Never
    /// forwards: a node that is not the leader answers `NotLeader`, and
    /// then nothing was proposed.
    pub(crate) async fn write(&self, cmd: Command, deadline: Instant) -> WriteOutcome {
        let registered = match &cmd {
            Command::RegisterBroker(b) => Some(b.id),
            _ => None,
        };
        let write = tokio::time::timeout_at(deadline, self.raft.client_write(cmd)).await;
        match write {
            Err(_) => WriteOutcome::Timeout,
            Ok(Ok(response)) => {
                if let (Some(id), Ok(_)) = (registered, &response.data.0) {
                    // Registering counts as the broker's first heartbeat.
                    self.sessions().last_seen.insert(id, Instant::now());
                }
                WriteOutcome::Committed {
                    index: response.log_id.index,
                    result: response.data.0,
                }
            }
            // openraft answers this before proposing, or when the entry
            // was truncated away by a new leader: either way it is not,
            // and will never be, committed.
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_)))) => {
                WriteOutcome::NotLeader
            }
            Ok(Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(e)))) => {
                WriteOutcome::Unavailable(e.to_string())
            }
            Ok(Err(RaftError::Fatal(e))) => WriteOutcome::Unavailable(e.to_string()),
        }
    }

    /// The index a linearizable read waits for (Raft's ReadIndex): this
    /// node confirms with a quorum that it still leads, and answers an
    /// index at or past every entry committed before the call. `None` if
    /// it is not the leader, or could not confirm it by `deadline`.
    pub(crate) async fn read_index(&self, deadline: Instant) -> Option<u64> {
        match tokio::time::timeout_at(deadline, self.raft.get_read_log_id()).await {
            Ok(Ok((read, _applied))) => Some(read.map_or(0, |id| id.index)),
            _ => None,
        }
    }

    /// Answers a broker heartbeat if this node is the leader; `None`
    /// otherwise.
    pub(crate) fn heartbeat(
        &self,
        broker_id: i32,
        incarnation: uuid::Uuid,
    ) -> Option<HeartbeatReply> {
        self.leading_since()?;
        let image = self.image.borrow().clone();
        let reply = match image.broker(broker_id) {
            Some(b) if b.incarnation == incarnation => {
                if image.is_fenced(broker_id) {
                    HeartbeatReply::Fenced
                } else {
                    self.sessions().last_seen.insert(broker_id, Instant::now());
                    HeartbeatReply::Alive
                }
            }
            _ => HeartbeatReply::UnknownBroker,
        };
        debug!(broker_id, %incarnation, ?reply, "broker heartbeat");
        Some(reply)
    }

    /// Makes node `id` a learner reachable at `addr`, if this node is the
    /// leader and `id` is not a voter; waits (until `deadline`) for the
    /// membership entry to commit. A node that is a learner already is
    /// added again (openraft accepts it; the membership is unchanged), or,
    /// if its address changed, gets its new address.
    pub(crate) async fn admit_learner(
        &self,
        id: u64,
        addr: String,
        deadline: Instant,
    ) -> JoinOutcome {
        let (is_voter, known_addr) = {
            let m = self.raft.metrics();
            let m = m.borrow();
            if !(m.state == ServerState::Leader && m.current_leader == Some(self.node_id)) {
                let leader = m.current_leader.map(|l| {
                    let addr = m.membership_config.membership().get_node(&l);
                    (l, addr.map(|n| n.addr.clone()).unwrap_or_default())
                });
                return JoinOutcome::NotLeader { leader };
            }
            let membership = m.membership_config.membership();
            let is_voter = membership.voter_ids().any(|v| v == id);
            (is_voter, membership.get_node(&id).map(|n| n.addr.clone()))
        };
        if is_voter {
            // Nothing on this path may change who votes: a voter asking
            // to be a learner is misconfigured, not to be demoted.
            return JoinOutcome::Refused(format!(
                "controller {id} is a voter of the controller quorum, so it cannot join as a \
                 learner; give brokers that are not controllers ids the voters do not use"
            ));
        }
        let node = ControllerNode { addr: addr.clone() };
        let change = match known_addr {
            Some(old) if old != addr => {
                info!(learner = id, %old, new = %addr, "updating a learner's controller address");
                // `add_learner` keeps a known node's address; `SetNodes`
                // replaces it (safe for a learner: it has no vote).
                let nodes = BTreeMap::from([(id, node)]);
                let change = self
                    .raft
                    .change_membership(ChangeMembers::SetNodes(nodes), true);
                tokio::time::timeout_at(deadline, change).await
            }
            known => {
                if known.is_none() {
                    info!(learner = id, %addr, "adding a learner");
                }
                // Blocking: openraft returns once replication to the learner
                // is under way and not far behind.
                let change = self.raft.add_learner(id, node, true);
                tokio::time::timeout_at(deadline, change).await
            }
        };
        match change {
            Ok(Ok(response)) => {
                let applied = self.raft.metrics().borrow().last_applied.map(|l| l.index);
                let index = response.log_id.index.max(applied.unwrap_or(0));
                debug!(learner = id, index, "learner admitted");
                JoinOutcome::Joined { index }
            }
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f)))) => {
                let leader = f
                    .leader_id
                    .map(|l| (l, f.leader_node.map(|n| n.addr).unwrap_or_default()));
                JoinOutcome::NotLeader { leader }
            }
            // Another membership change is not committed yet: worth asking
            // again.
            Ok(Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(
                ChangeMembershipError::InProgress(e),
            )))) => JoinOutcome::Unavailable(e.to_string()),
            Ok(Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(e)))) => {
                JoinOutcome::Refused(e.to_string())
            }
            Ok(Err(RaftError::Fatal(e))) => JoinOutcome::Unavailable(e.to_string()),
            Err(_) => JoinOutcome::Unavailable(format!(
                "adding learner {id} was not done within {:?}",
                self.submit_timeout
            )),
        }
    }

    /// The live brokers whose session expired at `now`: no heartbeat
    /// within `timeout`, counting from when this node became leader at the
    /// earliest. With how long each has been silent.
    fn expired(
        &self,
        image: &MetadataImage,
        since: Instant,
        now: Instant,
        timeout: Duration,
    ) -> Vec<(i32, Duration)> {
        let live: Vec<i32> = image.live_brokers().map(|b| b.id).collect();
        self.sessions().expired(&live, since, now, timeout)
    }

    /// Gives every broker a full session from `now`.
    fn restart_sessions(&self, now: Instant) {
        let live: Vec<i32> = self.image.borrow().live_brokers().map(|b| b.id).collect();
        self.sessions().restart(&live, now);
    }
}

impl Sessions {
    fn expired(
        &self,
        live: &[i32],
        since: Instant,
        now: Instant,
        timeout: Duration,
    ) -> Vec<(i32, Duration)> {
        live.iter()
            .filter_map(|&id| {
                let seen = self
                    .last_seen
                    .get(&id)
                    .map_or(since, |&seen| seen.max(since));
                let silent = now.saturating_duration_since(seen);
                (silent > timeout).then_some((id, silent))
            })
            .collect()
    }

    fn restart(&mut self, live: &[i32], now: Instant) {
        for &id in live {
            self.last_seen.insert(id, now);
        }
    }
}

/// True if the monitor, last done at `previous`, wakes at `now` much later
/// than its `tick`: this controller itself was stalled (paused, starved of
/// CPU) and heard no heartbeat meanwhile, so the brokers' silence says
/// nothing about them. The heartbeats that waited in its sockets are
/// answered only after the monitor's first look.
fn stalled(previous: Instant, now: Instant, tick: Duration) -> bool {
    now.saturating_duration_since(previous) > tick * 3
}

/// How often the monitor looks at the sessions: an eighth of the session
/// timeout, so that a silent broker is fenced at most that much late, and
/// no more often than every 100 ms.
pub(crate) fn monitor_tick(session_timeout: Duration) -> Duration {
    (session_timeout / 8).max(Duration::from_millis(100))
}

/// The leader's background duties, forever (the controller aborts the
/// task on shutdown): fence brokers whose session expired, and every
/// `imbalance_interval` move leadership back to preferred replicas when
/// some partition is led by another one.
pub(crate) async fn monitor(
    shared: Arc<Shared>,
    session_timeout: Duration,
    imbalance_interval: Option<Duration>,
) {
    let tick = monitor_tick(session_timeout);
    let mut ticks = tokio::time::interval(tick);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut led_since: Option<Instant> = None;
    let mut next_balance: Option<Instant> = None;
    let mut looked = Instant::now();
    loop {
        ticks.tick().await;
        let woke = Instant::now();
        if stalled(looked, woke, tick) {
            info!(
                stalled_ms = woke.duration_since(looked).as_millis() as u64,
                "this controller was stalled: every broker gets a full session"
            );
            shared.restart_sessions(woke);
        }
        looked = woke;
        let Some(since) = shared.leading_since() else {
            led_since = None;
            continue;
        };
        if led_since != Some(since) {
            // A new term of leadership: the imbalance check waits a full
            // interval, as brokers get a full session.
            led_since = Some(since);
            next_balance = imbalance_interval.map(|i| since + i);
        }
        let now = Instant::now();
        let image = shared.image.borrow().clone();
        for (id, silent) in shared.expired(&image, since, now, session_timeout) {
            info!(
                broker_id = id,
                silent_ms = silent.as_millis() as u64,
                session_timeout_ms = session_timeout.as_millis() as u64,
                "fencing broker: no heartbeat within the session timeout"
            );
            if !propose(&shared, Command::FenceBroker { id }).await {
                break;
            }
        }
        // Time spent proposing (up to the submit timeout) is not a stall.
        looked = Instant::now();
        if let (Some(at), Some(interval)) = (next_balance, imbalance_interval) {
            if now >= at {
                next_balance = Some(now + interval);
                let image = shared.image.borrow().clone();
                let imbalance = image.preferred_leader_imbalance();
                if imbalance > 0 {
                    info!(
                        partitions = imbalance,
                        "moving leadership back to preferred replicas"
                    );
                    propose(&shared, Command::ElectPreferredLeaders).await;
                }
            }
        }
    }
}

/// Proposes a command of the monitor; false if this node stopped leading
/// (the next leader's monitor takes over).
async fn propose(shared: &Shared, cmd: Command) -> bool {
    let deadline = Instant::now() + shared.submit_timeout;
    match shared.write(cmd.clone(), deadline).await {
        WriteOutcome::Committed { result: Ok(_), .. } => true,
        WriteOutcome::Committed {
            result: Err(rejection),
            ..
        } => {
            warn!(
                ?cmd,
                ?rejection,
                "the controller's own command was rejected"
            );
            true
        }
        WriteOutcome::NotLeader => false,
        // Retried at the next tick if still needed.
        WriteOutcome::Unavailable(reason) => {
            warn!(?cmd, %reason, "the controller could not propose its command");
            false
        }
        WriteOutcome::Timeout => {
            warn!(?cmd, "the controller's command was not committed in time");
            false
        }
        // Its own commands are never checked.
        WriteOutcome::Denied(reason) => {
            warn!(?cmd, %reason, "the controller's own command was refused");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stalled_controller_fences_no_broker_for_the_silence_it_did_not_hear() {
        let session = Duration::from_secs(4);
        let tick = monitor_tick(session);
        let start = Instant::now();
        let mut sessions = Sessions::default();
        sessions.last_seen.insert(1, start);
        sessions.last_seen.insert(2, start);
        let live = [1, 2, 3];

        // Broker 2 heartbeats on; 1 and 3 (never seen) fall silent.
        let on_time = start + tick;
        assert!(!stalled(start, on_time, tick));
        sessions.last_seen.insert(2, on_time);
        let later = start + session + tick;
        let expired: Vec<i32> = sessions
            .expired(&live, start, later, session)
            .iter()
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(expired, [1, 3], "silent brokers are fenced");

        // The controller is paused for ten seconds: on waking, nobody's
        // session has expired until a full session has passed again.
        let woke = on_time + Duration::from_secs(10);
        assert!(stalled(on_time, woke, tick));
        sessions.restart(&live, woke);
        assert!(sessions
            .expired(&live, start, woke + tick, session)
            .is_empty());
        let silent_again = sessions.expired(&live, start, woke + session + tick, session);
        assert_eq!(silent_again.len(), 3);
    }

    #[test]
    fn a_tick_late_by_up_to_two_periods_is_no_stall() {
        let tick = Duration::from_millis(500);
        let start = Instant::now();
        assert!(!stalled(start, start + tick * 3, tick));
        assert!(stalled(
            start,
            start + tick * 3 + Duration::from_millis(1),
            tick
        ));
    }

    #[test]
    fn tick_is_an_eighth_of_the_session_but_at_least_100ms() {
        let table = [
            (Duration::from_secs(9), Duration::from_millis(1125)),
            (Duration::from_secs(2), Duration::from_millis(250)),
            (Duration::from_millis(800), Duration::from_millis(100)),
            (Duration::from_millis(100), Duration::from_millis(100)),
        ];
        for (session, tick) in table {
            assert_eq!(monitor_tick(session), tick, "{session:?}");
        }
    }
}
