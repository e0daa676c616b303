//! Progress reports for people (stderr lines from the CLI), separate from the
//! machine-readable events.

use std::time::Duration;

/// What a run reports as it goes.
#[derive(Clone, Debug, PartialEq)]
pub enum Step<'a> {
    Started {
        node: &'a str,
        item: Option<u32>,
    },
    Finished {
        node: &'a str,
        took: Duration,
    },
    Skipped {
        node: &'a str,
    },
    Failed {
        node: &'a str,
        message: &'a str,
    },
    Retrying {
        node: &'a str,
        try_number: u32,
        after: Duration,
    },
    Waiting {
        gate: &'a str,
    },
}

/// Receives progress; the CLI prints it on stderr.
pub trait Progress: Send + Sync {
    fn step(&self, step: Step<'_>);
}

/// One line per step on stderr.
pub struct StderrProgress;

impl Progress for StderrProgress {
    fn step(&self, step: Step<'_>) {
        let line = match step {
            Step::Started { node, item: None } => format!("  ▸ {node}"),
            Step::Started {
                node,
                item: Some(i),
            } => format!("  ▸ {node}[{i}]"),
            Step::Finished { node, took } => format!("  ✓ {node} ({})", human(took)),
            Step::Skipped { node } => format!("  ↷ {node} skipped"),
            Step::Failed { node, message } => {
                format!("  ✗ {node}: {}", message.lines().next().unwrap_or(""))
            }
            Step::Retrying {
                node,
                try_number,
                after,
            } => format!("  ↻ {node}: try {try_number} in {}", human(after)),
            Step::Waiting { gate } => format!("  ⏸ {gate} waits for an answer"),
        };
        eprintln!("{line}");
    }
}

pub fn human(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 1.0 {
        format!("{:.0}µs", ms * 1000.0)
    } else if ms < 1000.0 {
        format!("{ms:.0}ms")
    } else {
        format!("{:.1}s", ms / 1000.0)
    }
}
