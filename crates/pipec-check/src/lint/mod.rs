//! Lint passes, their registry, and suppression comments.
//!
//! Rules that are passes of their own read the checked program through a
//! [`LintContext`]; their check is in `passes/<rule>.rs`. Every rule, pass or not, is
//! declared in the catalogue (`pipec_diagnostic::rules`), which the checker reports from too.

mod edit;
mod passes;
mod registry;
mod suppress;

use crate::SyntaxFile;
use crate::hir::Hir;
use pipec_base::source::SourceDb;
use pipec_diagnostic::Diagnostic;

pub use suppress::apply_suppressions;

/// What a lint pass may read.
pub struct LintContext<'a> {
    pub hir: &'a Hir,
    pub syntax: &'a [SyntaxFile],
    pub db: &'a SourceDb,
    /// Whether the checker reported an error: passes that measure the program (sizes,
    /// budgets) hold back on one that is incomplete.
    pub has_errors: bool,
}

impl LintContext<'_> {
    /// Whether diagnostics about the checked file's own declarations are wanted: a library
    /// file checked on its own gets no unused warnings (its declarations are for importers).
    pub fn reports_unused(&self) -> bool {
        !self.hir.is_library
    }
}

/// A lint pass: reads the program, adds diagnostics.
pub type Pass = fn(&LintContext<'_>, &mut Vec<Diagnostic>);

/// Runs every pass.
pub fn run(cx: &LintContext<'_>, out: &mut Vec<Diagnostic>) {
    for pass in registry::PASSES {
        pass(cx, out);
    }
}
