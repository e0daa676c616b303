//! Values are stored as envelopes: one version byte, then JSON. A record of a version
//! this pipec does not know is an error naming the table and key, never a panic.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::StoreError;

/// The envelope version of every record this pipec writes.
pub(crate) const RECORD_VERSION: u8 = 1;

pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, StoreError> {
    let mut out = vec![RECORD_VERSION];
    serde_json::to_writer(&mut out, value)
        .map_err(|e| StoreError::Io(format!("cannot encode a record: {e}")))?;
    Ok(out)
}

pub(crate) fn decode<T: DeserializeOwned>(
    bytes: &[u8],
    what: &dyn Fn() -> String,
) -> Result<T, StoreError> {
    match bytes.split_first() {
        Some((&RECORD_VERSION, body)) => {
            serde_json::from_slice(body).map_err(|e| StoreError::Corrupt {
                what: format!("{}: {e}", what()),
            })
        }
        Some((v, _)) => Err(StoreError::Corrupt {
            what: format!("{}: record version {v} is not one this pipec reads", what()),
        }),
        None => Err(StoreError::Corrupt {
            what: format!("{}: empty record", what()),
        }),
    }
}
