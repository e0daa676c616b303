//! `pipec store migrate` and `pipec store check`.

use std::path::PathBuf;

use clap::Subcommand;

use super::common;
use crate::store::{RedbStore, STORE_FORMAT, StoreError};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: StoreCommand,
    #[arg(long, global = true)]
    store: Option<PathBuf>,
}

#[derive(Subcommand)]
enum StoreCommand {
    /// Upgrade the store file to this pipec's format
    Migrate,
    /// Run the store's integrity check (needs no other process using it)
    Check,
}

pub fn run(args: Args) -> u8 {
    let path = common::store_path(&args.store, &common::default_root());
    if !path.exists() {
        super::err(&format!("error: no store at {}", path.display()));
        return super::EXIT_USAGE;
    }
    match args.command {
        StoreCommand::Migrate => match RedbStore::format_of(&path) {
            Ok(v) if v == STORE_FORMAT => {
                super::err(&format!(
                    "{} is already at store format {STORE_FORMAT}",
                    path.display()
                ));
                super::EXIT_OK
            }
            Ok(v) if v > STORE_FORMAT => {
                common::print_error(
                    &StoreError::NewerFormat {
                        found: v,
                        supported: STORE_FORMAT,
                    }
                    .into(),
                );
                super::EXIT_FINDINGS
            }
            Ok(_) => match RedbStore::open(&path) {
                // Format 0 is a store created before formats were recorded: opening
                // records the format; there is nothing else to convert yet.
                Ok(_) => {
                    super::err(&format!(
                        "{} migrated to store format {STORE_FORMAT}",
                        path.display()
                    ));
                    super::EXIT_OK
                }
                Err(e) => {
                    common::print_error(&e.into());
                    super::EXIT_FINDINGS
                }
            },
            Err(e) => {
                common::print_error(&e.into());
                super::EXIT_FINDINGS
            }
        },
        StoreCommand::Check => match RedbStore::check_integrity(&path) {
            Ok(true) => {
                super::err("the store is intact");
                super::EXIT_OK
            }
            Ok(false) => {
                super::err("the store was repaired");
                super::EXIT_OK
            }
            Err(e) => {
                common::print_error(&e.into());
                super::EXIT_FINDINGS
            }
        },
    }
}
