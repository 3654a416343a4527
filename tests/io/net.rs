//! `net`: TCP and UDP sockets on the pool, under every executor of
//! `support/executors.rs`. Loopback only; every loop bounded.
#![cfg(windows)]

use crate::support;
use support::PATIENCE;

use crate::executors;
use crate::sockets;
use executors::{counting_waker, on_each_executor, poll_once};
use sockets::reset_on_close;

use std::io::ErrorKind;
use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use windows_threadpool::net::{self, TcpListener, TcpStream, UdpSocket};
use windows_threadpool::{io, task, time};

/// What Wine 8 reports for `FileReplaceCompletionInformation`:
/// `STATUS_NOT_IMPLEMENTED`, as a Win32 error `ERROR_INVALID_FUNCTION`.
const WINE_NOT_IMPLEMENTED: i32 = 1;

/// A connected pair: (client, server side).
async fn pair(listener: &TcpListener) -> (TcpStream, TcpStream) {
    let addr = listener.local_addr().unwrap();
    let (client, accepted) = futures::join!(TcpStream::connect(addr), listener.accept());
    let (client, (server, peer)) = (client.unwrap(), accepted.unwrap());
    assert_eq!(peer, client.local_addr().unwrap());
    assert_eq!(server.peer_addr().unwrap(), client.local_addr().unwrap());
    (client, server)
}

/// Reads until `want` bytes have arrived or the peer shut down.
async fn read_exactly(s: &TcpStream, want: usize) -> Vec<u8> {
    let mut got = Vec::with_capacity(want);
    let mut buf = vec![0u8; 64 * 1024];
    while got.len() < want {
        let (n, b) = s.read(buf).await;
        buf = b;
        match n.unwrap() {
            0 => break,
            n => got.extend_from_slice(&buf[..n]),
        }
    }
    got
}

#[test]
fn echo_under_every_executor() {
    on_each_executor(|| async {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (client, server) = pair(&listener).await;
        client.set_nodelay(true).unwrap();
        assert!(client.nodelay().unwrap());
        for round in 0..20u8 {
            let (sent, _) = client.write_all(vec![round; 64]).await;
            sent.unwrap();
            let got = read_exactly(&server, 64).await;
            let (sent, _) = server.write_all(got).await;
            sent.unwrap();
            assert_eq!(read_exactly(&client, 64).await, vec![round; 64]);
        }
    });
}

/// 64 connections at once, each echoing through its own task.
#[test]
fn many_concurrent_connections() {
    const N: usize = 64;
    let listener = Arc::new(TcpListener::bind("127.0.0.1:0").unwrap());
    let addr = listener.local_addr().unwrap();
    let l = Arc::clone(&listener);
    let server = task::spawn(async move {
        let mut echoes = Vec::new();
        for _ in 0..N {
            let (s, _) = l.accept().await.unwrap();
            echoes.push(task::spawn(async move {
                let got = read_exactly(&s, 1000).await;
                let (sent, _) = s.write_all(got).await;
                sent.unwrap();
            }));
        }
        for e in echoes {
            e.await.unwrap();
        }
    });
    let clients: Vec<_> = (0..N)
        .map(|i| {
            task::spawn(async move {
                let s = TcpStream::connect(addr).await.unwrap();
                let (sent, _) = s.write_all(vec![i as u8; 1000]).await;
                sent.unwrap();
                assert_eq!(read_exactly(&s, 1000).await, vec![i as u8; 1000]);
            })
        })
        .collect();
    for c in clients {
        task::block_on(c).unwrap();
    }
    task::block_on(server).unwrap();
}

/// After the peer's `shutdown(Write)`, reads see the data, then end of file.
#[test]
fn end_of_file_after_the_peers_shutdown() {
    on_each_executor(|| async {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (client, server) = pair(&listener).await;
        let (sent, _) = client.write_all(b"last words".to_vec()).await;
        sent.unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        assert_eq!(read_exactly(&server, 10).await, b"last words");
        let (n, _) = server.read(vec![0u8; 16]).await;
        assert_eq!(n.unwrap(), 0);
        // The other direction still works.
        let (sent, _) = server.write_all(b"ack".to_vec()).await;
        sent.unwrap();
        assert_eq!(read_exactly(&client, 3).await, b"ack");
    });
}

/// A peer that closes with a zero linger resets the connection: a read
/// pending at the time fails with `ConnectionReset`, and nothing panics.
#[test]
fn a_reset_by_the_peer_fails_a_pending_read() {
    on_each_executor(|| async {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (client, server) = pair(&listener).await;
        let mut read = server.read(vec![0u8; 16]);
        let (_woken, w) = counting_waker();
        assert!(poll_once(&mut read, &w).is_pending(), "nothing was sent");
        reset_on_close(&client);
        drop(client);
        let (n, _) = read.await;
        let e = n.expect_err("a read of a reset connection");
        assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e:?}");
    });
}

/// Connections that reset before they are accepted (200 of them, each
/// having sent the head of a request, waiting in the backlog) end no
/// `accept`: the listener skips them, and the next good client is served.
#[test]
fn accept_skips_connections_reset_before_they_were_accepted() {
    use std::io::Write;
    on_each_executor(|| async {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let clients = std::thread::spawn(move || {
            for _ in 0..200 {
                let mut c = std::net::TcpStream::connect(addr).unwrap();
                let _ = c.write_all(b"POST / HTTP/1.1\r\nContent-Length: 1000000\r\n\r\n");
                reset_on_close(&c);
            }
            let mut good = std::net::TcpStream::connect(addr).unwrap();
            good.write_all(b"hi").unwrap();
            good
        });
        let deadline = Instant::now() + PATIENCE;
        loop {
            assert!(Instant::now() < deadline, "the good client was never served");
            let (s, _) = listener.accept().await.expect("an accept failed for a client that left");
            let (n, buf) = s.read(vec![0u8; 2]).await;
            if n.is_ok_and(|n| n == 2) && buf == b"hi" {
                break;
            }
        }
        drop(clients.join().unwrap());
    });
}

#[test]
fn connecting_to_a_closed_port_is_refused() {
    on_each_executor(|| async {
        let addr = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let e = TcpStream::connect(addr).await.expect_err("nothing listens there");
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e:?}");
    });
}

/// A read dropped by a timeout is cancelled; the stream stays usable and the
/// next read gets the data sent after.
#[test]
fn a_read_dropped_by_a_timeout_leaves_the_stream_usable() {
    on_each_executor(|| async {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (client, server) = pair(&listener).await;
        let timed_out = time::timeout(Duration::from_millis(20), server.read(vec![0u8; 16])).await;
        assert!(timed_out.is_err(), "nothing was sent");
        let (sent, _) = client.write_all(b"after".to_vec()).await;
        sent.unwrap();
        assert_eq!(read_exactly(&server, 5).await, b"after");
    });
}

/// A listener dropped with an accept pending (its future forgotten): the
/// drop returns at once, the accept is cancelled and its block freed.
#[test]
fn a_listener_dropped_with_an_accept_pending() {
    support::alone("net::a_listener_dropped_with_an_accept_pending", || {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut accept = listener.accept();
        let (_woken, w) = counting_waker();
        assert!(poll_once(&mut accept, &w).is_pending());
        assert_eq!(listener.local_addr().unwrap(), addr);
        std::mem::forget(accept);
        drop(listener);
        let deadline = Instant::now() + PATIENCE;
        while io::live_operations() != 0 {
            assert!(Instant::now() < deadline, "the pending accept was never settled");
            std::thread::yield_now();
        }
        // The socket is closed once the handed-off rundown is done.
        loop {
            match task::block_on(TcpStream::connect(addr)) {
                Err(e) => break assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e:?}"),
                Ok(_) => assert!(Instant::now() < deadline, "the dropped listener's socket was never closed"),
            }
        }
    });
}

/// Data already buffered is read inline: each 1-byte read after the first
/// is ready at its first poll, and no completion is delivered for it. The
/// first read (`a`) proves the 4-byte segment has arrived. Dropping the
/// stream afterwards must return: an inline completion whose start were not
/// balanced would leave the drain waiting forever.
#[test]
fn buffered_data_is_read_inline_with_no_completion() {
    support::alone("net::buffered_data_is_read_inline_with_no_completion", || {
        assert!(net::completes_inline().unwrap(), "a TCP socket's provider is expected to be an IFS provider");
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (client, server) = task::block_on(pair(&listener));
        let (sent, _) = task::block_on(client.write_all(b"abcd".to_vec()));
        sent.unwrap();
        let (n, buf) = task::block_on(server.read(vec![0u8; 1]));
        assert_eq!((n.unwrap(), buf[0]), (1, b'a'));
        let (_woken, w) = counting_waker();
        let before = io::async_completions();
        for want in [b'b', b'c', b'd'] {
            let mut read = server.read(vec![0u8; 1]);
            match poll_once(&mut read, &w) {
                Poll::Ready((n, buf)) => assert_eq!((n.unwrap(), buf[0]), (1, want)),
                Poll::Pending => panic!("a read of buffered data was not ready at its first poll"),
            }
        }
        assert_eq!(io::async_completions(), before, "an inline read delivered a completion");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            drop(server);
            let _ = tx.send(());
        });
        rx.recv_timeout(PATIENCE).expect("dropping the stream never returned");
    });
}

/// `readable` waits for data without a buffer: pending on an idle
/// connection, ready once bytes arrive (and then at its first poll while
/// they are unread), and ready at the peer's shutdown, where the read then
/// finds end of file.
#[test]
fn readable_waits_for_data_and_for_end_of_file() {
    on_each_executor(|| async {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (client, server) = pair(&listener).await;
        let mut idle = server.readable();
        let (_woken, w) = counting_waker();
        assert!(poll_once(&mut idle, &w).is_pending(), "readable on an idle connection");
        let (sent, _) = client.write_all(b"abc".to_vec()).await;
        sent.unwrap();
        idle.await.unwrap();
        server.readable().await.unwrap(); // the bytes are still unread
        let (n, buf) = server.read(vec![0u8; 8]).await;
        assert_eq!(&buf[..n.unwrap()], b"abc");
        let mut next = server.readable();
        assert!(poll_once(&mut next, &w).is_pending(), "readable after the bytes were read");
        client.shutdown(Shutdown::Write).unwrap();
        next.await.unwrap();
        let (n, _) = server.read(vec![0u8; 8]).await;
        assert_eq!(n.unwrap(), 0, "end of file after readable");
    });
}

/// One MiB each way at once: `write_all` goes on through partial sends.
#[test]
fn a_mebibyte_each_way() {
    on_each_executor(|| async {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (client, server) = pair(&listener).await;
        let data: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
        let ((sent, _), got) = futures::join!(client.write_all(data.clone()), read_exactly(&server, 1 << 20));
        sent.unwrap();
        assert!(got == data, "the stream corrupted the data");
    });
}

#[test]
fn socket_options_and_errors() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (client, _server) = task::block_on(pair(&listener));
    client.set_ttl(42).unwrap();
    assert_eq!(client.ttl().unwrap(), 42);
    assert!(client.take_error().unwrap().is_none());
    assert!(listener.take_error().unwrap().is_none());
    let e = client.set_ttl(u32::MAX).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
}

#[test]
fn std_sockets_convert() {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_listener.local_addr().unwrap();
    let listener = TcpListener::from_std(std_listener).unwrap();
    let std_client = std::net::TcpStream::connect(addr).unwrap();
    let client = TcpStream::from_std(std_client).unwrap();
    let (server, peer) = task::block_on(listener.accept()).unwrap();
    assert_eq!(peer, client.local_addr().unwrap());
    let (sent, _) = task::block_on(client.write_all(b"std".to_vec()));
    sent.unwrap();
    assert_eq!(task::block_on(read_exactly(&server, 3)), b"std");
    let udp = UdpSocket::from_std(std::net::UdpSocket::bind("127.0.0.1:0").unwrap()).unwrap();
    assert!(udp.local_addr().unwrap().port() != 0);
}

#[test]
fn udp_ping_pong() {
    on_each_executor(|| async {
        let (a, b) = (UdpSocket::bind("127.0.0.1:0").unwrap(), UdpSocket::bind("127.0.0.1:0").unwrap());
        let (a_addr, b_addr) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        let mut buf = vec![0u8; 1500];
        for round in 0..20u8 {
            let (sent, _) = a.send_to(vec![round; 64], b_addr).await;
            assert_eq!(sent.unwrap(), 64);
            let (got, bb) = b.recv_from(buf).await;
            buf = bb;
            assert_eq!(got.unwrap(), (64, a_addr));
            let (sent, _) = b.send_to(buf[..64].to_vec(), a_addr).await;
            assert_eq!(sent.unwrap(), 64);
            let (got, bb) = a.recv_from(buf).await;
            buf = bb;
            assert_eq!(got.unwrap(), (64, b_addr));
            assert_eq!(buf[..64], [round; 64]);
        }
    });
}

/// A datagram longer than the buffer is `WSAEMSGSIZE`, and the buffer comes
/// back holding its start.
#[test]
fn a_truncated_datagram_is_an_error_that_gives_the_buffer_back() {
    const WSAEMSGSIZE: i32 = 10040;
    on_each_executor(|| async {
        let (a, b) = (UdpSocket::bind("127.0.0.1:0").unwrap(), UdpSocket::bind("127.0.0.1:0").unwrap());
        let (sent, _) = a.send_to(b"0123456789".to_vec(), b.local_addr().unwrap()).await;
        sent.unwrap();
        let (got, buf) = b.recv_from(vec![0u8; 4]).await;
        let e = got.expect_err("the datagram does not fit");
        assert_eq!(e.raw_os_error(), Some(WSAEMSGSIZE), "{e:?}");
        assert_eq!(buf, b"0123");
    });
}

/// Every datagram operation completes through the pool, a truncating
/// receive among them: a datagram socket never skips the completion port
/// on success (`net`'s module docs say why). Each send succeeds at once on
/// loopback and each receive finds its datagram buffered (the first receive
/// waits for the burst), which a stream socket would finish inline.
#[test]
fn every_datagram_operation_completes_through_the_pool() {
    const WSAEMSGSIZE: i32 = 10040;
    support::alone("net::every_datagram_operation_completes_through_the_pool", || {
        let (a, b) = (UdpSocket::bind("127.0.0.1:0").unwrap(), UdpSocket::bind("127.0.0.1:0").unwrap());
        let to = b.local_addr().unwrap();
        let before = io::async_completions();
        let mut ops = 0;
        for d in [&b"one"[..], b"two", b"three", b"0123456789"] {
            let (sent, _) = task::block_on(a.send_to(d.to_vec(), to));
            assert_eq!(sent.unwrap(), d.len());
            ops += 1;
        }
        for want in [&b"one"[..], b"two", b"three"] {
            let (got, buf) = task::block_on(b.recv_from(vec![0u8; 8]));
            assert_eq!(&buf[..got.unwrap().0], want);
            ops += 1;
        }
        let (got, buf) = task::block_on(b.recv_from(vec![0u8; 4]));
        assert_eq!(got.unwrap_err().raw_os_error(), Some(WSAEMSGSIZE));
        assert_eq!(buf, b"0123");
        ops += 1;
        assert_eq!(io::async_completions() - before, ops, "a datagram operation completed inline");
    });
}

#[test]
fn send_to_an_address_of_the_other_family_is_invalid_input() {
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to: SocketAddr = "[::1]:9".parse().unwrap();
    let (sent, buf) = task::block_on(a.send_to(b"x".to_vec(), to));
    assert_eq!(sent.unwrap_err().kind(), ErrorKind::InvalidInput);
    assert_eq!(buf, b"x");
    let (sent, _) = task::block_on(a.send_to(b"x".to_vec(), &[][..] as &[SocketAddr]));
    assert_eq!(sent.unwrap_err().kind(), ErrorKind::InvalidInput);
}

#[test]
fn ipv6_loopback() {
    let Ok(listener) = TcpListener::bind("[::1]:0") else {
        panic!("IPv6 loopback is expected to be available");
    };
    let (client, server) = task::block_on(pair(&listener));
    assert!(client.peer_addr().unwrap().is_ipv6());
    let (sent, _) = task::block_on(client.write_all(b"six".to_vec()));
    sent.unwrap();
    assert_eq!(task::block_on(read_exactly(&server, 3)), b"six");
}

/// A socket created without `WSA_FLAG_OVERLAPPED`, wrapped by std, is
/// refused rather than bound (its file object has synchronous I/O).
#[test]
fn a_socket_not_created_overlapped_is_refused() {
    use std::os::windows::io::{FromRawSocket, OwnedSocket};
    use windows_sys::Win32::Networking::WinSock::{AF_INET, INVALID_SOCKET, IPPROTO_TCP, SOCK_STREAM, WSASocketW};
    // Winsock is started by std for us.
    drop(std::net::UdpSocket::bind("127.0.0.1:0").unwrap());
    // SAFETY: no pointers; the result is checked.
    let s = unsafe { WSASocketW(AF_INET.into(), SOCK_STREAM, IPPROTO_TCP, core::ptr::null(), 0, 0) };
    assert_ne!(s, INVALID_SOCKET);
    // SAFETY: a new socket owned by nothing else.
    let owned = unsafe { OwnedSocket::from_raw_socket(s as u64) };
    let e = TcpStream::from_std(std::net::TcpStream::from(owned)).unwrap_err();
    // The crate's own refusal, not a failure of the binding itself.
    assert_eq!((e.kind(), e.raw_os_error()), (ErrorKind::InvalidInput, None), "{e:?}");
    assert!(e.to_string().contains("overlapped"), "{e}");
}

/// `into_std` runs the stream down, then ends its association with the
/// pool's port (`FileReplaceCompletionInformation`), which Wine 8 does not
/// implement: there the conversion fails and gives back the stream, run
/// down and still usable; on Windows (8.1 and later) the std stream works
/// with blocking calls. Pinned per platform. Source for Windows: Microsoft's
/// `FILE_COMPLETION_INFORMATION` ("To remove an existing completion port for
/// a file handle, Port is set to NULL"); not measured.
#[test]
fn into_std_gives_a_std_stream_or_the_stream_back() {
    use std::io::{Read, Write};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (client, server) = task::block_on(pair(&listener));
    // A forgotten read is left outstanding: the conversion must cancel it.
    let mut read = server.read(vec![0u8; 16]);
    let (_woken, w) = counting_waker();
    assert!(poll_once(&mut read, &w).is_pending(), "nothing was sent");
    std::mem::forget(read);
    match server.into_std() {
        Ok(mut std_server) => {
            assert!(!support::on_wine(), "Wine 8 was expected to refuse FileReplaceCompletionInformation");
            let (sent, _) = task::block_on(client.write_all(b"std".to_vec()));
            sent.unwrap();
            let mut got = [0u8; 3];
            std_server.read_exact(&mut got).unwrap();
            assert_eq!(&got, b"std");
            std_server.write_all(b"back").unwrap();
            assert_eq!(task::block_on(read_exactly(&client, 4)), b"back");
        }
        Err(e) => {
            assert!(support::on_wine(), "into_std failed: {e}");
            assert_eq!(e.error().raw_os_error(), Some(WINE_NOT_IMPLEMENTED), "{e:?}");
            let server = e.into_inner();
            assert_eq!(server.outstanding(), 0, "the forgotten read was not run down");
            let (sent, _) = task::block_on(client.write_all(b"still".to_vec()));
            sent.unwrap();
            assert_eq!(task::block_on(read_exactly(&server, 5)), b"still");
        }
    }
}

/// The listener and the UDP socket convert by the same path.
#[test]
fn into_std_of_a_listener_and_a_udp_socket() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let udp_addr = udp.local_addr().unwrap();
    match (listener.into_std(), udp.into_std()) {
        (Ok(l), Ok(u)) => {
            assert!(!support::on_wine(), "Wine 8 was expected to refuse FileReplaceCompletionInformation");
            let _c = std::net::TcpStream::connect(addr).unwrap();
            assert_eq!(l.accept().unwrap().0.local_addr().unwrap(), addr);
            let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            peer.send_to(b"d", udp_addr).unwrap();
            let mut b = [0u8; 4];
            assert_eq!(u.recv_from(&mut b).unwrap(), (1, peer.local_addr().unwrap()));
        }
        (Err(l), Err(u)) => {
            assert!(support::on_wine(), "into_std failed: {l} / {u}");
            let (l, u) = (l.into_inner(), u.into_inner());
            assert_eq!(l.local_addr().unwrap(), addr);
            let (client, server) = task::block_on(pair(&l));
            drop((client, server));
            let (sent, _) = task::block_on(u.send_to(b"d".to_vec(), udp_addr));
            assert_eq!(sent.unwrap(), 1);
            let (got, _) = task::block_on(u.recv_from(vec![0u8; 4]));
            assert_eq!(got.unwrap(), (1, udp_addr));
        }
        (l, u) => panic!("the two conversions disagree: {:?} / {:?}", l.map(|_| ()), u.map(|_| ())),
    }
}

/// Dropping 2,000 streams with a read in flight waits for no completion.
/// With every thread of their pool (a private pool of four) held busy, so
/// that no completion can be delivered, the drops return having handed
/// nothing to another thread: each stream is left to the completion of its
/// cancelled read. Once the pool is free every stream closes (its peer
/// reads end of file) within the bound, from that completion's thread (no
/// hand-off then either), and a timer on that pool fires meanwhile.
#[test]
fn dropping_streams_with_reads_in_flight_parks_no_thread() {
    use std::io::Read;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    use std::sync::{Condvar, Mutex};
    use windows_threadpool::{CallbackEnviron, Pool, Timer, Work};
    const STREAMS: usize = 2_000;
    const THREADS: u32 = 4;
    support::alone("net::dropping_streams_with_reads_in_flight_parks_no_thread", || {
        // The first spawn turns in-place polling on, whose sites the last
        // completions close their streams from.
        task::block_on(task::spawn(async {})).unwrap();
        let pool = Pool::new().unwrap();
        pool.set_max_threads(THREADS).unwrap();
        let env = CallbackEnviron::new().with_pool(&pool);
        let listener = TcpListener::bind_in("127.0.0.1:0", &env).unwrap();
        let addr = listener.local_addr().unwrap();
        let (_woken, w) = counting_waker();
        let (mut ours, mut peers) = (Vec::with_capacity(STREAMS), Vec::with_capacity(STREAMS));
        for _ in 0..STREAMS {
            let peer = std::net::TcpStream::connect(addr).unwrap();
            peer.set_read_timeout(Some(PATIENCE)).unwrap();
            let (stream, _) = task::block_on(listener.accept()).unwrap();
            let mut read = stream.read(vec![0u8; 16]);
            assert!(poll_once(&mut read, &w).is_pending(), "nothing was sent");
            std::mem::forget(read); // the read stays in flight
            ours.push(stream);
            peers.push(peer);
        }
        // Every thread of the pool held, so no completion can be delivered.
        let held = Arc::new((Mutex::new((0u32, false)), Condvar::new()));
        let h = Arc::clone(&held);
        let hold = Work::new_in(
            move |_| {
                let mut g = h.0.lock().unwrap();
                g.0 += 1;
                h.1.notify_all();
                drop(h.1.wait_while(g, |g| !g.1).unwrap());
            },
            &env,
        )
        .unwrap();
        // Released however the test ends, before `hold` drains.
        let release = Release(Arc::clone(&held));
        // One at a time: Wine adds a thread only when a submission finds
        // every thread busy.
        for n in 1..=THREADS {
            hold.submit();
            let g = held.0.lock().unwrap();
            let (g, timeout) = held.1.wait_timeout_while(g, PATIENCE, |g| g.0 < n).unwrap();
            assert!(!timeout.timed_out(), "only {} of the pool's threads were held", g.0);
        }
        let fired = Arc::new(AtomicBool::new(false));
        let f = Arc::clone(&fired);
        let timer = Timer::new_in(move |_| f.store(true, SeqCst), &env).unwrap();
        timer.arm(Duration::from_millis(1));

        let handoffs = windows_threadpool::handoffs();
        drop(ours);
        assert_eq!(windows_threadpool::handoffs() - handoffs, 0, "a drop handed its rundown to another thread");

        drop(release);
        let deadline = Instant::now() + PATIENCE;
        let closed = AtomicUsize::new(0);
        for mut peer in peers {
            let mut buf = [0u8; 16];
            match peer.read(&mut buf) {
                Ok(0) => closed.fetch_add(1, SeqCst),
                Ok(n) => panic!("{n} bytes from a stream nobody wrote to"),
                Err(e) if e.kind() == ErrorKind::ConnectionReset => closed.fetch_add(1, SeqCst),
                Err(e) => panic!("a dropped stream was not closed: {e:?}"),
            };
        }
        assert!(Instant::now() < deadline, "the streams took over {PATIENCE:?} to close");
        assert_eq!(closed.into_inner(), STREAMS);
        // Each last completion closed its stream on its own thread.
        assert_eq!(
            windows_threadpool::handoffs() - handoffs,
            0,
            "a last completion handed its close to another thread"
        );
        while !fired.load(SeqCst) {
            assert!(Instant::now() < deadline, "the timer on the pool never fired");
            std::thread::yield_now();
        }
        drop(hold);
    });
}

/// Lets the callbacks held on `.0` go when dropped.
struct Release(Arc<(std::sync::Mutex<(u32, bool)>, std::sync::Condvar)>);

impl Drop for Release {
    fn drop(&mut self) {
        self.0.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).1 = true;
        self.0.1.notify_all();
    }
}

/// A task reading from a peer that never stops sending does not keep the
/// only thread of its pool: its reads find data buffered and complete
/// inline, but the task's budget makes it yield, so a second task on that
/// pool, ticking a timer, makes progress while the flood goes on.
///
/// The flood is one by construction: the reader starts only once the
/// writer has filled the connection (a non-blocking write would block), and
/// reads [`FLOOD_READ`] bytes at a time, so what is buffered then covers
/// more than one budget of reads however the threads are scheduled.
#[test]
fn a_flooding_peer_does_not_hold_the_pool_thread() {
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use windows_threadpool::{CallbackEnviron, Pool};
    /// A read's size: 128 of them (a budget) are 8 KiB, well under what a
    /// full loopback connection holds.
    const FLOOD_READ: usize = 64;
    support::alone("net::a_flooding_peer_does_not_hold_the_pool_thread", || {
        let pool = Pool::new().unwrap();
        pool.set_max_threads(1).unwrap();
        let env = CallbackEnviron::new().with_pool(&pool);
        let listener = TcpListener::bind_in("127.0.0.1:0", &env).unwrap();
        let addr = listener.local_addr().unwrap();
        let (flooding, stop) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicBool::new(false)));
        let (f, s) = (Arc::clone(&flooding), Arc::clone(&stop));
        let (full_tx, full_rx) = std::sync::mpsc::channel();
        let writer = std::thread::spawn(move || {
            let mut peer = std::net::TcpStream::connect(addr).unwrap();
            let chunk = vec![1u8; 1 << 20];
            let deadline = Instant::now() + PATIENCE;
            peer.set_nonblocking(true).unwrap();
            loop {
                match peer.write(&chunk) {
                    Ok(_) => assert!(Instant::now() < deadline, "the connection never filled"),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) => panic!("filling the connection: {e:?}"),
                }
            }
            peer.set_nonblocking(false).unwrap();
            full_tx.send(()).unwrap();
            while !s.load(SeqCst) && Instant::now() < deadline && peer.write_all(&chunk).is_ok() {}
            f.store(false, SeqCst);
        });
        let (server, _) = task::block_on(listener.accept()).unwrap();
        full_rx.recv_timeout(PATIENCE).expect("the writer never filled the connection");
        let s = Arc::clone(&stop);
        let reader = task::spawn_in(
            async move {
                let mut buf = vec![0u8; FLOOD_READ];
                let mut total = 0usize;
                // Ends with the test rather than drain the buffered flood.
                while !s.load(SeqCst) {
                    let (n, b) = server.read(buf).await;
                    buf = b;
                    match n {
                        Ok(0) | Err(_) => break,
                        Ok(n) => total += n,
                    }
                }
                total
            },
            &env,
        );
        let f = Arc::clone(&flooding);
        let ticker = task::spawn_in(
            async move {
                for _ in 0..5 {
                    time::sleep(Duration::from_millis(1)).await;
                }
                f.load(SeqCst)
            },
            &env,
        );
        let ticked_during_the_flood = task::block_on(ticker).unwrap();
        stop.store(true, SeqCst);
        // The reader first: its stream's close ends a write the writer may
        // be blocked in.
        let read = task::block_on(reader).unwrap();
        writer.join().unwrap();
        assert!(ticked_during_the_flood, "the ticker ran only once the flood was over ({read} bytes read)");
        assert!(task::budget_yields() > 0, "no read yielded for the budget");
    });
}

/// A read's buffer that, dropped in its completion's callback, waits there
/// until the stream has been dropped elsewhere, recording whether that
/// wait ran out.
struct WaitsForTheDrop {
    bytes: [u8; 16],
    /// (0: not dropped, 1: dropping, 2: the stream is gone), and whether
    /// the wait ran out.
    state: Arc<(std::sync::Mutex<(u8, bool)>, std::sync::Condvar)>,
}

impl AsMut<[u8]> for WaitsForTheDrop {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }
}

impl Drop for WaitsForTheDrop {
    fn drop(&mut self) {
        let (lock, cv) = &*self.state;
        let mut g = lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        g.0 = 1;
        cv.notify_all();
        let (mut g, waited) = cv.wait_timeout_while(g, PATIENCE, |g| g.0 != 2).unwrap();
        g.1 = waited.timed_out();
    }
}

/// An operation counts as in flight until what its future left behind has
/// dropped in the completion's callback: a stream dropped meanwhile (from
/// a thread that callback waits for) does not wait for that callback.
#[test]
fn a_drop_does_not_wait_for_user_code_in_the_completion() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (_client, server) = task::block_on(pair(&listener));
    let state = Arc::new((std::sync::Mutex::new((0u8, false)), std::sync::Condvar::new()));
    let mut read = server.read(WaitsForTheDrop { bytes: [0; 16], state: Arc::clone(&state) });
    let (_woken, w) = counting_waker();
    assert!(poll_once(&mut read, &w).is_pending(), "nothing was sent");
    drop(read); // cancelled: the buffer drops in the cancelled completion
    let (lock, cv) = &*state;
    let g = lock.lock().unwrap();
    let (g, waited) = cv.wait_timeout_while(g, PATIENCE, |g| g.0 == 0).unwrap();
    assert!(!waited.timed_out(), "the cancelled read never completed");
    drop(g);
    drop(server); // while the completion's callback runs the buffer's drop
    lock.lock().unwrap().0 = 2;
    cv.notify_all();
    let deadline = Instant::now() + PATIENCE;
    while Arc::strong_count(&state) > 1 {
        assert!(Instant::now() < deadline, "the buffer was never dropped");
        std::thread::yield_now();
    }
    assert!(!lock.lock().unwrap().1, "the stream's drop waited for the callback running the buffer's drop");
}

/// An executor run inside a crate task's poll (blocking there) is not
/// starved by that poll's budget: the futures it polls have its wakers, not
/// the task's, so they run without a budget, and 300 reads of buffered
/// data (more than one budget) all complete.
#[test]
fn an_executor_nested_in_a_task_poll_runs_without_its_budget() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (client, server) = task::block_on(pair(&listener));
    let (sent, _) = task::block_on(client.write_all(vec![7u8; 300]));
    sent.unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let _detached = task::spawn(async move {
        let read = futures::executor::block_on(async {
            let mut buf = vec![0u8; 1];
            let mut got = 0;
            while got < 300 {
                let (n, b) = server.read(buf).await;
                buf = b;
                got += n.unwrap();
            }
            got
        });
        let _ = tx.send(read);
    });
    assert_eq!(rx.recv_timeout(PATIENCE).expect("the nested executor never finished its reads"), 300);
}

/// A peek waits for data as a read does, copies what is there without
/// taking it (a second peek, ready at its first poll, sees it again, and
/// the next read gets it), and sees end of file once nothing is left.
#[test]
fn peek_leaves_the_bytes_for_the_next_read() {
    on_each_executor(|| async {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (client, server) = pair(&listener).await;
        let (_woken, w) = counting_waker();
        let mut waiting = server.peek(vec![0u8; 16]);
        assert!(poll_once(&mut waiting, &w).is_pending(), "a peek on an idle connection");
        let (sent, _) = client.write_all(b"hello".to_vec()).await;
        sent.unwrap();
        let (n, buf) = waiting.await;
        let n = n.unwrap();
        assert!(n > 0 && b"hello".starts_with(&buf[..n]), "{:?}", &buf[..n]);
        let mut again = server.peek(vec![0u8; 16]);
        match poll_once(&mut again, &w) {
            Poll::Ready((m, buf)) => assert!(m.unwrap() >= n && b"hello".starts_with(&buf[..n])),
            Poll::Pending => panic!("a peek of buffered data was not ready at its first poll"),
        }
        assert_eq!(read_exactly(&server, 5).await, b"hello", "the peeked bytes were not left for the read");
        let mut next = server.peek(vec![0u8; 16]);
        assert!(poll_once(&mut next, &w).is_pending(), "a peek after every byte was read");
        client.shutdown(Shutdown::Write).unwrap();
        let (n, _) = next.await;
        assert_eq!(n.unwrap(), 0, "end of file");
    });
}

/// `SO_LINGER` is set and read back in whole seconds, a fraction rounded
/// up (so a nonzero linger never becomes zero's reset) and a duration past
/// `u16::MAX` seconds saturated.
#[test]
fn linger_is_set_and_read_back() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (client, _server) = task::block_on(pair(&listener));
    assert_eq!(client.linger().unwrap(), None, "the default");
    let secs = Duration::from_secs;
    for (set, read) in [
        (secs(3), secs(3)),
        (Duration::from_millis(1), secs(1)),
        (Duration::from_millis(2_500), secs(3)),
        (secs(1 << 20), secs(u16::MAX.into())),
        (Duration::MAX, secs(u16::MAX.into())),
        (Duration::ZERO, Duration::ZERO),
    ] {
        client.set_linger(Some(set)).unwrap();
        assert_eq!(client.linger().unwrap(), Some(read), "set {set:?}");
    }
    client.set_linger(None).unwrap();
    assert_eq!(client.linger().unwrap(), None);
}

/// What Wine 8 answers for the keep-alive times (`TCP_KEEPIDLE`,
/// `TCP_KEEPINTVL`), which it does not implement: `WSAENOPROTOOPT`.
const WSAENOPROTOOPT: i32 = 10042;

/// Keep-alive is off by default, turned on with its times, which read back
/// (Windows 10 1709 and later; Wine 8 refuses to read them, see
/// `docs/wine.md`), and turned off; a zero time is refused.
#[test]
fn keepalive_is_set_and_read_back() {
    use windows_threadpool::net::Keepalive;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (client, _server) = task::block_on(pair(&listener));
    assert!(!client.keepalive().unwrap(), "on by default");
    for k in [
        Keepalive::new(Duration::from_secs(7), Duration::from_secs(3)),
        Keepalive::new(Duration::from_secs(600), Duration::from_secs(75)),
    ] {
        client.set_keepalive(Some(k)).unwrap();
        assert!(client.keepalive().unwrap(), "{k:?} did not turn it on");
        match (client.keepalive_times(), support::wine_version()) {
            (Ok(times), None) => assert_eq!(times, k),
            (Err(e), Some((8, _))) => assert_eq!(e.raw_os_error(), Some(WSAENOPROTOOPT), "{e:?}"),
            // Not measured under later Wines: the times, or Wine 8's refusal.
            (Ok(times), Some((major, _))) if major > 8 => assert_eq!(times, k),
            (Err(e), Some((major, _))) if major > 8 => assert_eq!(e.raw_os_error(), Some(WSAENOPROTOOPT), "{e:?}"),
            (times, wine) => panic!("keep-alive times {times:?} under Wine {wine:?}"),
        }
    }
    client.set_keepalive(None).unwrap();
    assert!(!client.keepalive().unwrap(), "still on after it was turned off");
    for zero in
        [Keepalive::new(Duration::ZERO, Duration::from_secs(1)), Keepalive::new(Duration::from_secs(1), Duration::ZERO)]
    {
        let e = client.set_keepalive(Some(zero)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{zero:?}");
    }
}

/// Options set while a read is in flight leave it alone: the synchronous
/// calls (`WSAIoctl`, `setsockopt`, `getsockopt`) complete on their own,
/// and the read completes with the data sent after them.
#[test]
fn options_set_with_a_read_in_flight_leave_it_alone() {
    use windows_threadpool::net::Keepalive;
    on_each_executor(|| async {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (client, server) = pair(&listener).await;
        let (_woken, w) = counting_waker();
        let mut read = server.read(vec![0u8; 16]);
        assert!(poll_once(&mut read, &w).is_pending(), "nothing was sent");
        let k = Keepalive::new(Duration::from_secs(30), Duration::from_secs(5));
        server.set_keepalive(Some(k)).unwrap();
        assert!(server.keepalive().unwrap());
        server.set_linger(Some(Duration::ZERO)).unwrap();
        server.set_linger(None).unwrap();
        server.set_nodelay(true).unwrap();
        assert_eq!(server.outstanding(), 1);
        let (sent, _) = client.write_all(b"after".to_vec()).await;
        sent.unwrap();
        let (n, buf) = read.await;
        assert_eq!(&buf[..n.unwrap()], b"after");
    });
}
