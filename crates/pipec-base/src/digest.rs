//! Bytes as lowercase hex, and SHA-256 digests written that way: plan hashes, node
//! fingerprints, argument hashes, idempotency keys and tokens all use these, so one
//! digest is written one way everywhere.

use sha2::{Digest, Sha256};

/// `bytes` as lowercase hex, two digits a byte.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// The first `bytes` bytes (at most 32) of the SHA-256 of `data`, in hex.
pub fn sha256_hex(data: impl AsRef<[u8]>, bytes: usize) -> String {
    let digest = Sha256::digest(data.as_ref());
    hex(&digest[..bytes.min(digest.len())])
}

/// The whole SHA-256 of `data` as `sha256:` and 64 hex digits: how pipec writes a hash
/// that names content (a plan's, a tape entry's request).
pub fn sha256_tagged(data: impl AsRef<[u8]>) -> String {
    format!("sha256:{}", sha256_hex(data, 32))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_and_digests() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(
            sha256_hex("abc", 32),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(sha256_hex("abc", 13), "ba7816bf8f01cfea414140de5d");
    }
}
