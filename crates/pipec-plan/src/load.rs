//! Reading a plan from JSON: its format version, its shape, its hash, then the invariants
//! `compile` guarantees. Every refusal is a [`PlanLoadError`] with the code R0004
//! plan-invalid, so a plan that pipec did not write never starts a thread.

use std::fmt;

use serde_json::Value;

use super::validate::{Violation, validate};
use super::{FORMAT_VERSION, Plan, hash_plan};
use pipec_diagnostic::{PLAN_INVALID, Rule};

/// Why a plan was refused.
#[derive(Clone, Debug, PartialEq)]
pub enum PlanLoadError {
    /// The text is not JSON.
    NotJson { error: String },
    /// The JSON is not an object.
    NotAnObject,
    /// There is no `format_version`.
    FormatVersionMissing,
    /// `format_version` is there but is not a whole number that is not negative: `found`
    /// is the value as written, `why` says what is wrong with it.
    FormatVersionInvalid { found: String, why: &'static str },
    /// A format this pipec does not read.
    FormatVersionUnsupported { found: u64 },
    /// The JSON does not have the plan's shape (a field missing, unknown or of another
    /// type).
    Shape { error: String },
    /// The content does not match the recorded hash: the plan was edited after compiling.
    HashMismatch { recorded: String, computed: String },
    /// The plan has its shape and its hash, but breaks an invariant that `compile`
    /// guarantees (its hash was recomputed after an edit).
    Inconsistent(Violation),
}

impl PlanLoadError {
    /// The diagnostic every refusal of a plan reports.
    pub fn rule(&self) -> &'static Rule {
        &PLAN_INVALID
    }

    /// The stable code, `R0004`.
    pub fn code(&self) -> &'static str {
        self.rule().code
    }

    /// What to type about it.
    pub fn help(&self) -> &'static str {
        match self {
            PlanLoadError::FormatVersionUnsupported { .. } => {
                "compile the pipeline again with this pipec: `pipec compile FILE.pipe -o plan.json`"
            }
            _ => {
                "compile the pipeline again (`pipec compile FILE.pipe -o plan.json`); plans are not edited by hand"
            }
        }
    }
}

impl fmt::Display for PlanLoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanLoadError::NotJson { error } => write!(f, "not a plan: {error}"),
            PlanLoadError::NotAnObject => write!(f, "not a plan: the JSON is not an object"),
            PlanLoadError::FormatVersionMissing => {
                write!(f, "not a plan: `format_version` is missing")
            }
            PlanLoadError::FormatVersionInvalid { found, why } => write!(
                f,
                "not a plan: `format_version` is {found} ({why}); this pipec reads format version {FORMAT_VERSION}"
            ),
            PlanLoadError::FormatVersionUnsupported { found } => write!(
                f,
                "the plan has format version {found}, and this pipec reads version {FORMAT_VERSION}; compile it again with this pipec"
            ),
            PlanLoadError::Shape { error } => write!(f, "not a valid plan: {error}"),
            PlanLoadError::HashMismatch { recorded, computed } => write!(
                f,
                "the plan's content does not match its hash ({recorded} ≠ {computed}); it was edited after compiling"
            ),
            PlanLoadError::Inconsistent(v) => write!(f, "the plan is inconsistent: {v}"),
        }
    }
}

impl std::error::Error for PlanLoadError {}

/// For callers that carry errors as text.
impl From<PlanLoadError> for String {
    fn from(e: PlanLoadError) -> String {
        e.to_string()
    }
}

/// Reads a plan and checks it; see [`Plan::from_json`].
pub(super) fn from_json(text: &str) -> Result<Plan, PlanLoadError> {
    let value: Value = serde_json::from_str(text).map_err(|e| PlanLoadError::NotJson {
        error: e.to_string(),
    })?;
    let Some(object) = value.as_object() else {
        return Err(PlanLoadError::NotAnObject);
    };
    format_version(object.get("format_version"))?;
    let plan: Plan = serde_json::from_value(value).map_err(|e| PlanLoadError::Shape {
        error: e.to_string(),
    })?;
    let computed = hash_plan(&plan);
    if computed != plan.hash {
        return Err(PlanLoadError::HashMismatch {
            recorded: plan.hash.clone(),
            computed,
        });
    }
    validate(&plan).map_err(PlanLoadError::Inconsistent)?;
    Ok(plan)
}

/// The format version, which decides how the rest is read, so it is checked first and on
/// its own: a version written as `1.0`, `-1` or `"1"` is named as it is written.
fn format_version(v: Option<&Value>) -> Result<(), PlanLoadError> {
    let invalid = |found: &Value, why| PlanLoadError::FormatVersionInvalid {
        found: found.to_string(),
        why,
    };
    match v {
        None => Err(PlanLoadError::FormatVersionMissing),
        Some(written @ Value::Number(n)) => match n.as_u64() {
            Some(found) if found == u64::from(FORMAT_VERSION) => Ok(()),
            Some(found) => Err(PlanLoadError::FormatVersionUnsupported { found }),
            None if n.as_i64().is_some_and(|i| i < 0) => Err(invalid(written, "a negative number")),
            None => Err(invalid(written, "not a whole number")),
        },
        Some(found @ Value::String(_)) => Err(invalid(found, "a string, not a number")),
        Some(found) => Err(invalid(found, "not a number")),
    }
}
