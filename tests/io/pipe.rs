//! Named pipes: `pipe::PipeListener` and `pipe::PipeStream`, under the
//! executors, with many clients, busy instances, peers that leave, accepts
//! that are dropped, message mode, and a client no one here wrote (`cmd`).

use std::os::windows::io::AsRawHandle as _;
use std::task::Poll;
use std::time::Duration;

use windows_sys::Win32::Foundation::{ERROR_MORE_DATA, ERROR_SEM_TIMEOUT};
use windows_threadpool::pipe::{PipeListener, PipeOptions, PipeStream};
use windows_threadpool::{io, task};

use crate::counts::handle_count;
use crate::executors::{counting_waker, on_each_executor, poll_once};

/// A connected pair: the server's stream and the client's.
async fn pair(listener: &PipeListener, name: &str) -> (PipeStream, PipeStream) {
    let (server, client) = futures::join!(listener.accept(), PipeStream::connect(name));
    (server.unwrap(), client.unwrap())
}

async fn read_to_end(stream: &PipeStream) -> Vec<u8> {
    let (mut out, mut buf) = (Vec::new(), vec![0u8; 4096]);
    loop {
        let (n, back) = stream.read(buf).await;
        buf = back;
        match n.unwrap() {
            0 => return out,
            n => out.extend_from_slice(&buf[..n]),
        }
    }
}

#[test]
fn an_echo_works_under_every_executor() {
    on_each_executor(|| async {
        let name = crate::support::unique_pipe_name();
        let listener = PipeListener::bind(&name).unwrap();
        let (server, client) = pair(&listener, &name).await;
        assert_eq!(server.client_process_id().unwrap(), std::process::id());
        assert_eq!(client.server_process_id().unwrap(), std::process::id());
        let (sent, _) = client.write_all(b"ping".to_vec()).await;
        sent.unwrap();
        let (n, buf) = server.read(vec![0u8; 16]).await;
        let (sent, _) = server.write_all(buf[..n.unwrap()].to_vec()).await;
        sent.unwrap();
        let (n, buf) = client.read(vec![0u8; 16]).await;
        assert_eq!(&buf[..n.unwrap()], b"ping");
    });
}

/// 64 clients connect at once, each to its own instance, and each gets its
/// own bytes back.
#[test]
fn sixty_four_clients_are_served_at_once() {
    const CLIENTS: usize = 64;
    let name = crate::support::unique_pipe_name();
    let listener = PipeListener::bind(&name).unwrap();
    let server = task::spawn(async move {
        let mut handlers = Vec::new();
        for _ in 0..CLIENTS {
            let stream = listener.accept().await.unwrap();
            handlers.push(task::spawn(async move {
                let (n, buf) = stream.read(vec![0u8; 64]).await;
                let (sent, _) = stream.write_all(buf[..n.unwrap()].to_vec()).await;
                sent.unwrap();
            }));
        }
        for h in handlers {
            h.await.unwrap();
        }
    });
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let name = name.clone();
            task::spawn(async move {
                let client = PipeStream::connect(&name).await.unwrap();
                let message = format!("client {i}").into_bytes();
                let (sent, message) = client.write_all(message).await;
                sent.unwrap();
                let (n, buf) = client.read(vec![0u8; 64]).await;
                assert_eq!(&buf[..n.unwrap()], &message[..]);
            })
        })
        .collect();
    task::block_on(async {
        for c in clients {
            c.await.unwrap();
        }
        server.await.unwrap();
    });
}

/// At the instance limit a client waits for an instance: `connect_timeout`
/// of zero fails at once with `ERROR_SEM_TIMEOUT` (`TimedOut`), and a
/// patient client connects once the busy instance is dropped.
#[test]
fn a_client_waits_while_every_instance_is_busy() {
    let name = crate::support::unique_pipe_name();
    let listener = PipeOptions::new().max_instances(1).bind(&name).unwrap();
    task::block_on(async {
        let (server, client) = pair(&listener, &name).await;
        let e = PipeStream::connect_timeout(&name, Duration::ZERO).await.unwrap_err();
        assert_eq!(e.raw_os_error(), Some(ERROR_SEM_TIMEOUT as i32));
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
        let patient = PipeStream::connect_timeout(&name, Duration::from_secs(30));
        let accept = listener.accept();
        let freed = async move {
            windows_threadpool::time::sleep(Duration::from_millis(20)).await;
            drop((server, client)); // the conversation ends: its instance is free
        };
        let (client, accepted, ()) = futures::join!(patient, accept, freed);
        let (client, accepted) = (client.unwrap(), accepted.unwrap());
        let (sent, _) = client.write_all(b"late".to_vec()).await;
        sent.unwrap();
        let (n, buf) = accepted.read(vec![0u8; 8]).await;
        assert_eq!(&buf[..n.unwrap()], b"late");
    });
}

#[test]
fn a_name_without_a_server_is_not_found() {
    let e = task::block_on(PipeStream::connect(crate::support::unique_pipe_name())).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn a_second_listener_of_a_name_is_addr_in_use() {
    let name = crate::support::unique_pipe_name();
    let _first = PipeListener::bind(&name).unwrap();
    let e = PipeListener::bind(&name).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
    // And while every instance of the name is connected.
    let _busy = task::block_on(async {
        let busy_name = crate::support::unique_pipe_name();
        let listener = PipeOptions::new().max_instances(1).bind(&busy_name).unwrap();
        let connected = pair(&listener, &busy_name).await;
        let e = PipeListener::bind(&busy_name).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
        (listener, connected)
    });
}

#[test]
fn a_name_with_a_nul_is_invalid_input() {
    let e = PipeListener::bind("\\\\.\\pipe\\a\0b").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    let e = task::block_on(PipeStream::connect("\\\\.\\pipe\\a\0b")).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
}

/// A peer that closes ends a read in flight with `Ok(0)`, after the data it
/// wrote first, and a write after it with `BrokenPipe`; neither hangs.
#[test]
fn a_peer_that_leaves_ends_reads_and_writes() {
    on_each_executor(|| async {
        let name = crate::support::unique_pipe_name();
        let listener = PipeListener::bind(&name).unwrap();
        let (server, client) = pair(&listener, &name).await;
        let (sent, _) = client.write_all(b"last words".to_vec()).await;
        sent.unwrap();
        drop(client);
        assert_eq!(read_to_end(&server).await, b"last words");
        let (sent, _) = server.write_all(b"anyone?".to_vec()).await;
        assert_eq!(sent.unwrap_err().kind(), std::io::ErrorKind::BrokenPipe);

        // A read already in flight when the server leaves.
        let (server, client) = pair(&listener, &name).await;
        let read = client.read(vec![0u8; 16]);
        let leave = async move {
            windows_threadpool::time::sleep(Duration::from_millis(10)).await;
            drop(server);
        };
        let ((n, _), ()) = futures::join!(read, leave);
        assert_eq!(n.unwrap(), 0);
    });
}

/// An accept dropped while it waits cancels its wait; the listener goes on
/// serving, and nothing of the dropped accept stays open.
#[test]
fn an_accept_dropped_while_it_waits_leaves_the_listener_serving() {
    let name = crate::support::unique_pipe_name();
    let listener = PipeListener::bind(&name).unwrap();
    task::block_on(async {
        for _ in 0..3 {
            let mut accept = listener.accept();
            assert!(futures::poll!(&mut accept).is_pending(), "no client yet");
            drop(accept);
        }
        let (server, client) = pair(&listener, &name).await;
        let (sent, _) = client.write_all(b"still here".to_vec()).await;
        sent.unwrap();
        let (n, buf) = server.read(vec![0u8; 16]).await;
        assert_eq!(&buf[..n.unwrap()], b"still here");

        // A client that connects while the accept waits, just before the
        // accept is dropped, is the next accept's: not lost on an instance
        // closed under it.
        let mut accept = listener.accept();
        assert!(futures::poll!(&mut accept).is_pending(), "no client yet");
        let client = PipeStream::connect(&name).await.unwrap();
        drop(accept);
        let limit = crate::support::PATIENCE;
        let server = windows_threadpool::time::timeout(limit, listener.accept()).await.unwrap().unwrap();
        let (sent, _) = client.write_all(b"not lost".to_vec()).await;
        sent.unwrap();
        let (n, buf) = server.read(vec![0u8; 16]).await;
        assert_eq!(&buf[..n.unwrap()], b"not lost");
    });
}

/// A client that opened the listening instance before any accept is
/// returned by the next one at once.
#[test]
fn a_client_that_came_before_the_accept_is_accepted() {
    let name = crate::support::unique_pipe_name();
    let listener = PipeListener::bind(&name).unwrap();
    task::block_on(async {
        let client = PipeStream::connect(&name).await.unwrap();
        let server = listener.accept().await.unwrap();
        let (sent, _) = server.write_all(b"early".to_vec()).await;
        sent.unwrap();
        let (n, buf) = client.read(vec![0u8; 16]).await;
        assert_eq!(&buf[..n.unwrap()], b"early");
    });
}

/// Between two accepts the name always has a listening instance: a client
/// that does not wait at all finds one after each accept.
#[test]
fn an_instance_listens_between_accepts() {
    let name = crate::support::unique_pipe_name();
    let listener = PipeListener::bind(&name).unwrap();
    task::block_on(async {
        let mut streams = Vec::new();
        for i in 0..5u8 {
            let client = PipeStream::connect_timeout(&name, Duration::ZERO).await.unwrap();
            let server = listener.accept().await.unwrap();
            let (sent, _) = client.write_all(vec![i]).await;
            sent.unwrap();
            let (n, buf) = server.read(vec![0u8; 4]).await;
            assert_eq!(&buf[..n.unwrap()], [i]);
            streams.push((client, server));
        }
    });
}

/// A client that came and went before its accept ends no accept: the
/// accept goes on to the next client.
#[test]
fn a_client_that_came_and_went_ends_no_accept() {
    let name = crate::support::unique_pipe_name();
    let listener = PipeListener::bind(&name).unwrap();
    task::block_on(async {
        drop(PipeStream::connect(&name).await.unwrap()); // onto the listening instance, and gone
        let (server, client) = pair(&listener, &name).await;
        let (sent, _) = client.write_all(b"second".to_vec()).await;
        sent.unwrap();
        let (n, buf) = server.read(vec![0u8; 16]).await;
        assert_eq!(&buf[..n.unwrap()], b"second");
    });
}

/// In message mode a read returns one message; one longer than the buffer
/// fills it and fails with `ERROR_MORE_DATA`, and the next read returns the
/// rest. The client reads in message mode too.
#[test]
fn message_mode_reads_one_message_at_a_time() {
    let name = crate::support::unique_pipe_name();
    let listener = PipeOptions::new().message_mode(true).bind(&name).unwrap();
    task::block_on(async {
        let (server, client) = pair(&listener, &name).await;
        for m in [&b"hello"[..], b"world!!"] {
            let (sent, _) = client.write(m.to_vec()).await;
            assert_eq!(sent.unwrap(), m.len());
        }
        let (n, buf) = server.read(vec![0u8; 64]).await;
        assert_eq!(&buf[..n.unwrap()], b"hello", "one message, not both");
        let (n, buf) = server.read(vec![0u8; 3]).await;
        assert_eq!(n.unwrap_err().raw_os_error(), Some(ERROR_MORE_DATA as i32));
        assert_eq!(&buf, b"wor");
        let (n, buf) = server.read(vec![0u8; 64]).await;
        assert_eq!(&buf[..n.unwrap()], b"ld!!");
        // And the other way, into the client's end.
        let (sent, _) = server.write(b"reply".to_vec()).await;
        sent.unwrap();
        let (n, buf) = client.read(vec![0u8; 2]).await;
        assert_eq!(n.unwrap_err().raw_os_error(), Some(ERROR_MORE_DATA as i32));
        assert_eq!(&buf, b"re");
    });
}

/// `FILE_SKIP_COMPLETION_PORT_ON_SUCCESS | FILE_SKIP_SET_EVENT_ON_HANDLE`.
const SKIP_ON_SUCCESS: u32 = 1 | 2;

/// `h`'s completion notification modes (`FileIoCompletionNotificationInformation`:
/// what `SetFileCompletionNotificationModes` set).
fn completion_modes(h: std::os::windows::io::RawHandle) -> u32 {
    use windows_sys::Wdk::Storage::FileSystem::FileIoCompletionNotificationInformation;
    // SAFETY: the class fills a FILE_IO_COMPLETION_NOTIFICATION_INFORMATION, one u32.
    unsafe { crate::file_information(h, FileIoCompletionNotificationInformation, 0u32) }
}

/// Writes `abc` with `write`, then reads it a byte at a time with `read`:
/// every operation ready at its first poll.
fn completes_at_once<W, R>(write: impl Fn(Vec<u8>) -> W, read: impl Fn(Vec<u8>) -> R)
where
    W: std::future::Future<Output = (std::io::Result<usize>, Vec<u8>)> + Unpin,
    R: std::future::Future<Output = (std::io::Result<usize>, Vec<u8>)> + Unpin,
{
    let (_woken, w) = counting_waker();
    match poll_once(&mut write(b"abc".to_vec()), &w) {
        Poll::Ready((n, _)) => assert_eq!(n.unwrap(), 3),
        Poll::Pending => panic!("a write the pipe had room for was not ready at its first poll"),
    }
    for want in *b"abc" {
        match poll_once(&mut read(vec![0u8; 1]), &w) {
            Poll::Ready((n, buf)) => assert_eq!((n.unwrap(), buf[0]), (1, want)),
            Poll::Pending => panic!("a read of data the pipe held was not ready at its first poll"),
        }
    }
}

/// Drops `ends` on another thread, which must return: an inline
/// completion whose start were not balanced would leave the drain waiting
/// forever.
fn drop_returns(ends: impl Send + 'static) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(ends);
        let _ = tx.send(());
    });
    rx.recv_timeout(crate::support::PATIENCE).expect("dropping the ends never returned");
}

/// In byte mode, a read of data the pipe holds and a write the pipe has
/// room for complete inline (the instance has skip-on-success): ready at
/// their first poll, with no completion delivered, on both ends.
#[test]
fn byte_mode_operations_that_complete_at_once_complete_inline() {
    crate::support::alone("pipe::byte_mode_operations_that_complete_at_once_complete_inline", || {
        let name = crate::support::unique_pipe_name();
        let listener = PipeListener::bind(&name).unwrap();
        let (server, client) = task::block_on(pair(&listener, &name));
        for end in [&server, &client] {
            assert_eq!(completion_modes(end.as_raw_handle()), SKIP_ON_SUCCESS, "a byte-mode end's modes");
        }
        let before = io::async_completions();
        for (from, to) in [(&client, &server), (&server, &client)] {
            completes_at_once(|b| from.write(b), |b| to.read(b));
        }
        assert_eq!(io::async_completions(), before, "an operation that completed at once delivered a completion");
        drop_returns((server, client, listener));
    });
}

/// `AsyncIo` sets skip-on-success itself as it binds a handle: over
/// `io::pipe_pair`, operations that complete at once complete inline, as a
/// `PipeStream`'s do.
#[test]
fn async_io_over_a_pipe_pair_completes_inline() {
    crate::support::alone("pipe::async_io_over_a_pipe_pair_completes_inline", || {
        let (a, b) = io::pipe_pair().unwrap();
        let (a, b) = (io::AsyncIo::new(a).unwrap(), io::AsyncIo::new(b).unwrap());
        for end in [&a, &b] {
            assert_eq!(completion_modes(end.as_raw_handle()), SKIP_ON_SUCCESS, "an AsyncIo's modes");
        }
        let before = io::async_completions();
        for (from, to) in [(&a, &b), (&b, &a)] {
            completes_at_once(|buf| from.write(buf), |buf| to.read(buf));
        }
        assert_eq!(io::async_completions(), before, "an operation that completed at once delivered a completion");
        drop_returns((a, b));
    });
}

/// ... but not on a message-type pipe, whose operations stay on the pool's
/// path (as a message-mode `PipeStream`'s).
#[test]
fn async_io_over_a_message_pipe_keeps_every_completion() {
    use windows_sys::Win32::Storage::FileSystem::{FILE_FLAG_OVERLAPPED, PIPE_ACCESS_DUPLEX};
    use windows_sys::Win32::System::Pipes::{CreateNamedPipeW, PIPE_READMODE_MESSAGE, PIPE_TYPE_MESSAGE};
    let name: Vec<u16> = crate::support::unique_pipe_name().encode_utf16().chain([0]).collect();
    // SAFETY: `name` is NUL-terminated; no security attributes.
    let h = unsafe {
        CreateNamedPipeW(
            name.as_ptr(),
            PIPE_ACCESS_DUPLEX | FILE_FLAG_OVERLAPPED,
            PIPE_TYPE_MESSAGE | PIPE_READMODE_MESSAGE,
            1,
            4096,
            4096,
            0,
            core::ptr::null(),
        )
    };
    assert_ne!(h, windows_sys::Win32::Foundation::INVALID_HANDLE_VALUE, "{}", std::io::Error::last_os_error());
    // SAFETY: a fresh overlapped instance, not inheritable, bound to no
    // port, on which nothing else issues I/O.
    let h = unsafe { io::OverlappedHandle::assume_overlapped(std::os::windows::io::FromRawHandle::from_raw_handle(h)) };
    let server = io::AsyncIo::new(h).unwrap();
    assert_eq!(completion_modes(server.as_raw_handle()), 0, "a message pipe's AsyncIo has skip-on-success");
}

/// In message mode every operation completes through the pool, those that
/// complete at once among them: a message-mode instance has no
/// skip-on-success (`pipe`'s module docs say why).
#[test]
fn message_mode_operations_complete_through_the_pool() {
    crate::support::alone("pipe::message_mode_operations_complete_through_the_pool", || {
        let name = crate::support::unique_pipe_name();
        let listener = PipeOptions::new().message_mode(true).bind(&name).unwrap();
        let (server, client) = task::block_on(pair(&listener, &name));
        for end in [&server, &client] {
            assert_eq!(completion_modes(end.as_raw_handle()), 0, "a message-mode end's modes");
        }
        let before = io::async_completions();
        let mut ops = 0;
        for (from, to) in [(&client, &server), (&server, &client)] {
            let (sent, _) = task::block_on(from.write(b"message".to_vec()));
            assert_eq!(sent.unwrap(), 7);
            let (n, buf) = task::block_on(to.read(vec![0u8; 4]));
            assert_eq!(n.unwrap_err().raw_os_error(), Some(ERROR_MORE_DATA as i32));
            assert_eq!(&buf, b"mess");
            let (n, buf) = task::block_on(to.read(vec![0u8; 64]));
            assert_eq!(&buf[..n.unwrap()], b"age");
            ops += 3;
        }
        assert_eq!(io::async_completions() - before, ops, "a message-mode operation completed inline");
    });
}

/// 2,000 connect, accept and close cycles leave no handle open (100,000
/// in `cargo xtask stress`).
#[test]
fn connect_accept_close_cycles_leak_no_handle() {
    let name = crate::support::unique_pipe_name();
    let listener = PipeListener::bind(&name).unwrap();
    let cycle = |n: usize| {
        task::block_on(async {
            for _ in 0..n {
                let (server, client) = pair(&listener, &name).await;
                let (sent, _) = client.write_all(b"x".to_vec()).await;
                sent.unwrap();
                drop(client);
                assert_eq!(read_to_end(&server).await, b"x");
            }
        })
    };
    cycle(50); // warm: the pool's threads and the engine's caches
    let before = handle_count();
    cycle(2_000);
    // Every stream was dropped with nothing in flight, so each was closed
    // before its drop returned.
    let after = handle_count();
    assert!(after <= before + 8, "{before} handles before 2,000 cycles, {after} after");
}

/// A client no one here wrote: `cmd`'s redirection writes a line into the
/// pipe, which the server reads.
#[test]
fn a_line_from_cmd_reaches_the_server() {
    let name = crate::support::unique_pipe_name();
    let listener = PipeListener::bind(&name).unwrap();
    let mut child =
        std::process::Command::new("cmd").args(["/c", &format!("echo hello from cmd>{name}")]).spawn().unwrap();
    let got = task::block_on(async {
        let server = listener.accept().await.unwrap();
        read_to_end(&server).await
    });
    assert!(child.wait().unwrap().success());
    assert_eq!(String::from_utf8_lossy(&got).trim_end(), "hello from cmd");
}

/// `io::Compat` gives a pipe stream tokio's traits, as it does a
/// `TcpStream`.
#[cfg(feature = "tokio")]
#[test]
fn compat_gives_a_pipe_stream_tokios_traits() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use windows_threadpool::io::Compat;
    let name = crate::support::unique_pipe_name();
    let listener = PipeListener::bind(&name).unwrap();
    task::block_on(async {
        let (server, client) = pair(&listener, &name).await;
        let (mut server, mut client) = (Compat::new(server), Compat::new(client));
        let message = vec![7u8; 200_000]; // more than one write buffer
        let writer = async {
            client.write_all(&message).await.unwrap();
            client.flush().await.unwrap();
            client // kept open until the reader is done
        };
        let mut got = vec![0u8; message.len()];
        let (client, read) = futures::join!(writer, server.read_exact(&mut got));
        read.unwrap();
        assert_eq!(got, message);
        drop(client);
        let mut rest = Vec::new();
        assert_eq!(server.read_to_end(&mut rest).await.unwrap(), 0, "end of file once the client is gone");
    });
}

/// The impersonation level a server gets from its client, through
/// `ImpersonateNamedPipeClient` (`SECURITY_IMPERSONATION_LEVEL`: 1 is
/// identification, 2 impersonation). The server has read from the client
/// first, as impersonating requires.
fn level_seen_by(server: std::os::windows::io::RawHandle) -> i32 {
    use windows_sys::Win32::Foundation::CloseHandle;
    use windows_sys::Win32::Security::{GetTokenInformation, RevertToSelf, TOKEN_QUERY, TokenImpersonationLevel};
    use windows_sys::Win32::System::Pipes::ImpersonateNamedPipeClient;
    use windows_sys::Win32::System::Threading::{GetCurrentThread, OpenThreadToken};
    // SAFETY: `server` is an open pipe handle; the token is closed and the
    // impersonation reverted before returning; the out-pointers are valid.
    unsafe {
        assert_ne!(ImpersonateNamedPipeClient(server), 0, "{}", std::io::Error::last_os_error());
        let mut token = core::ptr::null_mut();
        let opened = OpenThreadToken(GetCurrentThread(), TOKEN_QUERY, 1, &mut token);
        let (mut level, mut len) = (-1i32, 0u32);
        let got = opened != 0
            && GetTokenInformation(token, TokenImpersonationLevel, (&raw mut level).cast(), 4, &mut len) != 0;
        if opened != 0 {
            CloseHandle(token);
        }
        assert_ne!(RevertToSelf(), 0);
        assert!(got, "the impersonation token: {}", std::io::Error::last_os_error());
        level
    }
}

/// A client opened by the crate (`PipeStream::connect`, and the client end
/// of `io::pipe_pair`) asks for identification only (`SECURITY_SQOS_PRESENT |
/// SECURITY_IDENTIFICATION`): its server can learn who it is, not act as
/// it. Windows only: Wine ignores the client's level and always grants
/// impersonation (2), which this asserts there (docs/wine.md).
#[test]
fn a_client_is_identified_not_impersonated_on_windows() {
    use std::os::windows::io::AsRawHandle;
    use windows_threadpool::io::{self, AsyncIo};
    let expected = if crate::support::on_wine() { 2 } else { 1 };
    let name = crate::support::unique_pipe_name();
    let listener = PipeListener::bind(&name).unwrap();
    task::block_on(async {
        let (server, client) = pair(&listener, &name).await;
        let (sent, _) = client.write_all(b"who".to_vec()).await;
        sent.unwrap();
        let (n, _) = server.read(vec![0u8; 3]).await;
        assert_eq!(n.unwrap(), 3);
        assert_eq!(level_seen_by(server.as_raw_handle()), expected, "PipeStream::connect");

        let (server, client) = io::pipe_pair().unwrap();
        let (server, client) = (AsyncIo::new(server).unwrap(), AsyncIo::new(client).unwrap());
        let (sent, _) = client.write(b"who".to_vec()).await;
        sent.unwrap();
        let (n, _) = server.read(vec![0u8; 3]).await;
        assert_eq!(n.unwrap(), 3);
        assert_eq!(level_seen_by(server.as_raw_handle()), expected, "io::pipe_pair");
    });
}
