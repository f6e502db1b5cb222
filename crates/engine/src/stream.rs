//! Per-stream state: flow control in both directions and the receive buffer.

use std::collections::VecDeque;

use bytes::Bytes;

#[derive(Debug)]
pub(crate) struct Stream {
    // Sending (local application -> peer).
    /// Stream bytes queued so far.
    pub tx_offset: u64,
    /// The peer lets us send up to this offset.
    pub tx_max: u64,
    /// Fin or Reset queued: the application will send no more.
    pub tx_done: bool,

    // Receiving (peer -> local application).
    pub rx_buf: VecDeque<Bytes>,
    /// Bytes delivered into `rx_buf` so far.
    pub rx_offset: u64,
    /// Bytes the application has read.
    pub rx_consumed: u64,
    /// Offset we last advertised to the peer.
    pub rx_max: u64,
    /// The peer half-closed; reported once `rx_buf` is drained.
    pub rx_fin: bool,
    /// The application has been told about the fin.
    pub rx_fin_read: bool,
}

impl Stream {
    pub fn new(window: u64) -> Self {
        Stream {
            tx_offset: 0,
            tx_max: window,
            tx_done: false,
            rx_buf: VecDeque::new(),
            rx_offset: 0,
            rx_consumed: 0,
            rx_max: window,
            rx_fin: false,
            rx_fin_read: false,
        }
    }

    /// Both directions finished: the stream can be forgotten.
    pub fn finished(&self) -> bool {
        self.tx_done && self.rx_fin_read
    }
}
