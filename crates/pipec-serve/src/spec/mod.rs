//! reShapr Resources specifications (`apiVersion: reshapr.io/v1alpha1`, `kind: Resources`)
//! loaded into a [`Catalogue`], as they are written for reShapr: the `service`, static
//! `resources` keyed by URI (content as `text`, base64 `blob` decoded once here, or
//! `remoteContent`), and `resourceTemplates` keyed by URI template, whose content comes
//! from the backend `pipec serve --backend` names.
//!
//! Every problem is a diagnostic with a P08xx code at its place in the YAML text, which is
//! added to the caller's [`SourceDb`], so it renders like a `.pipe` file's. The YAML is read
//! by `yaml_tree.rs`, the values by `values.rs`, the document by `document.rs`; URI keys are
//! held to what can be served in `uri_shape.rs`; entries that answer the same URI are found
//! by `pipec_base::uri::served_overlaps`, which the checker's `serve` block shares.

mod document;
mod uri_shape;
mod values;
mod yaml_tree;

use std::path::Path;
use std::sync::Arc;

use crate::catalogue::Catalogue;
use pipec_base::source::{SourceDb, is_not_utf8, read_text};
use pipec_diagnostic::rules as r;
use pipec_diagnostic::{self as diagnostic, Diagnostic};

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

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str =
        "apiVersion: reshapr.io/v1alpha1\nkind: Resources\nservice: {name: S, version: '1'}\n";

    fn problems(text: &str) -> Vec<(&'static str, String)> {
        let mut db = SourceDb::default();
        let loaded = load_spec_text(&mut db, Path::new("s.yaml"), "s.yaml", text);
        loaded
            .diagnostics
            .iter()
            .map(|d| {
                let span = d.primary.as_ref().map(|l| l.span).unwrap_or_default();
                let file = db.get(
                    d.primary
                        .as_ref()
                        .map_or(pipec_base::source::FileId(0), |l| l.file),
                );
                (d.rule.code, file.slice(span).to_string())
            })
            .collect()
    }

    #[test]
    fn a_template_problem_points_into_its_key_plain_or_quoted() {
        let plain = format!("{HEADER}resourceTemplates:\n  file:///a/{{#x}}: {{name: a}}\n");
        assert_eq!(problems(&plain), [("P0812", "{#x}".to_string())]);
        let quoted = format!("{HEADER}resourceTemplates:\n  'file:///a/{{#x}}': {{name: a}}\n");
        assert_eq!(problems(&quoted), [("P0812", "{#x}".to_string())]);
        // With an escape, the key's text is not the file's, so the whole key is shown.
        let escaped =
            format!("{HEADER}resourceTemplates:\n  \"file:///\\x61/{{#x}}\": {{name: a}}\n");
        assert_eq!(
            problems(&escaped),
            [("P0812", "\"file:///\\x61/{#x}\"".to_string())]
        );
    }

    #[test]
    fn files_that_cannot_be_read_say_why_without_a_place() {
        let dir = std::env::temp_dir().join(format!("pipec-spec-unit-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let latin1 = dir.join("latin1.yaml");
        let _ = std::fs::write(&latin1, b"name: caf\xe9\n");
        let mut db = SourceDb::default();
        let loaded = load_spec_file(&mut db, &latin1, "latin1.yaml");
        assert_eq!(loaded.diagnostics.len(), 1);
        assert_eq!(loaded.diagnostics[0].rule.code, "P0004");
        assert!(loaded.diagnostics[0].primary.is_none());
        let loaded = load_spec_file(&mut db, &dir.join("missing.yaml"), "missing.yaml");
        assert_eq!(loaded.diagnostics[0].rule.code, "P0105");
        assert!(loaded.has_errors());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn spec_paths_are_yaml_and_yml_in_any_case() {
        for yes in ["a.yaml", "b/c.yml", "D.YAML", "e.Yml"] {
            assert!(is_spec_path(Path::new(yes)), "{yes}");
        }
        for no in ["a.pipe", "yaml", "a.yaml.bak", "a.json"] {
            assert!(!is_spec_path(Path::new(no)), "{no}");
        }
    }
}
