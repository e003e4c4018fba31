//! Writes to a plain connection's socket, shared by the HTTP/1.1 server (`h1.rs`) and
//! the watches written from the dispatch pass (`direct.rs`): vectored writes of a
//! frame, HTTP/1.1 chunk heads built on the stack, and a look at whether the peer is
//! still there while a response streams.

use std::io::{self, IoSlice};
use std::pin::Pin;

use bytes::{Buf, BytesMut};
use tokio::io::AsyncWrite;
use tokio::net::TcpStream;

use super::write_deadline::WriteDeadline;

/// IO slices per `writev` of a streamed frame: its chunk head, up to a few segments (an
/// event is one; a batch of events more), its CRLF; longer frames take more calls.
pub(super) const FRAME_IOV: usize = 16;

/// The socket of a plain connection, with its write timeout.
pub(super) type Io = WriteDeadline<TcpStream>;

/// A chunk's size line (`<hex>\r\n`), built on the stack: no allocation per frame.
pub(super) struct ChunkHead {
    bytes: [u8; 18],
    pos: usize,
}

impl ChunkHead {
    pub(super) fn new(len: usize) -> Self {
        let mut bytes = [0u8; 18];
        let digits = (usize::BITS - len.leading_zeros()).div_ceil(4).max(1) as usize;
        let start = 16 - digits;
        for (i, b) in bytes[start..16].iter_mut().enumerate() {
            let nibble = (len >> (4 * (digits - 1 - i))) & 0xf;
            *b = b"0123456789ABCDEF"[nibble];
        }
        bytes[16] = b'\r';
        bytes[17] = b'\n';
        ChunkHead { bytes, pos: start }
    }
}

impl Buf for ChunkHead {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn chunk(&self) -> &[u8] {
        &self.bytes[self.pos..]
    }

    fn advance(&mut self, cnt: usize) {
        self.pos = (self.pos + cnt).min(self.bytes.len());
    }
}

/// After the socket turned readable while a response streams: false when the peer
/// closed; bytes it sent (a pipelined request) are kept for after the response, up to
/// the head limit.
pub(super) fn peer_still_open(socket: &TcpStream, buf: &mut BytesMut) -> io::Result<bool> {
    let mut tmp = [0u8; 1024];
    match socket.try_read(&mut tmp) {
        Ok(0) => Ok(false),
        Ok(n) if buf.len() + n <= crate::config::MAX_REQUEST_HEAD => {
            buf.extend_from_slice(&tmp[..n]);
            Ok(true)
        }
        Ok(_) => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(true),
        Err(e) => Err(e),
    }
}

/// Writes all of `out` with vectored writes of up to `N` slices (a watch frame needs a
/// few; the array is initialised on every poll, so it is sized to the use).
pub(super) async fn write_buf<const N: usize>(io: &mut Io, out: &mut impl Buf) -> io::Result<()> {
    while out.has_remaining() {
        // The slices live on the stack of each poll, not in the future (which a watch's
        // writer holds for as long as the watch lasts).
        let n = std::future::poll_fn(|cx| {
            let mut slices = [IoSlice::new(&[]); N];
            let count = out.chunks_vectored(&mut slices);
            Pin::new(&mut *io).poll_write_vectored(cx, &slices[..count])
        })
        .await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        out.advance(n);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_heads_are_hex_sizes() {
        for (len, want) in [
            (1, "1\r\n"),
            (255, "FF\r\n"),
            (4096, "1000\r\n"),
            (0, "0\r\n"),
        ] {
            assert_eq!(ChunkHead::new(len).chunk(), want.as_bytes());
        }
        let mut h = ChunkHead::new(0xABC);
        h.advance(2);
        assert_eq!(h.chunk(), b"C\r\n");
        assert_eq!(
            ChunkHead::new(usize::MAX).remaining(),
            2 * std::mem::size_of::<usize>() + 2
        );
    }
}
