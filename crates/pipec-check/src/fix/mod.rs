//! Applying the fixes diagnostics offer (`pipec check --fix`, `--unsafe-fixes`, `--diff`).
//!
//! Each pass checks the files, chooses the fixes the mode allows whose edits do not
//! overlap, makes them as byte-range replacements on the text the pass read (so comments
//! and formatting are kept), and checks again; passes repeat until none applies, at most
//! [`MAX_PASSES`] times. A fix that would leave a file that does not parse (a `.pipe`
//! file with a syntax error, a template minijinja cannot parse) is refused. Nothing is
//! written here: the fixed texts live in an [`Overlay`] over the loader, and the caller
//! writes [`FixRun::changed`] (or shows it as a diff).

pub mod diff;
mod edits;
mod overlay;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub use edits::{Mode, apply, choose, overlaps};
pub use overlay::Overlay;

use crate::Analysis;
use pipec_base::source::{FileId, Loader, SourceDb, normalize_path};
use pipec_diagnostic::{Diagnostic, Fix};

/// Passes over one file before fixing stops: a fix that undoes another would otherwise
/// go round for ever.
pub const MAX_PASSES: usize = 10;

/// One fix that was made, or refused, and where.
#[derive(Clone, Debug)]
pub struct FixReport {
    pub code: &'static str,
    pub name: &'static str,
    pub title: String,
    /// The file of the diagnostic's primary label, as shown to users.
    pub file: String,
    pub line: u32,
    pub column: u32,
}

/// A file whose text the fixes changed.
#[derive(Clone, Debug)]
pub struct ChangedFile {
    /// Where it was read from (absolute).
    pub path: PathBuf,
    /// As shown to users.
    pub name: String,
    pub before: String,
    pub after: String,
}

/// What fixing some files did.
pub struct FixRun {
    pub applied: Vec<FixReport>,
    /// Fixes not made because the file would not parse afterwards.
    pub refused: Vec<FixReport>,
    pub changed: Vec<ChangedFile>,
    /// Each root file checked again after its last pass, in the order given.
    pub analyses: Vec<Analysis>,
    /// Roots still offering fixes after [`MAX_PASSES`] passes.
    pub unfinished: Vec<String>,
}

/// Fixes each `(path, display name)` root and what it imports or uses, with `mode`'s
/// fixes. Roots share their edits: a library two roots import is fixed once.
pub fn fix_files(loader: &dyn Loader, roots: &[(PathBuf, String)], mode: Mode) -> FixRun {
    let mut overlay = Overlay::new(loader);
    let mut originals: BTreeMap<PathBuf, (String, String)> = BTreeMap::new();
    let mut run = FixRun {
        applied: Vec::new(),
        refused: Vec::new(),
        changed: Vec::new(),
        analyses: Vec::new(),
        unfinished: Vec::new(),
    };
    for (path, name) in roots {
        let mut refused: BTreeSet<String> = BTreeSet::new();
        let mut passes = 0;
        let analysis = loop {
            let analysis = crate::analyze(&overlay, path, name);
            if passes == MAX_PASSES {
                let left = choose(&analysis.diagnostics, mode, &|f| {
                    refused.contains(&fix_key(&analysis.db, f))
                });
                if !left.is_empty() {
                    run.unfinished.push(name.clone());
                }
                break analysis;
            }
            passes += 1;
            let made = one_pass(
                &analysis,
                mode,
                &mut refused,
                &mut overlay,
                &mut originals,
                &mut run,
            );
            if !made {
                break analysis;
            }
        };
        run.analyses.push(analysis);
    }
    for (path, (name, before)) in originals {
        let after = overlay.get(&path).unwrap_or_default().to_string();
        if after != before {
            run.changed.push(ChangedFile {
                path,
                name,
                before,
                after,
            });
        }
    }
    run
}

/// Makes one pass's fixes in `overlay`; `false` when there was none to make.
fn one_pass(
    analysis: &Analysis,
    mode: Mode,
    refused: &mut BTreeSet<String>,
    overlay: &mut Overlay<'_>,
    originals: &mut BTreeMap<PathBuf, (String, String)>,
    run: &mut FixRun,
) -> bool {
    let db = &analysis.db;
    let chosen = choose(&analysis.diagnostics, mode, &|f| {
        refused.contains(&fix_key(db, f))
    });
    if chosen.is_empty() {
        return false;
    }
    let (accepted, refusals) = sort_out(db, chosen);
    let refused_now = !refusals.is_empty();
    for (d, fix) in refusals {
        refused.insert(fix_key(db, fix));
        run.refused.push(report(db, d, fix));
    }
    if accepted.is_empty() {
        return refused_now;
    }
    let files: BTreeSet<FileId> = accepted.iter().flat_map(|(_, f)| touched(f)).collect();
    for file in files {
        let edits: Vec<&pipec_diagnostic::Edit> = accepted
            .iter()
            .flat_map(|(_, f)| f.edits.iter())
            .filter(|e| e.file == file)
            .collect();
        let Some(text) = fixed_text(db, file, &edits) else {
            continue;
        };
        let source = db.get(file);
        let path = normalize_path(&source.path);
        originals
            .entry(path.clone())
            .or_insert_with(|| (source.name.clone(), source.text.to_string()));
        overlay.set(&path, text);
    }
    run.applied
        .extend(accepted.iter().map(|(d, f)| report(db, d, f)));
    true
}

/// The fixes of one pass that can be made together, and those that cannot be made at all
/// because a file they change would not parse afterwards. A fix that parses alone but not
/// with the others is in neither: it waits for the next pass.
type Chosen<'a> = Vec<(&'a Diagnostic, &'a Fix)>;

fn sort_out<'a>(db: &SourceDb, chosen: Chosen<'a>) -> (Chosen<'a>, Chosen<'a>) {
    let mut accepted: Chosen<'a> = Vec::new();
    let mut refused: Chosen<'a> = Vec::new();
    let parses_with = |fix: &Fix, others: &[(&Diagnostic, &Fix)]| {
        touched(fix).into_iter().all(|file| {
            let mut edits: Vec<&pipec_diagnostic::Edit> = others
                .iter()
                .flat_map(|(_, f)| f.edits.iter())
                .filter(|e| e.file == file)
                .collect();
            edits.extend(fix.edits.iter().filter(|e| e.file == file));
            fixed_text(db, file, &edits).is_some_and(|t| parses(&db.get(file).path, &t))
        })
    };
    for (d, fix) in chosen {
        if parses_with(fix, &accepted) {
            accepted.push((d, fix));
        } else if !parses_with(fix, &[]) {
            refused.push((d, fix));
        }
    }
    (accepted, refused)
}

fn touched(fix: &Fix) -> BTreeSet<FileId> {
    fix.edits.iter().map(|e| e.file).collect()
}

fn fixed_text(db: &SourceDb, file: FileId, edits: &[&pipec_diagnostic::Edit]) -> Option<String> {
    let pairs: Vec<(pipec_base::source::Span, &str)> = edits
        .iter()
        .map(|e| (e.span, e.replacement.as_str()))
        .collect();
    apply(&db.get(file).text, &pairs)
}

/// Whether a file's text parses: a `.pipe` file by the pipec grammar, anything else (a
/// prompt template) by minijinja.
pub fn parses(path: &Path, text: &str) -> bool {
    if path.extension().is_some_and(|e| e == "pipe") {
        pipec_syntax::parse(FileId(0), text).diagnostics.is_empty()
    } else {
        crate::template_parses(text)
    }
}

/// What identifies a fix across passes of an unchanged file.
fn fix_key(db: &SourceDb, fix: &Fix) -> String {
    let mut key = fix.title.clone();
    for e in &fix.edits {
        key.push_str(&format!(
            "\u{0}{}:{}-{}={}",
            db.get(e.file).path.display(),
            e.span.start,
            e.span.end,
            e.replacement
        ));
    }
    key
}

fn report(db: &SourceDb, d: &Diagnostic, fix: &Fix) -> FixReport {
    let (file, (line, column)) = match &d.primary {
        Some(p) => {
            let (file, start, _) = pipec_diagnostic::location(db, p);
            (file, start)
        }
        None => match fix.edits.first() {
            Some(e) => (
                db.get(e.file).name.clone(),
                db.get(e.file).line_col(e.span.start),
            ),
            None => (String::new(), (0, 0)),
        },
    };
    FixReport {
        code: d.rule.code,
        name: d.rule.name,
        title: fix.title.clone(),
        file,
        line,
        column,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pipec_base::source::Span;
    use pipec_diagnostic::{Applicability, Edit};

    fn rename(file: FileId, start: u32, end: u32, to: &str) -> Fix {
        Fix {
            title: format!("rename to {to}"),
            applicability: Applicability::Safe,
            edits: vec![Edit {
                file,
                span: Span::new(start, end),
                replacement: to.to_string(),
            }],
        }
    }

    #[test]
    fn a_fix_that_breaks_the_syntax_is_refused_and_the_others_are_made() {
        let mut db = SourceDb::default();
        let text = "input deal_idd: string\n";
        let file = db.add("a.pipe".into(), "a.pipe".into(), text.into());
        let d = Diagnostic::new(
            &pipec_diagnostic::rules::UNKNOWN_NAME,
            file,
            Span::new(6, 14),
            "x",
        );
        let good = rename(file, 6, 14, "deal_id");
        // A name that is not an identifier leaves a file that does not parse.
        let bad = rename(file, 16, 22, "str ing {");
        let (accepted, refused) = sort_out(&db, vec![(&d, &bad), (&d, &good)]);
        assert_eq!(accepted.len(), 1);
        assert_eq!(accepted[0].1, &good);
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].1, &bad);
    }

    #[test]
    fn a_template_must_parse_after_its_fix() {
        assert!(parses(Path::new("p.jinja"), "{{ topic }}"));
        assert!(!parses(Path::new("p.jinja"), "{{ topic "));
        assert!(parses(Path::new("a.pipe"), "input x: string\n"));
        assert!(!parses(Path::new("a.pipe"), "input x: string {\n"));
    }
}
