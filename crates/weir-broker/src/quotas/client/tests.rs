use weir_meta::QuotaValue;

use super::*;

const WINDOWS: QuotaWindows = QuotaWindows {
    samples: 11,
    window_ms: 1000,
};

fn entity(user: Option<Option<&str>>, client_id: Option<Option<&str>>) -> QuotaEntity {
    let name = |n: Option<&str>| EntityName::from_nullable(n);
    QuotaEntity {
        user: user.map(name),
        client_id: client_id.map(name),
    }
}

fn manager(quotas: &[(QuotaEntity, &str, f64)]) -> ClientQuotaManager {
    let mut all = ClientQuotas::new();
    for (entity, key, value) in quotas {
        all.entry(entity.clone())
            .or_default()
            .insert((*key).to_owned(), QuotaValue(*value));
    }
    let manager = ClientQuotaManager::new(WINDOWS);
    manager.update(&all);
    manager
}

fn client<'a>(user: &'a str, client_id: &'a str) -> Client<'a> {
    Client { user, client_id }
}

#[test]
fn nothing_is_measured_without_a_quota() {
    let m = manager(&[]);
    assert!(!m.enabled(QuotaKind::Produce));
    assert_eq!(m.record(QuotaKind::Produce, &client("u", "c"), 1e12, 0), 0);
}

#[test]
fn a_burst_over_the_quota_is_delayed_until_the_rate_is_back_within_it() {
    let m = manager(&[(entity(None, Some(Some("c"))), "producer_byte_rate", 1000.0)]);
    assert!(m.enabled(QuotaKind::Produce));
    assert!(!m.enabled(QuotaKind::Fetch));
    // 10 000 bytes over the minimum span of 10 windows: exactly the quota.
    assert_eq!(
        m.record(QuotaKind::Produce, &client("u", "c"), 10_000.0, 0),
        0
    );
    // 20 000 over 10 s is twice the quota: another 10 s bring it back.
    assert_eq!(
        m.record(QuotaKind::Produce, &client("u", "c"), 10_000.0, 0),
        10_000
    );
    // Another client id has no quota.
    assert_eq!(m.record(QuotaKind::Produce, &client("u", "d"), 1e9, 0), 0);
}

#[test]
fn old_windows_stop_counting() {
    let m = manager(&[(entity(None, Some(Some("c"))), "producer_byte_rate", 1000.0)]);
    assert!(m.record(QuotaKind::Produce, &client("u", "c"), 30_000.0, 0) > 0);
    // Eleven windows later the burst is forgotten.
    assert_eq!(
        m.record(QuotaKind::Produce, &client("u", "c"), 100.0, 11_000),
        0
    );
}

#[test]
fn the_most_specific_quota_applies() {
    let m = manager(&[
        (entity(None, Some(None)), "producer_byte_rate", 100.0),
        (entity(None, Some(Some("c"))), "producer_byte_rate", 1000.0),
        (
            entity(Some(Some("u")), Some(Some("c"))),
            "producer_byte_rate",
            10_000.0,
        ),
    ]);
    // user + client id: 100 000 bytes in 10 s is within 10 000/s.
    assert_eq!(
        m.record(QuotaKind::Produce, &client("u", "c"), 100_000.0, 0),
        0
    );
    // Another user's client "c": the client-id quota, 1 000/s.
    assert!(m.record(QuotaKind::Produce, &client("v", "c"), 100_000.0, 0) > 0);
    // Any other client id: the default client-id quota, 100/s.
    assert_eq!(
        m.record(QuotaKind::Produce, &client("v", "x"), 1000.0, 0),
        0
    );
    assert!(m.record(QuotaKind::Produce, &client("v", "x"), 1000.0, 0) > 0);
}

#[test]
fn a_user_quota_is_one_budget_for_all_its_clients_and_a_default_one_per_client() {
    let m = manager(&[
        (entity(Some(Some("u")), None), "consumer_byte_rate", 1000.0),
        (entity(None, Some(None)), "consumer_byte_rate", 1000.0),
    ]);
    assert_eq!(
        m.record(QuotaKind::Fetch, &client("u", "a"), 10_000.0, 0),
        0
    );
    assert!(m.record(QuotaKind::Fetch, &client("u", "b"), 10.0, 0) > 0);
    // Under the default client-id quota each client id has its own.
    assert_eq!(
        m.record(QuotaKind::Fetch, &client("v", "a"), 10_000.0, 0),
        0
    );
    assert_eq!(
        m.record(QuotaKind::Fetch, &client("v", "b"), 10_000.0, 0),
        0
    );
}

#[test]
fn each_kind_is_resolved_on_its_own() {
    let m = manager(&[
        (entity(Some(Some("u")), None), "producer_byte_rate", 1000.0),
        (entity(None, Some(Some("c"))), "consumer_byte_rate", 1000.0),
    ]);
    assert!(m.record(QuotaKind::Fetch, &client("u", "c"), 20_000.0, 0) > 0);
    assert_eq!(m.record(QuotaKind::Produce, &client("x", "c"), 1e9, 0), 0);
}

#[test]
fn a_request_time_delay_is_at_most_one_window() {
    let m = manager(&[(entity(None, Some(None)), "request_percentage", 10.0)]);
    // 100 percent-seconds (one thread busy for 100 s) against 10 %.
    assert_eq!(
        m.record(QuotaKind::Request, &client("u", "c"), 10_000.0, 0),
        1000
    );
}

#[test]
fn an_unrecorded_fetch_does_not_count() {
    let m = manager(&[(entity(None, Some(Some("c"))), "consumer_byte_rate", 1000.0)]);
    assert_eq!(m.record(QuotaKind::Fetch, &client("u", "c"), 9_000.0, 0), 0);
    let throttle = m.record(QuotaKind::Fetch, &client("u", "c"), 9_000.0, 10);
    assert!(throttle > 0);
    m.unrecord(QuotaKind::Fetch, &client("u", "c"), 9_000.0, 10);
    assert_eq!(
        m.record(QuotaKind::Fetch, &client("u", "c"), 1_000.0, 20),
        0
    );
}

#[test]
fn a_fetch_is_bounded_by_the_quota_over_all_but_one_window() {
    let m = manager(&[(entity(None, Some(Some("c"))), "consumer_byte_rate", 1000.0)]);
    assert_eq!(m.max_fetch_bytes(&client("u", "c")), Some(10_000));
    assert_eq!(m.max_fetch_bytes(&client("u", "d")), None);
}

#[test]
fn removing_the_last_quota_stops_measuring() {
    let m = manager(&[(entity(None, Some(Some("c"))), "producer_byte_rate", 1.0)]);
    m.update(&ClientQuotas::new());
    assert!(!m.enabled(QuotaKind::Produce));
    assert_eq!(m.record(QuotaKind::Produce, &client("u", "c"), 1e9, 0), 0);
}
