//! One client connection: read, decode every complete request, run them
//! as one batch, write the replies, repeat.
//!
//! A batch that reaches the engine runs on tokio's blocking pool
//! (`spawn_blocking`): engine calls block (a synced write waits for
//! `fdatasync`, a read out of cache waits for the disk) and must not hold a
//! network thread. Running a whole pipeline in one hop makes the hand-off
//! cost per batch rather than per command. While the replies of one batch
//! are being written, nothing more is read from that client, so a client
//! that does not read its replies costs at most one batch of them.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::commands::{
    counter_run_len, dispatch, get_run_len, needs_engine, run_counters, run_gets, run_sets,
    set_run_len,
};
use crate::resp::{Decoder, Reply};
use crate::session::Session;
use crate::shared::{Counters, Shared};

/// Most requests run as one batch: bounds a batch's replies in memory and
/// lets a long pipeline's first replies leave early.
pub const MAX_BATCH_REQUESTS: usize = 512;
/// What a read asks for at least; an idle connection holds no more.
const READ_CHUNK_BYTES: usize = 16 * 1024;
/// An emptied read buffer above this is given back rather than kept.
const KEEP_BUFFER_BYTES: usize = 256 * 1024;

/// Serves `stream` until the client leaves, sends `QUIT`/`SHUTDOWN`, or
/// breaks the protocol.
pub async fn serve(mut stream: TcpStream, shared: Arc<Shared>) {
    // Replies are written whole; Nagle's delay would only add latency.
    let _ = stream.set_nodelay(true);
    let mut decoder = Decoder::new(shared.config.limits());
    let mut buf = BytesMut::new();
    let mut session = Some(Session::new(shared.config.requirepass.is_none()));
    loop {
        let mut batch: Vec<Vec<Bytes>> = Vec::new();
        let mut broken = None;
        while batch.len() < MAX_BATCH_REQUESTS {
            match decoder.decode(&mut buf) {
                Ok(Some(request)) => batch.push(request),
                Ok(None) => break,
                Err(e) => {
                    broken = Some(e);
                    break;
                }
            }
        }
        let full_batch = batch.len() == MAX_BATCH_REQUESTS;
        if !batch.is_empty() {
            let Some(current) = session.take() else {
                return;
            };
            let (back, out) = if needs_engine(&batch) {
                let shared = shared.clone();
                match tokio::task::spawn_blocking(move || run_batch(&shared, current, batch)).await
                {
                    Ok(done) => done,
                    // A command panicked: the session's state is lost, and
                    // with it the connection.
                    Err(_) => return,
                }
            } else {
                run_batch(&shared, current, batch)
            };
            let closing = back.closing;
            session = Some(back);
            if stream.write_all(&out).await.is_err() || closing {
                return;
            }
        }
        if let Some(e) = broken {
            Counters::bump(&shared.counters.protocol_errors);
            let _ = stream
                .write_all(format!("-ERR Protocol error: {e}\r\n").as_bytes())
                .await;
            return;
        }
        if full_batch {
            // More requests may already be buffered: run them before reading.
            continue;
        }
        if buf.is_empty() && buf.capacity() > KEEP_BUFFER_BYTES {
            buf = BytesMut::new();
        }
        if buf.capacity() - buf.len() < READ_CHUNK_BYTES / 4 {
            buf.reserve(READ_CHUNK_BYTES);
        }
        match stream.read_buf(&mut buf).await {
            // Closed (or half-closed: nothing more will come; replies to
            // everything received have been written).
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Runs a batch and returns its replies. Under `--sync always`, a batch
/// that wrote syncs the log before any of its replies is released, so an
/// acknowledged write is durable; concurrent batches share a sync (the
/// first syncs every write logged so far, the others find nothing left).
/// If the sync fails, no reply is released and the connection closes: the
/// client cannot take its writes as acknowledged.
fn run_batch(shared: &Shared, mut session: Session, batch: Vec<Vec<Bytes>>) -> (Session, Vec<u8>) {
    let mut reply = Reply::new(session.protocol);
    session.wrote = false;
    let mut i = 0;
    while i < batch.len() && !session.closing {
        let sets = set_run_len(&session, &batch[i..]);
        let gets = get_run_len(&session, &batch[i..]);
        let counters = counter_run_len(&session, &batch[i..]);
        if sets > 0 {
            run_sets(shared, &mut session, &mut reply, &batch[i..i + sets]);
            i += sets;
        } else if gets > 0 {
            run_gets(shared, &session, &mut reply, &batch[i..i + gets]);
            i += gets;
        } else if counters > 0 {
            run_counters(shared, &mut session, &mut reply, &batch[i..i + counters]);
            i += counters;
        } else {
            dispatch(shared, &mut session, &mut reply, &batch[i]);
            i += 1;
        }
    }
    if session.wrote
        && shared.sync_before_reply
        && let Err(e) = shared.db.flush_wal()
    {
        eprintln!("turtlekv-server: syncing the log failed: {e}");
        session.closing = true;
        reply.out.clear();
    }
    (session, reply.out)
}
