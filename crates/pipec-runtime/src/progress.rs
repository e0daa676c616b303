//! Progress reports for people (stderr lines from the CLI), separate from the
//! machine-readable events, and the attempt's secrets scrubbed from them.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a run reports as it goes.
#[derive(Clone, Debug, PartialEq)]
pub enum Step<'a> {
    Started {
        node: &'a str,
        item: Option<u32>,
    },
    /// A node, or an item of an `each` node, finished.
    Finished {
        node: &'a str,
        item: Option<u32>,
        took: Duration,
    },
    Skipped {
        node: &'a str,
    },
    /// A node, or an item of an `each` node, failed.
    Failed {
        node: &'a str,
        item: Option<u32>,
        message: &'a str,
    },
    /// An `each` node failed because of items whose failures were reported one by one.
    ItemsFailed {
        node: &'a str,
        failed: u32,
        total: u32,
    },
    Retrying {
        node: &'a str,
        item: Option<u32>,
        try_number: u32,
        after: Duration,
    },
    Waiting {
        gate: &'a str,
    },
    /// A resource read for a node, from its server or the attempt's cache.
    Read {
        node: &'a str,
        uri: &'a str,
        bytes: u64,
        cached: bool,
    },
    /// A dead link re-derived by calling its producer again.
    Healed {
        node: &'a str,
        kind: &'a str,
        tool: &'a str,
        uri: &'a str,
    },
    /// Something the person running pipec should know that stops nothing.
    Warning {
        message: &'a str,
    },
}

/// Receives progress; the CLI prints it on stderr.
pub trait Progress: Send + Sync {
    fn step(&self, step: Step<'_>);
}

/// Progress with an attempt's secrets scrubbed from every text a step carries: a URI that
/// was read or healed is what a server sent, and may hold a secret the call that
/// produced it was given.
pub(crate) struct ScrubbedProgress {
    inner: Arc<dyn Progress>,
    scrubber: crate::secrets::Scrubber,
}

impl ScrubbedProgress {
    pub(crate) fn wrap(
        inner: Arc<dyn Progress>,
        scrubber: crate::secrets::Scrubber,
    ) -> Arc<dyn Progress> {
        if scrubber.is_empty() {
            return inner;
        }
        Arc::new(ScrubbedProgress { inner, scrubber })
    }
}

impl Progress for ScrubbedProgress {
    fn step(&self, step: Step<'_>) {
        let s = &self.scrubber;
        match step {
            Step::Failed {
                node,
                item,
                message,
            } => self.inner.step(Step::Failed {
                node,
                item,
                message: &s.scrub(message),
            }),
            Step::Read {
                node,
                uri,
                bytes,
                cached,
            } => self.inner.step(Step::Read {
                node,
                uri: &s.scrub(uri),
                bytes,
                cached,
            }),
            Step::Healed {
                node,
                kind,
                tool,
                uri,
            } => self.inner.step(Step::Healed {
                node,
                kind,
                tool,
                uri: &s.scrub(uri),
            }),
            Step::Warning { message } => self.inner.step(Step::Warning {
                message: &s.scrub(message),
            }),
            other => self.inner.step(other),
        }
    }
}

/// Progress on stderr. On a terminal: a spinner line naming the nodes that run, with the
/// finished steps printed above it, in colour unless `NO_COLOR` is set. Elsewhere (a
/// pipe, a CI log): one plain line per step.
pub struct StderrProgress {
    tty: bool,
    color: bool,
    shared: Arc<Mutex<Live>>,
}

/// What the spinner line shows, and where it goes.
struct Live {
    out: Box<dyn Write + Send>,
    running: BTreeMap<String, Instant>,
    frame: usize,
    /// A spinner line is on screen and must be cleared before anything else is printed.
    drawn: bool,
    stop: bool,
    ticker: bool,
}

/// How many lines below a failure's first line are shown.
const FAILURE_LINES: usize = 12;

const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

impl StderrProgress {
    pub fn new() -> StderrProgress {
        let tty = std::io::stderr().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        StderrProgress::with_writer(Box::new(std::io::stderr()), tty, tty && !no_color)
    }

    /// Progress into any writer, drawn as for a terminal or not, in colour or not.
    pub fn with_writer(out: Box<dyn Write + Send>, terminal: bool, color: bool) -> StderrProgress {
        StderrProgress {
            tty: terminal,
            color,
            shared: Arc::new(Mutex::new(Live {
                out,
                running: BTreeMap::new(),
                frame: 0,
                drawn: false,
                stop: false,
                ticker: false,
            })),
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    /// Starts the thread that turns the spinner (once, on a terminal).
    fn start_ticker(&self, live: &mut Live) {
        if live.ticker {
            return;
        }
        live.ticker = true;
        let shared = Arc::downgrade(&self.shared);
        let _ = std::thread::Builder::new()
            .name("pipec-progress".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(Duration::from_millis(100));
                    let Some(shared) = shared.upgrade() else {
                        return;
                    };
                    let mut live = shared.lock().unwrap_or_else(|e| e.into_inner());
                    if live.stop {
                        return;
                    }
                    live.frame += 1;
                    draw(&mut live);
                }
            });
    }
}

impl Default for StderrProgress {
    fn default() -> Self {
        StderrProgress::new()
    }
}

impl Drop for StderrProgress {
    fn drop(&mut self) {
        let mut live = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        live.stop = true;
        clear(&mut live);
    }
}

fn clear(live: &mut Live) {
    if live.drawn {
        let _ = write!(live.out, "\r\x1b[2K");
        let _ = live.out.flush();
        live.drawn = false;
    }
}

fn draw(live: &mut Live) {
    if live.running.is_empty() {
        clear(live);
        return;
    }
    let oldest = live.running.values().min().map(|t| t.elapsed());
    let mut names: Vec<&str> = live.running.keys().map(String::as_str).collect();
    let more = names.len().saturating_sub(4);
    names.truncate(4);
    let mut line = format!("{} {}", FRAMES[live.frame % FRAMES.len()], names.join(", "));
    if more > 0 {
        line.push_str(&format!(" and {more} more"));
    }
    if let Some(t) = oldest {
        line.push_str(&format!(" ({})", human(t)));
    }
    let _ = write!(live.out, "\r\x1b[2K{line}");
    let _ = live.out.flush();
    live.drawn = true;
}

impl Progress for StderrProgress {
    fn step(&self, step: Step<'_>) {
        let line = match step {
            Step::Started { node, item } => {
                if self.tty {
                    let mut live = self.shared.lock().unwrap_or_else(|e| e.into_inner());
                    live.running.insert(label(node, item), Instant::now());
                    self.start_ticker(&mut live);
                    draw(&mut live);
                    return;
                }
                format!("  ▸ {}", label(node, item))
            }
            Step::Finished { node, item, took } => {
                format!(
                    "  {} {} ({})",
                    self.paint("32", "✓"),
                    label(node, item),
                    human(took)
                )
            }
            Step::Skipped { node } => format!("  {} {node} skipped", self.paint("2", "↷")),
            Step::Failed {
                node,
                item,
                message,
            } => {
                // The first line, then what it announces (a command's stderr tail),
                // indented below it, its last lines at most.
                let mut lines = message.lines();
                let mut text = format!(
                    "  {} {}: {}",
                    self.paint("31", "✗"),
                    label(node, item),
                    lines.next().unwrap_or("")
                );
                let rest: Vec<&str> = lines.collect();
                let shown = &rest[rest.len().saturating_sub(FAILURE_LINES)..];
                if shown.len() < rest.len() {
                    text.push_str("\n      …");
                }
                for l in shown {
                    text.push_str(&format!("\n      {l}"));
                }
                text
            }
            Step::ItemsFailed {
                node,
                failed,
                total,
            } => format!(
                "  {} {node}: {failed} of {total} {} failed",
                self.paint("31", "✗"),
                if total == 1 { "item" } else { "items" }
            ),
            Step::Retrying {
                node,
                item,
                try_number,
                after,
            } => format!(
                "  {} {}: try {try_number} in {}",
                self.paint("33", "↻"),
                label(node, item),
                human(after)
            ),
            Step::Waiting { gate } => {
                format!("  {} {gate} waits for an answer", self.paint("33", "⏸"))
            }
            Step::Warning { message } => format!("  {} {message}", self.paint("33", "!")),
            Step::Read {
                node,
                uri,
                bytes,
                cached,
            } => format!(
                "    {} {node} read {uri} ({}{})",
                self.paint("2", "↓"),
                human_bytes(bytes),
                if cached { ", cached" } else { "" }
            ),
            Step::Healed {
                node,
                kind,
                tool,
                uri,
            } => format!(
                "    {} {node}: a dead {} link was re-derived by calling `{tool}` again: {uri}",
                self.paint("33", "⟳"),
                if kind.is_empty() {
                    String::new()
                } else {
                    format!("`{kind}`")
                }
            ),
        };
        let mut live = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        if !self.tty {
            let _ = writeln!(live.out, "{line}");
            return;
        }
        match step {
            Step::Finished {
                node,
                item: Some(i),
                ..
            }
            | Step::Failed {
                node,
                item: Some(i),
                ..
            } => {
                live.running.remove(&label(node, Some(i)));
            }
            Step::Finished { node, .. }
            | Step::Skipped { node }
            | Step::Failed { node, .. }
            | Step::ItemsFailed { node, .. } => {
                // Items of an `each` node end with the node.
                let prefix = format!("{node}[");
                live.running
                    .retain(|k, _| k != node && !k.starts_with(&prefix));
            }
            _ => {}
        }
        clear(&mut live);
        let _ = writeln!(live.out, "{line}");
        draw(&mut live);
    }
}

/// A node's name, with the index of an `each` node's item: `classify[3]`.
fn label(node: &str, item: Option<u32>) -> String {
    match item {
        Some(i) => format!("{node}[{i}]"),
        None => node.to_string(),
    }
}

/// Bytes for people, in the units `.pipe` files write caps in (`kb` is 1,000 bytes):
/// `512 B`, `200 KB`, `5.1 MB`.
pub fn human_bytes(n: u64) -> String {
    const K: f64 = 1000.0;
    let f = n as f64;
    let (v, unit) = if f < K {
        return format!("{n} B");
    } else if f < K * K {
        (f / K, "KB")
    } else if f < K * K * K {
        (f / (K * K), "MB")
    } else {
        (f / (K * K * K), "GB")
    };
    if (v - v.round()).abs() < 0.05 {
        format!("{} {unit}", v.round() as u64)
    } else {
        format!("{v:.1} {unit}")
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer the test can read back.
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Buf {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().expect("lock")).into_owned()
        }
    }

    fn steps(p: &StderrProgress) {
        p.step(Step::Started {
            node: "fetch",
            item: None,
        });
        p.step(Step::Finished {
            node: "fetch",
            item: None,
            took: Duration::from_millis(12),
        });
        p.step(Step::Waiting { gate: "review" });
    }

    #[test]
    fn plain_lines_without_a_terminal() {
        let buf = Buf::default();
        let p = StderrProgress::with_writer(Box::new(buf.clone()), false, false);
        steps(&p);
        assert_eq!(
            buf.text(),
            "  ▸ fetch\n  ✓ fetch (12ms)\n  ⏸ review waits for an answer\n"
        );
    }

    #[test]
    fn a_spinner_line_on_a_terminal_cleared_before_each_line_and_at_the_end() {
        let buf = Buf::default();
        let p = StderrProgress::with_writer(Box::new(buf.clone()), true, true);
        steps(&p);
        let text = buf.text();
        // The running node is on the spinner line, not a line of its own.
        assert!(text.starts_with("\r\x1b[2K⠋ fetch"), "{text:?}");
        assert!(!text.contains("▸"), "{text:?}");
        // Cleared before the finished line, which is green.
        assert!(
            text.contains("\r\x1b[2K  \x1b[32m✓\x1b[0m fetch (12ms)\n"),
            "{text:?}"
        );
        assert!(text.ends_with("review waits for an answer\n"), "{text:?}");
        drop(p);
        assert!(!buf.text().ends_with("⠋ fetch"), "nothing is left drawn");
    }

    #[test]
    fn no_colour_on_a_terminal_when_asked() {
        let buf = Buf::default();
        let p = StderrProgress::with_writer(Box::new(buf.clone()), true, false);
        steps(&p);
        assert!(!buf.text().contains("\x1b[32m"), "{:?}", buf.text());
    }
}
