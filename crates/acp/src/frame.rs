//! Line framing (SPEC 1): one JSON object per `\n`-terminated line, a
//! trailing `\r` tolerated, blank lines skipped, and a line longer than
//! `max_frame_bytes` reported once as [`Frame::TooLong`] and skipped up to
//! its newline, so the connection keeps working from the next line.

use bytes::{Buf, BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::codec::Decoder;

/// One decoded unit of input.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    /// A non-blank line without its `\n` (and without a trailing `\r`).
    Line(BytesMut),
    /// A line longer than the limit; its bytes were discarded.
    TooLong,
}

/// Decoder for [`Frame`]s with a maximum line length in bytes (excluding
/// the terminator).
#[derive(Debug)]
pub(crate) struct LineCodec {
    max: usize,
    /// Inside an over-long line: drop bytes up to the next `\n`.
    discarding: bool,
    /// Bytes of `buf` already searched for `\n`.
    scanned: usize,
}

impl LineCodec {
    /// A codec accepting lines of at most `max` bytes.
    pub(crate) fn new(max: usize) -> Self {
        LineCodec {
            max,
            discarding: false,
            scanned: 0,
        }
    }
}

impl Decoder for LineCodec {
    type Item = Frame;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, std::io::Error> {
        loop {
            let newline = memchr::memchr(b'\n', &buf[self.scanned..]).map(|i| i + self.scanned);
            if self.discarding {
                if let Some(i) = newline {
                    buf.advance(i + 1);
                    self.discarding = false;
                    self.scanned = 0;
                    continue;
                }
                buf.clear();
                self.scanned = 0;
                return Ok(None);
            }
            let Some(i) = newline else {
                // `max + 1` leaves room for a trailing `\r`.
                if buf.len() > self.max + 1 {
                    buf.clear();
                    self.scanned = 0;
                    self.discarding = true;
                    return Ok(Some(Frame::TooLong));
                }
                self.scanned = buf.len();
                return Ok(None);
            };
            self.scanned = 0;
            let mut line = buf.split_to(i + 1);
            line.truncate(i);
            if line.last() == Some(&b'\r') {
                line.truncate(i - 1);
            }
            if line.len() > self.max {
                return Ok(Some(Frame::TooLong));
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Ok(Some(Frame::Line(line)));
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, std::io::Error> {
        if let Some(frame) = self.decode(buf)? {
            return Ok(Some(frame));
        }
        if self.discarding || buf.is_empty() {
            buf.clear();
            return Ok(None);
        }
        // A last line without `\n`.
        buf.extend_from_slice(b"\n");
        self.decode(buf)
    }
}

/// Most bytes one read brings while no long line is being read.
pub(crate) const READ_CHUNK: usize = 64 * 1024;

/// Most bytes one read brings while a long line is being read (the buffer
/// doubles as the line grows).
pub(crate) const READ_MAX: usize = 128 * 1024;

/// A connection's input: a reader, its buffer and the [`LineCodec`]. The
/// caller decides when to read more ([`LineReader::fill`]), so it can hold
/// budget for a long line before buffering it (`conn`).
pub(crate) struct LineReader<R> {
    reader: R,
    buf: BytesMut,
    codec: LineCodec,
    eof: bool,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// A reader of lines of at most `max` bytes.
    pub(crate) fn new(reader: R, max: usize) -> Self {
        LineReader {
            reader,
            buf: BytesMut::new(),
            codec: LineCodec::new(max),
            eof: false,
        }
    }

    /// The next frame already buffered; at end of input, the last line
    /// even without its newline. `None`: read more (or, after end of input,
    /// nothing is left).
    pub(crate) fn next_buffered(&mut self) -> Option<Frame> {
        // The codec never fails: its error type is only the trait's.
        let frame = if self.eof {
            self.codec.decode_eof(&mut self.buf)
        } else {
            self.codec.decode(&mut self.buf)
        };
        let frame = frame.ok().flatten();
        // A long line shares its allocation with what is left of the
        // buffer: give the rest a buffer of its own, so the long line's
        // memory goes as soon as the line does (not when this connection
        // next reads a long line). The rest is at most one read past the
        // line (`READ_MAX`); a connection that kept the long line's whole
        // allocation for it held megabytes while it waited for budget for
        // its next line, and hundreds of such connections held a gigabyte.
        if self.buf.capacity() > READ_MAX && self.buf.len() <= READ_MAX {
            let rest = std::mem::take(&mut self.buf);
            self.buf = BytesMut::with_capacity(rest.len().max(READ_CHUNK));
            self.buf.extend_from_slice(&rest);
        }
        frame
    }

    /// Reads once more into the buffer, at most `limit` bytes. `Ok(false)`
    /// at end of input.
    pub(crate) async fn fill(&mut self, limit: usize) -> std::io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        // A long line's buffer doubles (amortised copies); a short one gets
        // room for a read of READ_CHUNK.
        let want = self.buf.len().max(READ_CHUNK);
        if self.buf.capacity() - self.buf.len() < want / 2 {
            self.buf.reserve(want);
        }
        let n = self
            .reader
            .read_buf(&mut (&mut self.buf).limit(limit))
            .await?;
        if n == 0 {
            self.eof = true;
        }
        Ok(n > 0)
    }

    /// Gives the buffer room for `bytes` in all (a long line, read under a
    /// reservation of budget for that much), so that it is read into one
    /// allocation instead of doubling into ever larger ones and copying
    /// what it holds each time. The memory is only address space until the
    /// line's bytes arrive in it.
    pub(crate) fn presize(&mut self, bytes: usize) {
        if self.buf.capacity() < bytes {
            self.buf.reserve(bytes - self.buf.len());
        }
    }

    /// True once the reader reported end of input.
    pub(crate) fn at_eof(&self) -> bool {
        self.eof
    }

    /// Bytes buffered and not yet returned as lines: the beginning of an
    /// incomplete line (0 while an over-long line is being skipped).
    pub(crate) fn partial(&self) -> usize {
        self.buf.len()
    }

    /// Whether another whole line is already buffered.
    pub(crate) fn has_line(&self) -> bool {
        memchr::memchr(b'\n', &self.buf).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(max: usize, chunks: &[&[u8]]) -> Vec<Frame> {
        let mut c = LineCodec::new(max);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for ch in chunks {
            buf.extend_from_slice(ch);
            while let Some(f) = c.decode(&mut buf).unwrap() {
                out.push(f);
            }
        }
        while let Some(f) = c.decode_eof(&mut buf).unwrap() {
            out.push(f);
        }
        out
    }

    fn line(s: &str) -> Frame {
        Frame::Line(BytesMut::from(s.as_bytes()))
    }

    #[test]
    fn lines_crlf_blank_and_final_line() {
        assert_eq!(
            all(100, &[b"a\r\n\n  \r\nb\n", b"c"]),
            vec![line("a"), line("b"), line("c")]
        );
    }

    #[test]
    fn split_across_chunks() {
        assert_eq!(
            all(100, &[b"ab", b"c\nd", b"e\n"]),
            vec![line("abc"), line("de")]
        );
    }

    #[test]
    fn too_long_reported_once_then_next_line_works() {
        let long = vec![b'x'; 50];
        assert_eq!(
            all(10, &[&long, &long, b"\nok\n"]),
            vec![Frame::TooLong, line("ok")]
        );
        assert_eq!(
            all(10, &[b"xxxxxxxxxxxxxxxx\nok\n"]),
            vec![Frame::TooLong, line("ok")]
        );
    }

    #[test]
    fn exactly_max_is_accepted_with_or_without_cr() {
        assert_eq!(all(3, &[b"abc\nabc\r\n"]), vec![line("abc"), line("abc")]);
        assert_eq!(all(3, &[b"abcd\n"]), vec![Frame::TooLong]);
    }
}
