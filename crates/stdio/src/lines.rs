//! The one line framing of every front end (ACP's `serve` and proxy, MCP),
//! both ways.
//!
//! In: one message per `\n`-terminated line, one trailing `\r` dropped,
//! blank (whitespace-only) lines skipped, a last line without `\n` at the
//! end of input taken as a line, and a line longer than the limit reported
//! once as [`Frame::TooLong`] and skipped up to its newline, so the
//! connection keeps working from the next line. The reader reads only when
//! its caller asks ([`LineReader::fill`]), so the caller can hold budget
//! for a long line before buffering it; [`LineReader::next_line`] reads as
//! needed.
//!
//! Out: [`LineWriter`] writes whole lines, each given in pieces that are
//! never joined, and enlarges an output pipe once, before the first line of
//! [`LARGE_LINE`] bytes or more ([`EnlargeOnce`], which direct writes to
//! the same descriptor beside the writer share).

use crate::NonBlockingFd;
use bytes::{Buf, BufMut, BytesMut};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};

/// One decoded unit of input.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A non-blank line without its `\n` (and without a trailing `\r`).
    Line(BytesMut),
    /// A line longer than the limit; its bytes were discarded.
    TooLong,
}

/// Splits a buffer into [`Frame`]s with a maximum line length in bytes
/// (excluding the terminator).
#[derive(Debug)]
struct LineCodec {
    max: usize,
    /// Inside an over-long line: drop bytes up to the next `\n`.
    discarding: bool,
    /// Bytes of `buf` already searched for `\n`.
    scanned: usize,
}

impl LineCodec {
    /// A codec accepting lines of at most `max` bytes.
    fn new(max: usize) -> Self {
        LineCodec {
            max,
            discarding: false,
            scanned: 0,
        }
    }

    /// The next frame in `buf` (its bytes are removed from it); `None`:
    /// no whole line yet.
    fn decode(&mut self, buf: &mut BytesMut) -> Option<Frame> {
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
                return None;
            }
            let Some(i) = newline else {
                // `max + 1` leaves room for a trailing `\r`.
                if buf.len() > self.max + 1 {
                    buf.clear();
                    self.scanned = 0;
                    self.discarding = true;
                    return Some(Frame::TooLong);
                }
                self.scanned = buf.len();
                return None;
            };
            self.scanned = 0;
            let mut line = buf.split_to(i + 1);
            line.truncate(i);
            if line.last() == Some(&b'\r') {
                line.truncate(i - 1);
            }
            if line.len() > self.max {
                return Some(Frame::TooLong);
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Some(Frame::Line(line));
        }
    }

    /// [`LineCodec::decode`] at the end of input: what is left is the last
    /// line, even without its newline.
    fn decode_eof(&mut self, buf: &mut BytesMut) -> Option<Frame> {
        if let Some(frame) = self.decode(buf) {
            return Some(frame);
        }
        if self.discarding || buf.is_empty() {
            buf.clear();
            return None;
        }
        // A last line without `\n`.
        buf.extend_from_slice(b"\n");
        self.decode(buf)
    }
}

/// Most bytes one read brings while no long line is being read.
pub const READ_CHUNK: usize = 64 * 1024;

/// Most bytes one read brings while a long line is being read (the buffer
/// doubles as the line grows).
pub const READ_MAX: usize = 128 * 1024;

/// A connection's input: a reader, its buffer and the line splitter. The
/// caller decides when to read more ([`LineReader::fill`]), so it can hold
/// budget for a long line before buffering it (ACP's connection loop), or
/// lets [`LineReader::next_line`] read as needed (MCP).
pub struct LineReader<R> {
    reader: R,
    buf: BytesMut,
    codec: LineCodec,
    eof: bool,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// A reader of lines of at most `max` bytes.
    pub fn new(reader: R, max: usize) -> Self {
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
    pub fn next_buffered(&mut self) -> Option<Frame> {
        let frame = if self.eof {
            self.codec.decode_eof(&mut self.buf)
        } else {
            self.codec.decode(&mut self.buf)
        };
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
    pub async fn fill(&mut self, limit: usize) -> std::io::Result<bool> {
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

    /// The longest line accepted, in bytes.
    pub fn max(&self) -> usize {
        self.codec.max
    }

    /// Gives the buffer room for `bytes` in all (a long line, read under a
    /// reservation of budget for that much), so that it is read into one
    /// allocation instead of doubling into ever larger ones and copying
    /// what it holds each time. The memory is only address space until the
    /// line's bytes arrive in it.
    pub fn presize(&mut self, bytes: usize) {
        if self.buf.capacity() < bytes {
            self.buf.reserve(bytes - self.buf.len());
        }
    }

    /// True once the reader reported end of input.
    pub fn at_eof(&self) -> bool {
        self.eof
    }

    /// Bytes buffered and not yet returned as lines: the beginning of an
    /// incomplete line (0 while an over-long line is being skipped, even
    /// when a read brought the next line's first bytes: those are counted
    /// once [`LineReader::next_buffered`] has dropped the rest of the
    /// skipped one).
    pub fn partial(&self) -> usize {
        self.partial_bytes().len()
    }

    /// The bytes buffered and not yet returned as lines (see
    /// [`LineReader::partial`]); nothing while an over-long line is being
    /// skipped. Right after [`LineReader::next_buffered`] gave `None` they
    /// start at the first byte of the line not yet whole (blank lines
    /// before it dropped), and until `next_buffered` is called again only
    /// reads change them, at their end: what
    /// `writegate_jsonscan::StringsAhead` needs to be fed.
    pub fn partial_bytes(&self) -> &[u8] {
        if self.codec.discarding {
            &[]
        } else {
            &self.buf
        }
    }

    /// Whether another whole line is already buffered.
    pub fn has_line(&self) -> bool {
        memchr::memchr(b'\n', &self.buf).is_some()
    }

    /// The next frame, reading as much as it takes; `Ok(None)` once the
    /// input has ended and every line was handed out. Cancel-safe: its only
    /// await is one read into the buffer, which either happened or did not.
    pub async fn next_line(&mut self) -> std::io::Result<Option<Frame>> {
        loop {
            if let Some(frame) = self.next_buffered() {
                return Ok(Some(frame));
            }
            if self.eof {
                return Ok(None);
            }
            self.fill(usize::MAX).await?;
        }
    }
}

/// A line this long is a large answer: before the first one, an output
/// pipe is enlarged to [`crate::STDIN_PIPE_BYTES`] (a 5 MiB read's MCP
/// answer, 12.8 MB, then crosses in 13 pipe-fulls instead of 200; ADR 0023
/// has the bench's figures). Not at start: each enlarged pipe takes its
/// size from the user's pipe quota, so only a connection that sends large
/// answers takes it.
pub const LARGE_LINE: usize = 256 * 1024;

/// The enlarge-once policy of one connection's output: the first time a
/// line of [`LARGE_LINE`] bytes or more is about to be written, its pipe
/// is enlarged ([`crate::enlarge_pipe`]; a socket stays as it is), and
/// never again. A [`LineWriter`] holds one; direct writes to the same
/// descriptor beside it share it ([`LineWriter::enlarge_once`]), so the
/// pipe is enlarged once whichever path writes the first large line.
#[derive(Clone, Default)]
pub struct EnlargeOnce(Arc<AtomicBool>);

impl EnlargeOnce {
    /// Call before writing a line of `len` bytes to `fd`.
    pub fn before_line(&self, fd: &NonBlockingFd, len: usize) {
        if len >= LARGE_LINE && !self.0.swap(true, Ordering::Relaxed) {
            crate::enlarge_pipe(fd);
        }
    }
}

/// A connection's output: whole `\n`-terminated lines, each written from
/// pieces in order (a large piece straight from its own memory, never
/// copied to join the others; small pieces and lines gathered and written
/// together at [`LineWriter::flush`]), with the connection's
/// [`EnlargeOnce`] applied before each line. A line is whole on the wire
/// as long as one writer writes it: the caller holds the writer for the
/// whole line (ACP's writer task owns it, MCP's `Out` writes under a
/// lock).
pub struct LineWriter<W> {
    writer: BufWriter<W>,
    /// The writer's descriptor, to enlarge (`None`: it has none, as a
    /// terminal or a file).
    fd: Option<NonBlockingFd>,
    enlarge: EnlargeOnce,
}

impl<W: AsyncWrite + Unpin> LineWriter<W> {
    /// A writer of lines to `writer`. `fd` is the descriptor `writer`
    /// writes to ([`NonBlockingFd::share`]), enlarged before the first
    /// large line when it is a pipe; `None` when there is none.
    pub fn new(writer: W, fd: Option<NonBlockingFd>) -> Self {
        LineWriter {
            writer: BufWriter::new(writer),
            fd,
            enlarge: EnlargeOnce::default(),
        }
    }

    /// The policy this writer applies, for direct writes to its
    /// descriptor beside it.
    pub fn enlarge_once(&self) -> EnlargeOnce {
        self.enlarge.clone()
    }

    /// Writes one line: `pieces`, one after the other, are the line,
    /// `\n` included. What is small may wait in the buffer until
    /// [`LineWriter::flush`].
    ///
    /// # Errors
    /// The write failed (the peer is gone); the line may be cut.
    pub async fn write_line<P: AsRef<[u8]>>(&mut self, pieces: &[P]) -> std::io::Result<()> {
        debug_assert!(
            pieces
                .iter()
                .rev()
                .find_map(|p| p.as_ref().last())
                .is_some_and(|b| *b == b'\n'),
            "a line ends with its newline"
        );
        if let Some(fd) = &self.fd {
            let len = pieces.iter().map(|p| p.as_ref().len()).sum();
            self.enlarge.before_line(fd, len);
        }
        for piece in pieces {
            self.writer.write_all(piece.as_ref()).await?;
        }
        Ok(())
    }

    /// Writes what the buffer holds and flushes the writer.
    ///
    /// # Errors
    /// The write failed (the peer is gone).
    pub async fn flush(&mut self) -> std::io::Result<()> {
        self.writer.flush().await
    }

    /// Flushes, then shuts the writer down (a socket's peer reads end of
    /// input; a pipe's once every descriptor of it is closed).
    ///
    /// # Errors
    /// The write or the shutdown failed.
    pub async fn shutdown(&mut self) -> std::io::Result<()> {
        self.writer.shutdown().await
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
            while let Some(f) = c.decode(&mut buf) {
                out.push(f);
            }
        }
        while let Some(f) = c.decode_eof(&mut buf) {
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

    /// Every frame of `input` read through [`LineReader::next_line`] with
    /// `max`, until the input ends.
    fn frames(input: &[u8], max: usize) -> Vec<Frame> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(async {
                let mut lines = LineReader::new(input, max);
                let mut out = Vec::new();
                while let Some(f) = lines.next_line().await.unwrap() {
                    out.push(f);
                }
                out
            })
    }

    /// Lines come out whole and in order, however they fall across reads:
    /// many in one read, one over many reads (a whole file), a small line
    /// after a big one; over-long lines are skipped up to their `\n` and
    /// the next line is read; a last line without `\n` is a line.
    #[test]
    fn lines_are_framed_across_reads_and_over_long_ones_skipped() {
        let big = vec![b'b'; 3 * READ_CHUNK + 7];
        let big_line = Frame::Line(BytesMut::from(&big[..]));
        let mut input = Vec::new();
        for l in [&b"one"[..], b"", b"two\r", &big, b"three"] {
            input.extend_from_slice(l);
            input.push(b'\n');
        }
        assert_eq!(
            frames(&input, big.len()),
            vec![line("one"), line("two"), big_line, line("three")]
        );
        // The big line is over a smaller limit: skipped, once, whether it
        // is found too long before or at its newline.
        for max in [big.len() - 1, READ_CHUNK / 2] {
            assert_eq!(
                frames(&input, max),
                vec![line("one"), line("two"), Frame::TooLong, line("three")],
                "max {max}"
            );
        }
        let mut unfinished = input.clone();
        unfinished.extend_from_slice(b"no newline");
        let mut want = frames(&input, big.len());
        want.push(line("no newline"));
        assert_eq!(frames(&unfinished, big.len()), want);
    }

    /// The bytes buffered always start where a line starts: while an
    /// over-long line is skipped, none are given, even those after its
    /// `\n` that a read brought. A scan that follows the arriving line
    /// from its first byte (`StringsAhead`, fed after each read) must never
    /// start inside the skipped one.
    #[test]
    fn the_bytes_of_a_skipped_line_are_never_the_arriving_line() {
        let max = 4 * READ_CHUNK;
        let skipped = [b"S".as_slice(), &vec![b'x'; 4 * max]].concat();
        let next = [b"{\"k\":\"".as_slice(), &vec![b'y'; 3 * READ_CHUNK], b"\"}"].concat();
        let input = [skipped.as_slice(), b"\n", &next, b"\n"].concat();
        let frames = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(async {
                let mut lines = LineReader::new(&input[..], max);
                let mut frames = Vec::new();
                loop {
                    if let Some(f) = lines.next_buffered() {
                        frames.push(f);
                        continue;
                    }
                    if lines.at_eof() {
                        return frames;
                    }
                    lines.fill(usize::MAX).await.unwrap();
                    let p = lines.partial_bytes();
                    // The start of a line: the skipped one before it is
                    // found too long, or the next.
                    assert!(
                        matches!(p.first(), None | Some(b'S' | b'{')),
                        "{} bytes buffered, starting {:?}",
                        p.len(),
                        String::from_utf8_lossy(&p[..p.len().min(8)])
                    );
                }
            });
        assert!(
            matches!(&frames[..], [Frame::TooLong, Frame::Line(l)] if l[..] == next[..]),
            "{} frames",
            frames.len()
        );
    }

    /// A reader that hands out a few bytes at a time (sizes cycling
    /// through primes up to 70,000) and is not ready every third call.
    struct Choppy {
        data: Vec<u8>,
        at: usize,
        calls: usize,
    }

    impl AsyncRead for Choppy {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            self.calls += 1;
            if self.calls.is_multiple_of(3) {
                cx.waker().wake_by_ref();
                return std::task::Poll::Pending;
            }
            let size = [1, 7, 61, 4_093, 70_001][self.calls % 5];
            let n = size.min(buf.remaining()).min(self.data.len() - self.at);
            let at = self.at;
            buf.put_slice(&self.data[at..at + n]);
            self.at += n;
            std::task::Poll::Ready(Ok(()))
        }
    }

    /// `next_line` is polled in `select!` by MCP's service: dropped while a
    /// read is pending, it loses no byte and repeats none. Short reads and
    /// a competing branch that wins half the time give the same lines as
    /// one big read.
    #[test]
    fn a_cancelled_next_line_loses_nothing() {
        let mut input = Vec::new();
        for i in 0..200usize {
            // Every line holds at least one byte: blank lines are skipped.
            let len = [0, 3, 100, 70_000, 200_000][i % 5] + i + 1;
            input.extend(std::iter::repeat_n(
                b'a' + u8::try_from(i % 26).unwrap(),
                len,
            ));
            input.push(b'\n');
        }
        let want = frames(&input, 1 << 20);
        let got = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(async {
                let reader = Choppy {
                    data: input.clone(),
                    at: 0,
                    calls: 0,
                };
                let mut lines = LineReader::new(reader, 1 << 20);
                let (mut out, mut cancelled) = (Vec::new(), 0);
                loop {
                    tokio::select! {
                        l = lines.next_line() => match l.unwrap() {
                            Some(l) => out.push(l),
                            None => break,
                        },
                        () = tokio::task::yield_now() => cancelled += 1,
                    }
                }
                assert!(cancelled > 100, "only {cancelled} cancellations");
                out
            });
        assert_eq!(got.len(), 200);
        assert!(got == want, "lines differ after cancellations");
    }

    /// A pipe's ends: the write end non-blocking (a description of its
    /// own), the read end blocking, for a reader thread.
    fn pipe() -> (std::fs::File, NonBlockingFd) {
        let (r, w) = rustix::pipe::pipe().unwrap();
        let flags = rustix::fs::fcntl_getfl(&w).unwrap();
        rustix::fs::fcntl_setfl(&w, flags | rustix::fs::OFlags::NONBLOCK).unwrap();
        (std::fs::File::from(r), NonBlockingFd::new(w).unwrap())
    }

    /// Whether this process may enlarge a pipe to 1 MiB (root, or
    /// `pipe-max-size` at least that).
    fn may_enlarge() -> bool {
        let max: usize = std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
            .map_or(0, |s| s.trim().parse().unwrap_or(0));
        max >= crate::STDIN_PIPE_BYTES || rustix::process::geteuid().is_root()
    }

    fn pipe_size(fd: &NonBlockingFd) -> usize {
        rustix::pipe::fcntl_getpipe_size(fd).unwrap()
    }

    /// Lines given in pieces come out whole and in order, the small ones
    /// gathered, the large one straight from its pieces; the pipe is
    /// enlarged before the first large line, not before.
    #[test]
    fn lines_are_written_whole_from_pieces_and_the_pipe_grows_before_the_first_large_one() {
        let (mut r, w) = pipe();
        let reader = std::thread::spawn(move || {
            let mut all = Vec::new();
            std::io::Read::read_to_end(&mut r, &mut all).unwrap();
            all
        });
        let small = pipe_size(&w);
        assert!(
            small < crate::STDIN_PIPE_BYTES,
            "a new pipe of {small} bytes"
        );
        let big = vec![b'x'; LARGE_LINE];
        let mut want = Vec::new();
        tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap()
            .block_on(async {
                let mut lines = LineWriter::new(crate::WriteEnd::new(w.share()), Some(w.share()));
                for i in 0..3 {
                    let line = format!("small {i}\n");
                    lines.write_line(&[line.as_bytes()]).await.unwrap();
                    want.extend_from_slice(line.as_bytes());
                }
                lines.flush().await.unwrap();
                assert_eq!(pipe_size(&w), small, "small lines leave the pipe as it is");
                let pieces: [&[u8]; 4] = [b"{", &big[..10], &big[10..], b"}\n"];
                lines.write_line(&pieces).await.unwrap();
                want.extend_from_slice(&pieces.concat());
                lines.flush().await.unwrap();
                if may_enlarge() {
                    assert_eq!(pipe_size(&w), crate::STDIN_PIPE_BYTES);
                }
                lines.shutdown().await.unwrap();
            });
        drop(w);
        assert!(reader.join().unwrap() == want, "the lines differ");
    }

    /// One policy, shared: once a pipe was enlarged for a large line, no
    /// later line enlarges again, whichever path writes it.
    #[test]
    fn the_pipe_is_enlarged_once() {
        let ((_ra, a), (_rb, b)) = (pipe(), pipe());
        let once = EnlargeOnce::default();
        let shared = once.clone();
        shared.before_line(&a, LARGE_LINE - 1);
        assert!(
            pipe_size(&a) < crate::STDIN_PIPE_BYTES,
            "not for a small line"
        );
        shared.before_line(&a, LARGE_LINE);
        if may_enlarge() {
            assert_eq!(pipe_size(&a), crate::STDIN_PIPE_BYTES);
        }
        once.before_line(&b, LARGE_LINE);
        assert!(pipe_size(&b) < crate::STDIN_PIPE_BYTES, "enlarged twice");
    }
}
