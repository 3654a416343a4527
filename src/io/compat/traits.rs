//! The front ends' traits (futures-io, tokio, hyper) over [`Compat`] and
//! its halves, each a call into the side it reads or writes with.

use core::pin::Pin;
use core::task::{Context, Poll};
use std::io;

use super::object::CompatIo;
use super::{Compat, ReadHalf, WriteHalf};

/// The reading traits of every front end, for a type with a `read_side`.
macro_rules! read_traits {
    ($ty:ident) => {
        #[cfg(feature = "futures-io")]
        impl<T: CompatIo> futures_io::AsyncRead for $ty<T> {
            fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
                let (io, reader) = Pin::get_mut(self).read_side();
                reader.poll_read_with(io, cx, buf.len(), |src| buf[..src.len()].copy_from_slice(src))
            }
        }

        #[cfg(feature = "futures-io")]
        impl<T: CompatIo> futures_io::AsyncBufRead for $ty<T> {
            fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
                let (io, reader) = Pin::get_mut(self).read_side();
                reader.poll_fill(io, cx)
            }

            fn consume(self: Pin<&mut Self>, amt: usize) {
                let (io, reader) = Pin::get_mut(self).read_side();
                reader.consume(io, amt);
            }
        }

        #[cfg(feature = "tokio")]
        impl<T: CompatIo> tokio::io::AsyncRead for $ty<T> {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                let room = buf.remaining();
                let (io, reader) = Pin::get_mut(self).read_side();
                reader.poll_read_with(io, cx, room, |src| buf.put_slice(src)).map_ok(drop)
            }
        }

        #[cfg(feature = "tokio")]
        impl<T: CompatIo> tokio::io::AsyncBufRead for $ty<T> {
            fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
                let (io, reader) = Pin::get_mut(self).read_side();
                reader.poll_fill(io, cx)
            }

            fn consume(self: Pin<&mut Self>, amt: usize) {
                let (io, reader) = Pin::get_mut(self).read_side();
                reader.consume(io, amt);
            }
        }

        #[cfg(feature = "hyper")]
        impl<T: CompatIo> ::hyper::rt::Read for $ty<T> {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                mut buf: ::hyper::rt::ReadBufCursor<'_>,
            ) -> Poll<io::Result<()>> {
                let room = buf.remaining();
                let (io, reader) = Pin::get_mut(self).read_side();
                reader.poll_read_with(io, cx, room, |src| buf.put_slice(src)).map_ok(drop)
            }
        }
    };
}

/// The methods the writing traits of every front end share, each one call
/// of the write side (`$close` names the trait's shutdown).
macro_rules! write_methods {
    ($close:ident) => {
        fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            let (io, writer) = Pin::get_mut(self).write_side();
            writer.poll_accept(io, cx, &[io::IoSlice::new(buf)])
        }

        fn poll_write_vectored(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            bufs: &[io::IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let (io, writer) = Pin::get_mut(self).write_side();
            writer.poll_accept(io, cx, bufs)
        }

        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            let (io, writer) = Pin::get_mut(self).write_side();
            writer.poll_sent(io, cx)
        }

        fn $close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            let (io, writer) = Pin::get_mut(self).write_side();
            writer.poll_close_write(io, cx)
        }
    };
}

/// The writing traits of every front end, for a type with a `write_side`.
macro_rules! write_traits {
    ($ty:ident) => {
        #[cfg(feature = "futures-io")]
        impl<T: CompatIo> futures_io::AsyncWrite for $ty<T> {
            write_methods!(poll_close);
        }

        #[cfg(feature = "tokio")]
        impl<T: CompatIo> tokio::io::AsyncWrite for $ty<T> {
            fn is_write_vectored(&self) -> bool {
                true
            }

            write_methods!(poll_shutdown);
        }

        #[cfg(feature = "hyper")]
        impl<T: CompatIo> ::hyper::rt::Write for $ty<T> {
            fn is_write_vectored(&self) -> bool {
                true
            }

            write_methods!(poll_shutdown);
        }
    };
}

read_traits!(Compat);
write_traits!(Compat);
read_traits!(ReadHalf);
write_traits!(WriteHalf);
