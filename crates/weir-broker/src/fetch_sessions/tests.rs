use super::*;

const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;
const FETCH_SESSION_TOPIC_ID_ERROR: i16 = 106;

fn key(topic: &str, partition: i32) -> PartitionKey {
    PartitionKey {
        topic: TopicRef::Name(topic.into()),
        partition,
    }
}

fn params(fetch_offset: i64) -> FetchParams {
    FetchParams {
        fetch_offset,
        max_bytes: 1 << 20,
        current_leader_epoch: -1,
        log_start_offset: -1,
    }
}

fn request(session_id: i32, epoch: i32, partitions: &[(&str, i32, i64)]) -> FetchRequestView {
    FetchRequestView {
        version: 12,
        session_id,
        epoch,
        privileged: false,
        partitions: partitions
            .iter()
            .map(|&(t, p, offset)| (key(t, p), params(offset)))
            .collect(),
        forgotten: Vec::new(),
    }
}

fn quiet(high_watermark: i64) -> Answered {
    Answered {
        error_code: 0,
        high_watermark,
        log_start_offset: 0,
        has_records: false,
        preferred_read_replica: false,
        caught_up_at: None,
        skipped: false,
    }
}

fn with_records(high_watermark: i64) -> Answered {
    Answered {
        has_records: true,
        ..quiet(high_watermark)
    }
}

fn names(context: &FetchContext) -> Vec<(String, i32)> {
    context
        .partitions()
        .iter()
        .map(|(k, _)| match &k.topic {
            TopicRef::Name(name) => (name.to_string(), k.partition),
            TopicRef::Id(id) => (id.to_string(), k.partition),
        })
        .collect()
}

/// Opens a session over `partitions`, each answered quietly at offset 10.
fn open(cache: &FetchSessionCache, partitions: &[(&str, i32, i64)], now: i64) -> i32 {
    let context = cache.new_context(request(0, 0, partitions), now);
    let answered = vec![quiet(10); partitions.len()];
    let outcome = cache.finish(&context, &answered, now);
    assert_ne!(outcome.session_id, 0);
    outcome.session_id
}

#[test]
fn a_full_fetch_opens_a_session_and_later_ones_carry_only_what_changed() {
    let cache = FetchSessionCache::new(10, Gauge::default());
    let id = open(&cache, &[("a", 0, 5), ("a", 1, 5), ("b", 0, 5)], 0);
    assert_eq!(cache.len(), 1);

    // The next request names nothing: every partition of the session is read.
    let context = cache.new_context(request(id, 1, &[]), 1);
    assert_eq!(
        names(&context),
        [("a".into(), 0), ("a".into(), 1), ("b".into(), 0)]
    );
    let outcome = cache.finish(&context, &[quiet(10), with_records(12), quiet(10)], 1);
    assert_eq!(
        outcome,
        Outcome {
            error_code: 0,
            session_id: id,
            include: vec![false, true, false]
        }
    );

    // A moved high watermark is news even without records.
    let context = cache.new_context(request(id, 2, &[("a", 1, 12)]), 2);
    let sent = context
        .partitions()
        .iter()
        .find(|(k, _)| *k == key("a", 1))
        .map(|(_, p)| p.fetch_offset);
    assert_eq!(sent, Some(12), "the request updates the session's offsets");
    let outcome = cache.finish(&context, &[quiet(11), quiet(10), quiet(12)], 2);
    assert_eq!(outcome.include, vec![true, false, false]);
}

#[test]
fn the_final_epoch_fetches_without_a_session_and_closes_the_one_named() {
    let cache = FetchSessionCache::new(10, Gauge::default());
    let id = open(&cache, &[("a", 0, 0)], 0);
    let context = cache.new_context(request(id, -1, &[("a", 0, 0)]), 1);
    assert!(matches!(context, FetchContext::Sessionless(_)));
    assert_eq!(cache.len(), 0);
    let outcome = cache.finish(&context, &[quiet(3)], 1);
    assert_eq!((outcome.session_id, outcome.include), (0, vec![true]));
    // An initial epoch closes the old session and opens another.
    let old = open(&cache, &[("a", 0, 0)], 2);
    let new = open(&cache, &[("a", 0, 0)], 3);
    let _ = cache.new_context(request(old, 0, &[]), 3);
    assert_eq!(cache.len(), 1);
    assert_ne!(old, new);
}

#[test]
fn session_errors_are_kafkas() {
    let cache = FetchSessionCache::new(10, Gauge::default());
    let id = open(&cache, &[("a", 0, 0)], 0);
    let error = |context: FetchContext| match context {
        FetchContext::Error(code) => code,
        other => panic!("expected an error, got {other:?}"),
    };
    assert_eq!(
        error(cache.new_context(request(id + 1, 1, &[]), 1)),
        FETCH_SESSION_ID_NOT_FOUND
    );
    assert_eq!(
        error(cache.new_context(request(id, 2, &[]), 1)),
        INVALID_FETCH_SESSION_EPOCH
    );
    let by_id = FetchRequestView {
        version: 13,
        ..request(id, 1, &[])
    };
    assert_eq!(
        error(cache.new_context(by_id, 1)),
        FETCH_SESSION_TOPIC_ID_ERROR
    );
    // None of those moved the session on: epoch 1 is still the next one.
    let context = cache.new_context(request(id, 1, &[]), 1);
    assert!(matches!(
        context,
        FetchContext::Incremental { epoch: 2, .. }
    ));
    let outcome = cache.finish(&FetchContext::Error(70), &[], 1);
    assert_eq!((outcome.error_code, outcome.session_id), (70, 0));
}

#[test]
fn a_retried_request_whose_epoch_was_used_meanwhile_is_refused_at_the_answer() {
    let cache = FetchSessionCache::new(10, Gauge::default());
    let id = open(&cache, &[("a", 0, 0)], 0);
    let first = cache.new_context(request(id, 1, &[]), 1);
    let second = cache.new_context(request(id, 2, &[]), 1);
    let outcome = cache.finish(&first, &[with_records(5)], 1);
    assert_eq!(outcome.error_code, INVALID_FETCH_SESSION_EPOCH);
    assert!(outcome.include.is_empty());
    assert_eq!(
        cache.finish(&second, &[with_records(5)], 1).include,
        vec![true]
    );
}

#[test]
fn forgotten_partitions_leave_the_session_and_the_last_one_closes_it() {
    let cache = FetchSessionCache::new(10, Gauge::default());
    let id = open(&cache, &[("a", 0, 0), ("a", 1, 0)], 0);
    let mut forget = request(id, 1, &[("b", 0, 7)]);
    forget.forgotten = vec![key("a", 0)];
    let context = cache.new_context(forget, 1);
    assert_eq!(names(&context), [("a".into(), 1), ("b".into(), 0)]);
    // The added partition is always sent the first time.
    let outcome = cache.finish(&context, &[quiet(10), quiet(10)], 1);
    assert_eq!(outcome.include, vec![false, true]);

    let mut forget = request(id, 2, &[]);
    forget.forgotten = vec![key("a", 1), key("b", 0)];
    let context = cache.new_context(forget, 2);
    assert!(matches!(&context, FetchContext::Sessionless(p) if p.is_empty()));
    assert_eq!(cache.len(), 0);
}

#[test]
fn partitions_that_returned_records_go_to_the_back_of_the_line() {
    let cache = FetchSessionCache::new(10, Gauge::default());
    let id = open(&cache, &[("a", 0, 0), ("a", 1, 0), ("a", 2, 0)], 0);
    let context = cache.new_context(request(id, 1, &[]), 1);
    cache.finish(
        &context,
        &[with_records(20), quiet(10), with_records(20)],
        1,
    );
    let context = cache.new_context(request(id, 2, &[]), 2);
    assert_eq!(
        names(&context),
        [("a".into(), 1), ("a".into(), 0), ("a".into(), 2)]
    );
}

#[test]
fn an_erroring_partition_is_sent_until_the_error_clears_and_once_after() {
    let cache = FetchSessionCache::new(10, Gauge::default());
    let id = open(&cache, &[("a", 0, 0)], 0);
    let not_leader = Answered {
        error_code: 6,
        high_watermark: -1,
        log_start_offset: -1,
        has_records: false,
        preferred_read_replica: false,
        caught_up_at: None,
        skipped: false,
    };
    for epoch in 1..=2 {
        let context = cache.new_context(request(id, epoch, &[]), 1);
        assert_eq!(cache.finish(&context, &[not_leader], 1).include, vec![true]);
    }
    let context = cache.new_context(request(id, 3, &[]), 1);
    assert_eq!(cache.finish(&context, &[quiet(10)], 1).include, vec![true]);
    let context = cache.new_context(request(id, 4, &[]), 1);
    assert_eq!(cache.finish(&context, &[quiet(10)], 1).include, vec![false]);
}

#[test]
fn a_partition_naming_a_preferred_read_replica_is_always_sent() {
    let cache = FetchSessionCache::new(10, Gauge::default());
    let id = open(&cache, &[("a", 0, 0), ("a", 1, 0)], 0);
    let context = cache.new_context(request(id, 1, &[]), 1);
    cache.finish(&context, &[quiet(10), quiet(10)], 1);
    let redirected = Answered {
        preferred_read_replica: true,
        ..quiet(10)
    };
    for epoch in 2..=3 {
        let context = cache.new_context(request(id, epoch, &[]), 1);
        let outcome = cache.finish(&context, &[redirected, quiet(10)], 1);
        assert_eq!(outcome.include, vec![true, false], "epoch {epoch}");
    }
}

#[test]
fn a_full_cache_evicts_only_what_kafka_would() {
    let cache = FetchSessionCache::new(1, Gauge::default());
    let small = open(&cache, &[("a", 0, 0)], 0);
    // A fresh session is kept: the newcomer fetches without one.
    let context = cache.new_context(request(0, 0, &[("a", 0, 0), ("a", 1, 0)]), 1_000);
    assert_eq!(
        cache
            .finish(&context, &[quiet(1), quiet(1)], 1_000)
            .session_id,
        0
    );
    // A follower's session displaces a consumer's at once.
    let follower = FetchRequestView {
        privileged: true,
        ..request(0, 0, &[("a", 0, 0)])
    };
    let context = cache.new_context(follower, 1_000);
    let privileged = cache.finish(&context, &[quiet(1)], 1_000).session_id;
    assert_ne!(privileged, 0);
    let gone = cache.new_context(request(small, 1, &[]), 1_000);
    assert!(matches!(
        gone,
        FetchContext::Error(FETCH_SESSION_ID_NOT_FOUND)
    ));

    // Used within two minutes, an old follower session holds against a larger consumer one ...
    let keep_alive = cache.new_context(request(privileged, 1, &[]), 100_000);
    cache.finish(&keep_alive, &[quiet(1)], 100_000);
    let bigger = [("a", 0, 0), ("a", 1, 0), ("a", 2, 0)];
    let context = cache.new_context(request(0, 0, &bigger), 200_000);
    assert_eq!(
        cache.finish(&context, &[quiet(1); 3], 200_000).session_id,
        0
    );
    // ... but not once idle for longer than that.
    let context = cache.new_context(request(0, 0, &bigger), 220_001);
    assert_ne!(
        cache.finish(&context, &[quiet(1); 3], 220_001).session_id,
        0
    );
    assert_eq!(cache.len(), 1);
}

#[test]
fn an_old_session_gives_way_to_a_larger_one_but_not_to_a_smaller_one() {
    let cache = FetchSessionCache::new(1, Gauge::default());
    let two = [("a", 0, 0), ("a", 1, 0)];
    let id = open(&cache, &two, 0);
    // Kept in use, so never stale, but older than two minutes.
    for epoch in 1..=3 {
        let context = cache.new_context(request(id, epoch, &[]), epoch as i64 * 60_000);
        cache.finish(&context, &[quiet(10), quiet(10)], epoch as i64 * 60_000);
    }
    let context = cache.new_context(request(0, 0, &[("b", 0, 0)]), 180_000);
    assert_eq!(cache.finish(&context, &[quiet(1)], 180_000).session_id, 0);
    let three = [("b", 0, 0), ("b", 1, 0), ("b", 2, 0)];
    let context = cache.new_context(request(0, 0, &three), 180_000);
    assert_ne!(
        cache.finish(&context, &[quiet(1); 3], 180_000).session_id,
        0
    );
}

#[test]
fn the_epoch_wraps_to_one() {
    assert_eq!(next_epoch(0), 1);
    assert_eq!(next_epoch(41), 42);
    assert_eq!(next_epoch(i32::MAX), 1);
    assert_eq!(next_epoch(-1), -1);
}

#[test]
fn a_partition_read_caught_up_is_marked_until_its_parameters_change() {
    let cache = FetchSessionCache::new(10, Gauge::default());
    let context = cache.new_context(request(0, 0, &[("a", 0, 10), ("a", 1, 10)]), 0);
    assert_eq!(
        context.caught_up_at(0),
        None,
        "a full fetch reads everything"
    );
    let caught_up = Answered {
        caught_up_at: Some(7),
        ..quiet(10)
    };
    let id = cache
        .finish(&context, &[caught_up, quiet(10)], 0)
        .session_id;

    let context = cache.new_context(request(id, 1, &[]), 1);
    assert_eq!(
        (context.caught_up_at(0), context.caught_up_at(1)),
        (Some(7), None)
    );
    // Skipped, it keeps its mark and is not sent.
    let skipped = Answered {
        skipped: true,
        ..quiet(-1)
    };
    let outcome = cache.finish(&context, &[skipped, quiet(10)], 1);
    assert_eq!(outcome.include, vec![false, false]);

    // New parameters (the client moved its offset) forget the mark.
    let context = cache.new_context(request(id, 2, &[("a", 0, 11)]), 2);
    assert_eq!(context.caught_up_at(0), None);
    // As does a read that was not caught up.
    cache.finish(&context, &[with_records(12), quiet(10)], 2);
    let context = cache.new_context(request(id, 3, &[]), 3);
    assert_eq!(context.caught_up_at(1), None);
}
