//! The byte stream under a connection: TCP, or TLS over TCP. An enum
//! rather than a boxed trait object, so that the plaintext path costs one
//! match per read or write and nothing else.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::error::ClientError;
use crate::security::{SaslConfig, SecurityConfig, SecurityConfigError};

pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
            Self::Tls(stream) => Pin::new(stream.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(stream) => Pin::new(stream).poll_write(cx, buf),
            Self::Tls(stream) => Pin::new(stream.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
            Self::Tls(stream) => Pin::new(stream.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(stream) => stream.is_write_vectored(),
            Self::Tls(stream) => stream.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(stream) => Pin::new(stream).poll_flush(cx),
            Self::Tls(stream) => Pin::new(stream.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(stream) => Pin::new(stream).poll_shutdown(cx),
            Self::Tls(stream) => Pin::new(stream.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Opens connections as a [`SecurityConfig`] says: the TLS setup is built
/// once (files read, keys parsed) and shared by every connection to every
/// broker of a cluster.
pub(crate) struct Connector {
    security: SecurityConfig,
    tls: Option<TlsConnector>,
}

impl Connector {
    pub(crate) fn new(security: SecurityConfig) -> Result<Arc<Self>, SecurityConfigError> {
        let tls = match &security.tls {
            Some(tls) => Some(TlsConnector::from(crate::tls::client_config(tls)?)),
            None => None,
        };
        Ok(Arc::new(Self { security, tls }))
    }

    pub(crate) fn plaintext() -> Arc<Self> {
        Arc::new(Self {
            security: SecurityConfig::plaintext(),
            tls: None,
        })
    }

    pub(crate) fn security(&self) -> &SecurityConfig {
        &self.security
    }

    pub(crate) fn sasl(&self) -> Option<&SaslConfig> {
        self.security.sasl.as_ref()
    }

    /// A TCP connection to `addr`, with TLS on it if configured, each step
    /// within `timeout`.
    pub(crate) async fn open(&self, addr: &str, timeout: Duration) -> Result<Stream, ClientError> {
        let tcp = connect(addr, timeout).await?;
        let Some(tls) = &self.tls else {
            return Ok(Stream::Plain(tcp));
        };
        let name = crate::tls::server_name(addr).ok_or_else(|| ClientError::Tls {
            addr: addr.to_owned(),
            reason: "the host is neither a DNS name nor an IP address".to_owned(),
            hint: None,
        })?;
        match tokio::time::timeout(timeout, tls.connect(name, tcp)).await {
            Ok(Ok(stream)) => Ok(Stream::Tls(Box::new(stream))),
            Ok(Err(error)) => Err(handshake_error(addr, error)),
            Err(_) => Err(ClientError::Timeout {
                context: format!("TLS handshake with {addr}"),
                after: timeout,
            }),
        }
    }
}

async fn connect(addr: &str, timeout: Duration) -> Result<TcpStream, ClientError> {
    let context = || format!("cannot connect to {addr}");
    let stream = match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => {
            return Err(ClientError::Io {
                context: context(),
                error,
            })
        }
        Err(_) => {
            return Err(ClientError::Timeout {
                context: context(),
                after: timeout,
            })
        }
    };
    stream.set_nodelay(true).map_err(|error| ClientError::Io {
        context: context(),
        error,
    })?;
    Ok(stream)
}

/// A failed handshake: rustls's reason, or the connection closing under
/// it, which is what a plaintext listener does with a TLS hello.
fn handshake_error(addr: &str, error: io::Error) -> ClientError {
    if let Some(tls) = tls_error(addr, &error) {
        return tls;
    }
    let reason = match error.kind() {
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => {
            "the broker closed the connection during the handshake".to_owned()
        }
        _ => error.to_string(),
    };
    ClientError::Tls {
        addr: addr.to_owned(),
        reason,
        hint: Some("is this an SSL or SASL_SSL listener?"),
    }
}

/// The TLS error inside an I/O error from a TLS stream, if that is what it
/// is: with TLS 1.3 a broker refusing the client's certificate says so in
/// an alert read after the handshake, with the first response.
pub(crate) fn tls_error(addr: &str, error: &io::Error) -> Option<ClientError> {
    let tls = error.get_ref()?.downcast_ref::<rustls::Error>()?;
    Some(ClientError::Tls {
        addr: addr.to_owned(),
        reason: tls.to_string(),
        hint: crate::tls::hint(tls),
    })
}
