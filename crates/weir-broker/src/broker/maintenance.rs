//! Background upkeep: retention, producer-state snapshots and expiry, time-based
//! flushes, the expiry and checkpoints of `__consumer_offsets`, failed and
//! full log directories, and TLS certificates read again when their files
//! change.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::broker::Broker;
use crate::config::TxnSettings;
use crate::groups::offsets::OFFSETS_TOPIC;
use crate::share::state_coordinator::SHARE_STATE_TOPIC;
use crate::txn::hanging::HangingTxns;

/// A `__consumer_offsets` partition is checkpointed once its log holds at
/// least this many records, and this many times its live records.
const CHECKPOINT_MIN_RECORDS: u64 = 10_000;
const CHECKPOINT_RATIO: u64 = 4;

/// How often high watermarks are written down (Kafka's
/// `replica.high.watermark.checkpoint.interval.ms`).
const HIGH_WATERMARK_CHECKPOINT_INTERVAL: Duration = Duration::from_secs(5);

/// How often the TLS key store and trust store files are checked for a
/// change.
const TLS_RELOAD_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// How often a full log directory's volume is checked for freed space.
const FULL_DIR_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// How often `flush.ms` is checked.
const FLUSH_CHECK_INTERVAL: Duration = Duration::from_millis(500);

pub async fn run(broker: Arc<Broker>, mut shutdown: watch::Receiver<bool>) {
    let retention_every = Duration::from_millis(broker.config().log_retention_check_interval_ms);
    let mut retention = tokio::time::interval(retention_every);
    let mut flush = tokio::time::interval(FLUSH_CHECK_INTERVAL);
    let offsets_every = Duration::from_millis(broker.config().offsets_retention_check_interval_ms);
    let mut offsets = tokio::time::interval(offsets_every);
    offsets.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    retention.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Kafka checks at half the lag allowed.
    let lag_ms = broker.config().replica_lag_time_max_ms;
    let mut isr = tokio::time::interval(Duration::from_millis((lag_ms / 2).max(1) as u64));
    isr.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let txn_settings = broker.txn_settings();
    let mut transactions =
        tokio::time::interval(Duration::from_millis(txn_settings.abort_check_interval_ms));
    transactions.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let hanging = HangingTxns::default();
    let producers_every =
        Duration::from_millis(broker.config().producer_id_expiration_check_interval_ms);
    // The first check one interval after start, as Kafka schedules it:
    // producers restored from snapshots get that long to write again.
    let mut producers = tokio::time::interval_at(
        tokio::time::Instant::now() + producers_every,
        producers_every,
    );
    producers.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut high_watermarks = tokio::time::interval(HIGH_WATERMARK_CHECKPOINT_INTERVAL);
    high_watermarks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut full_dirs = tokio::time::interval(FULL_DIR_CHECK_INTERVAL);
    full_dirs.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut tls_reload = tokio::time::interval(TLS_RELOAD_CHECK_INTERVAL);
    tls_reload.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = retention.tick() => {
                let broker = broker.clone();
                let _ = tokio::task::spawn_blocking(move || enforce_retention(&broker)).await;
            }
            _ = offsets.tick() => {
                upkeep_offsets(&broker).await;
                upkeep_share_state(&broker).await;
            }
            _ = isr.tick() => shrink_isrs(&broker, lag_ms),
            _ = transactions.tick() => upkeep_transactions(&broker, &txn_settings, &hanging).await,
            _ = producers.tick() => expire_producers(&broker),
            _ = high_watermarks.tick() => {
                let broker = broker.clone();
                let _ = tokio::task::spawn_blocking(move || checkpoint_high_watermarks(&broker)).await;
            }
            _ = flush.tick() => {
                let broker = broker.clone();
                let _ = tokio::task::spawn_blocking(move || flush_due(&broker)).await;
            }
            _ = tls_reload.tick(), if broker.tls().is_some() || broker.oauth().is_some() => {
                let files = broker.clone();
                let reloaded = tokio::task::spawn_blocking(move || {
                    let tls = files.tls().map(|tls| tls.reload_if_changed());
                    (tls, files.refresh_jwks_if_due())
                })
                .await;
                let Ok((tls, jwks)) = reloaded else { continue };
                match tls {
                    Some(Ok(true)) => tracing::info!("TLS certificates changed on disk: new connections use them"),
                    Some(Err(error)) => tracing::warn!(%error, "TLS files changed but cannot be used; the previous ones stay in force"),
                    _ => {}
                }
                match jwks {
                    Ok(true) => tracing::info!("the OAUTHBEARER JWKS was read again: new tokens are checked against it"),
                    Ok(false) => {}
                    Err(error) => tracing::warn!(%error, "the OAUTHBEARER JWKS cannot be read again or used; the previous keys stay in force"),
                }
            }
            _ = broker.log_dirs().failed_since() => {
                let replicas = broker.clone();
                let refusing = tokio::task::spawn_blocking(move || {
                    let replicas = replicas.replicas();
                    let mut refusing = replicas.take_failed_dirs_offline();
                    refusing.extend(replicas.replicas_in_full_dirs());
                    refusing
                })
                .await;
                broker.report_offline_replicas(refusing.unwrap_or_default());
            }
            _ = full_dirs.tick(), if !broker.log_dirs().full().is_empty() => {
                let dirs = broker.clone();
                let _ = tokio::task::spawn_blocking(move || dirs.log_dirs().take_back_freed()).await;
            }
            _ = shutdown.changed() => return,
        }
    }
}

/// Finishes, times out and expires transactions, aborts hanging ones;
/// publishes how many are open and the age of the oldest.
async fn upkeep_transactions(broker: &Arc<Broker>, settings: &TxnSettings, hanging: &HangingTxns) {
    let coordinator = broker.txns().clone();
    coordinator.upkeep(settings.id_expiration_ms).await;
    let led = broker
        .all_partitions()
        .into_iter()
        .filter(|p| broker.leader_partition(&p.topic, p.index).is_ok())
        .collect();
    hanging
        .abort_hanging(&coordinator, led, i64::from(settings.max_timeout_ms))
        .await;
    let (open, oldest) = coordinator.open_transactions().await;
    let metrics = broker.metrics();
    metrics.transactions_open.set(open as i64);
    let age_ms = oldest.map_or(0, |start| broker.now_ms().saturating_sub(start).max(0));
    metrics
        .transaction_oldest_open_seconds
        .set(age_ms as f64 / 1000.0);
}

fn enforce_retention(broker: &Broker) {
    for partition in broker.all_partitions() {
        // Bounds how much log a restart after a crash replays to rebuild
        // idempotent-producer state.
        if let Err(error) = partition.snapshot_producer_state() {
            tracing::warn!(topic = %partition.topic, partition = partition.index, %error, "producer state snapshot failed");
        }
        match partition.enforce_retention() {
            Ok(outcome) if outcome.deleted_segments > 0 => tracing::info!(
                topic = %partition.topic,
                partition = partition.index,
                segments = outcome.deleted_segments,
                log_start_offset = outcome.log_start_offset,
                "retention deleted segments"
            ),
            Ok(_) => {}
            Err(error) => {
                tracing::error!(topic = %partition.topic, partition = partition.index, %error, "retention failed")
            }
        }
    }
}

/// Expires old offsets, then checkpoints every `__consumer_offsets`
/// partition whose log holds mostly superseded records.
async fn upkeep_offsets(broker: &Broker) {
    let retention_ms = broker.config().offsets_retention_minutes * 60_000;
    broker
        .groups()
        .expire_offsets(retention_ms, broker.now_ms() as u64)
        .await;
    // Only a partition's leader writes to it.
    let led = broker
        .offsets()
        .hosted()
        .into_iter()
        .filter_map(|index| broker.partition(OFFSETS_TOPIC, index));
    for partition in led {
        let in_log = partition.log().log_end_offset() - partition.log().log_start_offset();
        let live = broker.offsets().live_records(partition.index) as u64;
        if in_log < CHECKPOINT_MIN_RECORDS || in_log < CHECKPOINT_RATIO * live {
            continue;
        }
        match broker
            .offsets()
            .checkpoint(partition.index, broker.now_ms())
            .await
        {
            Ok(rewritten) => tracing::info!(
                partition = partition.index,
                superseded = in_log - live,
                rewritten,
                "checkpointed __consumer_offsets"
            ),
            Err(error) => {
                tracing::warn!(partition = partition.index, %error, "__consumer_offsets checkpoint failed")
            }
        }
    }
}

/// Prunes the `__share_group_state` partitions led here that hold many
/// records: their cold share-partitions are snapshotted again and the log
/// start moves up to the oldest snapshot still needed.
async fn upkeep_share_state(broker: &Broker) {
    let led = broker
        .partitions_of(SHARE_STATE_TOPIC)
        .into_iter()
        .filter(|p| broker.leader_partition(SHARE_STATE_TOPIC, p.index).is_ok());
    for partition in led {
        let in_log = partition.log().log_end_offset() - partition.log().log_start_offset();
        if in_log < CHECKPOINT_MIN_RECORDS {
            continue;
        }
        match broker
            .share_state()
            .prune(&partition, broker.now_ms())
            .await
        {
            Ok(Some(start)) => tracing::info!(
                partition = partition.index,
                log_start = start,
                "pruned __share_group_state"
            ),
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(partition = partition.index, %error, "pruning __share_group_state failed")
            }
        }
    }
}

fn checkpoint_high_watermarks(broker: &Broker) {
    if let Err(error) = broker.checkpoint_high_watermarks() {
        tracing::warn!(%error, "high watermark checkpoint failed");
    }
}

/// Forgets idempotent producers idle past `producer.id.expiration.ms`
/// (in memory only: the next snapshot leaves them out).
fn expire_producers(broker: &Broker) {
    let (now, expiration_ms) = (broker.now_ms(), broker.config().producer_id_expiration_ms);
    for partition in broker.all_partitions() {
        let expired = partition.expire_producers(now, expiration_ms);
        if expired > 0 {
            tracing::debug!(topic = %partition.topic, partition = partition.index, expired, "idle producers expired");
        }
    }
}

/// Proposes ISRs without the followers that stopped keeping up.
fn shrink_isrs(broker: &Arc<Broker>, lag_ms: i64) {
    let now = broker.now_ms();
    for partition in broker.all_partitions() {
        if let Some(isr) = partition.lagging_isr(now, lag_ms) {
            broker.propose_isr(partition, isr);
        }
    }
}

fn flush_due(broker: &Broker) {
    for partition in broker.all_partitions() {
        if let Err(error) = partition.flush_if_due() {
            tracing::error!(topic = %partition.topic, partition = partition.index, %error, "flush failed");
        }
    }
}
