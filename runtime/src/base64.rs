//! Standard base64 (RFC 4648, `+` and `/`), the two ways warren needs it: decoding what a
//! broker wrote (a direct reply-to address, `crate::rpc::reply_to`), strictly, and encoding
//! HTTP Basic credentials (`crate::management`).

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// `bytes` in standard base64, padded.
pub(crate) fn encode(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let group = chunk.iter().enumerate().fold(0u32, |group, (i, byte)| {
            group | u32::from(*byte) << (16 - 8 * i)
        });
        for i in 0..4 {
            if i <= chunk.len() {
                let index = (group >> (18 - 6 * i)) & 0x3f;
                text.push(char::from(ALPHABET[index as usize]));
            } else {
                text.push('=');
            }
        }
    }
    text
}

/// The bytes of standard base64 `text` (padding optional, as Erlang's `base64:decode`
/// accepts it); `None` for anything else.
pub(crate) fn decode(text: &str) -> Option<Vec<u8>> {
    let digits = text.trim_end_matches('=');
    let padding = text.len() - digits.len();
    if padding > 2 || (padding > 0 && !text.len().is_multiple_of(4)) || digits.len() % 4 == 1 {
        return None;
    }
    let mut bytes = Vec::with_capacity(digits.len() * 3 / 4);
    let mut buffer = 0u32;
    let mut bits = 0;
    for byte in digits.bytes() {
        let value = ALPHABET.iter().position(|&a| a == byte)?;
        buffer = (buffer << 6) | value as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            bytes.push((buffer >> bits) as u8);
        }
    }
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::{decode, encode};

    #[test]
    fn base64_is_decoded_strictly() {
        assert_eq!(decode("aGk="), Some(b"hi".to_vec()));
        assert_eq!(decode("aGk"), Some(b"hi".to_vec()));
        assert_eq!(decode("aGVsbG8h"), Some(b"hello!".to_vec()));
        for bad in ["a", "a===", "aG=k", "aGk-", "aG k", "aGk=="] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn encoding_round_trips() {
        assert_eq!(encode(b"guest:guest"), "Z3Vlc3Q6Z3Vlc3Q=");
        assert_eq!(encode(b""), "");
        assert_eq!(encode(b"a"), "YQ==");
        for length in 0..40u8 {
            let bytes: Vec<u8> = (0..length).map(|b| b.wrapping_mul(37)).collect();
            assert_eq!(decode(&encode(&bytes)), Some(bytes));
        }
    }
}
