//! The checker: from what the producers were told and what the consumers
//! read afterwards, what became of every acknowledged write. Pure: it only
//! looks at a [`History`].

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

/// How many examples of each anomaly a report keeps.
const SAMPLES: usize = 10;

/// What the producer's delivery report said of one write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// No delivery report came (the run ended with it in flight).
    Unknown,
    /// Acknowledged at this partition and offset, `at_ms` after the start
    /// of the run, as this producer's `order`-th acknowledgement.
    Acked {
        partition: i32,
        offset: i64,
        at_ms: u64,
        order: u64,
    },
    /// The producer gave up on it.
    Failed { error: String },
}

/// One value a producer sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Write {
    pub producer: String,
    pub seq: u64,
    /// Unique over the whole run: `{producer}-{seq}`.
    pub value: String,
    pub sent_ms: u64,
    pub outcome: Outcome,
}

/// One record a consumer read, in read pass `pass`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Read {
    pub pass: u32,
    pub partition: i32,
    pub offset: i64,
    pub value: String,
}

/// The offsets one read pass covered of a partition: `[start, end)`,
/// `complete` if every record in between was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    pub pass: u32,
    pub partition: i32,
    pub start: i64,
    pub end: i64,
    pub complete: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    pub writes: Vec<Write>,
    pub reads: Vec<Read>,
    pub coverage: Vec<Coverage>,
    /// When the producers started and stopped, in ms from the start.
    pub workload_start_ms: u64,
    pub workload_end_ms: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Samples {
    pub lost: Vec<String>,
    pub unverified: Vec<String>,
    pub duplicates: Vec<String>,
    pub inconsistent: Vec<String>,
    pub reorderings: Vec<String>,
}

/// What the checker found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Values sent.
    pub attempted: usize,
    /// Values the producers were told are written.
    pub acknowledged: usize,
    /// Values the producers gave up on.
    pub failed: usize,
    /// Values without a delivery report.
    pub in_doubt: usize,
    /// Distinct (partition, offset) positions read.
    pub read_records: usize,
    /// Acknowledged values read at least once.
    pub read_back: usize,
    /// Acknowledged values never read, in a partition read completely.
    pub lost: usize,
    /// Acknowledged values never read, in a partition no pass read
    /// completely: neither lost nor kept as far as the checker knows.
    pub unverified: usize,
    /// Values read at more than one offset.
    pub duplicates: usize,
    /// Acknowledged values whose acknowledged offset holds something else
    /// (or that were read elsewhere), offsets read with different values
    /// in different passes, and values read that nobody wrote.
    pub inconsistent: usize,
    /// Records read after a record of the same producer and partition
    /// that was acknowledged later.
    pub reorderings: usize,
    /// Values read although their producer was not told they were written
    /// (allowed: the acknowledgement may have been lost).
    pub unacknowledged_read: usize,
    /// The longest time without a successful write while the producers
    /// ran, and when it began (ms from the start).
    pub longest_unavailable_ms: u64,
    pub longest_unavailable_from_ms: u64,
    pub samples: Samples,
}

impl Report {
    /// The safety properties an idempotent acks=all producer is promised,
    /// each that does not hold as a sentence.
    pub fn violations(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut check = |count: usize, what: &str, samples: &[String]| {
            if count > 0 {
                out.push(format!("{count} {what}, e.g. {samples:?}"));
            }
        };
        check(self.lost, "lost", &self.samples.lost);
        check(self.duplicates, "duplicated", &self.samples.duplicates);
        check(
            self.inconsistent,
            "inconsistent",
            &self.samples.inconsistent,
        );
        check(self.reorderings, "reordered", &self.samples.reorderings);
        check(
            self.unverified,
            "unverified (partition not read completely)",
            &self.samples.unverified,
        );
        out
    }
}

fn sample(samples: &mut Vec<String>, text: impl FnOnce() -> String) {
    if samples.len() < SAMPLES {
        samples.push(text());
    }
}

/// One producer's acknowledged values in one partition: (offset, order
/// of acknowledgement, value).
type Stream<'a> = Vec<(i64, u64, &'a str)>;

/// Checks a history.
pub fn check(history: &History) -> Report {
    let mut report = Report {
        attempted: history.writes.len(),
        ..Report::default()
    };
    let mut samples = Samples::default();
    let writes: HashMap<&str, &Write> = history
        .writes
        .iter()
        .map(|w| (w.value.as_str(), w))
        .collect();
    for write in &history.writes {
        match write.outcome {
            Outcome::Acked { .. } => report.acknowledged += 1,
            Outcome::Failed { .. } => report.failed += 1,
            Outcome::Unknown => report.in_doubt += 1,
        }
    }

    // Per pass, what each offset held; and where each value was read.
    let mut by_pass: BTreeMap<(u32, i32, i64), &str> = BTreeMap::new();
    let mut by_position: BTreeMap<(i32, i64), BTreeSet<&str>> = BTreeMap::new();
    let mut positions_of: HashMap<&str, BTreeSet<(i32, i64)>> = HashMap::new();
    for read in &history.reads {
        by_pass.insert((read.pass, read.partition, read.offset), &read.value);
        by_position
            .entry((read.partition, read.offset))
            .or_default()
            .insert(&read.value);
        positions_of
            .entry(&read.value)
            .or_default()
            .insert((read.partition, read.offset));
    }
    report.read_records = by_position.len();
    let complete: Vec<&Coverage> = history.coverage.iter().filter(|c| c.complete).collect();
    let verified: BTreeSet<i32> = complete.iter().map(|c| c.partition).collect();

    // Acknowledged values: read back, lost, or at another offset than the
    // one acknowledged.
    for write in &history.writes {
        let Outcome::Acked {
            partition, offset, ..
        } = write.outcome
        else {
            continue;
        };
        let value = write.value.as_str();
        // librdkafka acknowledges without an offset (-1001) records whose
        // own answer was lost or failed when a later batch of the same
        // producer succeeds: their sequences prove them written, but
        // where is not known.
        let offset_known = offset >= 0;
        let elsewhere = |p: &(i32, i64)| {
            if offset_known {
                *p != (partition, offset)
            } else {
                p.0 != partition
            }
        };
        match positions_of.get(value) {
            Some(positions) => {
                report.read_back += 1;
                if positions.iter().any(elsewhere) {
                    report.inconsistent += 1;
                    sample(&mut samples.inconsistent, || {
                        format!(
                            "{value} acknowledged at {partition}:{offset}, read at {positions:?}"
                        )
                    });
                    continue;
                }
            }
            None if verified.contains(&partition) => {
                report.lost += 1;
                sample(&mut samples.lost, || {
                    format!("{value} acknowledged at {partition}:{offset}")
                });
            }
            None => {
                report.unverified += 1;
                sample(&mut samples.unverified, || {
                    format!("{value} acknowledged at {partition}:{offset}")
                });
            }
        }
        // Every pass that covered the acknowledged offset must have read
        // this value there.
        let differs = complete.iter().find_map(|c| {
            let covered =
                offset_known && c.partition == partition && c.start <= offset && offset < c.end;
            let held = by_pass.get(&(c.pass, partition, offset)).copied();
            (covered && held != Some(value)).then_some((c.pass, held))
        });
        if let Some((pass, held)) = differs {
            report.inconsistent += 1;
            sample(&mut samples.inconsistent, || {
                format!("{value} acknowledged at {partition}:{offset}, which pass {pass} read as {held:?}")
            });
        }
    }

    // Offsets read with different values by different passes.
    for ((partition, offset), values) in &by_position {
        if values.len() > 1 {
            report.inconsistent += 1;
            sample(&mut samples.inconsistent, || {
                format!("{partition}:{offset} read as {values:?}")
            });
        }
    }

    // Values read: duplicated, never written, written but not acknowledged.
    for (value, positions) in &positions_of {
        if positions.len() > 1 {
            report.duplicates += 1;
            sample(&mut samples.duplicates, || {
                format!("{value} read at {positions:?}")
            });
        }
        match writes.get(value) {
            None => {
                report.inconsistent += 1;
                sample(&mut samples.inconsistent, || {
                    format!("{value} read at {positions:?} but never written")
                });
            }
            Some(write) if !matches!(write.outcome, Outcome::Acked { .. }) => {
                report.unacknowledged_read += 1;
            }
            Some(_) => {}
        }
    }

    // Order: within a partition, one producer's acknowledged values in the
    // order they were acknowledged. Each position counts once, with the
    // first value read there.
    let mut streams: BTreeMap<(&str, i32), Stream<'_>> = BTreeMap::new();
    for ((partition, offset), values) in &by_position {
        let value = *values.iter().next().expect("a value");
        if let Some(write) = writes.get(value) {
            if let Outcome::Acked { order, .. } = write.outcome {
                streams
                    .entry((write.producer.as_str(), *partition))
                    .or_default()
                    .push((*offset, order, value));
            }
        }
    }
    for ((_, partition), stream) in &streams {
        let mut latest: Option<(i64, u64, &str)> = None;
        for &(offset, order, value) in stream {
            match latest {
                Some((at, max, before)) if order < max => {
                    report.reorderings += 1;
                    sample(&mut samples.reorderings, || {
                        format!(
                            "{value} (ack #{order}) read at {partition}:{offset}, after {before} (ack #{max}) at {partition}:{at}"
                        )
                    });
                }
                _ => latest = Some((offset, order, value)),
            }
        }
    }

    // Availability: the longest gap between successful writes, the start
    // and end of the workload included.
    let mut acks: Vec<u64> = history
        .writes
        .iter()
        .filter_map(|w| match w.outcome {
            Outcome::Acked { at_ms, .. } => Some(at_ms),
            _ => None,
        })
        .filter(|t| (history.workload_start_ms..=history.workload_end_ms).contains(t))
        .collect();
    acks.sort_unstable();
    let mut previous = history.workload_start_ms;
    for t in acks.into_iter().chain([history.workload_end_ms]) {
        if t.saturating_sub(previous) > report.longest_unavailable_ms {
            report.longest_unavailable_ms = t - previous;
            report.longest_unavailable_from_ms = previous;
        }
        previous = t;
    }

    report.samples = samples;
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acked(producer: &str, seq: u64, partition: i32, offset: i64, order: u64) -> Write {
        Write {
            producer: producer.to_owned(),
            seq,
            value: format!("{producer}-{seq}"),
            sent_ms: seq * 10,
            outcome: Outcome::Acked {
                partition,
                offset,
                at_ms: seq * 10 + 5,
                order,
            },
        }
    }

    fn failed(producer: &str, seq: u64) -> Write {
        Write {
            producer: producer.to_owned(),
            seq,
            value: format!("{producer}-{seq}"),
            sent_ms: seq * 10,
            outcome: Outcome::Failed {
                error: "timed out".to_owned(),
            },
        }
    }

    fn read(pass: u32, partition: i32, offset: i64, value: &str) -> Read {
        Read {
            pass,
            partition,
            offset,
            value: value.to_owned(),
        }
    }

    fn covered(pass: u32, partition: i32, end: i64) -> Coverage {
        Coverage {
            pass,
            partition,
            start: 0,
            end,
            complete: true,
        }
    }

    /// p-0..p-3 acknowledged at 0:0..0:3, in order.
    fn clean() -> History {
        History {
            writes: (0..4).map(|i| acked("p", i, 0, i as i64, i)).collect(),
            reads: (0..4)
                .map(|i| read(1, 0, i as i64, &format!("p-{i}")))
                .collect(),
            coverage: vec![covered(1, 0, 4)],
            workload_start_ms: 0,
            workload_end_ms: 40,
        }
    }

    #[test]
    fn an_acknowledgement_without_an_offset_holds_for_any_offset_of_its_partition() {
        // librdkafka's implicit acknowledgement: offset -1001.
        let mut history = clean();
        history.writes[2] = acked("p", 2, 0, -1001, 2);
        let report = check(&history);
        assert_eq!(report.violations(), Vec::<String>::new());
        assert_eq!(report.read_back, 4);

        // Read in another partition: inconsistent.
        history.reads[2].partition = 1;
        assert_eq!(check(&history).inconsistent, 1);

        // Not read at all from its partition, read to its end: lost.
        history.reads.remove(2);
        assert_eq!(check(&history).lost, 1);
    }

    #[test]
    fn a_clean_history_has_no_anomalies() {
        let report = check(&clean());
        assert_eq!(report.attempted, 4);
        assert_eq!(report.acknowledged, 4);
        assert_eq!(report.read_back, 4);
        assert_eq!(report.read_records, 4);
        assert_eq!(report.violations(), Vec::<String>::new());
        // Acks at 5, 15, 25, 35 within [0, 40].
        assert_eq!(report.longest_unavailable_ms, 10);
    }

    #[test]
    fn an_acknowledged_value_never_read_is_lost() {
        let mut h = clean();
        h.reads.pop();
        h.coverage = vec![covered(1, 0, 3)];
        let report = check(&h);
        assert_eq!(report.lost, 1);
        assert_eq!(report.inconsistent, 0, "its offset is past the end read");
        assert_eq!(report.samples.lost, vec!["p-3 acknowledged at 0:3"]);
        assert_eq!(report.violations().len(), 1);
    }

    #[test]
    fn a_lost_value_whose_offset_was_reused_is_also_inconsistent() {
        // The classic unclean election: p-2 and p-3 acknowledged by a leader
        // that died; the new leader wrote q-0, q-1 at their offsets.
        let mut h = clean();
        h.writes.push(acked("q", 0, 0, 2, 0));
        h.writes.push(acked("q", 1, 0, 3, 1));
        h.reads.truncate(2);
        h.reads.push(read(1, 0, 2, "q-0"));
        h.reads.push(read(1, 0, 3, "q-1"));
        let report = check(&h);
        assert_eq!(report.lost, 2);
        assert_eq!(report.inconsistent, 2);
        assert_eq!(report.read_back, 4);
    }

    #[test]
    fn a_value_in_a_partition_not_read_completely_is_unverified_not_lost() {
        let mut h = clean();
        h.writes.push(acked("p", 9, 1, 0, 4));
        h.coverage.push(Coverage {
            pass: 1,
            partition: 1,
            start: 0,
            end: 1,
            complete: false,
        });
        let report = check(&h);
        assert_eq!(report.lost, 0);
        assert_eq!(report.unverified, 1);
        assert_eq!(report.violations().len(), 1);
    }

    #[test]
    fn a_value_read_at_two_offsets_is_a_duplicate() {
        let mut h = clean();
        h.reads.push(read(1, 0, 4, "p-1"));
        h.coverage = vec![covered(1, 0, 5)];
        let report = check(&h);
        assert_eq!(report.duplicates, 1);
        // It is also read away from where it was acknowledged.
        assert_eq!(report.inconsistent, 1);
        assert_eq!(report.lost, 0);
    }

    #[test]
    fn a_duplicate_of_an_unacknowledged_value_is_still_a_duplicate() {
        let mut h = clean();
        h.writes.push(failed("p", 4));
        h.reads.push(read(1, 0, 4, "p-4"));
        h.reads.push(read(1, 0, 5, "p-4"));
        h.coverage = vec![covered(1, 0, 6)];
        let report = check(&h);
        assert_eq!(report.duplicates, 1);
        assert_eq!(report.unacknowledged_read, 1);
        assert_eq!(report.inconsistent, 0);
        assert_eq!(report.failed, 1);
    }

    #[test]
    fn an_acknowledged_offset_holding_another_value_is_inconsistent() {
        // p-1 acknowledged at 0:1 but read at 0:5 while 0:1 holds x-0.
        let mut h = clean();
        h.writes.push(failed("x", 0));
        h.reads[1] = read(1, 0, 1, "x-0");
        h.reads.push(read(1, 0, 5, "p-1"));
        h.coverage = vec![covered(1, 0, 6)];
        let report = check(&h);
        assert_eq!(report.inconsistent, 1, "{report:?}");
        assert_eq!(report.lost, 0);
        assert_eq!(report.unacknowledged_read, 1);
    }

    #[test]
    fn an_offset_read_differently_by_two_passes_is_inconsistent() {
        let mut h = clean();
        for r in clean().reads {
            h.reads.push(Read { pass: 2, ..r });
        }
        h.coverage.push(covered(2, 0, 4));
        assert_eq!(check(&h).violations(), Vec::<String>::new());
        // Pass 2 sees p-0 and p-3 swapped.
        h.reads[4].value = "p-3".to_owned();
        h.reads[7].value = "p-0".to_owned();
        let report = check(&h);
        // Both offsets have two values, and both values are read away from
        // their acknowledged offsets.
        assert_eq!(report.inconsistent, 4, "{report:?}");
        assert_eq!(report.duplicates, 2);
    }

    #[test]
    fn a_value_nobody_wrote_is_inconsistent() {
        let mut h = clean();
        h.reads.push(read(1, 0, 4, "ghost"));
        h.coverage = vec![covered(1, 0, 5)];
        let report = check(&h);
        assert_eq!(report.inconsistent, 1);
        assert_eq!(report.samples.inconsistent.len(), 1);
    }

    #[test]
    fn values_read_against_their_acknowledgement_order_are_reordered() {
        // p-1 (ack #1) was stored after p-2 (ack #2), offsets as reported.
        let h = History {
            writes: vec![
                acked("p", 0, 0, 0, 0),
                acked("p", 1, 0, 2, 1),
                acked("p", 2, 0, 1, 2),
                acked("q", 0, 0, 3, 0),
            ],
            reads: vec![
                read(1, 0, 0, "p-0"),
                read(1, 0, 1, "p-2"),
                read(1, 0, 2, "p-1"),
                read(1, 0, 3, "q-0"),
            ],
            coverage: vec![covered(1, 0, 4)],
            workload_start_ms: 0,
            workload_end_ms: 40,
        };
        let report = check(&h);
        assert_eq!(report.reorderings, 1, "{report:?}");
        assert_eq!(report.inconsistent, 0);
        assert!(report.samples.reorderings[0].starts_with("p-1 (ack #1)"));
    }

    #[test]
    fn order_is_only_compared_within_a_partition_and_a_producer() {
        // p-1 acknowledged before p-0, but in another partition; q's
        // order does not constrain p's.
        let h = History {
            writes: vec![
                acked("p", 0, 0, 0, 1),
                acked("p", 1, 1, 0, 0),
                acked("q", 0, 0, 1, 0),
            ],
            reads: vec![
                read(1, 0, 0, "p-0"),
                read(1, 1, 0, "p-1"),
                read(1, 0, 1, "q-0"),
            ],
            coverage: vec![covered(1, 0, 2), covered(1, 1, 1)],
            workload_start_ms: 0,
            workload_end_ms: 40,
        };
        assert_eq!(check(&h).violations(), Vec::<String>::new());
    }

    #[test]
    fn the_longest_window_without_a_successful_write_counts_the_edges() {
        let mut h = clean();
        // Acks at 5, 15, 25, 35; failures do not count.
        h.writes.push(failed("p", 5));
        h.workload_end_ms = 100;
        let report = check(&h);
        assert_eq!(report.longest_unavailable_ms, 65);
        assert_eq!(report.longest_unavailable_from_ms, 35);

        let mut h = clean();
        h.writes[1].outcome = Outcome::Acked {
            partition: 0,
            offset: 1,
            at_ms: 30,
            order: 1,
        };
        h.writes[2].outcome = Outcome::Unknown;
        h.workload_start_ms = 0;
        h.workload_end_ms = 40;
        let report = check(&h);
        // 5, 30, 35: the gap 5..30.
        assert_eq!(report.longest_unavailable_ms, 25);
        assert_eq!(report.longest_unavailable_from_ms, 5);
        assert_eq!(report.in_doubt, 1);

        let nothing = History {
            writes: vec![failed("p", 0)],
            workload_start_ms: 10,
            workload_end_ms: 70,
            ..History::default()
        };
        assert_eq!(check(&nothing).longest_unavailable_ms, 60);
    }

    #[test]
    fn a_history_round_trips_through_json() {
        let mut h = clean();
        h.writes.push(failed("p", 9));
        h.writes[0].outcome = Outcome::Unknown;
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(serde_json::from_str::<History>(&json).unwrap(), h);
        let report = serde_json::to_value(check(&h)).unwrap();
        assert_eq!(report["acknowledged"], 3);
    }
}
