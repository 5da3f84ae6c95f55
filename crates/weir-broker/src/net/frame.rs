//! Size-prefixed frames: a 4-byte big-endian length, then that many bytes.
//! The body is read as it arrives, reserving memory from the connection's and
//! the broker's budgets chunk by chunk, so a frame announced as large but sent
//! slowly holds only what actually arrived.

use std::io;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Memory reserved while a request is in flight.
pub(crate) struct Reservation {
    _permits: Vec<OwnedSemaphorePermit>,
}

/// Why a connection must be closed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FrameError {
    #[error("connection closed")]
    Closed,
    #[error("invalid frame size {0}")]
    InvalidSize(i32),
    #[error("frame of {size} bytes exceeds socket.request.max.bytes {max}")]
    TooLarge { size: usize, max: usize },
    #[error(transparent)]
    Io(#[from] io::Error),
}

const CHUNK: usize = 64 * 1024;

/// Budgets a frame's bytes count against.
pub(crate) struct Budgets {
    pub(crate) connection: Arc<Semaphore>,
    pub(crate) global: Arc<Semaphore>,
}

impl Budgets {
    async fn reserve(&self, bytes: usize, into: &mut Vec<OwnedSemaphorePermit>) {
        let n = bytes as u32;
        for semaphore in [&self.connection, &self.global] {
            let permit = semaphore
                .clone()
                .acquire_many_owned(n)
                .await
                .expect("budgets are never closed");
            into.push(permit);
        }
    }
}

/// Reads the next frame. `Ok(None)` is a clean end of stream.
pub(crate) async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    max_size: usize,
    budgets: &Budgets,
) -> Result<Option<(Bytes, Reservation)>, FrameError> {
    let mut size_bytes = [0u8; 4];
    match reader.read_exact(&mut size_bytes).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let size = i32::from_be_bytes(size_bytes);
    if size <= 0 {
        return Err(FrameError::InvalidSize(size));
    }
    let size = size as usize;
    if size > max_size {
        return Err(FrameError::TooLarge {
            size,
            max: max_size,
        });
    }
    let mut permits = Vec::new();
    let mut buf = BytesMut::new();
    while buf.len() < size {
        let want = (size - buf.len()).min(CHUNK);
        budgets.reserve(want, &mut permits).await;
        buf.reserve(want);
        let mut chunk = (&mut *reader).take(want as u64);
        let before = buf.len();
        while buf.len() < before + want {
            if chunk.read_buf(&mut buf).await? == 0 {
                return Err(FrameError::Closed);
            }
        }
    }
    Ok(Some((buf.freeze(), Reservation { _permits: permits })))
}
