import NIOCore

/// Buffers for replayed UDP answers, reused in turn. A reply is handed to the channel and
/// sent by the next flush (every `udpWriteBatch` answers at most); once sent, NIO drops its
/// reference and the slot's storage is ours alone again, so `clear()` reuses it in place.
/// With more slots than answers can wait unflushed, a replay costs a copy and no allocation;
/// a slot still held (the socket's send buffer was full) gets a new allocation instead.
struct ReplyBufferRing {
    private let slots: Int
    private var buffers: [ByteBuffer] = []
    private var next = 0

    init(slots: Int) {
        self.slots = max(1, slots)
    }

    /// `answer` with `id` in place of its own ID, in the next slot's buffer.
    mutating func reply(copying answer: UnsafeRawBufferPointer, id: UInt16, allocator: ByteBufferAllocator)
        -> ByteBuffer
    {
        let slot: Int
        if self.buffers.count < self.slots {
            slot = self.buffers.count
            self.buffers.append(allocator.buffer(capacity: answer.count))
        } else {
            slot = self.next
            self.next = slot + 1 == self.slots ? 0 : slot + 1
        }
        self.buffers[slot].clear()
        self.buffers[slot].writeBytes(answer)
        self.buffers[slot].setInteger(id, at: 0)
        return self.buffers[slot]
    }
}
