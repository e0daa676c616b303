//! `RuntimeError`: why a run was refused or could not go on, as a coded diagnostic. Every
//! error of the runtime ends up as one, built from its rule; lower layers return typed
//! errors (`EvalError`, `StoreError`, `ModelError`, ...) that say which rule they are,
//! so nothing is ever classified by its message text.

use pipec_diagnostic::{self as codes, Rule};
use pipec_store::{GateRec, StoreError, StoredError};

/// Why a run was refused or could not go on: a coded diagnostic.
#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeError {
    pub code: &'static str,
    pub name: &'static str,
    pub message: String,
    pub help: Option<String>,
}

impl RuntimeError {
    pub fn new(rule: &'static Rule, message: impl Into<String>) -> RuntimeError {
        RuntimeError {
            code: rule.code,
            name: rule.name,
            message: message.into(),
            help: None,
        }
    }

    pub fn help(mut self, help: impl Into<String>) -> RuntimeError {
        self.help = Some(help.into());
        self
    }

    /// Whether this is the error of `rule`.
    pub fn is(&self, rule: &Rule) -> bool {
        self.code == rule.code
    }

    /// The error as a thread stores it, about `node` when given.
    pub fn stored(&self, node: Option<&str>) -> StoredError {
        StoredError {
            code: self.code.into(),
            name: self.name.into(),
            message: self.message.clone(),
            node: node.map(str::to_string),
            help: self.help.clone(),
        }
    }
}

impl std::fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.name, self.message)?;
        if let Some(h) = &self.help {
            write!(f, "\n  help: {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RuntimeError {}

impl From<StoreError> for RuntimeError {
    fn from(e: StoreError) -> RuntimeError {
        let rule = match &e {
            StoreError::NotFound { .. } | StoreError::Ambiguous { .. } => &codes::THREAD_NOT_FOUND,
            StoreError::Locked { .. } => &codes::THREAD_LOCKED,
            StoreError::Fenced { .. } => &codes::LEASE_LOST,
            StoreError::Cancelled { .. } => &codes::THREAD_CANCELLED,
            StoreError::Ended { .. } => &codes::THREAD_ENDED,
            StoreError::NoSuchGate { .. } => &codes::GATE_ANSWER_INVALID,
            StoreError::AlreadyAnswered { .. } => &codes::GATE_ALREADY_ANSWERED,
            StoreError::NewerFormat { .. } => &codes::STORE_FORMAT_UNSUPPORTED,
            StoreError::Corrupt { .. } | StoreError::Io(_) | StoreError::ReadOnly { .. } => {
                &codes::STORE_UNREADABLE
            }
            StoreError::Missing { .. } => &codes::STORE_NOT_FOUND,
            StoreError::Exists { .. } => &codes::THREAD_EXISTS,
        };
        let help = match &e {
            StoreError::Locked { .. } => Some(
                "wait for it to finish, or stop that process; `pipec answer` works meanwhile"
                    .to_string(),
            ),
            StoreError::NotFound { .. } => {
                Some("`pipec runs` lists the threads of this store".to_string())
            }
            StoreError::NewerFormat { .. } => Some("use a newer pipec".to_string()),
            StoreError::Corrupt { .. } => Some(
                "restore the file from a backup, or point `--store` elsewhere; `pipec store check` says what is damaged"
                    .to_string(),
            ),
            StoreError::Missing { .. } => Some(
                "name the store with `--store PATH` or `PIPEC_STORE`; `pipec run` creates one"
                    .to_string(),
            ),
            _ => None,
        };
        RuntimeError {
            code: rule.code,
            name: rule.name,
            message: e.to_string(),
            help,
        }
    }
}

/// Several errors of one kind reported as one (every missing secret at once, not the
/// first of them): the messages joined, the first help kept.
pub(crate) fn combine(errors: Vec<RuntimeError>) -> Option<RuntimeError> {
    let mut iter = errors.into_iter();
    let mut first = iter.next()?;
    let rest: Vec<RuntimeError> = iter.collect();
    if rest.is_empty() {
        return Some(first);
    }
    let mut message = format!("{} problems:\n  - {}", rest.len() + 1, first.message);
    for e in &rest {
        message.push_str(&format!("\n  - {}", e.message));
    }
    first.message = message;
    Some(first)
}

/// How one try ended, when it did not give a value.
#[derive(Debug)]
pub(crate) enum TryError {
    /// Trying again may help, and is safe: the failure's code and message.
    Transient {
        rule: &'static Rule,
        message: String,
    },
    /// It will not get better by trying again.
    Fatal(StoredError),
    /// An effect that may or may not have happened: the thread needs a person.
    Unknown(String),
    /// A call waits at its approval gate (its row is written); the node goes on once
    /// the gate is answered.
    Waiting { gate: String, rec: Box<GateRec> },
}
