//! reShapr Resources specifications (`apiVersion: reshapr.io/v1alpha1`, `kind: Resources`)
//! loaded into a [`Catalogue`], as they are written for reShapr: the `service`, static
//! `resources` keyed by URI (content as `text`, base64 `blob` decoded once here, or
//! `remoteContent`), and `resourceTemplates` keyed by URI template, whose content comes
//! from the backend `pipec serve --backend` names.
//!
//! Every problem is a diagnostic with a P08xx code at its place in the YAML text, which is
//! added to the caller's [`SourceDb`], so it renders like a `.pipe` file's. The YAML is read
//! by `yaml_tree.rs`, the values by `values.rs`, the document by `document.rs`; URI keys are
//! held to what can be served in `uri_shape.rs`, and `overlap.rs` finds entries that answer
//! the same URI.

mod base64;
mod document;
mod overlap;
mod uri_shape;
mod values;
mod yaml_tree;

use std::path::Path;
use std::sync::Arc;

use crate::diagnostic::{self, Diagnostic};
use crate::rules as r;
use crate::serve::catalogue::Catalogue;
use crate::source::{SourceDb, is_not_utf8, read_text};

pub use document::{API_VERSION, KIND};

/// What loading one Resources file gave: the catalogue of every entry that is valid, and
/// every diagnostic, sorted by place. A file with errors must not be served.
#[derive(Debug)]
pub struct SpecLoad {
    pub catalogue: Catalogue,
    pub diagnostics: Vec<Diagnostic>,
}

impl SpecLoad {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Whether a path names a Resources specification rather than a `.pipe` file: its
/// extension is `.yaml` or `.yml` (in any case).
pub fn is_spec_path(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"))
}

/// Reads and loads a Resources file. A file that cannot be read, or is not UTF-8, is a
/// diagnostic without a place (P0105 and P0004, as for a `.pipe` file).
pub fn load_spec_file(db: &mut SourceDb, path: &Path, display_name: &str) -> SpecLoad {
    match read_text(path) {
        Ok(text) => load_spec_text(db, path, display_name, &text),
        Err(e) => {
            let diagnostic = if is_not_utf8(&e) {
                Diagnostic::without_location(
                    &r::INVALID_ENCODING,
                    format!("`{display_name}` is {e}"),
                )
                .help("save the file as UTF-8 (`iconv -f latin1 -t utf-8`, or the editor's encoding setting)")
            } else {
                Diagnostic::without_location(
                    &r::IMPORT_NOT_FOUND,
                    format!("cannot read `{display_name}`: {e}"),
                )
            };
            SpecLoad {
                catalogue: Catalogue::default(),
                diagnostics: vec![diagnostic],
            }
        }
    }
}

/// Loads a Resources file held in memory; `path` is where it came from (kept in the
/// [`SourceDb`]), `display_name` how messages name it.
pub fn load_spec_text(db: &mut SourceDb, path: &Path, display_name: &str, text: &str) -> SpecLoad {
    let file = db.add(
        display_name.to_string(),
        path.to_path_buf(),
        Arc::from(text),
    );
    let parsed = yaml_tree::parse_document(text);
    let mut reader = document::Reader {
        text,
        report: values::Report::new(file),
    };
    for problem in &parsed.problems {
        let mut d = Diagnostic::new(
            &r::SPEC_SYNTAX_ERROR,
            file,
            problem.span,
            problem.message.clone(),
        )
        .label(problem.label.clone());
        if let Some(help) = &problem.help {
            d = d.help(help.clone());
        }
        if let Some((span, label)) = &problem.related {
            d = d.secondary(file, *span, label.clone());
        }
        reader.report.push(d);
    }
    let readable = parsed.root.is_some() || parsed.problems.is_empty();
    let catalogue = if readable {
        reader.document(parsed.root.as_ref())
    } else {
        Catalogue::default()
    };
    let mut diagnostics = reader.report.diagnostics;
    diagnostic::snap_spans(db, &mut diagnostics);
    diagnostic::sort_and_dedup(&mut diagnostics);
    SpecLoad {
        catalogue,
        diagnostics,
    }
}
