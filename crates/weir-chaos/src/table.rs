//! The result table: one row per fault.

use crate::faults::{FaultResult, Status};

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

fn status(s: Status) -> &'static str {
    match s {
        Status::Passed => "passed",
        Status::Failed => "FAILED",
        Status::Skipped => "skipped",
        Status::Error => "error",
    }
}

fn row(result: &FaultResult) -> Vec<String> {
    let mut cells = vec![result.fault.clone(), status(result.status).to_owned()];
    match &result.report {
        Some(r) => cells.extend([
            r.acknowledged.to_string(),
            r.read_back.to_string(),
            if r.unverified > 0 {
                format!("{} (+{} unverified)", r.lost, r.unverified)
            } else {
                r.lost.to_string()
            },
            r.duplicates.to_string(),
            r.reorderings.to_string(),
            r.inconsistent.to_string(),
            result.divergent.len().to_string(),
            r.unacknowledged_read.to_string(),
            format!("{:.1}s", r.longest_unavailable_ms as f64 / 1000.0),
        ]),
        None => cells.extend(std::iter::repeat_n("-".to_owned(), HEADER.len() - 2)),
    }
    cells
}

/// The table, then a line for each fault that has a reason (why it was
/// skipped, failed or could not run).
pub fn render(results: &[FaultResult]) -> String {
    let rows: Vec<Vec<String>> = std::iter::once(HEADER.iter().map(|s| s.to_string()).collect())
        .chain(results.iter().map(row))
        .collect();
    let widths: Vec<usize> = (0..HEADER.len())
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
