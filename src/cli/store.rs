//! `pipec store migrate`, `pipec store check` and `pipec store stats`.

use std::path::PathBuf;

use clap::Subcommand;

use super::common;
use crate::store::{RedbStore, STORE_FORMAT, StoreError, StoreStats};

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
    /// Rows and bytes per table, and the file's size
    Stats {
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
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
        StoreCommand::Stats { json } => match RedbStore::stats_at(&path) {
            Ok(stats) => {
                if json {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&stats).unwrap_or_default()
                    );
                } else {
                    print_stats(&stats);
                }
                super::EXIT_OK
            }
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

fn print_stats(stats: &StoreStats) {
    println!(
        "{:<10} {:>9} {:>12} {:>12} {:>12} {:>7}",
        "table", "rows", "stored", "metadata", "fragmented", "pages"
    );
    let (mut stored, mut meta, mut frag) = (0, 0, 0);
    for t in &stats.tables {
        println!(
            "{:<10} {:>9} {:>12} {:>12} {:>12} {:>7}",
            t.name, t.rows, t.stored_bytes, t.metadata_bytes, t.fragmented_bytes, t.pages
        );
        stored += t.stored_bytes;
        meta += t.metadata_bytes;
        frag += t.fragmented_bytes;
    }
    println!(
        "{:<10} {:>9} {stored:>12} {meta:>12} {frag:>12}",
        "total", ""
    );
    println!(
        "file: {} bytes, {} in use",
        stats.file_bytes, stats.allocated_bytes
    );
}
