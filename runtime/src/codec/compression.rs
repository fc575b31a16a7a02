//! Body compression, both ways: what a publisher compresses with, and what a consumer
//! undoes, within its cap.

use std::borrow::Cow;
use std::io::{Read, Write as _};

use super::json::{Poison, poison};
use crate::model::{Compression, FailureReason};

/// `body` compressed with `compression`, at the default level. The `content-encoding` it is
/// sent with is the compression's spelling, [`Compression::as_str`].
pub(crate) fn compress(compression: Compression, body: &[u8]) -> std::io::Result<Vec<u8>> {
    let level = flate2::Compression::default();
    match compression {
        Compression::Gzip => {
            let mut encoder = flate2::write::GzEncoder::new(Vec::new(), level);
            encoder.write_all(body)?;
            encoder.finish()
        }
        Compression::Deflate => {
            let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), level);
            encoder.write_all(body)?;
            encoder.finish()
        }
    }
}

/// Undoes `content-encoding`, refusing to inflate beyond `max` bytes (a zip bomb stops at
/// the cap, it is not inflated first). An uncompressed body is borrowed, not copied.
pub(crate) fn decompress<'a>(
    body: &'a [u8],
    encoding: Option<&str>,
    max: usize,
) -> Result<Cow<'a, [u8]>, Poison> {
    let compression = match encoding.map(str::to_ascii_lowercase).as_deref() {
        None | Some("" | "identity") => return Ok(Cow::Borrowed(body)),
        Some(other) => other.parse::<Compression>().map_err(|_| {
            poison(
                FailureReason::Decode,
                format!("unknown content encoding `{other}`"),
            )
        })?,
    };
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let mut out = Vec::new();
    let read = match compression {
        Compression::Gzip => flate2::read::GzDecoder::new(body)
            .take(limit)
            .read_to_end(&mut out),
        Compression::Deflate => flate2::read::ZlibDecoder::new(body)
            .take(limit)
            .read_to_end(&mut out),
    };
    read.map_err(|e| {
        poison(
            FailureReason::Decode,
            format!("cannot decompress the body: {e}"),
        )
    })?;
    if out.len() > max {
        return Err(poison(
            FailureReason::TooLarge,
            format!("body inflates past the {max}-byte cap"),
        ));
    }
    Ok(Cow::Owned(out))
}

#[cfg(test)]
mod tests {
    use super::{Compression, FailureReason, compress, decompress};

    fn gzip(data: &[u8]) -> Vec<u8> {
        compress(Compression::Gzip, data).expect("compressed")
    }

    #[test]
    fn decompression_is_capped_and_reports_bad_input() {
        let body = gzip(&vec![b'a'; 10_000]);
        assert_eq!(
            decompress(&body, Some("gzip"), 10_000).unwrap().len(),
            10_000
        );
        assert_eq!(
            decompress(&body, Some("gzip"), 9_999).unwrap_err().reason,
            FailureReason::TooLarge
        );
        assert_eq!(
            decompress(b"not gzip", Some("gzip"), 100)
                .unwrap_err()
                .reason,
            FailureReason::Decode
        );
        assert_eq!(
            decompress(b"x", Some("br"), 100).unwrap_err().reason,
            FailureReason::Decode
        );
        assert_eq!(decompress(b"x", None, 100).unwrap().as_ref(), b"x");
        let deflated = compress(Compression::Deflate, b"abc").expect("compressed");
        assert_eq!(
            decompress(&deflated, Some("DEFLATE"), 100)
                .unwrap()
                .as_ref(),
            b"abc",
            "an encoding is read case-insensitively"
        );
    }

    #[test]
    fn a_zip_bomb_stops_at_the_cap() {
        // 32 MiB of zeros in about 32 KiB: a thousandfold bomb. Inflating stops one byte past
        // the cap rather than after the whole body.
        let bomb = gzip(&vec![0; 32 * 1024 * 1024]);
        assert!(bomb.len() < 64 * 1024, "{} bytes", bomb.len());
        let error = decompress(&bomb, Some("gzip"), 1024 * 1024).unwrap_err();
        assert_eq!(error.reason, FailureReason::TooLarge);
        assert!(
            error.detail.contains("1048576-byte cap"),
            "{}",
            error.detail
        );
    }
}
