//! The base64 of MCP `blob`s (RFC 4648, standard alphabet): decoding with padding
//! optional and whitespace ignored, as servers differ in both; encoding with padding.

/// The bytes `text` encodes, or why it is not base64.
pub(super) fn decode(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3 + 3);
    let mut group = [0u8; 4];
    let mut filled = 0;
    let mut padding = 0;
    for (at, c) in text.bytes().enumerate() {
        if c.is_ascii_whitespace() {
            continue;
        }
        if c == b'=' {
            padding += 1;
            continue;
        }
        if padding > 0 {
            return Err(format!("a character follows the padding at byte {at}"));
        }
        let Some(v) = value(c) else {
            return Err(format!("`{}` at byte {at} is not base64", c as char));
        };
        group[filled] = v;
        filled += 1;
        if filled == 4 {
            out.push((group[0] << 2) | (group[1] >> 4));
            out.push((group[1] << 4) | (group[2] >> 2));
            out.push((group[2] << 6) | group[3]);
            filled = 0;
        }
    }
    match filled {
        0 => {}
        1 => return Err("the data ends in the middle of a byte".into()),
        2 => out.push((group[0] << 2) | (group[1] >> 4)),
        _ => {
            out.push((group[0] << 2) | (group[1] >> 4));
            out.push((group[1] << 4) | (group[2] >> 2));
        }
    }
    if padding > 2 {
        return Err("too much padding".into());
    }
    Ok(out)
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// `bytes` as padded base64.
pub(super) fn encode(bytes: &[u8]) -> String {
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

fn value(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rfc_vectors_with_and_without_padding() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(
                decode(encoded).as_deref(),
                Ok(plain.as_bytes()),
                "{encoded}"
            );
            assert_eq!(encode(plain.as_bytes()), encoded);
            let bare = encoded.trim_end_matches('=');
            assert_eq!(decode(bare).as_deref(), Ok(plain.as_bytes()), "{bare}");
        }
        assert_eq!(decode("Zm9v\nYmFy\n").as_deref(), Ok(&b"foobar"[..]));
        assert_eq!(decode("/+8=").as_deref(), Ok(&[0xff, 0xef][..]));
    }

    #[test]
    fn what_is_not_base64() {
        assert!(decode("Zm9v!").is_err());
        assert!(decode("Z").is_err());
        assert!(decode("Zg==Zg").is_err());
    }
}
