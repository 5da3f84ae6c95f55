//! The log cleaner's background task: every `log.cleaner.backoff.ms` it
//! cleans the compacted partitions this broker hosts that need it, dirtiest
//! first (`cleanup.policy` with `compact`, `__consumer_offsets` included),
//! each below its high watermark. The cleaning itself is
//! [`weir_log::Cleaner`]'s; this task picks the logs, reports, and stops a
//! pass at shutdown. The dynamic cleaner configs (backoff, dedupe buffer,
//! I/O limit) apply from the next pass on.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use weir_log::{CleanOutcome, Cleaner, CleanerConfig};

use crate::broker::Broker;
use crate::partition::Partition;

/// A partition whose cleaning failed (corrupt data, I/O error) is left
/// alone for this many backoff periods, at least a minute.
const FAILURE_BACKOFFS: u32 = 20;

/// The cleaner's state between rounds.
struct State {
    cleaner: Cleaner,
    /// Partitions whose last cleaning failed, and until when they rest.
    failed: HashMap<(String, i32), Instant>,
}

/// Runs until `shutdown` turns true; a pass under way is stopped at its next
/// batch (what it swapped in stays, the rest waits for the next start).
pub async fn run(broker: Arc<Broker>, mut shutdown: watch::Receiver<bool>) {
    if !broker.config().log_cleaner_enable {
        return;
    }
    let mut settings = cleaner_config(&broker);
    let mut state = State {
        cleaner: Cleaner::new(settings.clone()),
        failed: HashMap::new(),
    };
    loop {
        let latest = cleaner_config(&broker);
        if (latest.dedupe_buffer_size, latest.io_max_bytes_per_second)
            != (
                settings.dedupe_buffer_size,
                settings.io_max_bytes_per_second,
            )
        {
            tracing::info!(
                dedupe_buffer_size = latest.dedupe_buffer_size,
                io_max_bytes_per_second = latest.io_max_bytes_per_second,
                "log cleaner reconfigured"
            );
            state.cleaner = Cleaner::new(latest.clone());
            settings = latest;
        }
        let abort = state.cleaner.abort_handle();
        let backoff = Duration::from_millis(broker.config().log_cleaner_backoff_ms);
        let round = {
            let broker = broker.clone();
            tokio::task::spawn_blocking(move || {
                clean_round(&broker, &mut state, backoff);
                state
            })
        };
        tokio::pin!(round);
        let finished = tokio::select! {
            finished = &mut round => finished,
            _ = shutdown.changed() => {
                abort.store(true, Ordering::Relaxed);
                let _ = round.await;
                return;
            }
        };
        state = match finished {
            Ok(state) => state,
            Err(error) => {
                tracing::error!(%error, "log cleaner stopped");
                return;
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// The cleaner's settings in force.
fn cleaner_config(broker: &Broker) -> CleanerConfig {
    let config = broker.config();
    CleanerConfig {
        dedupe_buffer_size: config.log_cleaner_dedupe_buffer_size,
        io_max_bytes_per_second: config.log_cleaner_io_max_bytes_per_second,
    }
}

/// Cleans, dirtiest first, every partition that needs it, each at most once.
fn clean_round(broker: &Broker, state: &mut State, backoff: Duration) {
    let abort = state.cleaner.abort_handle();
    let mut done = HashSet::new();
    let now = Instant::now();
    state.failed.retain(|_, until| *until > now);
    while !abort.load(Ordering::Relaxed) {
        let Some(partition) = dirtiest(broker, state, &done) else {
            return;
        };
        let id = (partition.topic.clone(), partition.index);
        done.insert(id.clone());
        if !clean(broker, &mut state.cleaner, &partition, &abort) {
            let rest = (backoff * FAILURE_BACKOFFS).max(Duration::from_secs(60));
            state.failed.insert(id, Instant::now() + rest);
        }
    }
}

/// The partition that most needs cleaning, by dirty ratio.
fn dirtiest(
    broker: &Broker,
    state: &State,
    done: &HashSet<(String, i32)>,
) -> Option<Arc<Partition>> {
    broker
        .all_partitions()
        .into_iter()
        .filter(|p| {
            let id = (p.topic.clone(), p.index);
            !done.contains(&id) && !state.failed.contains_key(&id)
        })
        .filter_map(|p| {
            let cleanable = p.cleanable()?;
            cleanable
                .needs_cleaning()
                .then_some((cleanable.dirty_ratio, p))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, p)| p)
}

/// Cleans one partition and reports; false when the cleaning failed.
fn clean(
    broker: &Broker,
    cleaner: &mut Cleaner,
    partition: &Partition,
    abort: &AtomicBool,
) -> bool {
    let (topic, index) = (&partition.topic, partition.index);
    match partition.clean(cleaner) {
        Ok(stats) => {
            if stats.outcome == CleanOutcome::NothingToClean {
                return true;
            }
            let seconds = stats.duration.as_secs_f64();
            let mb_s = if seconds > 0.0 {
                stats.bytes_read as f64 / seconds / 1e6
            } else {
                0.0
            };
            tracing::info!(
                topic = %topic,
                partition = index,
                outcome = ?stats.outcome,
                first_dirty_offset = stats.first_dirty_offset,
                end_offset = stats.end_offset,
                segments = stats.segments_cleaned,
                bytes_in = stats.bytes_read,
                bytes_out = stats.bytes_written,
                records_removed = stats.records_removed,
                tombstones_removed = stats.tombstones_removed,
                duration_ms = stats.duration.as_millis() as u64,
                mb_per_s = format!("{mb_s:.1}"),
                "log cleaner pass"
            );
            let metrics = broker.metrics();
            metrics.log_cleaner_passes.inc();
            metrics.log_cleaner_bytes_cleaned.inc_by(stats.bytes_read);
            metrics
                .log_cleaner_bytes_written
                .inc_by(stats.bytes_written);
            metrics
                .log_cleaner_records_removed
                .inc_by(stats.records_removed);
            true
        }
        Err(error) => {
            if abort.load(Ordering::Relaxed) {
                return true;
            }
            tracing::error!(topic = %topic, partition = index, %error, "log cleaner failed; partition left alone for a while");
            broker.metrics().log_cleaner_failures.inc();
            false
        }
    }
}
