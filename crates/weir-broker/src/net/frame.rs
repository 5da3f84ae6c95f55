//! Size-prefixed frames: a 4-byte big-endian length, then that many bytes.
//! The body is read as it arrives, reserving memory from the connection's
//! budgets (see [`super::request_memory`]) chunk by chunk, so a frame
//! announced as large but sent slowly holds only what actually arrived. A
//! frame larger than `socket.request.max.bytes` is refused before anything
//! is reserved. Once a frame's first byte has arrived, the rest must arrive
//! within `socket.request.receive.timeout.ms` of waiting on the socket (time
//! spent waiting for memory does not count): a client that stops sending
//! half-way gives its reservation back when the connection is closed.

use std::future::Future;
use std::io;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::request_memory::{ConnectionMemory, Reservation, Stage};

/// Why a connection must be closed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FrameError {
    #[error("connection closed")]
    Closed,
    #[error("no request for {0:?} (connections.max.idle.ms)")]
    Idle(Duration),
    #[error(
        "request not received within {timeout:?} of its first byte \
         (socket.request.receive.timeout.ms): {received} bytes arrived"
    )]
    Stalled { timeout: Duration, received: usize },
    #[error("invalid frame size {0}")]
    InvalidSize(i32),
    #[error("frame of {size} bytes exceeds socket.request.max.bytes {max}")]
    TooLarge { size: usize, max: usize },
    #[error(transparent)]
    Io(#[from] io::Error),
}

const CHUNK: usize = 64 * 1024;

/// What one frame may be.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FrameLimits {
    /// The largest size accepted.
    pub(crate) max_size: usize,
    /// How long the connection may wait for a frame to start.
    pub(crate) idle: Duration,
    /// How long the rest of a frame may take to arrive once it started.
    pub(crate) receive: Duration,
    /// Which pool the frame draws on.
    pub(crate) stage: Stage,
}

/// The time left to a frame to arrive, spent only while waiting on the
/// socket.
struct ReceiveClock {
    timeout: Duration,
    left: Duration,
}

impl ReceiveClock {
    async fn read(
        &mut self,
        read: impl Future<Output = io::Result<usize>>,
        received: usize,
    ) -> Result<usize, FrameError> {
        let started = Instant::now();
        let read = tokio::time::timeout(self.left, read).await;
        self.left = self.left.saturating_sub(started.elapsed());
        match read {
            Ok(Ok(0)) => Err(FrameError::Closed),
            Ok(Ok(n)) => Ok(n),
            Ok(Err(error)) => Err(error.into()),
            Err(_) => Err(FrameError::Stalled {
                timeout: self.timeout,
                received,
            }),
        }
    }
}

/// Reads the next frame. `Ok(None)` is a clean end of stream.
pub(crate) async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    limits: FrameLimits,
    memory: &ConnectionMemory,
) -> Result<Option<(Bytes, Reservation)>, FrameError> {
    let mut size_bytes = [0u8; 4];
    let mut filled = match tokio::time::timeout(limits.idle, reader.read(&mut size_bytes)).await {
        Err(_) => return Err(FrameError::Idle(limits.idle)),
        Ok(Ok(0)) => return Ok(None),
        Ok(Ok(n)) => n,
        Ok(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Ok(Err(e)) => return Err(e.into()),
    };
    let mut clock = ReceiveClock {
        timeout: limits.receive,
        left: limits.receive,
    };
    while filled < 4 {
        filled += clock
            .read(reader.read(&mut size_bytes[filled..]), filled)
            .await?;
    }
    let size = i32::from_be_bytes(size_bytes);
    if size <= 0 {
        return Err(FrameError::InvalidSize(size));
    }
    let size = size as usize;
    if size > limits.max_size {
        return Err(FrameError::TooLarge {
            size,
            max: limits.max_size,
        });
    }
    let mut reservation = Reservation::default();
    let mut buf = BytesMut::new();
    while buf.len() < size {
        let want = (size - buf.len()).min(CHUNK);
        memory
            .reserve(size, want, limits.stage, &mut reservation)
            .await;
        buf.reserve(want);
        let mut chunk = (&mut *reader).take(want as u64);
        let before = buf.len();
        while buf.len() < before + want {
            let received = 4 + buf.len();
            clock.read(chunk.read_buf(&mut buf), received).await?;
        }
    }
    Ok(Some((buf.freeze(), reservation)))
}
