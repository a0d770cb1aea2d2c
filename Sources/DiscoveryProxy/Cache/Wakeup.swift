/// The one timer of a browse that has waiters. It fires at the earliest of the end of the
/// collection window (opened by the first result) and the waiters' negative deadlines
/// (RFC 8766 §5.6), and is moved, replaced or cancelled as those change. It is kept beside
/// the browse, not in it: a browse is 72 bytes and almost none has a waiter, so a timer lives
/// only while a query waits.
struct Wakeup {
    /// The browse it belongs to (a later browse of the same question has another).
    var generation: UInt32
    /// When the collection window the first result opened ends.
    var flushAt: Duration?
    /// When the timer is set to fire, and the timer.
    var armed: (at: Duration, timer: any ProxyTimer)?
}
