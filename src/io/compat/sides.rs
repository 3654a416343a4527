//! The adapter's two sides, each written once for [`Compat`](super::Compat)
//! and its halves: the read side keeps one read in flight in an owned
//! buffer, the write side one write of an owned buffer; and the process's
//! cache of those buffers.

use core::task::{Context, Poll, ready};
use std::io;

use super::object::{CompatIo, ReadOutput, Start, Unsent, WriteOutput};
use crate::io::engine::{Engine, InFlight, Started};

/// The size of each of [`Compat`](super::Compat)'s two buffers.
const CAPACITY: usize = 64 * 1024;

/// Buffers given back by the process's adapters, at most
/// [`CACHED_BUFFERS`]: a busy server reuses them, and an idle one holds at
/// most that many.
static CACHE: std::sync::Mutex<Vec<Box<[u8]>>> = std::sync::Mutex::new(Vec::new());
/// 1 MiB of buffers.
const CACHED_BUFFERS: usize = 16;

/// A buffer from the cache, or a new one.
pub(super) fn buffer() -> Box<[u8]> {
    let cached = CACHE.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
    cached.unwrap_or_else(|| vec![0; CAPACITY].into_boxed_slice())
}

/// Gives `buf` back to the cache (or frees it, the cache being full).
pub(super) fn give_back(buf: Box<[u8]>) {
    let mut cache = CACHE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if cache.len() < CACHED_BUFFERS {
        cache.push(buf);
    }
}

/// What the adapter keeps to read, [`Compat`](super::Compat)'s or a [`ReadHalf`](super::ReadHalf)'s.
#[derive(Default)]
pub(super) struct Reader {
    /// The read buffer while no read is in flight and it holds bytes (or,
    /// over an object with no zero-byte waits, at all).
    pub(super) rbuf: Option<Box<[u8]>>,
    /// The bytes of `rbuf` not yet served: `rpos..rlen`.
    rpos: usize,
    rlen: usize,
    reading: Option<InFlight<ReadOutput>>,
    /// A zero-byte wait for data in flight.
    waiting: Option<InFlight<io::Result<()>>>,
    /// The last read filled its buffer: read again without waiting first.
    eager: bool,
    /// Reads never wait first: a read of the buffer stays in flight instead
    /// (`Compat::set_wait_for_data(false)`).
    buffered: bool,
}

/// What the adapter keeps to write, [`Compat`](super::Compat)'s or a [`WriteHalf`](super::WriteHalf)'s.
#[derive(Default)]
pub(super) struct Writer {
    pub(super) writing: Option<InFlight<WriteOutput>>,
    /// Bytes accepted while a write was in flight (`.0[...1]`), issued as
    /// one write once it is done: small writes in a row cost one operation.
    queued: Option<(Box<[u8]>, usize)>,
    /// The error a write failed with: every later write, flush and
    /// shutdown fails with it.
    pub(super) poisoned: Option<Poison>,
}

/// What [`Compat`](super::Compat) keeps of a failed write's error, to give it again.
#[derive(Debug, Clone, Copy)]
pub(super) enum Poison {
    Os(i32),
    Kind(io::ErrorKind),
}

impl Poison {
    pub(super) fn of(e: &io::Error) -> Self {
        match e.raw_os_error() {
            Some(code) => Self::Os(code),
            None => Self::Kind(e.kind()),
        }
    }

    pub(super) fn error(self) -> io::Error {
        match self {
            Self::Os(code) => io::Error::from_raw_os_error(code),
            Self::Kind(kind) => io::Error::new(kind, "an earlier write failed"),
        }
    }
}

impl Reader {
    pub(super) fn fields(&self, d: &mut core::fmt::DebugStruct<'_, '_>) {
        d.field("unread", &(self.rlen - self.rpos))
            .field("waiting", &self.waiting.is_some())
            .field("reading", &self.reading.is_some());
    }
}

impl Reader {
    /// Ready once data is there to read, by a zero-byte wait, holding no
    /// buffer; at once where the object has no such waits.
    pub(super) fn poll_data(&mut self, io: &impl CompatIo, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            if self.waiting.is_some() {
                return InFlight::poll_slot(&mut self.waiting, io.engine().0, cx);
            }
            match io.start_wait() {
                None => return Poll::Ready(Ok(())),
                Some(Start(Started::Done(result))) => return Poll::Ready(result),
                // Polled, so that its completion wakes us.
                Some(Start(Started::InFlight(wait))) => self.waiting = Some(wait),
            }
        }
    }

    /// The unread bytes; with none, reads more (the read stays in flight
    /// across `Pending`s). Empty at end of file. Under the task's budget
    /// (`crate::task::budget`).
    pub(super) fn poll_fill(&mut self, io: &impl CompatIo, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        crate::task::budget::guard(cx, |cx| self.poll_fill_now(io, cx))
    }

    pub(super) fn poll_fill_now(&mut self, io: &impl CompatIo, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        while self.rpos == self.rlen {
            let (result, buf) = match &self.reading {
                Some(_) => ready!(InFlight::poll_slot(&mut self.reading, io.engine().0, cx)),
                None => {
                    if !self.eager && (self.waiting.is_some() || self.waits_for_data(io)) {
                        ready!(self.poll_data(io, cx))?;
                    }
                    match io.start_read(self.rbuf.take().unwrap_or_else(buffer)).0 {
                        Started::Done(output) => output,
                        Started::InFlight(read) => {
                            self.reading = Some(read);
                            continue; // polled, so that its completion wakes us
                        }
                    }
                }
            };
            let full = buf.len();
            self.rbuf = Some(buf);
            (self.rpos, self.rlen) = (0, 0);
            let n = result.inspect_err(|_| self.release_drained(io))?;
            self.eager = n == full;
            if n == 0 {
                self.release_drained(io);
                return Poll::Ready(Ok(&[]));
            }
            self.rlen = n;
        }
        let buf = self.rbuf.as_deref().unwrap_or_default();
        Poll::Ready(Ok(&buf[self.rpos..self.rlen]))
    }

    /// Whether a read waits for data, holding no buffer, before it reads.
    pub(super) fn waits_for_data(&self, io: &impl CompatIo) -> bool {
        io.waits_for_data() && !self.buffered
    }

    pub(super) fn set_wait_for_data(&mut self, wait: bool) {
        self.buffered = !wait;
    }

    /// Gives the read buffer back once it holds no unread bytes, where reads
    /// wait for data without one (elsewhere the next read takes it anyway).
    pub(super) fn release_drained(&mut self, io: &impl CompatIo) {
        if self.rpos == self.rlen
            && self.waits_for_data(io)
            && let Some(buf) = self.rbuf.take()
        {
            give_back(buf);
        }
    }

    pub(super) fn consume(&mut self, io: &impl CompatIo, n: usize) {
        self.rpos = (self.rpos + n).min(self.rlen);
        self.release_drained(io);
    }

    /// Hands `put` what of the unread bytes fits in `room`, and consumes
    /// it: the count (0 at end of file, or for no room, with nothing read).
    pub(super) fn poll_read_with(
        &mut self,
        io: &impl CompatIo,
        cx: &mut Context<'_>,
        room: usize,
        put: impl FnOnce(&[u8]),
    ) -> Poll<io::Result<usize>> {
        if room == 0 {
            return Poll::Ready(Ok(0));
        }
        let src = ready!(self.poll_fill(io, cx))?;
        let n = src.len().min(room);
        put(&src[..n]);
        self.consume(io, n);
        Poll::Ready(Ok(n))
    }

    /// Cancels a wait or read in flight (see [`InFlight::cancel`]).
    pub(super) fn cancel(&mut self, engine: &Engine) {
        if let Some(wait) = self.waiting.take() {
            wait.cancel(engine);
        }
        if let Some(read) = self.reading.take() {
            read.cancel(engine);
        }
    }

    #[cfg(any(test, feature = "test-hooks"))]
    pub(super) fn held(&self) -> usize {
        usize::from(self.rbuf.is_some()) + usize::from(self.reading.is_some())
    }
}

impl Writer {
    /// The error a failed write left, if any, again.
    pub(super) fn check_poison(&self) -> io::Result<()> {
        self.poisoned.map_or(Ok(()), |p| Err(p.error()))
    }

    /// Takes a finished write's output: the rest of a short write is issued
    /// again; the buffer goes back once all of it is written or it failed,
    /// and a failure poisons the writing side.
    pub(super) fn sent(&mut self, io: &impl CompatIo, (mut result, mut unsent): WriteOutput) -> io::Result<()> {
        loop {
            let error = match result {
                Ok(0) => Some(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    unsent.start = (unsent.start + n).min(unsent.end);
                    None
                }
                Err(e) => Some(e),
            };
            if error.is_some() || unsent.start == unsent.end {
                give_back(unsent.buf);
                return match error {
                    None => Ok(()),
                    Some(e) => {
                        self.poisoned = Some(Poison::of(&e));
                        Err(e)
                    }
                };
            }
            match io.start_write(unsent).0 {
                Started::Done(output) => (result, unsent) = output,
                Started::InFlight(write) => {
                    self.writing = Some(write);
                    return Ok(());
                }
            }
        }
    }

    /// Issues a write of `unsent` with none in flight: taken in at once
    /// if it finished synchronously, kept in flight otherwise.
    fn issue(&mut self, io: &impl CompatIo, unsent: Unsent) -> io::Result<()> {
        match io.start_write(unsent).0 {
            Started::Done(output) => self.sent(io, output),
            Started::InFlight(write) => {
                self.writing = Some(write);
                Ok(())
            }
        }
    }

    /// Moves the writes on without waiting: takes in a finished write (the
    /// rest of a short one is issued again), then issues the queued bytes.
    /// Returns with a write in flight only when it is pending (its
    /// completion wakes `cx`), and never with bytes queued and none in
    /// flight.
    fn progress(&mut self, io: &impl CompatIo, cx: &mut Context<'_>) -> io::Result<()> {
        loop {
            if self.writing.is_some() {
                match InFlight::poll_slot(&mut self.writing, io.engine().0, cx) {
                    Poll::Pending => return Ok(()),
                    Poll::Ready(output) => self.sent(io, output)?,
                }
            } else if let Some((buf, end)) = self.queued.take() {
                self.issue(io, Unsent { buf, start: 0, end })?;
            } else {
                return Ok(());
            }
        }
    }

    /// Ready once every accepted byte is written (or a write failed).
    pub(super) fn poll_sent(&mut self, io: &impl CompatIo, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.check_poison()?;
        self.progress(io, cx)?;
        if self.writing.is_some() { Poll::Pending } else { Poll::Ready(Ok(())) }
    }

    /// Accepts what of `srcs` fits, under the task's budget
    /// (`crate::task::budget`): with no write in flight, into a buffer
    /// written at once; with one, into the queued buffer, written when it
    /// is done; with that one full too, once there is room.
    pub(super) fn poll_accept(
        &mut self,
        io: &impl CompatIo,
        cx: &mut Context<'_>,
        srcs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        crate::task::budget::guard(cx, |cx| self.poll_accept_now(io, cx, srcs))
    }

    pub(super) fn poll_accept_now(
        &mut self,
        io: &impl CompatIo,
        cx: &mut Context<'_>,
        srcs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.check_poison()?;
        self.progress(io, cx)?;
        if srcs.iter().all(|s| s.is_empty()) {
            return Poll::Ready(Ok(0));
        }
        if self.writing.is_none() {
            let mut buf = buffer();
            let n = gather(&mut buf, srcs);
            self.issue(io, Unsent { buf, start: 0, end: n })?;
            return Poll::Ready(Ok(n));
        }
        let (buf, end) = self.queued.get_or_insert_with(|| (buffer(), 0));
        let n = gather(&mut buf[*end..], srcs);
        if n == 0 {
            return Poll::Pending; // full: the write in flight wakes `cx`
        }
        *end += n;
        Poll::Ready(Ok(n))
    }

    pub(super) fn poll_close_write(&mut self, io: &impl CompatIo, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_sent(io, cx))?;
        Poll::Ready(io.close_write())
    }

    /// Cancels a write in flight (see [`InFlight::cancel`]); bytes queued
    /// behind it are dropped.
    pub(super) fn cancel(&mut self, engine: &Engine) {
        if let Some(write) = self.writing.take() {
            write.cancel(engine);
        }
        if let Some((buf, _)) = self.queued.take() {
            give_back(buf);
        }
    }

    #[cfg(any(test, feature = "test-hooks"))]
    pub(super) fn held(&self) -> usize {
        usize::from(self.writing.is_some()) + usize::from(self.queued.is_some())
    }
}

/// Copies the start of `srcs`, in order, into `dst`; the bytes copied.
fn gather(dst: &mut [u8], srcs: &[io::IoSlice<'_>]) -> usize {
    let mut n = 0;
    for src in srcs {
        let k = src.len().min(dst.len() - n);
        dst[n..n + k].copy_from_slice(&src[..k]);
        n += k;
        if n == dst.len() {
            break;
        }
    }
    n
}
