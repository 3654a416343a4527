//! `io::Compat`: tokio's and `futures-io`'s poll-based I/O traits over
//! `net::TcpStream` and `io::AsyncIo`. Loopback and pipes only; every loop
//! bounded.
#![cfg(all(windows, feature = "tokio", feature = "futures-io"))]

use crate::support;

use crate::executors;
use crate::sockets;
use executors::{counting_waker, on_each_executor};

use std::io::Write as _;
use std::net::Shutdown;
use std::pin::Pin;
use std::task::{Context, Poll};

use windows_threadpool::io::{self, AsyncIo, Compat};
use windows_threadpool::net::{TcpListener, TcpStream};
use windows_threadpool::task;

/// A connected pair: (client, server side).
async fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (client, accepted) = futures::join!(TcpStream::connect(addr), listener.accept());
    (client.unwrap(), accepted.unwrap().0)
}

/// Bytes that differ from their neighbours, so a lost or repeated chunk shows.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8 ^ (i / 251) as u8).collect()
}

/// 1 MiB through an echo server that is `tokio::io::copy` from a stream to
/// itself, under every executor.
#[test]
fn tokio_copy_echoes_a_mebibyte() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    on_each_executor(|| async {
        let (client, server) = pair().await;
        let echo = async move {
            let (mut r, mut w) = tokio::io::split(Compat::new(server));
            let copied = tokio::io::copy(&mut r, &mut w).await.unwrap();
            w.shutdown().await.unwrap();
            copied
        };
        let data = pattern(1 << 20);
        let (mut r, mut w) = tokio::io::split(Compat::new(client));
        let send = async {
            w.write_all(&data).await.unwrap();
            w.shutdown().await.unwrap(); // the echo's read sees end of file
        };
        let mut back = Vec::new();
        let (copied, (), got) = futures::join!(echo, send, r.read_to_end(&mut back));
        assert_eq!(copied, 1 << 20);
        assert_eq!(got.unwrap(), 1 << 20);
        assert!(back == data, "the echo differs from what was sent");
    });
}

#[test]
fn buf_reader_reads_lines() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    task::block_on(async {
        let (client, server) = pair().await;
        let mut client = Compat::new(client);
        client.write_all(b"alpha\nbeta\n").await.unwrap();
        client.write_all(b"gamma").await.unwrap();
        client.shutdown().await.unwrap();

        let mut lines = tokio::io::BufReader::new(Compat::new(server));
        let mut got = Vec::new();
        for _ in 0..4 {
            let mut line = String::new();
            if lines.read_line(&mut line).await.unwrap() == 0 {
                break;
            }
            got.push(line);
        }
        assert_eq!(got, ["alpha\n", "beta\n", "gamma"]);
    });
}

/// The adapter is an `AsyncBufRead` of its own: `lines` with no `BufReader`.
#[test]
fn compat_is_a_buf_read_itself() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    task::block_on(async {
        let (client, server) = pair().await;
        let mut client = Compat::new(client);
        client.write_all(b"one\r\ntwo\nthree\n").await.unwrap();
        client.shutdown().await.unwrap();
        let mut lines = Compat::new(server).lines();
        let mut got = Vec::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            got.push(line);
            assert!(got.len() <= 3);
        }
        assert_eq!(got, ["one", "two", "three"]);
    });
}

#[test]
fn futures_io_write_all_close_and_read_to_end() {
    use futures::io::{AsyncReadExt, AsyncWriteExt};
    on_each_executor(|| async {
        let (client, server) = pair().await;
        let data = pattern(300 * 1024);
        let mut client = Compat::new(client);
        let send = async {
            client.write_all(&data).await.unwrap();
            client.close().await.unwrap();
        };
        let mut server = Compat::new(server);
        let mut got = Vec::new();
        let ((), n) = futures::join!(send, server.read_to_end(&mut got));
        assert_eq!(n.unwrap(), data.len());
        assert!(got == data, "the bytes read differ from those written");
    });
}

/// A read that completed with more than the caller's buffer takes keeps
/// the rest for the next calls, in order. The 100 bytes are all in the
/// socket before the first read (peeked with `std`), so that read returns
/// every one of them at once.
#[test]
fn leftover_bytes_are_served_by_the_next_reads() {
    use tokio::io::AsyncReadExt;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    let data = pattern(100);
    client.write_all(&data).unwrap();
    let mut peek = [0u8; 100];
    let deadline = std::time::Instant::now() + support::PATIENCE;
    while server.peek(&mut peek).unwrap() < 100 {
        assert!(std::time::Instant::now() < deadline, "100 bytes never arrived");
        std::thread::yield_now();
    }
    client.shutdown(Shutdown::Write).unwrap();

    let mut server = Compat::new(TcpStream::from_std(server).unwrap());
    task::block_on(async {
        let mut got = Vec::new();
        let mut sizes = Vec::new();
        loop {
            let mut tiny = [0u8; 7];
            match server.read(&mut tiny).await.unwrap() {
                0 => break,
                n => {
                    sizes.push(n);
                    got.extend_from_slice(&tiny[..n]);
                }
            }
            assert!(sizes.len() <= 15);
        }
        assert_eq!(got, data);
        // Fourteen full reads of 7 and the last 2: each served whole.
        assert_eq!(sizes, [[7; 14].as_slice(), &[2]].concat());
    });
}

/// End of file passes through, again and again; after `shutdown` the
/// stream still reads (a half-close).
#[test]
fn end_of_file_passes_through_and_shutdown_half_closes() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    task::block_on(async {
        let (client, server) = pair().await;
        let (mut client, mut server) = (Compat::new(client), Compat::new(server));
        client.write_all(b"x").await.unwrap();
        client.shutdown().await.unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(server.read(&mut buf).await.unwrap(), 1);
        assert_eq!(server.read(&mut buf).await.unwrap(), 0);
        assert_eq!(server.read(&mut buf).await.unwrap(), 0);
        // futures-io's view of the same end of file.
        assert_eq!(futures::io::AsyncReadExt::read(&mut server, &mut buf).await.unwrap(), 0);
        server.write_all(b"back").await.unwrap();
        server.shutdown().await.unwrap();
        let mut back = Vec::new();
        client.read_to_end(&mut back).await.unwrap();
        assert_eq!(back, b"back");
    });
}

/// A pipe of `AsyncIo`s through the adapter; the reader sees end of file
/// once the writer is dropped (`shutdown` of a pipe only flushes).
#[test]
fn async_io_pipe_through_the_adapter() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    on_each_executor(|| async {
        let (server, client) = io::pipe_pair().unwrap();
        let (server, client) = (AsyncIo::new(server).unwrap(), AsyncIo::new(client).unwrap());
        let data = pattern(300 * 1024);
        let send = async {
            let mut client = Compat::new(client);
            client.write_all(&data).await.unwrap();
            client.shutdown().await.unwrap();
        };
        let mut server = Compat::new(server);
        let mut got = Vec::new();
        let ((), n) = futures::join!(send, server.read_to_end(&mut got));
        assert_eq!(n.unwrap(), data.len());
        assert!(got == data, "the bytes read differ from those written");
    });
}

/// Accepted is not written: with the pipe full, `poll_flush` stays pending
/// until the reader has taken every accepted byte, and is woken then.
#[test]
fn flush_waits_until_every_accepted_byte_is_written() {
    use tokio::io::{AsyncReadExt, AsyncWrite};
    let (server, client) = io::pipe_pair().unwrap();
    let (server, client) = (AsyncIo::new(server).unwrap(), AsyncIo::new(client).unwrap());
    let mut client = Compat::new(client);
    let (wakes, waker) = counting_waker();
    let mut cx = Context::from_waker(&waker);
    let chunk = pattern(64 * 1024);
    // Write until a write stays in flight (the pipe holds 64 KiB): then a
    // `poll_write` waits for it, and so does a flush. A write that was
    // merely not yet completed when `poll_write` looked may have completed
    // by the flush; the flush is then ready, and the next write must be
    // accepted at once. A flush ready with the write still in flight fails.
    let mut accepted = Vec::new();
    let mut accept = |n: std::io::Result<usize>| {
        accepted.extend_from_slice(&chunk[..n.unwrap()]);
        assert!(accepted.len() <= 64 * chunk.len(), "the pipe never filled");
    };
    loop {
        if let Poll::Ready(n) = Pin::new(&mut client).poll_write(&mut cx, &chunk) {
            accept(n);
            continue;
        }
        if Pin::new(&mut client).poll_flush(&mut cx).is_pending() {
            break;
        }
        match Pin::new(&mut client).poll_write(&mut cx, &chunk) {
            Poll::Ready(n) => accept(n),
            Poll::Pending => panic!("flush is ready with a write in flight"),
        }
    }
    // Wakes so far came from writes polled as they completed.
    let before = wakes.0.get();
    let reader = task::spawn(async move {
        let mut server = Compat::new(server);
        let mut got = vec![0u8; accepted.len()];
        server.read_exact(&mut got).await.unwrap();
        assert!(got == accepted, "the bytes read differ from those accepted");
        server
    });
    wakes.0.wait_for(before + 1);
    assert!(matches!(Pin::new(&mut client).poll_flush(&mut cx), Poll::Ready(Ok(()))));
    let _server = reader.join().unwrap();
}

/// Dropping the adapter with a read in flight does not block, and the
/// stream is closed: the peer reads end of file.
#[test]
fn drop_with_a_read_in_flight_closes_the_stream() {
    use tokio::io::{AsyncRead, ReadBuf};
    task::block_on(async {
        let (client, server) = pair().await;
        let mut server = Compat::new(server);
        let (_, waker) = counting_waker();
        let mut buf = [0u8; 8];
        let read = Pin::new(&mut server).poll_read(&mut Context::from_waker(&waker), &mut ReadBuf::new(&mut buf));
        assert!(read.is_pending());
        assert_eq!(server.get_ref().outstanding(), 1);
        drop(server);
        let (n, _) = client.read(vec![0u8; 8]).await;
        assert_eq!(n.unwrap(), 0);
    });
}

/// A zero-length read is ready at once and issues nothing; the adapted
/// object stays reachable for its other methods.
#[test]
fn zero_length_read_issues_nothing() {
    use futures::io::AsyncRead;
    task::block_on(async {
        let (client, server) = pair().await;
        let mut server = Compat::new(server);
        assert_eq!(server.get_ref().peer_addr().unwrap(), client.local_addr().unwrap());
        let (_, waker) = counting_waker();
        let read = Pin::new(&mut server).poll_read(&mut Context::from_waker(&waker), &mut []);
        assert!(matches!(read, Poll::Ready(Ok(0))));
        assert_eq!(server.get_ref().outstanding(), 0);
    });
}

/// An idle connection holds no buffer: after a request is read and an
/// answer written and flushed, a read waiting for the next request is a
/// zero-byte receive (one operation, no buffer lent), and the next request
/// is read as before.
#[test]
fn an_idle_connection_holds_no_buffer() {
    use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};
    on_each_executor(|| async {
        let (client, server) = pair().await;
        let mut server = Compat::new(server);
        let (sent, _) = client.write_all(b"request one".to_vec()).await;
        sent.unwrap();
        let mut got = [0u8; 11];
        server.read_exact(&mut got).await.unwrap();
        server.write_all(b"answer").await.unwrap();
        server.flush().await.unwrap();
        assert_eq!(server.buffers_held(), 0, "a drained read buffer or a flushed write buffer was kept");
        let (_, waker) = counting_waker();
        let mut buf = [0u8; 16];
        let idle = Pin::new(&mut server).poll_read(&mut Context::from_waker(&waker), &mut ReadBuf::new(&mut buf));
        assert!(idle.is_pending(), "nothing was sent");
        assert_eq!((server.buffers_held(), server.get_ref().outstanding()), (0, 1), "the idle read lends a buffer");
        let (sent, _) = client.write_all(b"request two".to_vec()).await;
        sent.unwrap();
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"request two");
        assert_eq!(server.buffers_held(), 0);
        let (n, buf) = client.read(vec![0u8; 16]).await;
        assert_eq!(&buf[..n.unwrap()], b"answer");
    });
}

/// With waiting for data off, an idle connection's read is a read of the
/// buffer in flight (one operation, the buffer lent), and requests are read
/// as before.
#[test]
fn with_wait_for_data_off_an_idle_read_keeps_its_buffer_in_flight() {
    use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
    on_each_executor(|| async {
        let (client, server) = pair().await;
        let mut server = Compat::new(server);
        assert!(server.waits_for_data());
        server.set_wait_for_data(false);
        assert!(!server.waits_for_data());
        for request in [&b"request one"[..], b"request two"] {
            let (_, waker) = counting_waker();
            let mut buf = [0u8; 16];
            let idle = Pin::new(&mut server).poll_read(&mut Context::from_waker(&waker), &mut ReadBuf::new(&mut buf));
            assert!(idle.is_pending(), "nothing was sent");
            assert_eq!(
                (server.buffers_held(), server.get_ref().outstanding()),
                (1, 1),
                "no read of the buffer in flight"
            );
            let (sent, _) = client.write_all(request.to_vec()).await;
            sent.unwrap();
            let mut got = [0u8; 11];
            server.read_exact(&mut got).await.unwrap();
            assert_eq!(&got, request);
        }
    });
}

/// Turning the wait off while a zero-byte wait is in flight finishes that
/// wait first: no read is issued beside it, and the next idle read is one
/// of the buffer.
#[test]
fn turning_wait_for_data_off_finishes_the_wait_in_flight_first() {
    use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};
    on_each_executor(|| async {
        let (client, server) = pair().await;
        let mut server = Compat::new(server);
        let (_, waker) = counting_waker();
        let mut buf = [0u8; 16];
        let mut poll = |server: &mut Compat<TcpStream>| {
            Pin::new(server).poll_read(&mut Context::from_waker(&waker), &mut ReadBuf::new(&mut buf)).is_pending()
        };
        assert!(poll(&mut server));
        assert_eq!((server.buffers_held(), server.get_ref().outstanding()), (0, 1), "a zero-byte wait");
        server.set_wait_for_data(false);
        assert!(poll(&mut server));
        assert_eq!((server.buffers_held(), server.get_ref().outstanding()), (0, 1), "a read beside the wait");
        let (sent, _) = client.write_all(b"request".to_vec()).await;
        sent.unwrap();
        let mut got = [0u8; 7];
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"request");
        assert!(poll(&mut server));
        assert_eq!((server.buffers_held(), server.get_ref().outstanding()), (1, 1), "no read of the buffer");
    });
}

/// The setting goes with the read half and comes back with it; over a pipe
/// reads never wait for data, whatever is set.
#[test]
fn wait_for_data_goes_with_the_read_half_and_never_applies_to_a_pipe() {
    task::block_on(async {
        let (_client, server) = pair().await;
        let mut server = Compat::new(server);
        server.set_wait_for_data(false);
        let (mut read, write) = server.into_split();
        assert!(!read.waits_for_data());
        read.set_wait_for_data(true);
        let server = read.reunite(write).unwrap();
        assert!(server.waits_for_data());
    });
    let (pipe, _other) = io::pipe_pair().unwrap();
    let mut pipe = Compat::new(AsyncIo::new(pipe).unwrap());
    pipe.set_wait_for_data(true);
    assert!(!pipe.waits_for_data());
}

/// Over a pipe a zero-byte read does not wait for data, so an idle read
/// keeps its buffer in flight (the documented difference).
#[test]
fn an_idle_pipe_read_keeps_its_buffer_in_flight() {
    use tokio::io::{AsyncRead, ReadBuf};
    task::block_on(async {
        let (server, _client) = io::pipe_pair().unwrap();
        let mut server = Compat::new(AsyncIo::new(server).unwrap());
        let (_, waker) = counting_waker();
        let mut buf = [0u8; 16];
        let idle = Pin::new(&mut server).poll_read(&mut Context::from_waker(&waker), &mut ReadBuf::new(&mut buf));
        assert!(idle.is_pending());
        assert_eq!(server.buffers_held(), 1);
    });
}

/// A failed write poisons the writing side: that write's error comes again
/// from every later write, flush and shutdown, as from a `BufWriter` whose
/// writer failed. Reads are not affected.
#[test]
fn a_failed_write_fails_every_later_write_flush_and_shutdown() {
    use tokio::io::AsyncWriteExt;
    on_each_executor(|| async {
        let (client, server) = pair().await;
        let mut server = Compat::new(server);
        sockets::reset_on_close(&client);
        drop(client); // a reset: the server's writes fail from some point on
        let chunk = vec![7u8; 64 * 1024];
        let mut first = None;
        for _ in 0..1000 {
            if let Err(e) = async {
                server.write_all(&chunk).await?;
                server.flush().await
            }
            .await
            {
                first = Some(e);
                break;
            }
        }
        let first = first.expect("writes to a reset connection kept succeeding");
        let code = first.raw_os_error();
        assert!(code.is_some(), "{first:?}");
        assert_eq!(server.flush().await.unwrap_err().raw_os_error(), code, "flush after a failed write");
        assert_eq!(server.write(b"x").await.unwrap_err().raw_os_error(), code, "write after a failed write");
        assert_eq!(server.shutdown().await.unwrap_err().raw_os_error(), code, "shutdown after a failed write");
    });
}

/// Yields until `done()`; fails once `PATIENCE` has passed.
fn settle(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + support::PATIENCE;
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{what} did not settle within {:?}", support::PATIENCE);
        std::thread::yield_now();
    }
}

/// The halves of one stream in two tasks at once, each under
/// `tokio::io::copy`: the client's writer task copies 4 MiB in while its
/// reader task (on the pool) copies the echo out, and the server echoes
/// with `copy` from its read half into its write half. Checked byte for
/// byte under every executor; afterwards the idle halves hold no buffer.
#[test]
fn split_halves_copy_both_ways_at_once_from_two_tasks() {
    use tokio::io::AsyncWriteExt;
    const LEN: usize = 4 << 20;
    on_each_executor(|| async {
        let (client, server) = pair().await;
        let echo = task::spawn(async move {
            let (mut r, mut w) = Compat::new(server).into_split();
            let copied = tokio::io::copy(&mut r, &mut w).await.unwrap();
            w.shutdown().await.unwrap();
            assert_eq!((r.buffers_held(), w.buffers_held()), (0, 0), "the echo's drained halves hold a buffer");
            copied
        });
        let (mut r, mut w) = Compat::new(client).into_split();
        let reader = task::spawn(async move {
            let mut back = Vec::with_capacity(LEN);
            tokio::io::copy(&mut r, &mut back).await.unwrap();
            (r, back)
        });
        let data = pattern(LEN);
        let copied = tokio::io::copy(&mut &data[..], &mut w).await.unwrap();
        w.shutdown().await.unwrap(); // flushed; the echo's read sees end of file
        assert_eq!(copied, LEN as u64);
        assert_eq!(w.buffers_held(), 0, "a flushed write half holds its buffer");
        let (r, back) = reader.await.unwrap();
        assert_eq!(echo.await.unwrap(), LEN as u64);
        assert_eq!(back.len(), LEN);
        assert!(back == data, "the echo differs from what was sent");
        assert_eq!(r.buffers_held(), 0, "a read half at end of file holds its buffer");
        assert!(r.is_pair_of(&w) && w.is_pair_of(&r));
    });
}

/// Halves of two different adapters are refused and given back as they
/// were; the right pairs reunite, from either side, into adapters that
/// still work, and a read in flight in a half goes on in the reunited
/// adapter.
#[test]
fn reunite_refuses_mismatched_halves_and_takes_matching_ones() {
    use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};
    task::block_on(async {
        let (a_client, a) = pair().await;
        let (b_client, b) = pair().await;
        let (mut ra, wa) = Compat::new(a).into_split();
        let (rb, wb) = Compat::new(b).into_split();
        assert!(!ra.is_pair_of(&wb) && !wb.is_pair_of(&ra));
        // A zero-byte wait in flight in `ra`.
        let (_, waker) = counting_waker();
        let mut buf = [0u8; 8];
        let idle = Pin::new(&mut ra).poll_read(&mut Context::from_waker(&waker), &mut ReadBuf::new(&mut buf));
        assert!(idle.is_pending(), "nothing was sent");

        let io::ReuniteError(ra, wb) = ra.reunite(wb).expect_err("halves of two adapters");
        let e = wb.reunite(ra).expect_err("halves of two adapters, from the write side");
        assert!(!e.to_string().is_empty());
        let _: &dyn std::error::Error = &e;
        let io::ReuniteError(ra, wb) = e;
        assert_eq!(ra.get_ref().outstanding(), 1, "the refused half's wait was disturbed");

        let mut a = ra.reunite(wa).expect("the halves of one adapter");
        let mut b = wb.reunite(rb).expect("the halves of one adapter, from the write side");
        assert_eq!(a.get_ref().peer_addr().unwrap(), a_client.local_addr().unwrap());
        let (sent, _) = a_client.write_all(b"to a".to_vec()).await;
        sent.unwrap();
        let mut got = [0u8; 4];
        a.read_exact(&mut got).await.unwrap(); // through the wait issued before
        assert_eq!(&got, b"to a");
        b.write_all(b"from b").await.unwrap();
        b.flush().await.unwrap();
        let (n, buf) = b_client.read(vec![0u8; 16]).await;
        assert_eq!(&buf[..n.unwrap()], b"from b");
    });
}

/// `into_inner` discards bytes read and not yet served (as tokio's
/// `BufReader::into_inner`), and gives the stream back usable: what comes
/// after is read from it. All six bytes are in the socket before the
/// adapter's read, so that one read takes all of them.
#[test]
fn into_inner_discards_unread_bytes_and_the_stream_reads_on() {
    use tokio::io::AsyncReadExt;
    task::block_on(async {
        let (client, server) = pair().await;
        let (sent, _) = client.write_all(b"abcdef".to_vec()).await;
        sent.unwrap();
        let deadline = std::time::Instant::now() + support::PATIENCE;
        loop {
            let peek = windows_threadpool::time::timeout(support::PATIENCE, server.peek(vec![0u8; 6]));
            let (n, _) = peek.await.expect("a peek waited for data past the deadline");
            if n.unwrap() == 6 {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "6 bytes never arrived");
        }
        let mut server = Compat::new(server);
        server.get_mut().set_nodelay(true).unwrap(); // the object, reached in place
        assert!(server.get_ref().nodelay().unwrap());
        let mut two = [0u8; 2];
        server.read_exact(&mut two).await.unwrap();
        assert_eq!(&two, b"ab");
        let server = server.into_inner();
        assert_eq!(server.outstanding(), 0);
        let (sent, _) = client.write_all(b"gh".to_vec()).await;
        sent.unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        let mut rest = Vec::new();
        for _ in 0..4 {
            let (n, buf) = server.read(vec![0u8; 16]).await;
            match n.unwrap() {
                0 => break,
                n => rest.extend_from_slice(&buf[..n]),
            }
        }
        assert_eq!(rest, b"gh", "\"cdef\" was served by the adapter's buffer, and goes with it");
    });
}

/// `into_inner` with a zero-byte wait in flight cancels it, as the drop
/// does, and loses nothing: the wait consumed no byte.
#[test]
fn into_inner_cancels_a_wait_in_flight() {
    use tokio::io::{AsyncRead, ReadBuf};
    task::block_on(async {
        let (client, server) = pair().await;
        let mut server = Compat::new(server);
        let (_, waker) = counting_waker();
        let mut buf = [0u8; 8];
        let idle = Pin::new(&mut server).poll_read(&mut Context::from_waker(&waker), &mut ReadBuf::new(&mut buf));
        assert!(idle.is_pending(), "nothing was sent");
        let server = server.into_inner();
        settle("the cancelled wait", || server.outstanding() == 0);
        let (sent, _) = client.write_all(b"kept".to_vec()).await;
        sent.unwrap();
        let (n, buf) = server.read(vec![0u8; 8]).await;
        assert_eq!(&buf[..n.unwrap()], b"kept");
    });
}

/// Each half's drop cancels its own side's operation only: with the read
/// half dropped while it waits, the write half still writes, and with the
/// write half dropped, the object (kept by neither) is closed.
#[test]
fn dropping_one_half_leaves_the_other_working() {
    use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};
    task::block_on(async {
        let (client, server) = pair().await;
        let (mut r, mut w) = Compat::new(server).into_split();
        let (_, waker) = counting_waker();
        let mut buf = [0u8; 8];
        let idle = Pin::new(&mut r).poll_read(&mut Context::from_waker(&waker), &mut ReadBuf::new(&mut buf));
        assert!(idle.is_pending(), "nothing was sent");
        assert_eq!(w.get_ref().outstanding(), 1);
        drop(r);
        settle("the read half's cancelled wait", || w.get_ref().outstanding() == 0);
        w.write_all(b"still writing").await.unwrap();
        w.flush().await.unwrap();
        let (n, buf) = client.read(vec![0u8; 32]).await;
        assert_eq!(&buf[..n.unwrap()], b"still writing");
        drop(w); // the last half: the stream is closed
        let (n, _) = client.read(vec![0u8; 8]).await;
        assert_eq!(n.unwrap(), 0);
    });
}

/// A write half dropped with its write in flight (a pipe nobody reads,
/// full) cancels it, as the adapter's drop does: the object, kept by the
/// read half, has nothing outstanding once the cancellation completes.
#[test]
fn dropping_the_write_half_cancels_its_write() {
    use tokio::io::AsyncWrite;
    let (server, client) = io::pipe_pair().unwrap();
    let (_server, client) = (AsyncIo::new(server).unwrap(), AsyncIo::new(client).unwrap());
    let (r, mut w) = Compat::new(client).into_split();
    let (_, waker) = counting_waker();
    let mut cx = Context::from_waker(&waker);
    let chunk = pattern(64 * 1024);
    let mut accepted = 0;
    while let Poll::Ready(n) = Pin::new(&mut w).poll_write(&mut cx, &chunk) {
        accepted += n.unwrap();
        assert!(accepted <= 64 * chunk.len(), "the pipe never filled");
    }
    assert_eq!((w.buffers_held(), r.get_ref().outstanding()), (2, 1), "a write in flight, a full buffer queued");
    drop(w);
    settle("the write half's cancelled write", || r.get_ref().outstanding() == 0);
}

/// Fills `w` (over a pipe nobody reads yet) until a write of it is in
/// flight and pending; the bytes it accepted.
fn fill_until_in_flight<W: tokio::io::AsyncWrite + Unpin>(
    w: &mut W,
    held: impl Fn(&W) -> usize,
    cx: &mut Context<'_>,
) -> usize {
    let chunk = pattern(64 * 1024);
    let mut accepted = 0;
    while held(w) == 0 {
        match Pin::new(&mut *w).poll_write(cx, &chunk) {
            Poll::Ready(n) => accepted += n.unwrap(),
            Poll::Pending => panic!("a write was refused with none in flight"),
        }
        assert!(accepted <= 64 * chunk.len(), "the pipe never filled");
    }
    accepted
}

/// Reads `len` bytes from `r` on another thread.
fn read_all_on_a_thread(r: AsyncIo, len: usize) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut got = Vec::with_capacity(len);
        let mut buf = vec![0u8; 64 * 1024];
        while got.len() < len {
            let (n, b) = task::block_on(r.read(buf));
            let n = n.unwrap();
            assert_ne!(n, 0, "end of file after {} of {len} bytes", got.len());
            got.extend_from_slice(&b[..n]);
            buf = b;
        }
        got
    })
}

/// Small writes while a write is in flight are accepted at once into a
/// second buffer, with no operation of their own, and written as one when
/// the write before them is done: in order, none lost.
#[test]
fn small_writes_behind_a_write_in_flight_are_queued_as_one() {
    use tokio::io::AsyncWrite;
    let (server, client) = io::pipe_pair().unwrap();
    let (server, client) = (AsyncIo::new(server).unwrap(), AsyncIo::new(client).unwrap());
    let mut w = Compat::new(client);
    let (_, waker) = counting_waker();
    let mut cx = Context::from_waker(&waker);
    let first = fill_until_in_flight(&mut w, |w| w.get_ref().outstanding(), &mut cx);
    let small: Vec<Vec<u8>> = (0..100u8).map(|i| vec![i; 100]).collect();
    for s in &small {
        match Pin::new(&mut w).poll_write(&mut cx, s) {
            Poll::Ready(n) => assert_eq!(n.unwrap(), s.len()),
            Poll::Pending => panic!("a small write behind a write in flight waited for it"),
        }
        assert_eq!(w.get_ref().outstanding(), 1, "a small write issued an operation of its own");
    }
    assert_eq!(w.buffers_held(), 2, "a write in flight and the queued buffer");
    let reader = read_all_on_a_thread(server, first + 100 * 100);
    task::block_on(std::future::poll_fn(|cx| Pin::new(&mut w).poll_flush(cx))).unwrap();
    let got = reader.join().unwrap();
    let mut want = Vec::new();
    while want.len() < first {
        want.extend_from_slice(&pattern(64 * 1024));
    }
    want.truncate(first);
    small.iter().for_each(|s| want.extend_from_slice(s));
    assert!(got == want, "the bytes arrived out of order or changed");
    assert_eq!(w.buffers_held(), 0, "a flushed adapter holds a write buffer");
}

/// A vectored write (hyper's head and body) is one write of every slice
/// that fits, not of the first slice alone.
#[test]
fn a_vectored_write_writes_every_slice_at_once() {
    use tokio::io::AsyncWrite;
    let (server, client) = io::pipe_pair().unwrap();
    let (server, client) = (AsyncIo::new(server).unwrap(), AsyncIo::new(client).unwrap());
    let mut w = Compat::new(client);
    assert!(w.is_write_vectored());
    let (head, body) = (b"HTTP/1.1 200 OK\r\n\r\n".to_vec(), pattern(1000));
    let slices = [std::io::IoSlice::new(&head), std::io::IoSlice::new(&[]), std::io::IoSlice::new(&body)];
    let n = task::block_on(std::future::poll_fn(|cx| Pin::new(&mut w).poll_write_vectored(cx, &slices))).unwrap();
    assert_eq!(n, head.len() + body.len(), "a vectored write took only part of its slices");
    let reader = read_all_on_a_thread(server, n);
    task::block_on(std::future::poll_fn(|cx| Pin::new(&mut w).poll_flush(cx))).unwrap();
    assert!(reader.join().unwrap() == [head, body].concat());
}
