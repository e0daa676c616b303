//! What to start: argv, working directory, and the environment policy — pipec's own
//! environment with additions (an `exec` command), or a cleared one with a short allowlist
//! and declared variables (a server pipec talks to) — and, optionally, the reaper the
//! child must be watched by.

use std::ffi::{OsStr, OsString};
use std::path::Path;

use super::ReaperId;

/// A child to start: `argv[0]` is the program (a bare name is searched on `PATH`, a name
/// with a `/` is relative to `cwd`), and the child runs in `cwd`.
#[derive(Clone, Copy, Debug)]
pub struct Command<'a> {
    pub(crate) argv: &'a [String],
    pub(crate) cwd: &'a Path,
    pub(crate) environment: Environment<'a>,
    pub(crate) reaper: Option<&'a ReaperId>,
}

/// Which environment the child gets.
#[derive(Clone, Copy, Debug)]
pub enum Environment<'a> {
    /// pipec's environment, with these variables set on top (a later entry wins).
    Inherited(&'a [(String, String)]),
    /// Only `PATH`, `HOME` and the locale variables (`LANG`, `LANGUAGE`, `LC_*`) of
    /// pipec's environment, then these: nothing of pipec's credentials or configuration
    /// reaches a program that did not declare it.
    Cleared(&'a [(String, String)]),
}

impl<'a> Command<'a> {
    /// `argv` (program first) in `cwd`, with pipec's environment.
    pub fn new(argv: &'a [String], cwd: &'a Path) -> Command<'a> {
        Command {
            argv,
            cwd,
            environment: Environment::Inherited(&[]),
            reaper: None,
        }
    }

    pub fn environment(mut self, environment: Environment<'a>) -> Command<'a> {
        self.environment = environment;
        self
    }

    /// Starts the child only if `reaper` is this process's reaper: a caller that wrote the
    /// reaper's identity down before the spawn (a journal's `started` row) learns that the
    /// reaper was replaced in between, instead of having the child watched by another.
    /// Without it, a spawn whose reaper died starts one more time under its replacement.
    pub fn watched_by(mut self, reaper: &'a ReaperId) -> Command<'a> {
        self.reaper = Some(reaper);
        self
    }

    /// The child's environment, in order, each name once.
    pub(crate) fn variables(&self) -> Vec<(OsString, OsString)> {
        let (mut vars, add): (Vec<(OsString, OsString)>, _) = match self.environment {
            Environment::Inherited(add) => (std::env::vars_os().collect(), add),
            Environment::Cleared(add) => (
                std::env::vars_os()
                    .filter(|(name, _)| is_allowed(name))
                    .collect(),
                add,
            ),
        };
        for (name, value) in add {
            vars.retain(|(n, _)| n != OsStr::new(name));
            vars.push((name.into(), value.into()));
        }
        vars
    }
}

/// The variables a cleared environment keeps from pipec's.
fn is_allowed(name: &OsStr) -> bool {
    let name = name.as_encoded_bytes();
    matches!(name, b"PATH" | b"HOME" | b"LANG" | b"LANGUAGE") || name.starts_with(b"LC_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowlist_is_path_home_and_the_locale() {
        for kept in ["PATH", "HOME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE"] {
            assert!(is_allowed(OsStr::new(kept)), "{kept}");
        }
        for dropped in [
            "OPENAI_API_KEY",
            "PIPEC_STORE",
            "USER",
            "PATHEXT",
            "XLC_ALL",
        ] {
            assert!(!is_allowed(OsStr::new(dropped)), "{dropped}");
        }
    }

    #[test]
    fn declared_variables_replace_inherited_ones() {
        let argv = ["x".to_string()];
        let add = [
            ("PATH".to_string(), "/only".to_string()),
            ("K".to_string(), "1".to_string()),
            ("K".to_string(), "2".to_string()),
        ];
        let vars = Command::new(&argv, Path::new("/"))
            .environment(Environment::Cleared(&add))
            .variables();
        let path: Vec<_> = vars.iter().filter(|(n, _)| n == "PATH").collect();
        assert_eq!(path.len(), 1);
        assert_eq!(path[0].1, "/only");
        let k: Vec<_> = vars.iter().filter(|(n, _)| n == "K").collect();
        assert_eq!(k, vec![&(OsString::from("K"), OsString::from("2"))]);
    }
}
