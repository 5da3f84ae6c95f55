//! The result table: one row per fault, with the columns of its workload.

use crate::faults::{FaultResult, Status, WorkloadKind};

const HEADER: [&str; 11] = [
    "fault",
    "status",
    "acked",
    "read back",
    "lost",
    "duplicates",
    "reordered",
    "inconsistent",
    "divergent",
    "unacked read",
    "longest unavailable",
];

const TXN_HEADER: [&str; 10] = [
    "fault",
    "status",
    "txns committed",
    "aborted",
    "unknown",
    "lost",
    "aborted read",
    "duplicates",
    "torn",
    "longest unavailable",
];

fn status(s: Status) -> &'static str {
    match s {
        Status::Passed => "passed",
        Status::Failed => "FAILED",
        Status::Skipped => "skipped",
        Status::Error => "error",
    }
}

fn lost(lost: usize, unverified: usize) -> String {
    if unverified > 0 {
        format!("{lost} (+{unverified} unverified)")
    } else {
        lost.to_string()
    }
}

fn seconds(ms: u64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

fn row(result: &FaultResult) -> Vec<String> {
    let mut cells = vec![result.fault.clone(), status(result.status).to_owned()];
    match &result.report {
        Some(r) => cells.extend([
            r.acknowledged.to_string(),
            r.read_back.to_string(),
            lost(r.lost, r.unverified),
            r.duplicates.to_string(),
            r.reorderings.to_string(),
            r.inconsistent.to_string(),
            result.divergent.len().to_string(),
            r.unacknowledged_read.to_string(),
            seconds(r.longest_unavailable_ms),
        ]),
        None => cells.extend(std::iter::repeat_n("-".to_owned(), HEADER.len() - 2)),
    }
    cells
}

fn txn_row(result: &FaultResult) -> Vec<String> {
    let mut cells = vec![result.fault.clone(), status(result.status).to_owned()];
    match &result.txn_report {
        Some(r) => cells.extend([
            r.committed.to_string(),
            r.aborted.to_string(),
            r.unknown.to_string(),
            lost(r.lost, r.unverified),
            r.aborted_reads.to_string(),
            r.duplicates.to_string(),
            r.torn.to_string(),
            seconds(r.longest_unavailable_ms),
        ]),
        None => cells.extend(std::iter::repeat_n("-".to_owned(), TXN_HEADER.len() - 2)),
    }
    cells
}

/// The table (one per workload that ran), then a line for each fault
/// that has a reason (why it was skipped, failed or could not run).
pub fn render(results: &[FaultResult]) -> String {
    let (txn, plain): (Vec<&FaultResult>, Vec<&FaultResult>) = results
        .iter()
        .partition(|r| r.workload == WorkloadKind::Transactional);
    let mut out = String::new();
    if !plain.is_empty() || txn.is_empty() {
        out.push_str(&table(&HEADER, plain.into_iter().map(row)));
    }
    if !txn.is_empty() {
        out.push_str(&table(&TXN_HEADER, txn.into_iter().map(txn_row)));
    }
    for result in results {
        if let Some(reason) = &result.reason {
            out.push_str(&format!("{}: {reason}\n", result.fault));
        }
        if let Some(dir) = &result.kept_dir {
            out.push_str(&format!("{}: data and logs kept in {dir}\n", result.fault));
        }
    }
    out
}

/// Columns as wide as their widest cell; names left-aligned, numbers
/// right-aligned.
fn table(header: &[&str], rows: impl Iterator<Item = Vec<String>>) -> String {
    let rows: Vec<Vec<String>> = std::iter::once(header.iter().map(|s| s.to_string()).collect())
        .chain(rows)
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (n, r) in rows.iter().enumerate() {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (cell, w))| {
                if i < 2 {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
        if n == 0 {
            let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            out.push_str(&rule.join("  "));
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::Report;
    use crate::txn_checker::TxnReport;

    fn result(fault: &str, workload: WorkloadKind) -> FaultResult {
        FaultResult {
            fault: fault.to_owned(),
            workload,
            status: Status::Passed,
            reason: None,
            report: None,
            txn_report: None,
            divergent: Vec::new(),
            healed: Ok(1000),
            events: Vec::new(),
            kept_dir: None,
            duration_ms: 0,
        }
    }

    #[test]
    fn each_workload_has_its_columns() {
        let plain = FaultResult {
            report: Some(Report {
                acknowledged: 7500,
                read_back: 7500,
                longest_unavailable_ms: 9100,
                ..Report::default()
            }),
            ..result("leader-kill", WorkloadKind::Plain)
        };
        assert_eq!(
            render(std::slice::from_ref(&plain)),
            "\
fault        status  acked  read back  lost  duplicates  reordered  inconsistent  divergent  unacked read  longest unavailable
-----------  ------  -----  ---------  ----  ----------  ---------  ------------  ---------  ------------  -------------------
leader-kill  passed   7500       7500     0           0          0             0          0             0                 9.1s
"
        );
        let txn = FaultResult {
            txn_report: Some(TxnReport {
                committed: 1200,
                aborted: 300,
                unknown: 2,
                lost: 1,
                unverified: 4,
                longest_unavailable_ms: 8000,
                ..TxnReport::default()
            }),
            ..result("leader-kill", WorkloadKind::Transactional)
        };
        let skipped = FaultResult {
            status: Status::Skipped,
            reason: Some("not here".to_owned()),
            ..result("negative-control", WorkloadKind::Transactional)
        };
        assert_eq!(
            render(&[txn, skipped]),
            "\
fault             status   txns committed  aborted  unknown               lost  aborted read  duplicates  torn  longest unavailable
----------------  -------  --------------  -------  -------  -----------------  ------------  ----------  ----  -------------------
leader-kill       passed             1200      300        2  1 (+4 unverified)             0           0     0                 8.0s
negative-control  skipped               -        -        -                  -             -           -     -                    -
negative-control: not here
"
        );
    }
}
