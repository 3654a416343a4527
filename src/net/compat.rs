//! [`io::Compat`](crate::io::Compat) over a [`TcpStream`].

use std::io;
use std::net::Shutdown;

use super::TcpStream;
use crate::io::CompatIo;
use crate::io::compat::{EngineOf, ReadOutput, Sealed, Start, Unsent, WriteOutput};
use crate::io::op::socket::{Readable, Recv, Transmit};

impl CompatIo for TcpStream {}

impl Sealed for TcpStream {
    fn engine(&self) -> EngineOf<'_> {
        EngineOf(&self.engine)
    }
    fn start_wait(&self) -> Option<Start<io::Result<()>>> {
        Some(Start(self.engine.start(Readable::new(self.inline))))
    }
    fn waits_for_data(&self) -> bool {
        true
    }
    fn start_read(&self, buf: Box<[u8]>) -> Start<ReadOutput> {
        Start(self.engine.start(Recv::new(buf, self.inline)))
    }
    fn start_write(&self, buf: Unsent) -> Start<WriteOutput> {
        Start(self.engine.start(Transmit::new(buf, 0, self.inline)))
    }
    fn close_write(&self) -> io::Result<()> {
        self.shutdown(Shutdown::Write)
    }
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<crate::io::Compat<TcpStream>>();
    send_sync::<crate::io::ReadHalf<TcpStream>>();
    send_sync::<crate::io::WriteHalf<TcpStream>>();
    send_sync::<crate::io::ReuniteError<TcpStream>>();
};
