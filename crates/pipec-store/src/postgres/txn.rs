//! Transactions whose `BEGIN` and `COMMIT` travel in the pipelines of their statements.
//!
//! A transaction opened the usual way costs a round trip for `BEGIN` and another for
//! `COMMIT`, on top of its statements'. Here `BEGIN` is sent with the first statements
//! and `COMMIT` with the last, so a transaction whose statements need no answer before
//! it ends is one round trip ([`at_once`]), and one that decides between two pipelines
//! is two ([`Tx`]).
//!
//! The server runs a connection's requests in order, and a statement that fails aborts
//! the transaction: the statements after it fail too, and a `COMMIT` sent after them ends
//! it as a rollback. So a transaction sent whole never leaves its connection inside a
//! transaction, whatever fails. A [`Tx`] dropped between its pipelines (its future was
//! cancelled) takes its connection out of the pool and closes it, which the server
//! answers by rolling back.

use deadpool_postgres::Object;
use tokio_postgres::Row;

use super::rows::{Stmt, pipeline};
use crate::StoreError;

/// Runs `stmts` as one transaction in one round trip: the rows each returned, or the
/// first error (and then none of them took effect).
pub(super) async fn at_once(
    client: &Object,
    stmts: Vec<Stmt>,
) -> Result<Vec<Vec<Row>>, StoreError> {
    let mut all = Vec::with_capacity(stmts.len() + 2);
    all.push(Stmt::new("BEGIN", Vec::new()));
    all.extend(stmts);
    all.push(Stmt::new("COMMIT", Vec::new()));
    let mut answers = pipeline(client, &all).await?;
    answers.pop();
    answers.remove(0);
    Ok(answers)
}

/// A transaction open on its connection between two pipelines.
pub(super) struct Tx {
    client: Option<Object>,
}

impl Tx {
    /// Begins a transaction with `first` in the same round trip; their rows.
    pub(super) async fn begin(
        client: Object,
        first: Vec<Stmt>,
    ) -> Result<(Tx, Vec<Vec<Row>>), StoreError> {
        let mut all = Vec::with_capacity(first.len() + 1);
        all.push(Stmt::new("BEGIN", Vec::new()));
        all.extend(first);
        let tx = Tx {
            client: Some(client),
        };
        match pipeline(tx.client(), &all).await {
            Ok(mut answers) => {
                answers.remove(0);
                Ok((tx, answers))
            }
            Err(e) => {
                tx.rollback().await;
                Err(e)
            }
        }
    }

    fn client(&self) -> &Object {
        self.client
            .as_ref()
            .expect("a transaction keeps its connection until it ends")
    }

    /// Sends `last` and `COMMIT` in one round trip; their rows, or the first error (and
    /// then nothing of the transaction took effect).
    pub(super) async fn commit(mut self, last: Vec<Stmt>) -> Result<Vec<Vec<Row>>, StoreError> {
        let mut all = last;
        all.push(Stmt::new("COMMIT", Vec::new()));
        let answers = pipeline(self.client(), &all).await;
        // Committed or rolled back: the connection is free either way.
        self.client = None;
        let mut answers = answers?;
        answers.pop();
        Ok(answers)
    }

    /// Ends the transaction without effect.
    pub(super) async fn rollback(mut self) {
        let ended = pipeline(self.client(), &[Stmt::new("ROLLBACK", Vec::new())]).await;
        if ended.is_ok() {
            self.client = None;
        }
    }
}

impl Drop for Tx {
    fn drop(&mut self) {
        // Still open (cancelled between pipelines, or a rollback that failed): the
        // connection must not serve anyone else inside this transaction.
        if let Some(client) = self.client.take() {
            drop(Object::take(client));
        }
    }
}
