//! The checker of the transactional workload: from what each transaction
//! became (committed, aborted, or unknown to its producer) and what a
//! `read_committed` consumer read afterwards, whether transactions were
//! atomic and their outcomes respected. Pure: it only looks at a
//! [`TxnHistory`].
//!
//! The anomalies, after Jepsen's Kafka workload:
//! - **lost**: a value of a committed transaction never read;
//! - **aborted read** (G1a): a value of an aborted transaction read;
//! - **duplicate**: a value read at more than one offset;
//! - **torn**: a transaction (whatever its outcome) of which some values
//!   were read and others, in partitions read completely, were not.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::checker::{Coverage, Read};

/// How many examples of each anomaly a report keeps.
const SAMPLES: usize = 10;

/// What became of a transaction, as its producer was told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TxnOutcome {
    /// `commit_transaction` succeeded: every value must be read.
    Committed,
    /// `abort_transaction` succeeded: no value may be read.
    Aborted,
    /// Ending it failed or timed out (or the producer was fenced): either
    /// way, but all or nothing.
    Unknown,
}

/// One value a transaction sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnValue {
    /// Unique over the whole run: `{producer}-{seq}`.
    pub value: String,
    pub partition: i32,
    /// Where its delivery report said it was written, if it said so.
    pub offset: Option<i64>,
}

/// One transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Txn {
    /// The producer thread, `t{n}` (its `transactional.id` is
    /// `chaos-txn-{n}`).
    pub producer: String,
    /// Which producer of that transactional id ran it (a producer is
    /// replaced after a fatal error or a transaction in doubt).
    pub incarnation: u32,
    /// The producer's transaction number.
    pub seq: u64,
    /// The values handed to the producer inside the transaction.
    pub values: Vec<TxnValue>,
    pub started_ms: u64,
    pub ended_ms: u64,
    pub outcome: TxnOutcome,
    /// What went wrong, when it was not committed or aborted as planned.
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnHistory {
    pub txns: Vec<Txn>,
    /// What the `read_committed` consumers read.
    pub reads: Vec<Read>,
    pub coverage: Vec<Coverage>,
    /// When the producers started and stopped, in ms from the start.
    pub workload_start_ms: u64,
    pub workload_end_ms: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnSamples {
    pub lost: Vec<String>,
    pub unverified: Vec<String>,
    pub aborted_reads: Vec<String>,
    pub duplicates: Vec<String>,
    pub torn: Vec<String>,
    pub unwritten_reads: Vec<String>,
}

/// What the checker found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnReport {
    pub transactions: usize,
    pub committed: usize,
    pub aborted: usize,
    pub unknown: usize,
    /// Values sent in transactions, of any outcome.
    pub values: usize,
    /// Distinct (partition, offset) positions read.
    pub read_records: usize,
    /// Values of committed transactions read at least once.
    pub committed_read: usize,
    /// Values of committed transactions never read, in partitions read
    /// completely.
    pub lost: usize,
    /// Values of committed transactions never read, in partitions no
    /// pass read completely: the run proves nothing about them.
    pub unverified: usize,
    /// Values of aborted transactions that their delivery reports said
    /// written: in the log, for a `read_committed` reader to skip.
    pub aborted_written: usize,
    /// Values of aborted transactions read (G1a).
    pub aborted_reads: usize,
    /// Values read at more than one offset.
    pub duplicates: usize,
    /// Transactions partly read: some values read, others (in partitions
    /// read completely) not.
    pub torn: usize,
    /// Transactions in doubt whose values were read (allowed: the commit
    /// went through although its producer was not told).
    pub unknown_visible: usize,
    /// Values read that no transaction sent.
    pub unwritten_reads: usize,
    /// The longest time without a successful commit while the producers
    /// ran, and when it began (ms from the start).
    pub longest_unavailable_ms: u64,
    pub longest_unavailable_from_ms: u64,
    pub samples: TxnSamples,
}

impl TxnReport {
    /// The properties transactions promise, each that does not hold as a
    /// sentence.
    pub fn violations(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut check = |count: usize, what: &str, samples: &[String]| {
            if count > 0 {
                out.push(format!("{count} {what}, e.g. {samples:?}"));
            }
        };
        check(self.lost, "lost", &self.samples.lost);
        check(
            self.aborted_reads,
            "aborted values read (G1a)",
            &self.samples.aborted_reads,
        );
        check(self.duplicates, "duplicated", &self.samples.duplicates);
        check(self.torn, "torn transactions", &self.samples.torn);
        check(
            self.unwritten_reads,
            "read but never written",
            &self.samples.unwritten_reads,
        );
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

fn describe(txn: &Txn) -> String {
    format!(
        "{}#{} ({}.{}, {:?})",
        txn.producer, txn.seq, txn.producer, txn.incarnation, txn.outcome
    )
}

/// Checks a history.
pub fn check(history: &TxnHistory) -> TxnReport {
    let mut report = TxnReport {
        transactions: history.txns.len(),
        ..TxnReport::default()
    };
    let mut samples = TxnSamples::default();
    for txn in &history.txns {
        match txn.outcome {
            TxnOutcome::Committed => report.committed += 1,
            TxnOutcome::Aborted => report.aborted += 1,
            TxnOutcome::Unknown => report.unknown += 1,
        }
        report.values += txn.values.len();
        if txn.outcome == TxnOutcome::Aborted {
            report.aborted_written += txn.values.iter().filter(|v| v.offset.is_some()).count();
        }
    }

    let mut positions_of: HashMap<&str, BTreeSet<(i32, i64)>> = HashMap::new();
    for read in &history.reads {
        positions_of
            .entry(&read.value)
            .or_default()
            .insert((read.partition, read.offset));
    }
    report.read_records = history
        .reads
        .iter()
        .map(|r| (r.partition, r.offset))
        .collect::<BTreeSet<_>>()
        .len();
    let verified: BTreeSet<i32> = history
        .coverage
        .iter()
        .filter(|c| c.complete)
        .map(|c| c.partition)
        .collect();

    let mut written: HashMap<&str, &Txn> = HashMap::new();
    for txn in &history.txns {
        let mut read = 0;
        // Values not read where they would have been seen.
        let mut missing = Vec::new();
        for v in &txn.values {
            written.insert(&v.value, txn);
            let positions = positions_of.get(v.value.as_str());
            match (positions, txn.outcome) {
                (Some(positions), outcome) => {
                    read += 1;
                    match outcome {
                        TxnOutcome::Committed => report.committed_read += 1,
                        TxnOutcome::Aborted => {
                            report.aborted_reads += 1;
                            sample(&mut samples.aborted_reads, || {
                                format!("{} of {} read at {positions:?}", v.value, describe(txn))
                            });
                        }
                        TxnOutcome::Unknown => {}
                    }
                }
                (None, outcome) if verified.contains(&v.partition) => {
                    missing.push(v.value.as_str());
                    if outcome == TxnOutcome::Committed {
                        report.lost += 1;
                        sample(&mut samples.lost, || {
                            format!(
                                "{} of {} written to {}:{}",
                                v.value,
                                describe(txn),
                                v.partition,
                                v.offset.map_or("?".to_owned(), |o| o.to_string())
                            )
                        });
                    }
                }
                (None, TxnOutcome::Committed) => {
                    report.unverified += 1;
                    sample(&mut samples.unverified, || {
                        format!("{} of {}", v.value, describe(txn))
                    });
                }
                (None, _) => {}
            }
        }
        if read > 0 && txn.outcome == TxnOutcome::Unknown {
            report.unknown_visible += 1;
        }
        if read > 0 && !missing.is_empty() {
            report.torn += 1;
            sample(&mut samples.torn, || {
                format!(
                    "{}: {read} of {} values read, not {missing:?}",
                    describe(txn),
                    txn.values.len()
                )
            });
        }
    }

    // Values read twice, or that nobody wrote.
    let by_value: BTreeMap<&str, &BTreeSet<(i32, i64)>> =
        positions_of.iter().map(|(v, p)| (*v, p)).collect();
    for (value, positions) in by_value {
        if positions.len() > 1 {
            report.duplicates += 1;
            sample(&mut samples.duplicates, || {
                format!("{value} read at {positions:?}")
            });
        }
        if !written.contains_key(value) {
            report.unwritten_reads += 1;
            sample(&mut samples.unwritten_reads, || {
                format!("{value} read at {positions:?}")
            });
        }
    }

    // Availability: the longest gap between successful commits, the start
    // and end of the workload included.
    let mut commits: Vec<u64> = history
        .txns
        .iter()
        .filter(|t| t.outcome == TxnOutcome::Committed)
        .map(|t| t.ended_ms)
        .filter(|t| (history.workload_start_ms..=history.workload_end_ms).contains(t))
        .collect();
    commits.sort_unstable();
    let mut previous = history.workload_start_ms;
    for t in commits.into_iter().chain([history.workload_end_ms]) {
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

    /// Transaction `seq` of producer t0: values `t0-{first}..` over
    /// partitions round robin, ended at `seq * 100 + 50` ms.
    fn txn(seq: u64, first: u64, size: u64, outcome: TxnOutcome) -> Txn {
        Txn {
            producer: "t0".to_owned(),
            incarnation: 0,
            seq,
            values: (first..first + size)
                .map(|i| TxnValue {
                    value: format!("t0-{i}"),
                    partition: (i % 2) as i32,
                    offset: None,
                })
                .collect(),
            started_ms: seq * 100,
            ended_ms: seq * 100 + 50,
            outcome,
            error: None,
        }
    }

    fn read(partition: i32, offset: i64, value: &str) -> Read {
        Read {
            pass: 1,
            partition,
            offset,
            value: value.to_owned(),
        }
    }

    fn covered(partition: i32, complete: bool) -> Coverage {
        Coverage {
            pass: 1,
            partition,
            start: 0,
            end: 100,
            complete,
        }
    }

    /// Reads `values` in order, each at the next offset of its partition.
    fn reads_of(values: &[&str]) -> Vec<Read> {
        let mut next = [0i64; 2];
        values
            .iter()
            .map(|v| {
                let i: usize = v.trim_start_matches("t0-").parse().unwrap();
                let p = i % 2;
                next[p] += 1;
                read(p as i32, next[p] - 1, v)
            })
            .collect()
    }

    /// Committed t0-0..3, aborted t0-4..7, committed t0-8..11: a
    /// read_committed consumer reads the committed ones.
    fn clean() -> TxnHistory {
        TxnHistory {
            txns: vec![
                txn(0, 0, 4, TxnOutcome::Committed),
                txn(1, 4, 4, TxnOutcome::Aborted),
                txn(2, 8, 4, TxnOutcome::Committed),
            ],
            reads: reads_of(&[
                "t0-0", "t0-1", "t0-2", "t0-3", "t0-8", "t0-9", "t0-10", "t0-11",
            ]),
            coverage: vec![covered(0, true), covered(1, true)],
            workload_start_ms: 0,
            workload_end_ms: 300,
        }
    }

    #[test]
    fn a_clean_history_has_no_anomalies() {
        let report = check(&clean());
        assert_eq!(report.violations(), Vec::<String>::new());
        assert_eq!(
            (report.transactions, report.committed, report.aborted),
            (3, 2, 1)
        );
        assert_eq!(report.values, 12);
        assert_eq!(report.committed_read, 8);
        assert_eq!(report.read_records, 8);
        // Commits at 50 and 250 within [0, 300].
        assert_eq!(report.longest_unavailable_ms, 200);
        assert_eq!(report.longest_unavailable_from_ms, 50);
    }

    #[test]
    fn a_committed_value_never_read_is_lost_and_its_transaction_torn() {
        let mut h = clean();
        h.reads.retain(|r| r.value != "t0-9");
        let report = check(&h);
        assert_eq!(report.lost, 1);
        assert_eq!(report.torn, 1);
        assert!(report.samples.lost[0].starts_with("t0-9 of t0#2"));
        assert!(
            report.samples.torn[0].contains("3 of 4 values read"),
            "{:?}",
            report.samples.torn
        );
        assert_eq!(report.violations().len(), 2);
    }

    #[test]
    fn a_committed_transaction_never_read_is_lost_but_not_torn() {
        let mut h = clean();
        h.reads
            .retain(|r| !r.value.starts_with("t0-1") && r.value != "t0-8");
        h.reads.retain(|r| r.value != "t0-9");
        let report = check(&h);
        // t0-8..11 are all missing; t0-1 too (t0-0, 2, 3 read: torn).
        assert_eq!(report.lost, 5, "{report:?}");
        assert_eq!(report.torn, 1);
    }

    #[test]
    fn a_value_of_an_aborted_transaction_read_is_an_aborted_read() {
        let mut h = clean();
        h.reads.push(read(1, 10, "t0-5"));
        let report = check(&h);
        assert_eq!(report.aborted_reads, 1);
        // One of its four values seen: torn as well.
        assert_eq!(report.torn, 1);
        assert_eq!(report.lost, 0);
        assert!(report.samples.aborted_reads[0].starts_with("t0-5 of t0#1"));
        assert!(report.violations()[0].contains("aborted values read (G1a)"));
    }

    #[test]
    fn a_fully_visible_aborted_transaction_is_g1a_not_torn() {
        let mut h = clean();
        for (i, v) in ["t0-4", "t0-5", "t0-6", "t0-7"].iter().enumerate() {
            h.reads.push(read(i as i32 % 2, 20 + i as i64, v));
        }
        let report = check(&h);
        assert_eq!(report.aborted_reads, 4);
        assert_eq!(report.torn, 0);
    }

    #[test]
    fn a_value_read_at_two_offsets_is_a_duplicate() {
        let mut h = clean();
        h.reads.push(read(0, 30, "t0-8"));
        let report = check(&h);
        assert_eq!(report.duplicates, 1);
        assert_eq!(
            report.samples.duplicates,
            vec!["t0-8 read at {(0, 2), (0, 30)}"]
        );
        // The same offset read twice (by two passes) is not a duplicate.
        let mut h = clean();
        h.reads.push(Read {
            pass: 2,
            ..h.reads[0].clone()
        });
        assert_eq!(check(&h).duplicates, 0);
    }

    #[test]
    fn a_transaction_in_doubt_may_be_read_or_not_but_not_in_part() {
        let mut h = clean();
        h.txns.push(txn(3, 12, 2, TxnOutcome::Unknown));
        h.txns.push(txn(4, 14, 2, TxnOutcome::Unknown));
        h.txns.push(txn(5, 16, 2, TxnOutcome::Unknown));
        // t0#3 fully visible, t0#4 not at all, t0#5 half.
        h.reads.push(read(0, 40, "t0-12"));
        h.reads.push(read(1, 40, "t0-13"));
        h.reads.push(read(0, 41, "t0-16"));
        let report = check(&h);
        assert_eq!(report.unknown, 3);
        assert_eq!(report.unknown_visible, 2);
        assert_eq!(report.torn, 1);
        assert!(report.samples.torn[0].starts_with("t0#5"));
        assert_eq!((report.lost, report.aborted_reads), (0, 0));
    }

    #[test]
    fn values_in_a_partition_not_read_completely_are_unverified_not_lost_or_torn() {
        let mut h = clean();
        h.reads.retain(|r| r.partition == 0);
        h.coverage[1].complete = false;
        let report = check(&h);
        assert_eq!(report.lost, 0);
        assert_eq!(report.torn, 0);
        assert_eq!(report.unverified, 4);
        assert_eq!(report.violations().len(), 1);
    }

    #[test]
    fn a_value_nobody_wrote_is_reported() {
        let mut h = clean();
        h.reads.push(read(0, 50, "ghost"));
        let report = check(&h);
        assert_eq!(report.unwritten_reads, 1);
        assert_eq!(report.violations().len(), 1);
    }

    #[test]
    fn the_longest_window_without_a_commit_counts_the_edges() {
        let mut h = clean();
        // Aborts and transactions in doubt are no successful commit.
        h.txns[2].outcome = TxnOutcome::Unknown;
        let report = check(&h);
        assert_eq!(report.longest_unavailable_ms, 250);
        assert_eq!(report.longest_unavailable_from_ms, 50);
        let nothing = TxnHistory {
            workload_start_ms: 10,
            workload_end_ms: 70,
            ..TxnHistory::default()
        };
        assert_eq!(check(&nothing).longest_unavailable_ms, 60);
    }

    #[test]
    fn a_history_round_trips_through_json() {
        let mut h = clean();
        h.txns[0].values[0].offset = Some(7);
        h.txns[1].values[2].offset = Some(9);
        h.txns[1].error = Some("timed out".to_owned());
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(serde_json::from_str::<TxnHistory>(&json).unwrap(), h);
        let report = serde_json::to_value(check(&h)).unwrap();
        assert_eq!(report["committed"], 2);
        assert_eq!(report["aborted_written"], 1);
    }
}
