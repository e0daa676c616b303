//! The compiler's entry points: a file analysed (checked, linted, suppressions applied,
//! diagnostics sorted), and a file compiled to a [`Plan`].

use std::path::Path;

use pipec_base::source::{FsLoader, Loader, MemoryLoader, SourceDb};
use pipec_diagnostic::{Diagnostic, Severity, TerminalOptions};
use pipec_plan::Plan;

use crate::SyntaxFile;
use crate::hir::Hir;

/// Everything pipec knows about a checked file: the program, its sources, and every
/// diagnostic (sorted, with suppressions applied).
pub struct Analysis {
    pub hir: Hir,
    pub db: SourceDb,
    pub diagnostics: Vec<Diagnostic>,
    pub syntax: Vec<SyntaxFile>,
}

impl Analysis {
    pub fn has_errors(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity == Severity::Error)
    }
}

/// Checks a file (parse, resolve, types, prompts, graph, lints), reading through `loader`.
/// `display_name` is how the file is named in messages.
pub fn analyze(loader: &dyn Loader, path: &Path, display_name: &str) -> Analysis {
    let checked = crate::check(loader, path, display_name);
    let mut diagnostics = checked.diagnostics;
    let has_errors = diagnostics.iter().any(Diagnostic::is_error);
    let cx = crate::lint::LintContext {
        hir: &checked.hir,
        syntax: &checked.syntax,
        db: &checked.db,
        has_errors,
    };
    crate::lint::run(&cx, &mut diagnostics);
    if has_errors {
        // A program with errors is incomplete: what looks unused may be used by the
        // code that failed to check, so these warnings would mostly be noise.
        diagnostics.retain(|d| !pipec_diagnostic::rules::UNUSED_FAMILY.contains(&d.rule.code));
    }
    crate::lint::apply_suppressions(&checked.syntax, &checked.db, &mut diagnostics, has_errors);
    pipec_diagnostic::snap_spans(&checked.db, &mut diagnostics);
    pipec_diagnostic::sort_and_dedup(&mut diagnostics);
    Analysis {
        hir: checked.hir,
        db: checked.db,
        diagnostics,
        syntax: checked.syntax,
    }
}

/// Why a file did not compile: every diagnostic, and the sources to show them with.
pub struct CompileError {
    pub db: SourceDb,
    pub diagnostics: Vec<Diagnostic>,
}

impl CompileError {
    /// The diagnostics drawn for a terminal.
    pub fn render(&self, opts: TerminalOptions) -> String {
        pipec_diagnostic::render_terminal(&self.db, &self.diagnostics, opts)
    }
}

impl std::fmt::Debug for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.render(TerminalOptions::default()))
    }
}

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.render(TerminalOptions::default()))
    }
}

impl std::error::Error for CompileError {}

/// The pipeline's name: the file name without its extension.
fn pipeline_name(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "pipeline".into())
}

/// Checks and lowers an analysis; errors (not warnings) refuse the plan.
pub fn lower_analysis(analysis: Analysis, path: &Path) -> Result<Plan, CompileError> {
    if analysis.has_errors() {
        return Err(CompileError {
            db: analysis.db,
            diagnostics: analysis
                .diagnostics
                .into_iter()
                .filter(Diagnostic::is_error)
                .collect(),
        });
    }
    Ok(crate::lower::lower(&analysis.hir, &pipeline_name(path)))
}

/// Compiles the `.pipe` file at `path` (and its imports and prompt templates).
pub fn compile_file(path: impl AsRef<Path>) -> Result<Plan, CompileError> {
    let path = path.as_ref();
    let name = path.to_string_lossy().into_owned();
    lower_analysis(analyze(&FsLoader, path, &name), path)
}

/// Compiles source text held in memory. Prompts must be inline strings and imports are
/// not available; use [`compile_with`] with a [`MemoryLoader`] for those.
pub fn compile_str(name: &str, source: &str) -> Result<Plan, CompileError> {
    let loader = MemoryLoader::new().with(name, source);
    compile_with(&loader, Path::new(name))
}

/// Compiles a file read through any loader.
pub fn compile_with(loader: &dyn Loader, path: &Path) -> Result<Plan, CompileError> {
    let name = path.to_string_lossy().into_owned();
    lower_analysis(analyze(loader, path, &name), path)
}
