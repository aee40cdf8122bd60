//! The outgoing side of the stdio transport: each message one line, written
//! whole under one lock, in the order sent, through the line writer every
//! front end writes with (`writegate_stdio::lines::LineWriter`, which also
//! enlarges a stdout pipe before the first large answer). A message is
//! serialised by serde before the lock is taken; a tool result whose members are already
//! JSON text (a [`Prebuilt`] answer: a large read's lines, written straight
//! from the file by `writegate_core::read_answer`) is copied into its line
//! as it is. Through `rmcp`'s types the same answer is a `Value` tree of one
//! object per line, built and serialised again: 272-308 ms for a 5 MiB
//! file against 28-39 ms this way, in the throughput bench
//! (docs/decisions/0023-large-answers-and-kept-buffers.md).
//!
//! A prebuilt answer's text waits in its connection's [`Pending`] table,
//! under the id of the request it answers, and `rmcp` carries a
//! placeholder in its place: an error result that says the answer was
//! lost. [`Out`] swaps the text in when it writes the response; any other
//! writer (`rmcp`'s own transports, a test's serde) sends the placeholder,
//! a visible error, never an empty successful read.

use rmcp::model::{
    CallToolResult, ContentBlock, JsonRpcMessage, MetaObject, RequestId, ServerResult,
};
use rmcp::service::{RoleServer, TxJsonRpcMessage};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWrite;
use writegate_stdio::NonBlockingFd;
use writegate_stdio::lines::LineWriter;

/// `_meta` key that marks a placeholder: its text waits in [`Pending`]
/// under the response's request id. Never on the wire from [`Out`]: the
/// line is written from the text it stands for.
const PREBUILT_KEY: &str = "writegate/prebuilt";

/// What a placeholder says, to whoever receives it instead of its text.
const LOST: &str = "internal_error: this answer was sent without its text; call the tool again";

/// A successful tool result whose members (`"content":[...],
/// "structuredContent":{...},"isError":false`, without the braces) are
/// already JSON text, in pieces: the line that answers it holds exactly
/// the pieces' text, one after the other (a large piece is not copied to
/// join the others).
pub(crate) struct Prebuilt(pub(crate) Vec<Vec<u8>>);

/// What a tool call answers: a result in `rmcp`'s types, or a
/// [`Prebuilt`] one, which only its connection's [`Out`] can send.
pub(crate) enum Answer {
    Typed(CallToolResult),
    Prebuilt(Prebuilt),
}

/// Who writes a connection's results, so a tool knows which answers it
/// may give.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Writer {
    /// Its own [`Out`], with a [`Pending`] table (stdio, the daemon's MCP
    /// socket): a [`Prebuilt`] answer may be sent.
    Own,
    /// `rmcp`'s service, which serialises every message (Streamable
    /// HTTP): typed answers only.
    Rmcp,
}

/// The error result that stands in for a lost prebuilt answer.
fn lost() -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(LOST)])
}

/// The prebuilt answers of one connection not sent yet, by the id of the
/// request they answer. An entry leaves when its response is written, or
/// when its call is cancelled ([`Pending::discard`]); a request id the
/// client uses again replaces it. The table lives as long as its [`Out`]:
/// nothing here outlives the connection.
#[derive(Clone, Default)]
pub(crate) struct Pending(Arc<Mutex<HashMap<RequestId, Vec<Vec<u8>>>>>);

impl Pending {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, Vec<Vec<u8>>>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps `answer`'s text for the response to request `id`, and returns
    /// the placeholder `rmcp` carries in its place: an error result that
    /// says the answer was lost, marked in `_meta`.
    pub(crate) fn hold(&self, id: RequestId, answer: Prebuilt) -> CallToolResult {
        self.table().insert(id, answer.0);
        let mut meta = MetaObject::new();
        meta.0.insert(PREBUILT_KEY.to_string(), true.into());
        lost().with_meta(Some(meta))
    }

    /// Drops the text held for request `id`: its call was cancelled, and
    /// `rmcp` drops a cancelled call's answer unsent.
    pub(crate) fn discard(&self, id: &RequestId) {
        self.table().remove(id);
    }

    /// `item` as one `\n`-terminated line, in pieces to be written in
    /// order: a placeholder's text is taken out of the table and written
    /// in its place.
    pub(crate) fn line_of(
        &self,
        item: &TxJsonRpcMessage<RoleServer>,
    ) -> std::io::Result<Vec<Vec<u8>>> {
        if let JsonRpcMessage::Response(r) = item
            && let ServerResult::CallToolResult(c) = &r.result
            && is_placeholder(c)
        {
            let Some(members) = self.table().remove(&r.id) else {
                // Never an empty success: the model would take it for an
                // empty file.
                tracing::error!(id = %r.id, "a prebuilt tool result was dropped before it was sent");
                let mut lost = lost();
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
}

/// Whether `result` is a [`Pending::hold`] placeholder.
fn is_placeholder(result: &CallToolResult) -> bool {
    result
        .meta
        .as_ref()
        .is_some_and(|m| m.0.contains_key(PREBUILT_KEY))
}

/// The connection's line writer; `None` once closed.
type Lines = Option<LineWriter<Box<dyn AsyncWrite + Unpin + Send>>>;

/// The writer every message goes out through, with the connection's
/// prebuilt answers.
#[derive(Clone)]
pub(crate) struct Out {
    writer: Arc<tokio::sync::Mutex<Lines>>,
    /// The prebuilt answers waiting for their responses.
    pending: Pending,
}

impl Out {
    /// Lines to `writer`; `fd` is its descriptor (a pipe is enlarged before
    /// the first large answer), `None` when stdout is no pipe or socket.
    pub(crate) fn new(
        writer: Box<dyn AsyncWrite + Unpin + Send>,
        fd: Option<NonBlockingFd>,
    ) -> Out {
        Out {
            writer: Arc::new(tokio::sync::Mutex::new(Some(LineWriter::new(writer, fd)))),
            pending: Pending::default(),
        }
    }

    /// The table of this connection's prebuilt answers, for the handler
    /// that makes them.
    pub(crate) fn pending(&self) -> Pending {
        self.pending.clone()
    }

    /// Writes `item` as one line and flushes it. The line is made now
    /// (a prebuilt result's text is taken out of the table even when the
    /// future is dropped unpolled); the write waits for the lock.
    pub(crate) fn send(
        &self,
        item: &TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = std::io::Result<()>> + Send + use<> {
        let line = self.pending.line_of(item);
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
            w.write_line(&pieces).await?;
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

    fn wire(pending: &Pending, item: &TxJsonRpcMessage<RoleServer>) -> Value {
        let line = pending.line_of(item).unwrap().concat();
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
            let pending = Pending::default();
            let mut fast =
                pending.hold(RequestId::Number(4), Prebuilt(vec![a.to_vec(), b.to_vec()]));
            fast.result_type = result_type;
            assert_eq!(
                wire(&pending, &response(fast)),
                wire(&pending, &response(typed))
            );
        }
    }

    /// The defect pinned: a prebuilt result sent by any writer but its
    /// connection's `Out` (rmcp's own transports, a layer that rebuilds
    /// results) must not reach the model as an empty successful read.
    #[test]
    fn a_prebuilt_result_serialised_by_serde_is_an_error() {
        let pending = Pending::default();
        let placeholder = pending.hold(
            RequestId::Number(4),
            Prebuilt(vec![br#""content":[],"isError":false"#.to_vec()]),
        );
        let plain: Value =
            serde_json::from_slice(&serde_json::to_vec(&response(placeholder)).unwrap()).unwrap();
        assert_eq!(plain["result"]["isError"], json!(true), "{plain}");
        let text = plain["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("internal_error:"), "{text}");
    }

    /// The defect pinned: a result whose text is gone (sent already, or
    /// discarded when its call was cancelled) must not go out as an empty
    /// successful read.
    #[test]
    fn a_prebuilt_text_is_sent_once_and_a_lost_one_is_an_error() {
        let pending = Pending::default();
        let fast = pending.hold(
            RequestId::Number(4),
            Prebuilt(vec![br#""content":[],"isError":false"#.to_vec()]),
        );
        let item = response(fast);
        let first = wire(&pending, &item);
        assert_eq!(
            first["result"],
            json!({"resultType": "complete", "content": [], "isError": false})
        );
        let again = wire(&pending, &item);
        assert_eq!(again["result"]["isError"], json!(true), "{again}");
        assert!(again["result"].get("_meta").is_none(), "{again}");
        let text = again["result"]["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("internal_error:"), "{text}");

        let cancelled = pending.hold(RequestId::Number(4), Prebuilt(vec![b"x".to_vec()]));
        pending.discard(&RequestId::Number(4));
        assert_eq!(
            wire(&pending, &response(cancelled))["result"]["isError"],
            json!(true)
        );
    }

    /// Each connection's table is its own: one connection's answer never
    /// stands in for another's under the same request id.
    #[test]
    fn two_connections_keep_their_own_prebuilt_answers() {
        let (one, two) = (Pending::default(), Pending::default());
        let a = one.hold(
            RequestId::Number(4),
            Prebuilt(vec![br#""content":[],"isError":false"#.to_vec()]),
        );
        let b = two.hold(
            RequestId::Number(4),
            Prebuilt(vec![
                br#""content":[{"type":"text","text":"b"}],"isError":false"#.to_vec(),
            ]),
        );
        assert_eq!(
            wire(&two, &response(b))["result"]["content"][0]["text"],
            json!("b")
        );
        assert_eq!(wire(&one, &response(a))["result"]["content"], json!([]));
    }
}
