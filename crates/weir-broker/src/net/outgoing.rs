//! A response on its way to the client: encoded bytes, with regions of
//! segment files in between that go from the page cache to the socket with
//! `sendfile`, never through the broker's memory. Over TLS a region must be
//! encrypted, so it is read once (on the blocking pool) and handed to
//! rustls, which encrypts it into its records: one copy, no more.

use std::io;

use bytes::Bytes;
use tokio::io::{AsyncWriteExt, Interest, WriteHalf};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use weir_log::LogSlice;

/// Where a connection's responses are written: its socket, and a buffer
/// that gathers small responses (pipelined ones, a fetch's headers) into
/// one write. The buffer is allocated when a response is written and
/// released once it has been written out, so an idle connection holds
/// none: thousands of open connections would otherwise pin as many
/// buffers, and their scattered pages stay resident long after the
/// connections are closed.
pub(crate) struct ResponseWriter {
    socket: Socket,
    buffer: Vec<u8>,
}

enum Socket {
    Plain(OwnedWriteHalf),
    Tls(WriteHalf<TlsStream<TcpStream>>),
}

/// The most bytes gathered before a write reaches the socket (or rustls).
const WRITE_BUFFER: usize = 64 * 1024;

impl ResponseWriter {
    pub(crate) fn plain(writer: OwnedWriteHalf) -> Self {
        Self {
            socket: Socket::Plain(writer),
            buffer: Vec::new(),
        }
    }

    pub(crate) fn tls(writer: WriteHalf<TlsStream<TcpStream>>) -> Self {
        Self {
            socket: Socket::Tls(writer),
            buffer: Vec::new(),
        }
    }

    async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.buffer.len() + bytes.len() > WRITE_BUFFER {
            self.write_buffer().await?;
        }
        if bytes.len() >= WRITE_BUFFER {
            return self.write_through(bytes).await;
        }
        self.buffer.extend_from_slice(bytes);
        Ok(())
    }

    /// Writes `bytes` to the socket, past the buffer.
    async fn write_through(&mut self, bytes: &[u8]) -> io::Result<()> {
        match &mut self.socket {
            Socket::Plain(writer) => writer.write_all(bytes).await,
            Socket::Tls(writer) => writer.write_all(bytes).await,
        }
    }

    /// Writes out what the buffer holds, and releases it.
    async fn write_buffer(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let buffer = std::mem::take(&mut self.buffer);
        self.write_through(&buffer).await
    }

    pub(crate) async fn flush(&mut self) -> io::Result<()> {
        self.write_buffer().await?;
        match &mut self.socket {
            Socket::Plain(writer) => writer.flush().await,
            Socket::Tls(writer) => writer.flush().await,
        }
    }

    pub(crate) async fn shutdown(&mut self) -> io::Result<()> {
        self.write_buffer().await?;
        match &mut self.socket {
            Socket::Plain(writer) => writer.shutdown().await,
            Socket::Tls(writer) => writer.shutdown().await,
        }
    }

    /// Writes a file region: with `sendfile` on a plain socket, else read
    /// on the blocking pool (a read may wait on the disk) and written.
    async fn write_file(&mut self, slice: LogSlice) -> io::Result<()> {
        self.write_buffer().await?;
        if let (Socket::Plain(writer), true) = (&self.socket, slice.as_fd().is_some()) {
            return send_file(writer, &slice).await;
        }
        let bytes = tokio::task::spawn_blocking(move || slice.to_bytes())
            .await
            .map_err(io::Error::other)??;
        // Past the buffer: rustls takes the region in one piece.
        self.write_through(&bytes).await
    }
}

/// One piece of a response.
pub(crate) enum Chunk {
    Bytes(Bytes),
    File(LogSlice),
}

/// A whole response frame, size prefix included; or, in its place, the
/// end of the connection.
pub(crate) struct Outgoing {
    chunks: Vec<Chunk>,
    len: usize,
    closes: bool,
}

impl From<Bytes> for Outgoing {
    fn from(bytes: Bytes) -> Self {
        Self {
            len: bytes.len(),
            chunks: vec![Chunk::Bytes(bytes)],
            closes: false,
        }
    }
}

impl Outgoing {
    /// A frame of `chunks`; see [`with_size_prefix`](Self::with_size_prefix).
    pub(crate) fn from_chunks(chunks: Vec<Chunk>) -> Self {
        let len = chunks
            .iter()
            .map(|chunk| match chunk {
                Chunk::Bytes(bytes) => bytes.len(),
                Chunk::File(slice) => slice.len() as usize,
            })
            .sum();
        Self {
            chunks,
            len,
            closes: false,
        }
    }

    /// No response but the connection's end, once the responses before it
    /// are written: for a request the broker cannot answer at all.
    pub(crate) fn closing() -> Self {
        Self {
            chunks: Vec::new(),
            len: 0,
            closes: true,
        }
    }

    /// Whether this closes the connection instead of answering.
    pub(crate) fn closes(&self) -> bool {
        self.closes
    }

    /// The same with the frame's size in front, as the protocol frames it.
    pub(crate) fn with_size_prefix(mut self) -> Self {
        let size = Bytes::copy_from_slice(&(self.len as i32).to_be_bytes());
        self.chunks.insert(0, Chunk::Bytes(size));
        self.len += 4;
        self
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Raises the big-endian i32 at `offset` of the frame to at least
    /// `value` (a throttle time found after the response was encoded);
    /// false if those bytes are not within one buffered chunk.
    pub(crate) fn raise_i32_at(&mut self, offset: usize, value: i32) -> bool {
        let mut start = 0;
        for chunk in &mut self.chunks {
            let len = match chunk {
                Chunk::Bytes(bytes) => bytes.len(),
                Chunk::File(slice) => slice.len() as usize,
            };
            if offset < start + len {
                let Chunk::Bytes(bytes) = chunk else {
                    return false;
                };
                let at = offset - start;
                let Some(current) = bytes.get(at..at + 4) else {
                    return false;
                };
                let current = i32::from_be_bytes([current[0], current[1], current[2], current[3]]);
                if value > current {
                    let mut patched = bytes::BytesMut::from(&bytes[..]);
                    patched[at..at + 4].copy_from_slice(&value.to_be_bytes());
                    *bytes = patched.freeze();
                }
                return true;
            }
            start += len;
        }
        false
    }

    /// The frame as one buffer, file regions read in.
    #[cfg(test)]
    pub(crate) fn to_bytes(&self) -> io::Result<Bytes> {
        if let [Chunk::Bytes(bytes)] = &self.chunks[..] {
            return Ok(bytes.clone());
        }
        let mut out = Vec::with_capacity(self.len);
        for chunk in &self.chunks {
            match chunk {
                Chunk::Bytes(bytes) => out.extend_from_slice(bytes),
                Chunk::File(slice) => out.extend_from_slice(&slice.to_bytes()?),
            }
        }
        Ok(out.into())
    }

    /// Writes the frame. Buffered bytes are flushed before a file region is
    /// spliced in after them.
    pub(crate) async fn write_to(self, writer: &mut ResponseWriter) -> io::Result<()> {
        for chunk in self.chunks {
            match chunk {
                Chunk::Bytes(bytes) => writer.write_all(&bytes).await?,
                Chunk::File(slice) => writer.write_file(slice).await?,
            }
        }
        Ok(())
    }
}

/// Sends a file region with `sendfile`, waiting whenever the socket is full.
async fn send_file(socket: &OwnedWriteHalf, slice: &LogSlice) -> io::Result<()> {
    let file = slice.as_fd().expect("checked by the caller");
    let socket = socket.as_ref();
    let mut position = slice.position() as i64;
    let mut remaining = slice.len() as usize;
    while remaining > 0 {
        let sent = socket
            .async_io(Interest::WRITABLE, || {
                nix::sys::sendfile::sendfile64(socket, file, Some(&mut position), remaining)
                    .map_err(io::Error::from)
            })
            .await?;
        if sent == 0 {
            // The file is shorter than the region promised in the frame:
            // the connection cannot go on.
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "segment file ended inside a fetch response",
            ));
        }
        remaining -= sent;
    }
    Ok(())
}
