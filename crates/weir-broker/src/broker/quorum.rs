//! The broker's handle on the controller quorum: it submits metadata
//! commands and reads the committed image.
//!
//! The Raft node runs on its own small runtime: request handlers await
//! their commands' commits from the broker's runtime, and start-up and
//! shutdown, which are synchronous, wait for theirs without starting a
//! runtime inside a runtime.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use weir_meta::{
    legacy_store, Applied, BrokerInfo, Command, Controller, ControllerError, ControllerStatus,
    HeartbeatReply, MetaError, MetadataImage, SubmitError,
};

/// Why the quorum could not be used.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    #[error(transparent)]
    Rejected(#[from] MetaError),
    #[error("the controller quorum could not take the change: {0}")]
    Unavailable(String),
    #[error("the controller quorum did not commit the change within {0:?}; it may still be made")]
    TimedOut(std::time::Duration),
    #[error(transparent)]
    Controller(#[from] ControllerError),
}

pub struct Metadata {
    runtime: Option<tokio::runtime::Runtime>,
    controller: Arc<Controller>,
}

impl Metadata {
    /// Starts this node's controller in `dir`, on `listener`, in the quorum
    /// of `voters` (as one of them, or as a learner that only follows the
    /// committed log when `voter` is false), and waits up to `leader_wait`
    /// until the quorum has a leader.
    pub fn start(
        dir: &Path,
        node_id: i32,
        listener: std::net::TcpListener,
        voters: Vec<(u64, SocketAddr)>,
        voter: bool,
        settings: weir_meta::ControllerConfig,
        leader_wait: Duration,
    ) -> Result<Self, MetadataError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("weir-controller")
            .enable_all()
            .build()
            .map_err(|e| MetadataError::Unavailable(format!("cannot start a runtime: {e}")))?;
        let dir = dir.to_owned();
        let controller = run_on(&runtime, async move {
            listener
                .set_nonblocking(true)
                .map_err(|e| MetadataError::Unavailable(e.to_string()))?;
            let listener = tokio::net::TcpListener::from_std(listener)
                .map_err(|e| MetadataError::Unavailable(e.to_string()))?;
            let controller = if voter {
                Controller::start_on(settings, node_id as u64, &dir, listener, &voters).await?
            } else {
                Controller::start_learner(settings, node_id as u64, &dir, listener, &voters).await?
            };
            if controller.wait_for_leader(leader_wait).await.is_none() {
                return Err(MetadataError::Unavailable(format!(
                    "no controller leader after {leader_wait:?} (initial.broker.registration.timeout.ms); are the other --controllers up?"
                )));
            }
            Ok(controller)
        })?;
        Ok(Self {
            runtime: Some(runtime),
            controller: Arc::new(controller),
        })
    }

    /// Submits a command and waits until it is committed and applied here.
    pub fn submit(&self, command: Command) -> Result<Applied, MetadataError> {
        let controller = self.controller.clone();
        let outcome = run_on(
            self.runtime(),
            async move { controller.submit(command).await },
        );
        outcome.map_err(submit_error)
    }

    /// Submits a command; the returned future ends once it is committed and
    /// applied here, or after `timeout_ms` (a request's own timeout) with
    /// [`MetadataError::TimedOut`]: the change may still be made. With a
    /// timeout of zero or less nothing is submitted and the answer is at
    /// once that it timed out, as Kafka's controller answers a request
    /// whose deadline passed before it could start it. The wait runs on the
    /// controller's runtime; the future may be awaited on any.
    pub fn submit_within(
        &self,
        command: Command,
        timeout_ms: i32,
    ) -> impl std::future::Future<Output = Result<Applied, MetadataError>> + Send + 'static {
        let timeout = Duration::from_millis(timeout_ms.max(0) as u64);
        let submitted = (!timeout.is_zero()).then(|| {
            let controller = self.controller.clone();
            self.runtime().spawn(async move {
                tokio::time::timeout(timeout, controller.submit(command)).await
            })
        });
        async move {
            match submitted {
                None => Err(MetadataError::TimedOut(timeout)),
                Some(task) => match task.await {
                    Ok(Ok(outcome)) => outcome.map_err(submit_error),
                    Ok(Err(_)) => Err(MetadataError::TimedOut(timeout)),
                    Err(error) => Err(MetadataError::Unavailable(error.to_string())),
                },
            }
        }
    }

    /// Ends once this node's image holds every change the controller
    /// quorum had committed when this was called (a linearizable read, see
    /// `Controller::catch_up`), or after `timeout_ms` with
    /// [`MetadataError::TimedOut`]. The wait runs on the controller's
    /// runtime; the future may be awaited on any.
    pub fn catch_up(
        &self,
        timeout_ms: i32,
    ) -> impl std::future::Future<Output = Result<(), MetadataError>> + Send + 'static {
        let timeout = Duration::from_millis(timeout_ms.max(0) as u64);
        let controller = self.controller.clone();
        let task = self
            .runtime()
            .spawn(async move { controller.catch_up(timeout).await });
        async move {
            match task.await {
                Ok(outcome) => outcome.map_err(submit_error),
                Err(error) => Err(MetadataError::Unavailable(error.to_string())),
            }
        }
    }

    /// Submits a command without waiting for it: `done` gets the outcome
    /// on the controller's runtime (it must not block).
    pub fn submit_in_background(
        &self,
        command: Command,
        done: impl FnOnce(Result<Applied, MetadataError>) + Send + 'static,
    ) {
        let controller = self.controller.clone();
        self.runtime().spawn(async move {
            done(controller.submit(command).await.map_err(submit_error));
        });
    }

    /// Heartbeats to the active controller every `interval` for as long as
    /// the returned task runs, registering `me` again whenever the
    /// controller answers that this incarnation is fenced or unknown.
    pub fn keep_alive(&self, me: BrokerInfo, interval: Duration) -> tokio::task::JoinHandle<()> {
        let controller = self.controller.clone();
        self.runtime().spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                match controller.heartbeat(me.id, me.incarnation).await {
                    Ok(HeartbeatReply::Alive) => {}
                    Ok(reply) => {
                        tracing::info!(
                            broker = me.id,
                            ?reply,
                            "registering again with the controller"
                        );
                        if let Err(error) =
                            controller.submit(Command::RegisterBroker(me.clone())).await
                        {
                            tracing::warn!(%error, "registration failed; retrying");
                        }
                    }
                    Err(error) => tracing::debug!(%error, "heartbeat to the controller failed"),
                }
            }
        })
    }

    /// Runs `on_change` (blocking code is fine) after every applied change
    /// to the image, until it returns false or the task is aborted.
    pub fn follow_changes(
        &self,
        on_change: impl Fn() -> bool + Send + Sync + 'static,
    ) -> tokio::task::JoinHandle<()> {
        let mut image = self.controller.image();
        let on_change = Arc::new(on_change);
        self.runtime().spawn(async move {
            while image.changed().await.is_ok() {
                let on_change = on_change.clone();
                match tokio::task::spawn_blocking(move || on_change()).await {
                    Ok(true) => {}
                    _ => break,
                }
            }
        })
    }

    /// The committed image, as this node has applied it.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.controller.image().borrow().clone()
    }

    /// The committed image as this node applies it, kept current.
    pub fn image_watch(&self) -> tokio::sync::watch::Receiver<Arc<MetadataImage>> {
        self.controller.image()
    }

    pub fn status(&self) -> ControllerStatus {
        self.controller.status()
    }

    /// Replays the metadata of a data directory written before the
    /// controller quorum existed (`meta/`) into an empty quorum, keeping
    /// topic ids, then sets the old directory aside.
    pub fn import_local_store(&self, dir: &Path) -> Result<(), MetadataError> {
        if !dir.join(legacy_store::LOG_FILE_NAME).exists()
            && !dir.join(legacy_store::SNAPSHOT_FILE_NAME).exists()
        {
            return Ok(());
        }
        let image = self.image();
        if image.topics().next().is_none() {
            let old = legacy_store::read(dir)?.unwrap_or_default();
            for broker in old.brokers() {
                self.submit(Command::RegisterBroker(broker.clone()))?;
            }
            for topic in old.topics() {
                self.submit(Command::CreateTopic {
                    name: topic.name.clone(),
                    id: topic.id,
                    partitions: topic.partitions.len() as i32,
                    replicas: topic
                        .partitions
                        .iter()
                        .map(|p| p.replicas.clone())
                        .collect(),
                    configs: topic.configs.clone(),
                    internal: topic.internal,
                })?;
            }
            let next = old.next_producer_id();
            if next > 0 {
                self.submit(Command::AllocateProducerIds { count: next })?;
            }
            tracing::info!(
                topics = old.topics().count(),
                "imported the metadata of the local store into the controller quorum"
            );
        }
        let aside = dir.with_extension("imported");
        std::fs::rename(dir, &aside)
            .map_err(|e| MetadataError::Unavailable(format!("{}: {e}", dir.display())))?;
        Ok(())
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime.as_ref().expect("present until dropped")
    }

    /// Stops the controller and waits for it.
    pub fn shutdown(&self) {
        let controller = self.controller.clone();
        if let Err(error) = run_on(self.runtime(), async move { controller.shutdown().await }) {
            tracing::warn!(%error, "controller shutdown");
        }
    }
}

impl Drop for Metadata {
    fn drop(&mut self) {
        // Dropping a runtime blocks; this one may be dropped on another
        // runtime's thread.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

fn submit_error(error: SubmitError) -> MetadataError {
    match error {
        SubmitError::Rejected(error) => MetadataError::Rejected(error),
        SubmitError::Timeout(timeout) => MetadataError::TimedOut(timeout),
        other => MetadataError::Unavailable(other.to_string()),
    }
}

/// Runs `future` on `runtime` and blocks this thread until it is done;
/// callable from synchronous code on any thread, a runtime's included.
fn run_on<T: Send + 'static>(
    runtime: &tokio::runtime::Runtime,
    future: impl std::future::Future<Output = T> + Send + 'static,
) -> T {
    let (done, outcome) = mpsc::channel();
    runtime.spawn(async move {
        let _ = done.send(future.await);
    });
    outcome
        .recv()
        .expect("the controller runtime runs until dropped")
}
