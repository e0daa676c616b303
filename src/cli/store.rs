//! `pipec store migrate`, `pipec store check` and `pipec store stats`; `pipec store copy`
//! is in `store_copy`.

use std::path::PathBuf;

use clap::Subcommand;

use super::common;
use crate::store::{
    PgOpen, PgStats, PostgresStore, RedbStore, SCHEMA_VERSION, STORE_FORMAT, StoreError, StoreStats,
};

#[derive(clap::Args)]
pub(super) struct Args {
    #[command(subcommand)]
    command: StoreCommand,
    /// The store: a redb file or a postgres:// URL (`copy` takes `--from` and `--to`)
    #[arg(long, global = true)]
    store: Option<PathBuf>,
}

#[derive(Subcommand)]
enum StoreCommand {
    /// Upgrade the store file to this pipec's format
    Migrate,
    /// Run the store's integrity check; it only reads the file
    Check {
        /// Let redb repair a damaged file (this writes it)
        #[arg(long)]
        repair: bool,
    },
    /// Rows and bytes per table, and the file's size
    Stats {
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Copy whole threads to another store (redb file or PostgreSQL), exactly; the
    /// source is only read
    Copy(super::store_copy::Args),
}

pub(super) fn run(args: Args) -> u8 {
    if let StoreCommand::Copy(copy) = args.command {
        if args.store.is_some() {
            super::err(
                "error: `pipec store copy` names its stores with `--from` and `--to`, not `--store`\n  help: pipec store copy --from STORE --to STORE",
            );
            return super::EXIT_USAGE;
        }
        return super::store_copy::run(copy);
    }
    let path = common::store_path(&args.store, &common::default_root());
    // Each of these refuses a path with no store (R0413) and creates nothing; all but
    // `migrate` and `check --repair` only read the file.
    let failed = |e: StoreError| {
        common::print_store_error(e, &path);
        super::EXIT_FINDINGS
    };
    if common::is_database(&path) {
        return run_on_database(args.command, &path.to_string_lossy(), &failed);
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
            Ok(v) if v > STORE_FORMAT => failed(StoreError::NewerFormat {
                found: v,
                supported: STORE_FORMAT,
            }),
            Ok(_) => match RedbStore::open_existing(&path) {
                // Format 0 is a store created before formats were recorded: opening
                // records the format; there is nothing else to convert yet.
                Ok(_) => {
                    super::err(&format!(
                        "{} migrated to store format {STORE_FORMAT}",
                        path.display()
                    ));
                    super::EXIT_OK
                }
                Err(e) => failed(e),
            },
            Err(e) => failed(e),
        },
        // Handled above.
        StoreCommand::Copy(_) => super::EXIT_USAGE,
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
            Err(e) => failed(e),
        },
        StoreCommand::Check { repair: true } => match RedbStore::repair(&path) {
            Ok(true) => {
                super::err("the store is intact");
                super::EXIT_OK
            }
            Ok(false) => {
                super::err(
                    "the store was damaged; redb repaired it by going back to the last state it could verify",
                );
                super::EXIT_OK
            }
            Err(e) => failed(e),
        },
        StoreCommand::Check { repair: false } => match RedbStore::check(&path) {
            Ok(report) => {
                let pages = if report.pages_verified {
                    "every page's checksum verified".to_string()
                } else {
                    "page checksums not verified while another process has the store open"
                        .to_string()
                };
                super::err(&format!(
                    "the store is intact: {} threads, {} rows read, {pages}",
                    report.threads, report.rows
                ));
                super::EXIT_OK
            }
            Err(e) => failed(e),
        },
    }
}

/// The same commands on a PostgreSQL store.
fn run_on_database(command: StoreCommand, url: &str, failed: &dyn Fn(StoreError) -> u8) -> u8 {
    let shown = crate::store::shown(url);
    match command {
        // Handled by `run`.
        StoreCommand::Copy(_) => super::EXIT_USAGE,
        StoreCommand::Migrate => match PostgresStore::migrate(url) {
            Ok(v) if v == SCHEMA_VERSION => {
                super::err(&format!(
                    "{shown} is already at store schema {SCHEMA_VERSION}"
                ));
                super::EXIT_OK
            }
            Ok(0) => {
                super::err(&format!(
                    "{shown}: created the store's tables (store schema {SCHEMA_VERSION})"
                ));
                super::EXIT_OK
            }
            Ok(v) => {
                super::err(&format!(
                    "{shown} migrated from store schema {v} to {SCHEMA_VERSION}"
                ));
                super::EXIT_OK
            }
            Err(e) => failed(e),
        },
        StoreCommand::Stats { json } => {
            match PostgresStore::connect(url, PgOpen::Existing).and_then(|s| s.stats()) {
                Ok(stats) => {
                    if json {
                        println!(
                            "{}",
                            serde_json::to_string_pretty(&stats).unwrap_or_default()
                        );
                    } else {
                        print_database_stats(&stats);
                    }
                    super::EXIT_OK
                }
                Err(e) => failed(e),
            }
        }
        StoreCommand::Check { repair: true } => {
            super::err(&format!(
                "error: `--repair` is for a store file; {shown} is a PostgreSQL database, whose server keeps it whole (run `pipec store check` without `--repair`)"
            ));
            super::EXIT_USAGE
        }
        StoreCommand::Check { repair: false } => {
            match PostgresStore::connect(url, PgOpen::Existing).and_then(|s| s.check()) {
                Ok(report) => {
                    super::err(&format!(
                        "the store is intact: {} threads, {} rows read and decoded",
                        report.threads, report.rows
                    ));
                    super::EXIT_OK
                }
                Err(e) => failed(e),
            }
        }
    }
}

fn print_database_stats(stats: &PgStats) {
    println!(
        "{:<16} {:>9} {:>12} {:>12}",
        "table", "rows", "table", "indexes"
    );
    for t in &stats.tables {
        println!(
            "{:<16} {:>9} {:>12} {:>12}",
            t.name, t.rows, t.table_bytes, t.index_bytes
        );
    }
    println!(
        "database: {} bytes; store schema {}",
        stats.database_bytes, stats.schema_version
    );
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
