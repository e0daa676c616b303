//! Base64 (RFC 4648, standard alphabet), the encoding of MCP's `blob`s and of binary
//! content written in `.pipe` files and specifications. Decoding skips white space and
//! line breaks (YAML block scalars and servers wrap long blobs) and lets the `=` padding
//! be left out, and says what is wrong with its position in the text; encoding pads.

/// The bytes, or what is wrong and at which character of the text.
pub fn decode(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3 + 3);
    let mut buffer: u32 = 0;
    let mut bits = 0u32;
    let mut digits = 0usize;
    let mut padding = 0usize;
    for (at, c) in text.chars().enumerate() {
        if c.is_ascii_whitespace() {
            continue;
        }
        if c == '=' {
            padding += 1;
            continue;
        }
        let position = at + 1;
        if padding > 0 {
            return Err(format!(
                "`{c}` at character {position} follows the `=` padding, which ends the data"
            ));
        }
        let value = match c {
            'A'..='Z' => c as u32 - 'A' as u32,
            'a'..='z' => c as u32 - 'a' as u32 + 26,
            '0'..='9' => c as u32 - '0' as u32 + 52,
            '+' => 62,
            '/' => 63,
            '-' | '_' => {
                return Err(format!(
                    "`{c}` at character {position} is of the URL-safe alphabet; the standard one writes `{}`",
                    if c == '-' { '+' } else { '/' }
                ));
            }
            _ => {
                return Err(format!(
                    "`{c}` at character {position} is not a base64 character"
                ));
            }
        };
        digits += 1;
        buffer = (buffer << 6) | value;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    if digits % 4 == 1 {
        return Err(format!(
            "{digits} characters encode no whole number of bytes (one is missing or one too many)"
        ));
    }
    if padding > 2 || (padding > 0 && !(digits + padding).is_multiple_of(4)) {
        return Err(format!(
            "{padding} `=` do not pad {digits} characters to a multiple of 4"
        ));
    }
    Ok(out)
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// `bytes` as padded base64.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
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
    }
}
