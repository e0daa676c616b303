//! Base64 (RFC 4648, standard alphabet), the encoding of MCP's `blob`s and of binary
//! content written in `.pipe` files and specifications, through the `base64` crate.
//! Decoding skips white space and line breaks (YAML block scalars and servers wrap long
//! blobs) and lets the `=` padding be left out, and says what is wrong with its position
//! in the text; encoding pads.

use base64::Engine;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

/// Padding optional on the way in, written on the way out; bits after the last whole byte
/// are ignored, as the decoders that wrote pipec's stored blobs ignored them.
const STANDARD: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// The bytes, or what is wrong and at which character of the text.
pub fn decode(text: &str) -> Result<Vec<u8>, String> {
    // The text without white space, and for each byte the character of `text` (from 1)
    // it came from.
    let mut compact = Vec::with_capacity(text.len());
    let mut positions = Vec::with_capacity(text.len());
    let mut chars = Vec::new();
    for (at, c) in text.chars().enumerate() {
        if c.is_ascii_whitespace() {
            continue;
        }
        let mut utf8 = [0u8; 4];
        for byte in c.encode_utf8(&mut utf8).bytes() {
            compact.push(byte);
            positions.push(at + 1);
            chars.push(c);
        }
    }
    let digits = compact.iter().filter(|b| **b != b'=').count();
    let padding = compact.len() - digits;
    let misplaced_padding =
        || format!("{padding} `=` do not pad {digits} characters to a multiple of 4");
    STANDARD.decode(&compact).map_err(|e| match e {
        base64::DecodeError::InvalidByte(i, b'=') => match compact[i..].iter().position(|b| *b != b'=') {
            Some(after) => format!(
                "`{}` at character {} follows the `=` padding, which ends the data",
                chars[i + after],
                positions[i + after]
            ),
            None => misplaced_padding(),
        },
        base64::DecodeError::InvalidByte(i, _) => {
            let (c, position) = (chars[i], positions[i]);
            match c {
                '-' | '_' => format!(
                    "`{c}` at character {position} is of the URL-safe alphabet; the standard one writes `{}`",
                    if c == '-' { '+' } else { '/' }
                ),
                _ => format!("`{c}` at character {position} is not a base64 character"),
            }
        }
        base64::DecodeError::InvalidLength(_) => format!(
            "{digits} characters encode no whole number of bytes (one is missing or one too many)"
        ),
        base64::DecodeError::InvalidPadding | base64::DecodeError::InvalidLastSymbol(..) => {
            misplaced_padding()
        }
    })
}

/// `bytes` as padded base64.
pub fn encode(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::{decode, encode};

    #[test]
    fn the_rfc_vectors_both_ways() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(encode(plain.as_bytes()), encoded);
            assert_eq!(
                decode(encoded).as_deref(),
                Ok(plain.as_bytes()),
                "{encoded}"
            );
            let bare = encoded.trim_end_matches('=');
            assert_eq!(decode(bare).as_deref(), Ok(plain.as_bytes()), "{bare}");
        }
    }

    #[test]
    fn standard_base64_with_and_without_padding_and_wrapped() {
        assert_eq!(decode("aGVsbG8=").ok(), Some(b"hello".to_vec()));
        assert_eq!(decode("aGVsbG8").ok(), Some(b"hello".to_vec()));
        assert_eq!(decode("aGVs\n  bG8h\n").ok(), Some(b"hell\x6f!".to_vec()));
        assert_eq!(decode("").ok(), Some(Vec::new()));
        assert_eq!(decode("/+8=").ok(), Some(vec![0xff, 0xef]));
    }

    #[test]
    fn what_is_not_base64_is_located() {
        let e = decode("aGV_bG8=").expect_err("url-safe");
        assert!(e.contains("character 4"), "{e}");
        assert!(e.contains("URL-safe"), "{e}");
        assert!(
            decode("aGVsbG8=x")
                .expect_err("after padding")
                .contains("character 9")
        );
        assert!(
            decode("aGVsb")
                .expect_err("length")
                .contains("5 characters")
        );
        assert!(decode("aGVsbG8===").is_err());
        assert!(
            decode("aGé=")
                .expect_err("not ascii")
                .contains("`é` at character 3")
        );
        assert!(
            decode("aG\n V_bG8=")
                .expect_err("wrapped")
                .contains("`_` at character 6")
        );
        assert!(
            decode("aG=Vs")
                .expect_err("inner padding")
                .contains("`V` at character 4 follows the `=` padding")
        );
        // Bits after the last whole byte are ignored, as they always were.
        assert_eq!(decode("Zh==").ok(), Some(b"f".to_vec()));
    }
}
