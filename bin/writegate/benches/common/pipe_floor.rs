//! The least a stdio server can do with a write request: a reader that
//! takes the request line from a pipe (enlarged to 1 MiB, as writegate's
//! stdin is), takes the content out of it, runs the bare durable sequence
//! with it and answers one line on a second pipe. It checks nothing,
//! resolves nothing, keeps no format, hash, event or before-image. With
//! [`Content::Raw`] it writes the content's JSON text as it came (no
//! decode at all: the floor of any server that has the whole request
//! before it writes); with [`Content::SerdeJson`] it decodes it with
//! `serde_json`, as a plain JSON-RPC server would. The reader is a thread
//! of the bench, the sender another: on two CPUs that is what a client and
//! a server process are.

use super::bare_write;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;

/// What the reader writes of the content.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Content {
    /// The JSON text of the string, undecoded.
    Raw,
    /// The string as `serde_json::from_slice::<String>` decodes it.
    SerdeJson,
}

/// A running reader and the ends the bench sends on and hears from.
pub(crate) struct PipeFloor {
    line: File,
    answer: BufReader<File>,
    reader: Option<JoinHandle<()>>,
    /// The line being sent.
    buf: Vec<u8>,
}

impl PipeFloor {
    /// Starts a reader writing in `dir` over `files` files, leaves
    /// `p0`, `p1`, ..., each line's content being what follows its first
    /// `"content":` up to the last `suffix` bytes of the line (its final
    /// `\n` not counted).
    pub(crate) fn start(dir: PathBuf, files: usize, how: Content, suffix: usize) -> PipeFloor {
        let (line_r, line_w) = rustix::pipe::pipe().unwrap();
        let (answer_r, answer_w) = rustix::pipe::pipe().unwrap();
        let _ = rustix::pipe::fcntl_setpipe_size(&line_r, 1024 * 1024);
        let (ready_tx, ready) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut input = File::from(line_r);
            let mut answer = File::from(answer_w);
            let mut buf = vec![0u8; 8 * 1024 * 1024];
            let mut seq = 0u64;
            let mut k = 0usize;
            ready_tx.send(()).unwrap();
            loop {
                let mut n = 0;
                // One line: the sender waits for its answer before the next.
                loop {
                    if n == buf.len() {
                        buf.resize(buf.len() * 2, 0);
                    }
                    let got = input.read(&mut buf[n..]).unwrap();
                    if got == 0 {
                        return;
                    }
                    n += got;
                    if buf[n - 1] == b'\n' {
                        break;
                    }
                }
                let key = b"\"content\":";
                let at = buf[..n].windows(key.len()).position(|w| w == key).unwrap();
                let text = &buf[at + key.len()..n - 1 - suffix];
                let leaf = format!("p{}", k % files);
                match how {
                    Content::Raw => bare_write(&dir, &leaf, text, "floor", &mut seq),
                    Content::SerdeJson => {
                        let s: String = serde_json::from_slice(text).unwrap();
                        bare_write(&dir, &leaf, s.as_bytes(), "floor", &mut seq);
                    }
                }
                k += 1;
                answer.write_all(b"{}\n").unwrap();
            }
        });
        ready.recv().unwrap();
        PipeFloor {
            line: File::from(line_w),
            answer: BufReader::new(File::from(answer_r)),
            reader: Some(reader),
            buf: Vec::new(),
        }
    }

    /// Sends a line made of `pieces` and a `\n` with one `write_all`, as
    /// [`super::Client::call`] sends the daemon's (copied into one buffer
    /// first), and waits for its answer.
    pub(crate) fn call(&mut self, pieces: &[&[u8]]) {
        self.buf.clear();
        for p in pieces {
            self.buf.extend_from_slice(p);
        }
        self.buf.push(b'\n');
        self.line.write_all(&self.buf).unwrap();
        let mut got = String::new();
        self.answer.read_line(&mut got).unwrap();
        assert_eq!(got, "{}\n");
    }
}

impl Drop for PipeFloor {
    fn drop(&mut self) {
        // End of input stops the reader.
        let (dead_r, dead_w) = rustix::pipe::pipe().unwrap();
        drop(dead_r);
        self.line = File::from(dead_w);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}
