//! The outgoing side of the stdio transport: each message one line, written
//! whole under one lock, in the order sent. A message is serialised by
//! serde before the lock is taken; a tool result whose members are already
//! JSON text (a [`prebuilt`] result: a large read's lines, written straight
//! from the file by `writegate_core::read_answer`) is copied into its line
//! as it is. Through `rmcp`'s types the same answer is a `Value` tree of one
//! object per line, built and serialised again: 150 ms for a 5 MiB file
//! against a few for the copy (docs/decisions/0022-large-reads-and-writes.md).

use rmcp::model::{CallToolResult, JsonRpcMessage, MetaObject, ServerResult};
use rmcp::service::{RoleServer, TxJsonRpcMessage};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// `_meta` key of a [`prebuilt`] result: the handle of its members' text.
/// Never on the wire: the line is written from the text it stands for.
const PREBUILT_KEY: &str = "writegate/prebuilt";

/// The members' text of the prebuilt results not sent yet, by handle: its
/// pieces, written one after the other.
static PREBUILT: Mutex<BTreeMap<u64, Vec<Vec<u8>>>> = Mutex::new(BTreeMap::new());
static NEXT: AtomicU64 = AtomicU64::new(1);

fn prebuilt_texts() -> std::sync::MutexGuard<'static, BTreeMap<u64, Vec<Vec<u8>>>> {
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
    prebuilt_texts().insert(handle, members);
    let mut meta = MetaObject::new();
    meta.0.insert(PREBUILT_KEY.to_string(), handle.into());
    CallToolResult::success(Vec::new()).with_meta(Some(meta))
}

/// The prebuilt members `result` stands for, taken out of the table.
fn take_prebuilt(result: &CallToolResult) -> Option<Vec<Vec<u8>>> {
    let handle = result.meta.as_ref()?.0.get(PREBUILT_KEY)?.as_u64()?;
    prebuilt_texts().remove(&handle)
}

/// `item` as one `\n`-terminated line, in pieces to be written in order.
pub(crate) fn line_of(item: &TxJsonRpcMessage<RoleServer>) -> std::io::Result<Vec<Vec<u8>>> {
    if let JsonRpcMessage::Response(r) = item
        && let ServerResult::CallToolResult(c) = &r.result
        && let Some(members) = take_prebuilt(c)
    {
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

/// The writer every message goes out through; `None` once closed.
#[derive(Clone)]
pub(crate) struct Out {
    writer: Arc<tokio::sync::Mutex<Option<Box<dyn AsyncWrite + Unpin + Send>>>>,
}

impl Out {
    pub(crate) fn new(writer: Box<dyn AsyncWrite + Unpin + Send>) -> Out {
        Out {
            writer: Arc::new(tokio::sync::Mutex::new(Some(writer))),
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

    #[test]
    fn a_prebuilt_text_is_sent_once_and_then_forgotten() {
        let fast = prebuilt(vec![br#""content":[],"isError":false"#.to_vec()]);
        let item = response(fast);
        let first = wire(&item);
        assert_eq!(
            first["result"],
            json!({"resultType": "complete", "content": [], "isError": false})
        );
        // The same message again (never done) would not find its text.
        let again = wire(&item);
        assert!(again["result"]["_meta"][PREBUILT_KEY].is_u64());
    }
}
