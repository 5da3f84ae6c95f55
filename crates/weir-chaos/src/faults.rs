//! The faults, each run against a fresh cluster with the workload going on
//! throughout: inject, hold, heal, again until the time is up; then wait
//! for the cluster to be whole, read everything back and check.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::checker::{self, History, Report};
use crate::cluster::{Cluster, ClusterOptions, Layout, Network};
use crate::txn_checker::{self, TxnHistory, TxnReport};
use crate::txn_workload::{self, TxnWorkload, TxnWorkloadOptions};
use crate::workload::{self, Workload, WorkloadOptions};
use crate::{netns, replicas, Error};

const TOPIC: &str = "chaos";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// kill -9 of a partition leader, then restart.
    LeaderKill,
    /// kill -9 of the active controller, then restart.
    ControllerKill,
    /// SIGSTOP of a partition leader for longer than the session timeout,
    /// then SIGCONT.
    LeaderPause,
    /// A partition leader cut off from its followers (not from clients),
    /// then the network healed.
    Partition,
    /// SIGTERM and restart of every broker in turn, each once its ISRs
    /// are whole again.
    RollingRestart,
    /// acks=1 and unclean leader election, scripted so that acknowledged
    /// writes must be lost: proves the checker sees loss.
    NegativeControl,
    /// Clean elections only, scripted so that a replica holds records of a
    /// leader epoch its next leader never had, at offsets where that
    /// leader holds records of an earlier epoch: the replica must drop
    /// them when it follows again.
    EpochDivergence,
    /// Eligible leader replicas (KIP-966), scripted: the followers of a
    /// partition stop cleanly one after the other until its ISR is below
    /// `min.insync.replicas`, then its leader is killed; the follower that
    /// stopped last comes back and must lead (it is in the ELR, not the
    /// ISR; unclean election is off), losing nothing acknowledged.
    EligibleLeader,
}

impl Fault {
    pub const ALL: [Fault; 8] = [
        Fault::LeaderKill,
        Fault::ControllerKill,
        Fault::LeaderPause,
        Fault::Partition,
        Fault::RollingRestart,
        Fault::EpochDivergence,
        Fault::EligibleLeader,
        Fault::NegativeControl,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::LeaderKill => "leader-kill",
            Fault::ControllerKill => "controller-kill",
            Fault::LeaderPause => "leader-pause",
            Fault::Partition => "partition",
            Fault::RollingRestart => "rolling-restart",
            Fault::NegativeControl => "negative-control",
            Fault::EpochDivergence => "epoch-divergence",
            Fault::EligibleLeader => "eligible-leader",
        }
    }

    pub fn from_name(name: &str) -> Option<Fault> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// What the producers do while the fault is injected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadKind {
    /// Idempotent acks=all producers, every value on its own; checked for
    /// lost, duplicated, reordered and inconsistent acknowledged writes.
    #[default]
    Plain,
    /// Transactional producers, a few values per transaction, some
    /// aborted on purpose; read back with `read_committed` and checked
    /// for lost, aborted (G1a), duplicated and torn values.
    Transactional,
}

impl WorkloadKind {
    pub const ALL: [WorkloadKind; 2] = [WorkloadKind::Plain, WorkloadKind::Transactional];

    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Plain => "plain",
            WorkloadKind::Transactional => "transactional",
        }
    }

    pub fn from_name(name: &str) -> Option<WorkloadKind> {
        Self::ALL.into_iter().find(|w| w.name() == name)
    }
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub weir: PathBuf,
    /// How long the workload runs (faults are injected over it).
    pub seconds: u64,
    pub producers: usize,
    /// Values per second per producer.
    pub rate: u32,
    pub partitions: i32,
    /// How long to wait for the cluster to be whole after the faults.
    pub heal_timeout: Duration,
    /// Keep the cluster's directory (data and logs) even when the run
    /// found nothing.
    pub keep: bool,
    /// Print the timeline as it happens.
    pub verbose: bool,
    pub workload: WorkloadKind,
}

impl RunOptions {
    pub fn new(weir: impl Into<PathBuf>, seconds: u64) -> Self {
        Self {
            weir: weir.into(),
            seconds,
            producers: 3,
            rate: 50,
            partitions: 3,
            heal_timeout: Duration::from_secs(120),
            keep: false,
            verbose: false,
            workload: WorkloadKind::Plain,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Every safety property held (for the negative control: the loss was
    /// seen).
    Passed,
    /// A property did not hold (for the negative control: no loss seen).
    Failed,
    /// Not run here; the reason says why.
    Skipped,
    /// The harness could not carry the run out.
    Error,
}

/// One timed event of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    pub at_ms: u64,
    pub what: String,
}

/// What one fault's run found.
#[derive(Debug, Clone, Serialize)]
pub struct FaultResult {
    pub fault: String,
    pub workload: WorkloadKind,
    pub status: Status,
    /// Why it was skipped, errored or failed.
    pub reason: Option<String>,
    /// What the checker of the plain workload found.
    pub report: Option<Report>,
    /// What the checker of the transactional workload found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub txn_report: Option<TxnReport>,
    /// Replicas whose logs differ over offsets they all hold.
    pub divergent: Vec<String>,
    /// How long the cluster took to be whole after the workload, or why
    /// it was not.
    pub healed: Result<u64, String>,
    pub events: Vec<Event>,
    /// The cluster's data and logs, when kept.
    pub kept_dir: Option<String>,
    pub duration_ms: u64,
}

impl FaultResult {
    fn new(fault: Fault, status: Status, reason: Option<String>) -> Self {
        Self {
            fault: fault.name().to_owned(),
            workload: WorkloadKind::Plain,
            status,
            reason,
            report: None,
            txn_report: None,
            divergent: Vec::new(),
            healed: Err("not run".to_owned()),
            events: Vec::new(),
            kept_dir: None,
            duration_ms: 0,
        }
    }

    fn without_run(fault: Fault, status: Status, reason: String) -> Self {
        Self::new(fault, status, Some(reason))
    }
}

/// A run in progress: the cluster and its timeline.
struct Run {
    cluster: Cluster,
    origin: Instant,
    events: Vec<Event>,
    verbose: bool,
    partitions: i32,
    fault: Fault,
    /// A broker the second read pass should read from (the others are
    /// stopped for it), to see what it holds.
    read_from: Option<i32>,
    /// Writes a fault script made itself, never acknowledged.
    side_writes: Vec<checker::Write>,
}

impl Run {
    fn event(&mut self, what: impl Into<String>) {
        let event = Event {
            at_ms: self.origin.elapsed().as_millis() as u64,
            what: what.into(),
        };
        if self.verbose {
            eprintln!(
                "[{} {:>7.1}s] {}",
                self.fault.name(),
                event.at_ms as f64 / 1000.0,
                event.what
            );
        }
        self.events.push(event);
    }

    fn session(&self) -> Duration {
        Duration::from_millis(self.cluster.options().session_timeout_ms)
    }

    /// The leader of `partition`, once it has one.
    fn leader(&self, partition: i32, timeout: Duration) -> Result<(i32, Vec<i32>), Error> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(views) = self.cluster.partitions(TOPIC) {
                if let Some(v) = views.iter().find(|v| v.partition == partition) {
                    if v.leader > 0 {
                        return Ok((v.leader, v.replicas.clone()));
                    }
                }
            }
            if Instant::now() > deadline {
                return Err(Error(format!("partition {partition} has no leader")));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Waits for the cluster to be whole; notes how long it took.
    fn settle(&mut self, timeout: Duration) -> Result<(), Error> {
        match self.cluster.wait_healthy(timeout) {
            Ok(took) => {
                self.event(format!("whole again after {:.1}s", took.as_secs_f64()));
                Ok(())
            }
            Err(e) => {
                self.event(format!("not whole after {timeout:?}: {e}"));
                Err(Error(format!(
                    "the cluster was not whole within {timeout:?}: {e}"
                )))
            }
        }
    }

    fn kill9(&mut self, id: i32, why: &str) {
        self.cluster.node_mut(id).kill9();
        self.event(format!("kill -9 node {id} ({why})"));
    }

    fn restart(&mut self, id: i32) -> Result<(), Error> {
        self.cluster.restart(id)?;
        self.event(format!("node {id} restarted"));
        Ok(())
    }
}

/// Why `fault` cannot run under the transactional workload, if it cannot.
fn unfit_for_transactions(fault: Fault) -> Option<&'static str> {
    match fault {
        Fault::NegativeControl => Some(
            "the negative control needs acks=1 without idempotence, which a transactional \
             producer cannot have; the transactional checker's negative controls are its unit tests",
        ),
        Fault::EpochDivergence => Some(
            "a script for the plain workload: it writes outside any transaction and reads one \
             replica alone",
        ),
        Fault::EligibleLeader => Some(
            "a script for the plain workload: it takes two of three brokers down, and the \
             transaction coordinator's own partitions with them",
        ),
        _ => None,
    }
}

/// Runs one fault against a fresh cluster, under the workload `options`
/// name.
pub fn run(fault: Fault, options: &RunOptions) -> FaultResult {
    let mut result = match (options.workload, unfit_for_transactions(fault)) {
        (WorkloadKind::Transactional, Some(reason)) => {
            FaultResult::without_run(fault, Status::Skipped, reason.to_owned())
        }
        _ => run_fault(fault, options),
    };
    result.workload = options.workload;
    result
}

fn run_fault(fault: Fault, options: &RunOptions) -> FaultResult {
    if matches!(fault, Fault::Partition | Fault::EpochDivergence) {
        if let Some(reason) = netns::unavailable() {
            return FaultResult::without_run(fault, Status::Skipped, reason);
        }
    }
    let started = Instant::now();
    let layout = match fault {
        Fault::NegativeControl | Fault::EpochDivergence | Fault::EligibleLeader => {
            Layout::SeparateController
        }
        _ => Layout::Combined,
    };
    let network = match fault {
        Fault::Partition | Fault::EpochDivergence => Network::Namespaces,
        _ => Network::Loopback,
    };
    let mut cluster_options = ClusterOptions {
        layout,
        network,
        ..ClusterOptions::new(&options.weir)
    };
    if fault == Fault::EpochDivergence {
        // Room for the script's steps before a cut-off follower leaves
        // the ISR.
        cluster_options.replica_lag_ms = 10_000;
    }
    let cluster = match Cluster::start(cluster_options) {
        Ok(c) => c,
        Err(e) => {
            let status = if network == Network::Namespaces {
                // Namespaces exist but something in them does not work.
                Status::Skipped
            } else {
                Status::Error
            };
            return FaultResult::without_run(fault, status, format!("cluster: {e}"));
        }
    };
    let mut run = Run {
        cluster,
        origin: Instant::now(),
        events: Vec::new(),
        verbose: options.verbose,
        partitions: options.partitions,
        fault,
        read_from: None,
        side_writes: Vec::new(),
    };
    run.event(format!(
        "cluster started in {} ({})",
        run.cluster.dir().display(),
        match network {
            Network::Loopback => "loopback",
            Network::Namespaces => "network namespaces",
        }
    ));
    let mut result = match execute(&mut run, options) {
        Ok(result) => result,
        Err(e) => {
            run.event(format!("error: {e}"));
            FaultResult::without_run(fault, Status::Error, e.to_string())
        }
    };
    result.events = std::mem::take(&mut run.events);
    result.duration_ms = started.elapsed().as_millis() as u64;
    if options.keep || result.status != Status::Passed {
        run.cluster.keep_dir();
        result.kept_dir = Some(run.cluster.dir().display().to_string());
    }
    result
}

fn execute(run: &mut Run, options: &RunOptions) -> Result<FaultResult, Error> {
    let negative = run.fault == Fault::NegativeControl;
    let configs: &[(&str, &str)] = if negative {
        &[
            ("min.insync.replicas", "1"),
            ("unclean.leader.election.enable", "true"),
        ]
    } else {
        &[
            ("min.insync.replicas", "2"),
            ("unclean.leader.election.enable", "false"),
        ]
    };
    let bootstrap = run.cluster.bootstrap();
    workload::create_topic(
        &options.weir,
        &bootstrap,
        TOPIC,
        options.partitions,
        3,
        configs,
    )?;
    run.settle(Duration::from_secs(60))?;
    run.event(format!("topic {TOPIC} created: {configs:?}"));
    for v in run.cluster.partitions(TOPIC)? {
        run.event(format!(
            "partition {}: leader {}, replicas {:?}, isr {:?}",
            v.partition, v.leader, v.replicas, v.isr
        ));
    }
    match options.workload {
        WorkloadKind::Plain => execute_plain(run, options, &bootstrap),
        WorkloadKind::Transactional => execute_transactional(run, options, &bootstrap),
    }
}

fn execute_plain(
    run: &mut Run,
    options: &RunOptions,
    bootstrap: &str,
) -> Result<FaultResult, Error> {
    let negative = run.fault == Fault::NegativeControl;
    let workload_options = WorkloadOptions {
        bootstrap: bootstrap.to_owned(),
        topic: TOPIC.to_owned(),
        partitions: options.partitions,
        producers: options.producers,
        rate: options.rate,
        acks: if negative { "1" } else { "all" }.to_owned(),
        idempotence: !negative,
        // Longer than any stall a fault causes: librdkafka bumps the
        // idempotent producer's epoch when a message times out, and
        // re-sends what was in flight on other partitions under the new
        // epoch, where the broker cannot recognise it (duplicates no
        // broker can prevent).
        message_timeout_ms: 120_000,
    };
    let workload_start = run.origin.elapsed().as_millis() as u64;
    let workload = Workload::start(&workload_options, run.origin);
    run.event(format!(
        "workload: {} producers x {}/s, acks={}, idempotence={}",
        options.producers, options.rate, workload_options.acks, workload_options.idempotence
    ));
    let injected = inject_for(run, Duration::from_secs(options.seconds));
    run.event("stopping the producers");
    let mut writes = workload.stop();
    writes.append(&mut run.side_writes);
    let workload_end = run.origin.elapsed().as_millis() as u64;
    run.event(format!("producers stopped: {} values sent", writes.len()));

    let healed = wait_whole(run, options.heal_timeout);
    let mut history = History {
        writes,
        workload_start_ms: workload_start,
        workload_end_ms: workload_end,
        ..History::default()
    };
    for pass in 1..=2 {
        if let (2, Some(id)) = (pass, run.read_from) {
            // Only this replica left: it leads every partition.
            let others: Vec<i32> = run
                .cluster
                .broker_ids()
                .into_iter()
                .filter(|b| *b != id)
                .collect();
            for other in others {
                let clean = run
                    .cluster
                    .node_mut(other)
                    .terminate(Duration::from_secs(30))?;
                run.event(format!(
                    "SIGTERM node {other} ({}), so that node {id} leads",
                    if clean { "clean" } else { "killed" }
                ));
            }
            let _ = run.leader(0, Duration::from_secs(30))?;
        }
        let (mut reads, mut coverage) = workload::read_all(
            bootstrap,
            TOPIC,
            options.partitions,
            pass,
            Duration::from_secs(60),
        );
        run.event(format!(
            "read pass {pass}: {} records, ends {:?}",
            reads.len(),
            coverage
                .iter()
                .map(|c| (c.end, c.complete))
                .collect::<Vec<_>>()
        ));
        history.reads.append(&mut reads);
        history.coverage.append(&mut coverage);
    }

    let divergent = compare_replicas(run, options.partitions);
    let report = checker::check(&history);
    write_history(run, &history);
    let (status, reason) = if negative {
        if report.lost > 0 {
            (Status::Passed, None)
        } else {
            (
                Status::Failed,
                Some(format!(
                    "the negative control lost nothing: the checker or the script is blind{}",
                    injected
                        .err()
                        .map_or(String::new(), |e| format!(" (script: {e})"))
                )),
            )
        }
    } else {
        let mut violations = report.violations();
        violations.extend(divergent.iter().cloned());
        verdict(&injected, violations)
    };
    Ok(FaultResult {
        report: Some(report),
        divergent,
        healed,
        ..FaultResult::new(run.fault, status, reason)
    })
}

/// The transactional workload: transactional producers throughout the
/// fault, then, once the cluster is whole and no transaction is open, one
/// `read_committed` pass over every partition.
fn execute_transactional(
    run: &mut Run,
    options: &RunOptions,
    bootstrap: &str,
) -> Result<FaultResult, Error> {
    let workload_options = TxnWorkloadOptions {
        bootstrap: bootstrap.to_owned(),
        topic: TOPIC.to_owned(),
        partitions: options.partitions,
        producers: options.producers,
        rate: options.rate,
    };
    let workload = TxnWorkload::start(&workload_options, run.origin);
    // The first init_transactions creates __transaction_state: the fault
    // should find it created and whole.
    if !workload.wait_ready(Duration::from_secs(60)) {
        let txns = workload.stop();
        return Err(Error(format!(
            "the transactional producers did not initialise within 60s ({} transactions)",
            txns.len()
        )));
    }
    run.settle(Duration::from_secs(60))?;
    let workload_start = run.origin.elapsed().as_millis() as u64;
    run.event(format!(
        "workload: {} transactional producers x {} values/s",
        options.producers, options.rate
    ));
    let injected = inject_for(run, Duration::from_secs(options.seconds));
    run.event("stopping the producers");
    let txns = workload.stop();
    let workload_end = run.origin.elapsed().as_millis() as u64;
    run.event(format!(
        "producers stopped: {} transactions, {} values",
        txns.len(),
        txns.iter().map(|t| t.values.len()).sum::<usize>()
    ));

    let healed = wait_whole(run, options.heal_timeout);
    // Transactions left open by a replaced producer end when their
    // coordinator times them out: the reader waits for that.
    let (reads, coverage) = txn_workload::read_committed_all(
        bootstrap,
        TOPIC,
        options.partitions,
        Instant::now() + options.heal_timeout,
    );
    run.event(format!(
        "read_committed pass: {} records, ends {:?}",
        reads.len(),
        coverage
            .iter()
            .map(|c| (c.end, c.complete))
            .collect::<Vec<_>>()
    ));
    let history = TxnHistory {
        txns,
        reads,
        coverage,
        workload_start_ms: workload_start,
        workload_end_ms: workload_end,
    };

    let divergent = compare_replicas(run, options.partitions);
    let report = txn_checker::check(&history);
    write_history(run, &history);
    let mut violations = report.violations();
    violations.extend(divergent.iter().cloned());
    let (status, reason) = verdict(&injected, violations);
    Ok(FaultResult {
        txn_report: Some(report),
        divergent,
        healed,
        ..FaultResult::new(run.fault, status, reason)
    })
}

/// Lets the workload run for `total`, injecting the fault again and again
/// after a quiet start and before a quiet end; whether the fault script
/// did what it meant to.
fn inject_for(run: &mut Run, total: Duration) -> Result<(), Error> {
    let edge = (total / 8).clamp(Duration::from_secs(5), Duration::from_secs(20));
    let end = Instant::now() + total;
    std::thread::sleep(edge);
    let injected = inject(run, end - edge);
    // Whatever happened, nothing stays paused, cut or down.
    heal_everything(run);
    if let Err(e) = &injected {
        run.event(format!("fault script failed: {e}"));
    }
    let now = Instant::now();
    if end > now {
        std::thread::sleep(end - now);
    }
    injected
}

/// Waits for the cluster to be whole after the workload: how long it
/// took, or why it was not.
fn wait_whole(run: &mut Run, timeout: Duration) -> Result<u64, String> {
    match run.cluster.wait_healthy(timeout) {
        Ok(took) => {
            run.event(format!("whole after {:.1}s", took.as_secs_f64()));
            Ok(took.as_millis() as u64)
        }
        Err(e) => {
            run.event(format!("not whole after {timeout:?}: {e}"));
            Err(e)
        }
    }
}

/// Stops everything at once (nothing is being written) and compares the
/// replicas on disk.
fn compare_replicas(run: &mut Run, partitions: i32) -> Vec<String> {
    for node in &mut run.cluster.nodes {
        node.kill9();
    }
    let dirs: Vec<(i32, PathBuf)> = run
        .cluster
        .broker_ids()
        .into_iter()
        .map(|id| (id, run.cluster.data_dir(id)))
        .collect();
    let dirs: Vec<(i32, &std::path::Path)> =
        dirs.iter().map(|(id, d)| (*id, d.as_path())).collect();
    let divergent: Vec<String> = (0..partitions)
        .flat_map(|p| replicas::compare(TOPIC, p, &dirs))
        .collect();
    run.event(format!(
        "replicas compared: {} differences",
        divergent.len()
    ));
    divergent
}

/// Keeps the history beside the data, for a run that is kept.
fn write_history(run: &Run, history: &impl Serialize) {
    let history_path = run.cluster.dir().join("history.json");
    if let Ok(json) = serde_json::to_vec(history) {
        let _ = std::fs::write(&history_path, json);
    }
}

/// Passed or failed, from the violations found; when nothing was found
/// but the fault script could not do what it meant to, the run is not the
/// test it claims to be: an error.
fn verdict(injected: &Result<(), Error>, violations: Vec<String>) -> (Status, Option<String>) {
    match (violations.is_empty(), injected) {
        (true, Err(e)) => (Status::Error, Some(format!("fault script: {e}"))),
        (true, Ok(())) => (Status::Passed, None),
        (false, _) => (Status::Failed, Some(violations.join("; "))),
    }
}

/// Resumes paused nodes, heals the network, restarts nodes that are down.
fn heal_everything(run: &mut Run) {
    if let Some(netns) = run.cluster.netns() {
        if let Err(e) = netns.heal() {
            run.event(format!("cannot heal the network: {e}"));
        }
    }
    let ids: Vec<i32> = run.cluster.nodes.iter().map(|n| n.id).collect();
    for id in ids {
        if run.cluster.node(id).is_paused() {
            let _ = run.cluster.node_mut(id).resume();
            run.event(format!("SIGCONT node {id}"));
        }
        if !run.cluster.node(id).is_running() {
            if let Err(e) = run.restart(id) {
                run.event(format!("cannot restart node {id}: {e}"));
            }
        }
    }
}

/// Injects the fault again and again until `until`, each time healed
/// before the next.
fn inject(run: &mut Run, until: Instant) -> Result<(), Error> {
    let session = run.session();
    // Longer than a session: the controller fences the node and moves its
    // leaderships.
    let hold = session * 2 + Duration::from_secs(3);
    let settle_timeout = Duration::from_secs(90);
    let quiet = Duration::from_secs(3);
    let mut cycle = 0;
    if run.fault == Fault::NegativeControl {
        return negative_control(run);
    }
    if run.fault == Fault::EpochDivergence {
        return epoch_divergence(run);
    }
    if run.fault == Fault::EligibleLeader {
        return eligible_leader(run);
    }
    while Instant::now() + hold < until || cycle == 0 {
        let partition = cycle % run.partitions;
        cycle += 1;
        match run.fault {
            Fault::LeaderKill => {
                let (leader, _) = run.leader(partition, Duration::from_secs(30))?;
                run.kill9(leader, &format!("leader of partition {partition}"));
                std::thread::sleep(hold);
                run.restart(leader)?;
            }
            Fault::ControllerKill => {
                let controller = run
                    .cluster
                    .controller()
                    .ok_or_else(|| Error("no active controller".to_owned()))?;
                run.kill9(controller, "the active controller");
                std::thread::sleep(hold);
                run.restart(controller)?;
            }
            Fault::LeaderPause => {
                let (leader, _) = run.leader(partition, Duration::from_secs(30))?;
                run.cluster.node_mut(leader).pause()?;
                run.event(format!(
                    "SIGSTOP node {leader} (leader of partition {partition})"
                ));
                std::thread::sleep(hold);
                run.cluster.node_mut(leader).resume()?;
                run.event(format!("SIGCONT node {leader}"));
            }
            Fault::Partition => {
                let (leader, replicas) = run.leader(partition, Duration::from_secs(30))?;
                let followers: Vec<usize> = replicas
                    .iter()
                    .filter(|r| **r != leader)
                    .map(|r| *r as usize)
                    .collect();
                run.cluster
                    .netns()
                    .expect("namespaces")
                    .cut(leader as usize, &followers)
                    .map_err(Error)?;
                run.event(format!(
                    "network: node {leader} (leader of partition {partition}) cut off from {followers:?}"
                ));
                std::thread::sleep(hold);
                run.cluster
                    .netns()
                    .expect("namespaces")
                    .heal()
                    .map_err(Error)?;
                run.event("network healed");
            }
            Fault::RollingRestart => {
                for id in run.cluster.broker_ids() {
                    let clean = run
                        .cluster
                        .node_mut(id)
                        .terminate(Duration::from_secs(30))?;
                    run.event(format!(
                        "SIGTERM node {id}: {}",
                        if clean {
                            "exited cleanly"
                        } else {
                            "did not exit cleanly (killed)"
                        }
                    ));
                    run.restart(id)?;
                    run.settle(settle_timeout)?;
                }
            }
            Fault::NegativeControl | Fault::EpochDivergence | Fault::EligibleLeader => {
                unreachable!()
            }
        }
        run.settle(settle_timeout)?;
        std::thread::sleep(quiet);
    }
    Ok(())
}

/// The negative control, on brokers 1..=3 with a separate controller
/// (node 4), so that pausing two brokers leaves the quorum up: pause both
/// followers of partition 0 until its leader alone is the ISR, write
/// (acks=1) to the leader alone, kill it, resume the followers: unclean
/// election makes one of them leader without those writes.
fn negative_control(run: &mut Run) -> Result<(), Error> {
    let (leader, replicas) = run.leader(0, Duration::from_secs(30))?;
    let followers: Vec<i32> = replicas.into_iter().filter(|r| *r != leader).collect();
    for f in &followers {
        run.cluster.node_mut(*f).pause()?;
        run.event(format!("SIGSTOP node {f} (follower of partition 0)"));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(views) = run.cluster.partitions(TOPIC) {
            if views[0].isr == [leader] {
                break;
            }
        }
        if Instant::now() > deadline {
            return Err(Error(format!(
                "the ISR of partition 0 did not shrink to its leader {leader}"
            )));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    run.event(format!(
        "partition 0: ISR [{leader}]; writes acknowledged by it alone"
    ));
    std::thread::sleep(Duration::from_secs(5));
    run.kill9(leader, "leader of partition 0, alone in its ISR");
    for f in &followers {
        run.cluster.node_mut(*f).resume()?;
        run.event(format!("SIGCONT node {f}"));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let new_leader = loop {
        if let Ok(views) = run.cluster.partitions(TOPIC) {
            if followers.contains(&views[0].leader) {
                break views[0].leader;
            }
        }
        if Instant::now() > deadline {
            return Err(Error(
                "no follower of partition 0 became its leader".to_owned(),
            ));
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    run.event(format!("partition 0: node {new_leader} elected (unclean)"));
    // New writes take the offsets of the lost ones.
    std::thread::sleep(Duration::from_secs(5));
    run.restart(leader)?;
    run.settle(Duration::from_secs(90))
}

/// Polls the metadata until `partition`'s leader is `id`.
fn wait_leader(run: &Run, partition: i32, id: i32, timeout: Duration) -> Result<(), Error> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(views) = run.cluster.partitions(TOPIC) {
            if views
                .iter()
                .any(|v| v.partition == partition && v.leader == id)
            {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            return Err(Error(format!(
                "node {id} did not become leader of partition {partition}"
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// On brokers 1..=3 with a separate controller, in network namespaces,
/// with a replica lag limit long enough that no step drops a follower
/// from the ISR, so that every election is clean. Partition 0 has
/// replicas [a, b, c], led by a:
///
/// 1. b is cut off from a: a appends records that c copies and b does
///    not (acks=all waits for b).
/// 2. a is killed, c cut off from b. Once a is fenced, b leads (the first
///    in-sync replica), its log ending where it stopped copying a.
/// 3. b appends records in its epoch (the script sends some to it,
///    acks=all); none reaches c, none is acknowledged.
/// 4. b is killed. Once it is fenced, c leads (in sync, and still in the
///    ISR), with a's records at the offsets where b wrote its own.
/// 5. The network heals, a and then (once c has appended in its epoch) b
///    restart and follow c. b's latest epoch
///    is unknown to c, which answers OffsetForLeaderEpoch with the end of
///    the epoch before (a's, past b's records): b must still drop every
///    record of its epoch.
///
/// The second read pass reads from b alone.
fn epoch_divergence(run: &mut Run) -> Result<(), Error> {
    let (a, replicas) = run.leader(0, Duration::from_secs(30))?;
    if replicas.first() != Some(&a) || replicas.len() != 3 {
        return Err(Error(format!(
            "partition 0: leader {a} is not the first of {replicas:?}"
        )));
    }
    let (b, c) = (replicas[1], replicas[2]);
    run.read_from = Some(b);
    let cut = |run: &Run, node: i32, peers: &[i32]| -> Result<(), Error> {
        let peers: Vec<usize> = peers.iter().map(|p| *p as usize).collect();
        run.cluster
            .netns()
            .expect("namespaces")
            .cut(node as usize, &peers)
            .map_err(Error)
    };
    cut(run, b, &[a])?;
    run.event(format!(
        "network: node {b} cut off from {a}: leader {a} appends, {c} copies"
    ));
    std::thread::sleep(Duration::from_millis(1500));
    cut(run, c, &[b])?;
    run.event(format!("network: node {c} cut off from {b}"));
    run.kill9(a, "leader of partition 0");
    wait_leader(run, 0, b, Duration::from_secs(30))?;
    run.event(format!("node {b} leads partition 0"));
    let sent = workload::send_to_leader(&run.cluster.node(b).kafka, TOPIC, 0, "x", 10, run.origin);
    // The broker answers REQUEST_TIMED_OUT to what it appended but could
    // not replicate in time.
    let appended = sent
        .iter()
        .filter(|w| match &w.outcome {
            checker::Outcome::Failed { error } => error.contains("Broker: Request timed out"),
            checker::Outcome::Acked { .. } => true,
            checker::Outcome::Unknown => false,
        })
        .count();
    run.event(format!(
        "{} values sent to node {b} for partition 0, {appended} appended there (acks=all: none can be acknowledged)",
        sent.len()
    ));
    run.side_writes.extend(sent);
    if appended == 0 {
        return Err(Error(format!(
            "node {b} appended nothing while it led partition 0: the scenario did not happen"
        )));
    }
    run.kill9(b, "leader of partition 0, its records on no other replica");
    wait_leader(run, 0, c, Duration::from_secs(30))?;
    run.event(format!("node {c} leads partition 0"));
    run.cluster
        .netns()
        .expect("namespaces")
        .heal()
        .map_err(Error)?;
    run.event("network healed");
    run.restart(a)?;
    // Once c has appended in its own epoch, its OffsetForLeaderEpoch
    // answer for b's epoch is the end of the epoch before (a's), not
    // "unknown" (which would make b drop everything and copy it again).
    std::thread::sleep(Duration::from_secs(5));
    run.restart(b)?;
    run.settle(Duration::from_secs(90))
}

/// Eligible leader replicas (KIP-966), on brokers 1..=3 with a separate
/// controller (node 4), so that two brokers down leave the quorum up; the
/// topic has `min.insync.replicas` 2 and no unclean election. Partition 0
/// has replicas [a, b, c] in some order, led by a:
///
/// 1. b stops cleanly (SIGTERM): the ISR is [a, c], at its minimum, and
///    acks=all writes go on; b lacks them.
/// 2. c stops cleanly: the ISR is [a], below its minimum. c is an eligible
///    leader replica; the high watermark stands still, writes wait.
/// 3. a is killed. Once it is fenced the ISR is empty.
/// 4. c restarts (its clean stop proven): it must lead, elected from the
///    ELR, without unclean election. Then b and a restart.
///
/// The checker then finds every acknowledged write.
fn eligible_leader(run: &mut Run) -> Result<(), Error> {
    let (a, replicas) = run.leader(0, Duration::from_secs(30))?;
    let followers: Vec<i32> = replicas.iter().copied().filter(|r| *r != a).collect();
    let &[b, c] = followers.as_slice() else {
        return Err(Error(format!(
            "partition 0 has replicas {replicas:?}, not three"
        )));
    };
    // The ISR as a set: its order is the metadata's.
    let wait_isr = |run: &Run, isr: &[i32]| -> Result<(), Error> {
        let wanted: std::collections::BTreeSet<i32> = isr.iter().copied().collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(views) = run.cluster.partitions(TOPIC) {
                let is_wanted = |v: &&crate::cluster::PartitionView| {
                    v.partition == 0
                        && v.isr
                            .iter()
                            .copied()
                            .collect::<std::collections::BTreeSet<_>>()
                            == wanted
                };
                if views.iter().any(|v| is_wanted(&v)) {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(Error(format!(
                    "the ISR of partition 0 did not become {isr:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    };
    for (id, isr) in [(b, vec![a, c]), (c, vec![a])] {
        let clean = run
            .cluster
            .node_mut(id)
            .terminate(Duration::from_secs(30))?;
        if !clean {
            return Err(Error(format!(
                "node {id} did not stop cleanly: the scenario did not happen"
            )));
        }
        run.event(format!("SIGTERM node {id} (follower of partition 0)"));
        wait_isr(run, &isr)?;
        run.event(format!("partition 0: ISR {isr:?}"));
        // Writes acknowledged by the ISR at its minimum, which c holds.
        std::thread::sleep(Duration::from_secs(3));
    }
    run.kill9(a, "leader of partition 0, alone in its ISR");
    std::thread::sleep(run.session());
    run.restart(c)?;
    wait_leader(run, 0, c, Duration::from_secs(60))?;
    run.event(format!(
        "partition 0: node {c} elected from the eligible leader replicas"
    ));
    run.restart(b)?;
    run.restart(a)?;
    run.settle(Duration::from_secs(90))
}
