//! `pipec explain CODE|NAME` and `pipec explain --list`.

use super::{EXIT_OK, EXIT_USAGE};
use crate::diagnostic::RUNTIME_CODES;
use crate::names;
use crate::rules::{ALL_RULES, find_rule};

#[derive(clap::Args)]
pub(super) struct Args {
    /// A code (`P0301`) or rule name (`unbound-uri-variable`)
    #[arg(required_unless_present = "list")]
    rule: Option<String>,
    /// List every code with its name, severity and summary
    #[arg(long)]
    list: bool,
}

pub(super) fn run(args: Args) -> u8 {
    if args.list {
        let mut text = String::new();
        for r in ALL_RULES.iter().chain(RUNTIME_CODES.iter()) {
            text.push_str(&format!(
                "{}  {:<28} {:<8} {}\n",
                r.code,
                r.name,
                r.severity.as_str(),
                r.summary
            ));
        }
        super::out(&text);
        return EXIT_OK;
    }
    let key = args.rule.unwrap_or_default();
    match find_rule(&key) {
        Some(r) => {
            super::out(&format!(
                "{} {} ({})\n\n{}\n",
                r.code,
                r.name,
                r.severity.as_str(),
                r.documentation()
            ));
            EXIT_OK
        }
        None => {
            let all: Vec<&str> = ALL_RULES
                .iter()
                .chain(RUNTIME_CODES.iter())
                .map(|r| r.name)
                .collect();
            let hint = names::did_you_mean(&key, all)
                .map(|h| format!(" {h}"))
                .unwrap_or_default();
            super::err(&format!(
                "error: no rule `{key}`.{hint} `pipec explain --list` lists them all"
            ));
            EXIT_USAGE
        }
    }
}
