//! Incremental fetch sessions (KIP-227). A consumer or follower fetching
//! many partitions names them all once; the broker keeps them in a session,
//! later requests name only the partitions that changed (or are forgotten),
//! and responses carry only partitions with something new: records, an
//! error, or a moved high watermark or log start offset. With a thousand
//! idle partitions, each fetch then costs a few bytes each way instead of
//! a thousand partition entries.
//!
//! Kafka's rules, kept here without I/O or a clock of its own:
//! - epoch -1 (final) is a sessionless fetch, epoch 0 (initial) a full
//!   fetch that opens a session; either closes the session it names;
//! - a later epoch must be the session's next one (INVALID_FETCH_SESSION_EPOCH
//!   otherwise; FETCH_SESSION_ID_NOT_FOUND for an unknown or evicted id),
//!   and must name topics the way the session does (by id from v13 on:
//!   FETCH_SESSION_TOPIC_ID_ERROR otherwise);
//! - a full cache (`max.incremental.fetch.session.cache.slots`) makes room
//!   by evicting a session idle for two minutes, else the least valuable
//!   one (a consumer's before a follower's, smaller before larger) that is
//!   at least two minutes old, if it is worth less than the new one;
//!   otherwise the new fetch goes on without a session (id 0);
//! - partitions that returned records move to the end of the session's
//!   order, so a response bounded by `max_bytes` serves every partition in
//!   turn.
//!
//! Beyond Kafka, a session remembers which partitions a read found caught
//! up, and at which change count of the partition: until the count moves
//! (an append, a moved high watermark or log start, a leadership change)
//! or the client changes its parameters, the fetch skips them, so a fetch
//! costs little for every partition that has nothing new.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use parking_lot::{Mutex, MutexGuard};
use prometheus_client::metrics::gauge::Gauge;
use uuid::Uuid;

/// Kafka's `min.incremental.fetch.session.eviction.ms` (not configurable).
pub(crate) const EVICTION_MS: i64 = 120_000;
const INITIAL_EPOCH: i32 = 0;
const FINAL_EPOCH: i32 = -1;

/// How a fetch names a topic: by name before v13, by id from v13 on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum TopicRef {
    Name(Arc<str>),
    Id(Uuid),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PartitionKey {
    pub(crate) topic: TopicRef,
    pub(crate) partition: i32,
}

/// What the fetcher asks of one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FetchParams {
    pub(crate) fetch_offset: i64,
    pub(crate) max_bytes: i32,
    pub(crate) current_leader_epoch: i32,
    /// A follower's log start offset (-1 from consumers).
    pub(crate) log_start_offset: i64,
}

/// What a response said of one partition: decides whether the next
/// incremental response must include it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Answered {
    pub(crate) error_code: i16,
    pub(crate) high_watermark: i64,
    pub(crate) log_start_offset: i64,
    pub(crate) has_records: bool,
    /// A leader's answer naming another replica to read from (KIP-392):
    /// always sent, as Kafka's sessions do.
    pub(crate) preferred_read_replica: bool,
    /// Read with nothing beyond the fetch offset, at this change count of
    /// the partition: until the count moves, a read would find the same.
    pub(crate) caught_up_at: Option<u64>,
    /// Not read at all: unchanged since such a read.
    pub(crate) skipped: bool,
}

/// A fetch request as the session cache sees it.
pub(crate) struct FetchRequestView {
    pub(crate) version: i16,
    pub(crate) session_id: i32,
    pub(crate) epoch: i32,
    /// A follower's fetch: its session outranks a consumer's.
    pub(crate) privileged: bool,
    pub(crate) partitions: Vec<(PartitionKey, FetchParams)>,
    pub(crate) forgotten: Vec<PartitionKey>,
}

/// How a fetch is answered, decided before reading.
#[derive(Debug)]
pub(crate) enum FetchContext {
    /// A session error: answered at once, with no partitions.
    Error(i16),
    /// Epoch -1: the request's partitions, no session.
    Sessionless(Vec<(PartitionKey, FetchParams)>),
    /// Epoch 0: the request's partitions; a session is opened with them.
    Full {
        partitions: Vec<(PartitionKey, FetchParams)>,
        privileged: bool,
        uses_topic_ids: bool,
    },
    /// Every partition of the session, in the session's order.
    Incremental {
        session_id: i32,
        /// The session's epoch once this request is counted.
        epoch: i32,
        partitions: Vec<(PartitionKey, FetchParams)>,
        /// For each partition, the change count at which it was last read
        /// caught up with the same parameters, if it was.
        caught_up_at: Vec<Option<u64>>,
    },
}

impl FetchContext {
    /// For each partition, the change count of the partition at which a
    /// read found nothing new for the same parameters, if the session knows
    /// one: while the count stays, reading it again would change nothing.
    pub(crate) fn caught_up_at(&self, index: usize) -> Option<u64> {
        match self {
            FetchContext::Incremental { caught_up_at, .. } => caught_up_at[index],
            _ => None,
        }
    }

    /// The partitions to read, in the order to answer them.
    pub(crate) fn partitions(&self) -> &[(PartitionKey, FetchParams)] {
        match self {
            FetchContext::Error(_) => &[],
            FetchContext::Sessionless(partitions)
            | FetchContext::Full { partitions, .. }
            | FetchContext::Incremental { partitions, .. } => partitions,
        }
    }
}

/// The response's top-level fields, and which partitions it carries.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub(crate) error_code: i16,
    pub(crate) session_id: i32,
    /// One flag per partition of the context: include it in the response.
    pub(crate) include: Vec<bool>,
}

struct Cached {
    key: PartitionKey,
    params: FetchParams,
    /// As last sent; -1 after an error, so the partition is sent again
    /// once the error clears.
    high_watermark: i64,
    log_start_offset: i64,
    /// See [`Answered::caught_up_at`]; forgotten when the parameters change.
    caught_up_at: Option<u64>,
}

struct Session {
    epoch: i32,
    privileged: bool,
    uses_topic_ids: bool,
    created_ms: i64,
    last_used_ms: i64,
    /// The partitions, each in a slot that does not move while it stays.
    slots: Vec<Cached>,
    slot_of: HashMap<PartitionKey, usize>,
    /// The order the partitions are read and answered in, as slots: an
    /// incremental fetch reads them in this order, so its answers line up
    /// with it without a lookup.
    order: Vec<usize>,
}

impl Session {
    fn new(privileged: bool, uses_topic_ids: bool, slots: Vec<Cached>, now_ms: i64) -> Self {
        let mut session = Self {
            epoch: next_epoch(INITIAL_EPOCH),
            privileged,
            uses_topic_ids,
            created_ms: now_ms,
            last_used_ms: now_ms,
            slots,
            slot_of: HashMap::new(),
            order: Vec::new(),
        };
        session.index();
        session
    }

    /// Rebuilds the lookup and the order from the slots, in slot order.
    fn index(&mut self) {
        self.slot_of = self
            .slots
            .iter()
            .enumerate()
            .map(|(i, p)| (p.key.clone(), i))
            .collect();
        self.order = (0..self.slots.len()).collect();
    }

    fn add_or_update(&mut self, key: PartitionKey, params: FetchParams) {
        match self.slot_of.get(&key) {
            Some(&slot) => {
                let cached = &mut self.slots[slot];
                if cached.params != params {
                    cached.params = params;
                    cached.caught_up_at = None;
                }
            }
            None => {
                self.slot_of.insert(key.clone(), self.slots.len());
                self.order.push(self.slots.len());
                self.slots.push(Cached {
                    key,
                    params,
                    high_watermark: -1,
                    log_start_offset: -1,
                    caught_up_at: None,
                });
            }
        }
    }

    /// Drops `forgotten`, keeping the others in their order.
    fn forget(&mut self, forgotten: &[PartitionKey]) {
        let mut slots: Vec<Option<Cached>> = std::mem::take(&mut self.slots)
            .into_iter()
            .map(Some)
            .collect();
        self.slots = std::mem::take(&mut self.order)
            .into_iter()
            .filter_map(|slot| slots[slot].take())
            .filter(|p| !forgotten.contains(&p.key))
            .collect();
        self.index();
    }

    fn params(&self) -> Vec<(PartitionKey, FetchParams)> {
        self.order
            .iter()
            .map(|&slot| (self.slots[slot].key.clone(), self.slots[slot].params))
            .collect()
    }

    /// Kafka's eviction rank: followers' sessions above consumers', larger
    /// above smaller.
    fn rank(&self, id: i32) -> (bool, usize, i32) {
        (self.privileged, self.slots.len(), id)
    }
}

/// The broker's fetch sessions.
pub(crate) struct FetchSessionCache {
    max_sessions: usize,
    sessions: Mutex<HashMap<i32, Session>>,
    /// How many sessions are held.
    held: Gauge,
}

impl FetchSessionCache {
    pub(crate) fn new(max_sessions: usize, held: Gauge) -> Self {
        Self {
            max_sessions,
            sessions: Mutex::new(HashMap::new()),
            held,
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.sessions.lock().len()
    }

    /// The sessions, counted in the gauge when the guard goes.
    fn lock(&self) -> Counted<'_> {
        Counted {
            sessions: self.sessions.lock(),
            held: &self.held,
        }
    }

    /// Decides how `request` is answered, updating the session it
    /// continues.
    pub(crate) fn new_context(&self, request: FetchRequestView, now_ms: i64) -> FetchContext {
        let mut sessions = self.lock();
        if request.epoch == INITIAL_EPOCH || request.epoch == FINAL_EPOCH {
            sessions.remove(&request.session_id);
            return if request.epoch == FINAL_EPOCH {
                FetchContext::Sessionless(request.partitions)
            } else {
                FetchContext::Full {
                    partitions: request.partitions,
                    privileged: request.privileged,
                    uses_topic_ids: request.version >= 13,
                }
            };
        }
        let Some(session) = sessions.get_mut(&request.session_id) else {
            return FetchContext::Error(ResponseError::FetchSessionIdNotFound.code());
        };
        if session.epoch != request.epoch {
            return FetchContext::Error(ResponseError::InvalidFetchSessionEpoch.code());
        }
        if session.uses_topic_ids != (request.version >= 13) {
            return FetchContext::Error(ResponseError::FetchSessionTopicIdError.code());
        }
        for (key, params) in request.partitions {
            session.add_or_update(key, params);
        }
        if !request.forgotten.is_empty() {
            session.forget(&request.forgotten);
        }
        if session.slots.is_empty() {
            sessions.remove(&request.session_id);
            return FetchContext::Sessionless(Vec::new());
        }
        session.last_used_ms = now_ms;
        session.epoch = next_epoch(session.epoch);
        FetchContext::Incremental {
            session_id: request.session_id,
            epoch: session.epoch,
            partitions: session.params(),
            caught_up_at: session
                .order
                .iter()
                .map(|&slot| session.slots[slot].caught_up_at)
                .collect(),
        }
    }

    /// Settles a response that sends no partitions because the client is
    /// over its fetch quota: a full fetch opens no session, an incremental
    /// one keeps what its session had sent.
    pub(crate) fn throttled(&self, context: &FetchContext) -> Outcome {
        let (error_code, session_id) = match *context {
            FetchContext::Error(error_code) => (error_code, 0),
            FetchContext::Sessionless(_) | FetchContext::Full { .. } => (0, 0),
            FetchContext::Incremental { session_id, .. } => (0, session_id),
        };
        Outcome {
            error_code,
            session_id,
            include: Vec::new(),
        }
    }

    /// Settles the response once the partitions are read: opens the
    /// session of a full fetch, or records what an incremental one sends.
    /// `answered` follows [`FetchContext::partitions`].
    pub(crate) fn finish(
        &self,
        context: &FetchContext,
        answered: &[Answered],
        now_ms: i64,
    ) -> Outcome {
        let all = || vec![true; answered.len()];
        match *context {
            FetchContext::Error(error_code) => Outcome {
                error_code,
                session_id: 0,
                include: Vec::new(),
            },
            FetchContext::Sessionless(_) => Outcome {
                error_code: 0,
                session_id: 0,
                include: all(),
            },
            FetchContext::Full {
                ref partitions,
                privileged,
                uses_topic_ids,
            } => {
                let cached = || {
                    partitions
                        .iter()
                        .zip(answered)
                        .map(|((key, params), answer)| Cached {
                            key: key.clone(),
                            params: *params,
                            high_watermark: if answer.error_code == 0 {
                                answer.high_watermark
                            } else {
                                -1
                            },
                            log_start_offset: answer.log_start_offset,
                            caught_up_at: answer.caught_up_at,
                        })
                        .collect()
                };
                let session_id =
                    self.open(privileged, uses_topic_ids, partitions.len(), cached, now_ms);
                Outcome {
                    error_code: 0,
                    session_id,
                    include: all(),
                }
            }
            FetchContext::Incremental {
                session_id, epoch, ..
            } => {
                let mut sessions = self.lock();
                let Some(session) = sessions.get_mut(&session_id).filter(|s| s.epoch == epoch)
                else {
                    // A retry of this request, or a session evicted while
                    // this one waited for data: the client starts over.
                    return Outcome {
                        error_code: ResponseError::InvalidFetchSessionEpoch.code(),
                        session_id,
                        include: Vec::new(),
                    };
                };
                // The epoch is unchanged, so the session is as the
                // request found it: the answers follow its order.
                let mut include = Vec::with_capacity(answered.len());
                for (&slot, answer) in session.order.iter().zip(answered) {
                    let cached = &mut session.slots[slot];
                    if answer.skipped {
                        include.push(false);
                        continue;
                    }
                    cached.caught_up_at = answer.caught_up_at;
                    let mut send = answer.has_records
                        || answer.preferred_read_replica
                        || answer.error_code != 0;
                    if cached.high_watermark != answer.high_watermark {
                        send = true;
                        cached.high_watermark = answer.high_watermark;
                    }
                    if cached.log_start_offset != answer.log_start_offset {
                        send = true;
                        cached.log_start_offset = answer.log_start_offset;
                    }
                    if answer.error_code != 0 {
                        cached.high_watermark = -1;
                    }
                    include.push(send);
                }
                if answered.iter().any(|a| a.has_records) {
                    let (moved, stayed): (Vec<_>, Vec<_>) = session
                        .order
                        .iter()
                        .zip(answered)
                        .partition(|(_, a)| a.has_records);
                    session.order = stayed
                        .into_iter()
                        .chain(moved)
                        .map(|(&slot, _)| slot)
                        .collect();
                }
                Outcome {
                    error_code: 0,
                    session_id,
                    include,
                }
            }
        }
    }

    /// Opens a session if there is room or a session worth less can make
    /// some: its id, or 0.
    fn open(
        &self,
        privileged: bool,
        uses_topic_ids: bool,
        size: usize,
        partitions: impl FnOnce() -> Vec<Cached>,
        now_ms: i64,
    ) -> i32 {
        let mut sessions = self.lock();
        if sessions.len() >= self.max_sessions
            && !evict_one(&mut sessions, privileged, size, now_ms)
        {
            return 0;
        }
        let id = loop {
            let id = (Uuid::new_v4().as_u128() as i32) & i32::MAX;
            if id != 0 && !sessions.contains_key(&id) {
                break id;
            }
        };
        let session = Session::new(privileged, uses_topic_ids, partitions(), now_ms);
        sessions.insert(id, session);
        id
    }
}

/// Makes room for a new session of `size` partitions, as Kafka's
/// `FetchSessionCacheShard.tryEvict`: true if one was evicted.
fn evict_one(
    sessions: &mut HashMap<i32, Session>,
    privileged: bool,
    size: usize,
    now_ms: i64,
) -> bool {
    let stale = sessions
        .iter()
        .min_by_key(|(id, s)| (s.last_used_ms, **id))
        .filter(|(_, s)| now_ms - s.last_used_ms > EVICTION_MS)
        .map(|(id, _)| *id);
    if let Some(id) = stale {
        sessions.remove(&id);
        return true;
    }
    let old_enough = |s: &Session| now_ms - s.created_ms > EVICTION_MS;
    let victim = sessions
        .iter()
        .filter(|(_, s)| old_enough(s) || (privileged && !s.privileged))
        .min_by_key(|(id, s)| s.rank(**id))
        .filter(|(id, s)| (privileged, size, 0) >= s.rank(**id))
        .map(|(id, _)| *id);
    match victim {
        Some(id) => sessions.remove(&id).is_some(),
        None => false,
    }
}

struct Counted<'a> {
    sessions: MutexGuard<'a, HashMap<i32, Session>>,
    held: &'a Gauge,
}

impl std::ops::Deref for Counted<'_> {
    type Target = HashMap<i32, Session>;

    fn deref(&self) -> &Self::Target {
        &self.sessions
    }
}

impl std::ops::DerefMut for Counted<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.sessions
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.held.set(self.sessions.len() as i64);
    }
}

fn next_epoch(epoch: i32) -> i32 {
    match epoch {
        e if e < 0 => FINAL_EPOCH,
        i32::MAX => 1,
        e => e + 1,
    }
}

#[cfg(test)]
mod tests;
