//! The outgoing side of the stdio transport: each message one line, written
//! whole under one lock, in the order sent. A message is serialised by
//! serde before the lock is taken; a tool result whose members are already
//! JSON text (a [`prebuilt`] result: a large read's lines, written straight
//! from the file by `writegate_core::read_answer`) is copied into its line
//! as it is. Through `rmcp`'s types the same answer is a `Value` tree of one
//! object per line, built and serialised again: 272-308 ms for a 5 MiB
//! file against 28-39 ms this way, in the throughput bench
//! (docs/decisions/0023-large-answers-and-kept-buffers.md).

use rmcp::model::{CallToolResult, ContentBlock, JsonRpcMessage, MetaObject, ServerResult};
use rmcp::service::{RoleServer, TxJsonRpcMessage};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use writegate_stdio::NonBlockingFd;

/// `_meta` key of a [`prebuilt`] result: the handle of its members' text.
/// Never on the wire: the line is written from the text it stands for.
const PREBUILT_KEY: &str = "writegate/prebuilt";

/// How long a prebuilt text waits to be sent before it is dropped. `rmcp`
/// hands a result to [`Out::send`] as soon as its call returns, unless it
/// drops the answer (the call was cancelled, its id reused, or the server
/// is stopping): then nothing takes the text, and the next result made
/// drops it.
const PREBUILT_TTL: Duration = Duration::from_secs(60);

/// A prebuilt result's pieces, written one after the other, and when they
/// were made.
struct Pieces {
    made: Instant,
    pieces: Vec<Vec<u8>>,
}

/// The prebuilt results not sent yet, by handle.
static PREBUILT: Mutex<BTreeMap<u64, Pieces>> = Mutex::new(BTreeMap::new());
static NEXT: AtomicU64 = AtomicU64::new(1);

fn prebuilt_texts() -> std::sync::MutexGuard<'static, BTreeMap<u64, Pieces>> {
    PREBUILT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A successful tool result whose members (`"content":[...],
/// "structuredContent":{...},"isError":false`, without the braces) are
/// already JSON text, in pieces: the line that answers it holds exactly
/// the pieces' text, one after the other (a large piece is not copied to
/// join the others). Sent through [`Out`] only (rmcp's own writer would
/// send it empty).
pub(crate) fn prebuilt(members: Vec<Vec<u8>>) -> CallToolResult {
    let handle = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut texts = prebuilt_texts();
    texts.retain(|_, p| p.made.elapsed() < PREBUILT_TTL);
    texts.insert(
        handle,
        Pieces {
            made: Instant::now(),
            pieces: members,
        },
    );
    drop(texts);
    let mut meta = MetaObject::new();
    meta.0.insert(PREBUILT_KEY.to_string(), handle.into());
    CallToolResult::success(Vec::new()).with_meta(Some(meta))
}

/// The handle of a [`prebuilt`] result.
fn handle_of(result: &CallToolResult) -> Option<u64> {
    result.meta.as_ref()?.0.get(PREBUILT_KEY)?.as_u64()
}

/// Drops the text of a [`prebuilt`] result that will not be sent (its call
/// was cancelled: `rmcp` drops the answer).
pub(crate) fn discard(result: &CallToolResult) {
    if let Some(handle) = handle_of(result) {
        prebuilt_texts().remove(&handle);
    }
}

/// `item` as one `\n`-terminated line, in pieces to be written in order.
pub(crate) fn line_of(item: &TxJsonRpcMessage<RoleServer>) -> std::io::Result<Vec<Vec<u8>>> {
    if let JsonRpcMessage::Response(r) = item
        && let ServerResult::CallToolResult(c) = &r.result
        && let Some(handle) = handle_of(c)
    {
        let Some(Pieces {
            pieces: members, ..
        }) = prebuilt_texts().remove(&handle)
        else {
            // Never an empty success: the model would take it for an
            // empty file.
            tracing::error!(
                handle,
                "a prebuilt tool result was dropped before it was sent"
            );
            let mut lost = CallToolResult::error(vec![ContentBlock::text(
                "internal_error: writegate lost this answer before sending it; call the tool again",
            )]);
            lost.result_type.clone_from(&c.result_type);
            let answer: TxJsonRpcMessage<RoleServer> =
                JsonRpcMessage::response(ServerResult::CallToolResult(lost), r.id.clone());
            let mut line = serde_json::to_vec(&answer)?;
            line.push(b'\n');
            return Ok(vec![line]);
        };
        let mut head = br#"{"jsonrpc":"2.0","id":"#.to_vec();
        head.extend_from_slice(&serde_json::to_vec(&r.id)?);
        head.extend_from_slice(br#","result":{"#);
        if let Some(t) = &c.result_type {
            head.extend_from_slice(br#""resultType":"#);
            head.extend_from_slice(&serde_json::to_vec(t.as_str())?);
            head.push(b',');
        }
        let mut pieces = Vec::with_capacity(members.len() + 2);
        pieces.push(head);
        pieces.extend(members);
        pieces.push(b"}}\n".to_vec());
        return Ok(pieces);
    }
    let mut line = serde_json::to_vec(item)?;
    line.push(b'\n');
    Ok(vec![line])
}

/// A line this long is a large answer: before the first, a stdout pipe
/// is enlarged (a 5 MiB read's answer, 12.8 MB, then crosses in 13
/// pipe-fulls instead of 200; ADR 0023 has the bench's figures).
const LARGE_LINE: usize = 256 * 1024;

/// The writer every message goes out through; `None` once closed.
#[derive(Clone)]
pub(crate) struct Out {
    writer: Arc<tokio::sync::Mutex<Option<Box<dyn AsyncWrite + Unpin + Send>>>>,
    /// The writer's descriptor, to enlarge before the first large answer
    /// (taken then: `None` after, or when stdout is no pipe or socket).
    grow: Arc<Mutex<Option<NonBlockingFd>>>,
}

impl Out {
    pub(crate) fn new(
        writer: Box<dyn AsyncWrite + Unpin + Send>,
        fd: Option<NonBlockingFd>,
    ) -> Out {
        Out {
            writer: Arc::new(tokio::sync::Mutex::new(Some(writer))),
            grow: Arc::new(Mutex::new(fd)),
        }
    }

    /// Writes `item` as one line and flushes it. The line is made now
    /// (a prebuilt result's text is taken out of the table even when the
    /// future is dropped unpolled); the write waits for the lock.
    pub(crate) fn send(
        &self,
        item: &TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = std::io::Result<()>> + Send + use<> {
        let line = line_of(item);
        if line
            .as_ref()
            .is_ok_and(|p| p.iter().map(Vec::len).sum::<usize>() >= LARGE_LINE)
            && let Some(fd) = self
                .grow
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take()
        {
            writegate_stdio::enlarge_pipe(&fd);
        }
        let writer = self.writer.clone();
        async move {
            let pieces = line?;
            let mut w = writer.lock().await;
            let Some(w) = w.as_mut() else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the transport is closed",
                ));
            };
            for piece in &pieces {
                w.write_all(piece).await?;
            }
            w.flush().await
        }
    }

    /// Flushes and drops the writer; later sends fail.
    pub(crate) async fn close(&self) -> std::io::Result<()> {
        let mut w = self.writer.lock().await;
        if let Some(mut w) = w.take() {
            w.flush().await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ContentBlock, RequestId, ResultType};
    use serde_json::{Value, json};

    fn wire(item: &TxJsonRpcMessage<RoleServer>) -> Value {
        let line = line_of(item).unwrap().concat();
        assert_eq!(line.last(), Some(&b'\n'));
        serde_json::from_slice(&line).unwrap()
    }

    fn response(result: CallToolResult) -> TxJsonRpcMessage<RoleServer> {
        JsonRpcMessage::response(ServerResult::CallToolResult(result), RequestId::Number(4))
    }

    #[test]
    fn a_prebuilt_result_is_the_line_serde_writes_for_the_same_result() {
        for result_type in [None, Some(ResultType::COMPLETE)] {
            let mut typed = CallToolResult::success(vec![ContentBlock::text("a\t\"b\"\n")]);
            typed.structured_content =
                Some(json!({"path": "/w/a", "lines": [{"n": 1, "text": "b"}]}));
            typed.result_type = result_type.clone();
            let members = {
                let v = serde_json::to_vec(&typed).unwrap();
                // Without the braces and resultType: what a tool writes.
                let mut o: serde_json::Map<String, Value> = serde_json::from_slice(&v).unwrap();
                o.remove("resultType");
                let v = serde_json::to_vec(&o).unwrap();
                v[1..v.len() - 1].to_vec()
            };
            // Split anywhere: the pieces are one text.
            let (a, b) = members.split_at(members.len() / 3);
            let mut fast = prebuilt(vec![a.to_vec(), b.to_vec()]);
            fast.result_type = result_type;
            assert_eq!(wire(&response(fast)), wire(&response(typed)));
        }
    }

    /// The defect pinned: a result whose text is gone (sent already,
    /// discarded, or dropped after `PREBUILT_TTL`) must not go out as an
    /// empty successful read.
    #[test]
    fn a_prebuilt_text_is_sent_once_and_a_lost_one_is_an_error() {
        let fast = prebuilt(vec![br#""content":[],"isError":false"#.to_vec()]);
        let item = response(fast);
        let first = wire(&item);
        assert_eq!(
            first["result"],
            json!({"resultType": "complete", "content": [], "isError": false})
        );
        let again = wire(&item);
        assert_eq!(again["result"]["isError"], json!(true), "{again}");
        assert!(again["result"].get("_meta").is_none(), "{again}");
        let text = again["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("internal_error:"), "{text}");

        let cancelled = prebuilt(vec![b"x".to_vec()]);
        discard(&cancelled);
        assert_eq!(wire(&response(cancelled))["result"]["isError"], json!(true));
    }
}
