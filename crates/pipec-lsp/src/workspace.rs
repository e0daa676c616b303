//! What the server knows: the open buffers, one checked program per open `.pipe` file,
//! and the diagnostics last sent for each file.
//!
//! Each open `.pipe` file is checked as a root, through the loader that reads open
//! buffers first. An edit re-checks the roots whose program contains the edited file (an
//! import, a prompt template, or the root itself). Programs are replaced, never kept
//! beside their old versions, so memory follows the open files, not the edits.

use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use lsp_types::Diagnostic as LspDiagnostic;

use super::checkers::Checkers;
use super::diagnostics::{self, ExplainPages};
use super::documents::Documents;
use super::index::Index;
use pipec_base::source::FileId;
use pipec_check::Analysis;

/// One checked program, and its name table once something asks for it.
pub(crate) struct Snapshot {
    pub analysis: Analysis,
    index: OnceCell<Index>,
    /// Its diagnostics, per file, as the editor gets them.
    diagnostics: BTreeMap<PathBuf, Vec<LspDiagnostic>>,
}

impl Snapshot {
    pub(crate) fn index(&self) -> &Index {
        self.index.get_or_init(|| Index::build(&self.analysis))
    }

    pub(crate) fn file(&self, path: &Path) -> Option<FileId> {
        self.analysis.db.find(path)
    }
}

#[derive(Default)]
pub(crate) struct Workspace {
    pub documents: Documents,
    /// One per open `.pipe` file, by its path.
    pub snapshots: HashMap<PathBuf, Snapshot>,
    /// Roots to check again before anything reads them.
    dirty: BTreeSet<PathBuf>,
    /// The files last sent a non-empty list, to clear them when they have none.
    published: HashMap<PathBuf, Vec<LspDiagnostic>>,
    pub explain: ExplainPages,
    /// The last outcome of each test run from the editor.
    pub tests: super::test_runs::TestResults,
    /// Programs a check replaced, freed once the new diagnostics are sent: freeing a
    /// large program's tree takes about a fifth of its check.
    retired: Vec<Snapshot>,
    /// The threads that check programs, taking turns.
    checkers: Checkers,
}

pub(crate) fn is_pipe(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "pipe")
}

impl Workspace {
    /// A buffer was opened, changed or closed: mark what must be checked again.
    pub(crate) fn touched(&mut self, path: &Path) {
        if is_pipe(path) && self.documents.get(path).is_some() {
            self.dirty.insert(path.to_path_buf());
        }
        for (root, snap) in &self.snapshots {
            if root != path && snap.file(path).is_some() {
                self.dirty.insert(root.clone());
            }
        }
    }

    pub(crate) fn closed(&mut self, path: &Path) {
        self.documents.close(path);
        self.snapshots.remove(path);
        self.dirty.remove(path);
        self.touched(path);
    }

    pub(crate) fn is_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// Checks every dirty root again; returns the files whose diagnostics changed, with
    /// their new lists (empty to clear).
    pub(crate) fn refresh(&mut self) -> Vec<(PathBuf, Vec<LspDiagnostic>)> {
        let dirty = std::mem::take(&mut self.dirty);
        let mut refreshed = HashSet::new();
        for root in dirty {
            if self.documents.get(&root).is_none() {
                continue;
            }
            let analysis = self.checkers.analyze(&self.documents, root.clone());
            let diagnostics = diagnostics::by_file(&analysis, &mut self.explain);
            for i in 0..analysis.db.len() {
                let path = &analysis.db.get(FileId(i as u32)).path;
                if self.documents.get(path).is_some() {
                    refreshed.insert(path.clone());
                }
            }
            let replaced = self.snapshots.insert(
                root,
                Snapshot {
                    analysis,
                    index: OnceCell::new(),
                    diagnostics,
                },
            );
            self.retired.extend(replaced);
        }
        self.changed_diagnostics(&refreshed)
    }

    /// Frees the programs the last refresh replaced on a thread of its own, so the next
    /// edit does not wait for it either (here, when no thread can start: a failed spawn
    /// drops what it was given).
    pub(crate) fn release_retired(&mut self) {
        if self.retired.is_empty() {
            return;
        }
        let retired = std::mem::take(&mut self.retired);
        let _ = std::thread::Builder::new()
            .name("pipec-lsp-free".into())
            .spawn(move || drop(retired));
    }

    /// Every file's diagnostics over all programs (a file two programs contain gets each
    /// problem once), compared with what was sent. An open file that was just checked
    /// gets its list even when it did not change, so the editor knows it is current.
    fn changed_diagnostics(
        &mut self,
        refreshed: &HashSet<PathBuf>,
    ) -> Vec<(PathBuf, Vec<LspDiagnostic>)> {
        let mut now: HashMap<PathBuf, Vec<LspDiagnostic>> = HashMap::new();
        let mut roots: Vec<&PathBuf> = self.snapshots.keys().collect();
        roots.sort();
        for root in roots {
            for (path, list) in &self.snapshots[root].diagnostics {
                let entry = now.entry(path.clone()).or_default();
                for d in list {
                    if !entry.contains(d) {
                        entry.push(d.clone());
                    }
                }
            }
        }
        let mut changes = Vec::new();
        let gone: HashSet<PathBuf> = self
            .published
            .keys()
            .filter(|p| !now.contains_key(*p))
            .cloned()
            .collect();
        for path in gone {
            self.published.remove(&path);
            changes.push((path, Vec::new()));
        }
        for path in refreshed {
            if !now.contains_key(path) && !changes.iter().any(|(p, _)| p == path) {
                changes.push((path.clone(), Vec::new()));
            }
        }
        for (path, list) in now {
            if self.published.get(&path) != Some(&list) || refreshed.contains(&path) {
                changes.push((path.clone(), list.clone()));
                self.published.insert(path, list);
            }
        }
        changes.sort_by(|a, b| a.0.cmp(&b.0));
        changes
    }

    /// The program that knows `path` best: the one whose root it is, else any that
    /// contains it.
    pub(crate) fn snapshot_for(&self, path: &Path) -> Option<(&Snapshot, FileId)> {
        if let Some(s) = self.snapshots.get(path) {
            return Some((s, s.file(path)?));
        }
        let mut roots: Vec<&PathBuf> = self.snapshots.keys().collect();
        roots.sort();
        roots.into_iter().find_map(|r| {
            let s = &self.snapshots[r];
            Some((s, s.file(path)?))
        })
    }

    /// Every program that contains `path`, for references and rename across them.
    pub(crate) fn snapshots_containing(&self, path: &Path) -> Vec<(&Snapshot, FileId)> {
        let mut roots: Vec<&PathBuf> = self.snapshots.keys().collect();
        roots.sort();
        roots
            .into_iter()
            .filter_map(|r| {
                let s = &self.snapshots[r];
                Some((s, s.file(path)?))
            })
            .collect()
    }

    /// The text of a file as the editor has it (open buffer) or as the last check read it.
    pub(crate) fn text_of(&self, path: &Path) -> Option<String> {
        if let Some(d) = self.documents.get(path) {
            return Some(d.text.clone());
        }
        let (s, f) = self.snapshot_for(path)?;
        Some(s.analysis.db.get(f).text.to_string())
    }
}
