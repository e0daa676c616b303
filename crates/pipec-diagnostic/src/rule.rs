//! The identity of a diagnostic: code, name, severity and documentation.

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// A diagnostic kind. Codes are stable forever; a retired rule keeps its code.
#[derive(Debug)]
pub struct Rule {
    /// `P0101` for checks before a run, `R0101` for run-time errors.
    pub code: &'static str,
    /// kebab-case, naming the bad pattern (not the fix).
    pub name: &'static str,
    pub severity: Severity,
    /// One line: what it catches.
    pub summary: &'static str,
    /// The rule's documentation (what it catches, why it matters, an example), from
    /// the doc comment in the rule's own file; `pipec explain` prints it.
    pub doc: &'static str,
}

impl Rule {
    /// The documentation with the one leading space of each doc-comment line removed.
    pub fn documentation(&self) -> String {
        let mut out = String::new();
        for line in self.doc.lines() {
            out.push_str(line.strip_prefix(' ').unwrap_or(line));
            out.push('\n');
        }
        out.trim().to_string()
    }
}

/// Declares a rule from its doc comment and fields, so that the documentation `explain`
/// prints and the rustdoc of the rule are the same text.
#[macro_export]
#[doc(hidden)]
macro_rules! declare_rule {
    (
        $(#[doc = $doc:literal])*
        $vis:vis static $id:ident = {
            code: $code:literal,
            name: $name:literal,
            severity: $sev:ident,
            summary: $summary:literal $(,)?
        };
    ) => {
        $(#[doc = $doc])*
        $vis static $id: $crate::Rule = $crate::Rule {
            code: $code,
            name: $name,
            severity: $crate::Severity::$sev,
            summary: $summary,
            doc: concat!($($doc, "\n"),*),
        };
    };
}
