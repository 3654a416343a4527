//! What [`Compat`](super::Compat) asks of the object it adapts: the sealed
//! trait through which it issues reads and writes, and the outputs those
//! give back; and the trait for [`AsyncIo`].

use std::io;

use crate::io::AsyncIo;
use crate::io::engine::{Engine, Started};

/// What a read gives back.
pub(crate) type ReadOutput = (io::Result<usize>, Box<[u8]>);
/// What a write gives back.
pub(crate) type WriteOutput = (io::Result<usize>, Unsent);

/// The write buffer with the part of it still to be written, which is what
/// a write of it sends (its `AsRef`).
#[derive(Debug)]
pub struct Unsent {
    pub(super) buf: Box<[u8]>,
    pub(super) start: usize,
    pub(super) end: usize,
}

impl AsRef<[u8]> for Unsent {
    fn as_ref(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }
}

/// The engine's types as [`Sealed`] names them: public in name only (this
/// module is private), so a public trait's supertrait may show them.
#[derive(Debug)]
pub struct EngineOf<'a>(pub(crate) &'a Engine);
/// As [`EngineOf`].
pub struct Start<O>(pub(crate) Started<O>);

impl<O> core::fmt::Debug for Start<O> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self.0 {
            Started::Done(_) => "Start::Done",
            Started::InFlight(_) => "Start::InFlight",
        })
    }
}

mod sealed {
    use super::{EngineOf, ReadOutput, Start, Unsent, WriteOutput};

    /// How an object issues the adapter's reads and writes.
    pub trait Sealed: Unpin {
        fn engine(&self) -> EngineOf<'_>;
        /// Issues a zero-byte wait for data (see `Compat`'s reads), or
        /// `None` where a zero-byte read means something else.
        fn start_wait(&self) -> Option<Start<std::io::Result<()>>>;
        /// Issues a read into all of `buf`.
        fn start_read(&self, buf: Box<[u8]>) -> Start<ReadOutput>;
        /// Issues a write of `buf`'s unsent part.
        fn start_write(&self, buf: Unsent) -> Start<WriteOutput>;
        /// Shuts the writing side down, once everything is written.
        fn close_write(&self) -> std::io::Result<()>;
        /// Whether [`start_wait`](Self::start_wait) waits for data.
        fn waits_for_data(&self) -> bool;
    }
}

pub(crate) use sealed::Sealed;

/// An object [`Compat`](super::Compat) adapts: a stream whose reads and writes complete on
/// the pool, [`TcpStream`](crate::net::TcpStream) and
/// [`AsyncIo`]. Sealed.
pub trait CompatIo: Sealed {}

impl CompatIo for AsyncIo {}

/// The adapter's reads and writes of a file or pipe handle: what
/// [`AsyncIo`] and [`PipeStream`](crate::pipe::PipeStream) both are.
pub(crate) trait FileLike: Unpin {
    fn file_engine(&self) -> &Engine;
    /// Whether the handle has skip-on-success (a synchronous success
    /// completes inline). No default: a type whose handle has it and says
    /// otherwise would wait forever for a completion that never comes.
    fn completes_inline(&self) -> bool;
}

impl FileLike for AsyncIo {
    fn file_engine(&self) -> &Engine {
        &self.engine
    }
    fn completes_inline(&self) -> bool {
        self.inline
    }
}

impl<T: FileLike> Sealed for T {
    fn engine(&self) -> EngineOf<'_> {
        EngineOf(self.file_engine())
    }
    /// A zero-byte `ReadFile` does not wait for data: it completes at once
    /// (a pipe in byte mode) or reads a zero-length message.
    fn start_wait(&self) -> Option<Start<io::Result<()>>> {
        None
    }
    fn waits_for_data(&self) -> bool {
        false
    }
    fn start_read(&self, buf: Box<[u8]>) -> Start<ReadOutput> {
        Start(self.file_engine().start(crate::io::op::fs::Transfer::<_, false>::new(buf, 0, self.completes_inline())))
    }
    fn start_write(&self, buf: Unsent) -> Start<WriteOutput> {
        Start(self.file_engine().start(crate::io::op::fs::Transfer::<_, true>::new(buf, 0, self.completes_inline())))
    }
    /// A pipe has no half-close: its reader sees end of file once the
    /// handle closes.
    fn close_write(&self) -> io::Result<()> {
        Ok(())
    }
}
