//! Where programs are checked: two threads that take turns, one check each.
//!
//! glibc's malloc gives each thread an arena of its own. A check allocates a whole
//! program; the program it replaces is freed after the diagnostics go out. Checked on
//! one thread, each new program was carved out of the holes the last one left, and
//! `malloc` spent a third of the server's time searching and merging free chunks. Taking
//! turns, a check runs in the arena whose program was freed a keystroke ago — whole
//! again — while the other arena holds the program the editor is using.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::path::PathBuf;
use std::sync::mpsc;

use pipec_check::Analysis;

use super::documents::{Documents, OverlayLoader};

type Job = Box<dyn FnOnce() + Send>;

/// The two threads; a turn whose thread cannot be started checks here instead.
#[derive(Default)]
pub(crate) struct Checkers {
    threads: [Option<mpsc::Sender<Job>>; 2],
    turn: usize,
}

impl Checkers {
    /// Checks the program rooted at `root` over the open buffers, on the next thread
    /// in turn. A panic of the check is raised again here, as if it had run here.
    pub(crate) fn analyze(&mut self, documents: &Documents, root: PathBuf) -> Analysis {
        let name = root.display().to_string();
        let documents = documents.clone();
        let check = move || {
            let loader = OverlayLoader {
                documents: &documents,
            };
            pipec_check::analyze(&loader, &root, &name)
        };
        self.turn = (self.turn + 1) % 2;
        let turn = self.turn;
        let Some(thread) = self.thread(turn).cloned() else {
            return check();
        };
        let (tx, rx) = mpsc::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(catch_unwind(AssertUnwindSafe(check)));
        });
        if let Err(mpsc::SendError(job)) = thread.send(job) {
            // Its thread is gone: the check runs here, and the next turn starts one.
            self.threads[turn] = None;
            job();
        }
        match rx.recv() {
            Ok(Ok(analysis)) => analysis,
            Ok(Err(panic)) => resume_unwind(panic),
            Err(_) => {
                self.threads[turn] = None;
                resume_unwind(Box::new("the check's thread stopped"))
            }
        }
    }

    fn thread(&mut self, i: usize) -> Option<&mpsc::Sender<Job>> {
        if self.threads[i].is_none() {
            let (tx, rx) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name(format!("pipec-lsp-check-{i}"))
                .spawn(move || {
                    while let Ok(job) = rx.recv() {
                        job();
                    }
                })
                .ok()?;
            self.threads[i] = Some(tx);
        }
        self.threads[i].as_ref()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a panic is the assertion")]
mod tests {
    use super::*;

    fn codes(a: &Analysis) -> Vec<(String, String)> {
        a.diagnostics
            .iter()
            .map(|d| (d.rule.code.to_string(), d.message.clone()))
            .collect()
    }

    #[test]
    fn turns_check_the_open_buffers_as_a_check_here_does_each_on_its_own_thread() {
        let dir = std::env::temp_dir().join(format!("pipec-lsp-turns-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let root = dir.join("a.pipe");
        // Only the buffer holds the file (nothing on disk): the check reads the buffer.
        let mut documents = Documents::default();
        documents.open(
            root.clone(),
            "input x: int\n\nnode twice(v: int = input.y) -> int {\n  return = v\n}\n".into(),
            1,
        );
        let here = pipec_check::analyze(
            &OverlayLoader {
                documents: &documents,
            },
            &root,
            &root.display().to_string(),
        );
        assert!(!here.diagnostics.is_empty(), "the buffer's error is found");
        let mut checkers = Checkers::default();
        let first = checkers.analyze(&documents, root.clone());
        let second = checkers.analyze(&documents, root.clone());
        let third = checkers.analyze(&documents, root.clone());
        for a in [&first, &second, &third] {
            assert_eq!(codes(a), codes(&here));
        }
        // Two threads took turns: the first and third checks ran on the same one.
        assert!(checkers.threads.iter().all(Option::is_some));
        assert_eq!(checkers.turn, 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
