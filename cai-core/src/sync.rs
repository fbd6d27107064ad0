//! The sync engine: version 3's stream rules, as decisions over a [`Backend`].
//!
//! The engine decides which events are recorded on which streams and which streams wait
//! on them; a backend carries the decisions out. The CUDA driver backend lives in the
//! `cuda` module (feature `cuda`); [`Recorder`] only writes the operations down, so that
//! every decision is tested on machines without a GPU.
//!
//! **Producer** ([`PendingWork`]): after enqueuing work that touches a buffer on some
//! stream, record it; on export, the exported stream is made to wait on an event of every
//! other stream with pending work, so that a consumer synchronizing on the exported stream
//! alone sees all of it. The specification's own example (work on streams 7, 9 and 15,
//! exported on 3) is a unit test below.
//!
//! **Consumer** ([`import`]): stream `None` needs nothing. Otherwise, by [`SyncPolicy`]:
//! `Wait` (the default) records an event on the producer's stream and makes the
//! consumer's stream wait on it, so the host never blocks, and does nothing when the two
//! streams are the same; `Synchronize` blocks the host until the producer's stream is done;
//! `Ignore` leaves ordering to the user. Events come from an [`EventPool`]: after the
//! first import, no event is created.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, PoisonError};

use crate::stream::Stream;

/// A failure to reach or use the CUDA driver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DriverError {
    /// The driver library (`libcuda.so`, `nvcuda.dll`) could not be loaded.
    #[error("the CUDA driver library (libcuda) was not found on this machine")]
    NotFound,
    /// This build has no driver support (cai-core without its `cuda` feature).
    #[error("this build has no CUDA driver support (cai-core's `cuda` feature is off)")]
    Unsupported,
    /// A driver call returned an error code.
    #[error("{call} failed: {name} ({code}): {description}")]
    Call {
        /// The driver function.
        call: &'static str,
        /// The `CUresult` code.
        code: u32,
        /// The code's name (`CUDA_ERROR_INVALID_HANDLE`).
        name: String,
        /// The driver's description of the code.
        description: String,
    },
    /// An operation the engine cannot perform, such as waiting on stream `None`.
    #[error("{0}")]
    Invalid(String),
}

/// What carries the engine's decisions out: the CUDA driver, or a [`Recorder`].
///
/// Streams are [`Stream`] values, never [`Stream::None`]: the legacy and per-thread
/// default streams are the driver's `CU_STREAM_LEGACY` (1) and `CU_STREAM_PER_THREAD` (2),
/// the same integers as in the interface.
pub trait Backend {
    /// An event handle.
    type Event: Send;
    /// Creates an event (without timing).
    fn create_event(&self) -> Result<Self::Event, DriverError>;
    /// Records `event` on `stream`: it completes when the work queued so far does.
    fn record(&self, event: &Self::Event, stream: Stream) -> Result<(), DriverError>;
    /// Makes `stream`'s later work wait for `event`, without blocking the host.
    fn wait(&self, stream: Stream, event: &Self::Event) -> Result<(), DriverError>;
    /// Blocks the host until the work queued on `stream` so far has finished.
    fn synchronize(&self, stream: Stream) -> Result<(), DriverError>;
}

/// How a consumer orders its work after the producer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SyncPolicy {
    /// Record an event on the producer's stream and make the consumer's stream wait on it;
    /// nothing when the streams are the same. The host does not block.
    #[default]
    Wait,
    /// Block the host until the producer's stream has finished its work.
    Synchronize,
    /// Do nothing: the user orders the work (the specification's documented opt-out).
    Ignore,
}

impl SyncPolicy {
    /// The environment variable that sets the process-wide policy.
    pub const ENV: &'static str = "CAI_IMPORT_SYNC";

    /// Parses a policy name: `wait` (or `1`), `synchronize` (or `sync`), `ignore` (or `0`).
    pub fn parse(value: &str) -> Result<SyncPolicy, String> {
        match value.trim().to_ascii_lowercase().as_str() {
            "wait" | "1" => Ok(SyncPolicy::Wait),
            "synchronize" | "sync" => Ok(SyncPolicy::Synchronize),
            "ignore" | "0" => Ok(SyncPolicy::Ignore),
            other => Err(format!(
                "{}: '{other}' is not a sync policy (expected 'wait', 'synchronize' or 'ignore', or 1 / 0)",
                SyncPolicy::ENV
            )),
        }
    }

    /// The policy `CAI_IMPORT_SYNC` asks for, [`SyncPolicy::Wait`] when it is unset, and an
    /// error naming the variable when it holds anything else.
    pub fn from_env() -> Result<SyncPolicy, String> {
        match std::env::var(SyncPolicy::ENV) {
            Ok(v) => SyncPolicy::parse(&v),
            Err(std::env::VarError::NotPresent) => Ok(SyncPolicy::Wait),
            Err(e) => Err(format!("{}: {e}", SyncPolicy::ENV)),
        }
    }

    /// The policy's name, as [`SyncPolicy::parse`] accepts it.
    pub const fn name(self) -> &'static str {
        match self {
            SyncPolicy::Wait => "wait",
            SyncPolicy::Synchronize => "synchronize",
            SyncPolicy::Ignore => "ignore",
        }
    }
}

impl fmt::Display for SyncPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What [`import`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// The producer exported stream `None`: nothing to order.
    NoStream,
    /// The policy is [`SyncPolicy::Ignore`].
    Ignored,
    /// The consumer works on the producer's stream: already ordered.
    SameStream,
    /// The consumer's stream now waits on an event recorded on the producer's stream.
    Waited,
    /// The host waited for the producer's stream.
    Synchronized,
}

/// Reusable events, so that steady-state imports create none.
pub struct EventPool<B: Backend> {
    free: Mutex<Vec<B::Event>>,
}

impl<B: Backend> fmt::Debug for EventPool<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let free = self.free.lock().unwrap_or_else(PoisonError::into_inner).len();
        f.debug_struct("EventPool").field("free", &free).finish()
    }
}

impl<B: Backend> Default for EventPool<B> {
    fn default() -> Self {
        EventPool { free: Mutex::new(Vec::new()) }
    }
}

impl<B: Backend> EventPool<B> {
    /// An empty pool.
    pub fn new() -> Self {
        EventPool::default()
    }

    /// An event from the pool, or a new one when it is empty.
    pub fn take(&self, backend: &B) -> Result<B::Event, DriverError> {
        let pooled = self.free.lock().unwrap_or_else(PoisonError::into_inner).pop();
        match pooled {
            Some(e) => Ok(e),
            None => backend.create_event(),
        }
    }

    /// Returns an event. A wait enqueued on it is unaffected by its later re-recording, so
    /// an event can go back as soon as the wait is enqueued.
    pub fn give(&self, event: B::Event) {
        self.free.lock().unwrap_or_else(PoisonError::into_inner).push(event);
    }

    /// How many events wait in the pool.
    pub fn len(&self) -> usize {
        self.free.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Whether the pool holds no event.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Orders the consumer's work on `consumer` after the producer's pending work on
/// `producer`, as `policy` says.
pub fn import<B: Backend>(
    backend: &B,
    pool: &EventPool<B>,
    producer: Stream,
    consumer: Stream,
    policy: SyncPolicy,
) -> Result<Action, DriverError> {
    if producer.is_none() {
        return Ok(Action::NoStream);
    }
    match policy {
        SyncPolicy::Ignore => Ok(Action::Ignored),
        SyncPolicy::Synchronize => backend.synchronize(producer).map(|()| Action::Synchronized),
        SyncPolicy::Wait if consumer == producer => Ok(Action::SameStream),
        SyncPolicy::Wait => {
            if consumer.is_none() {
                return Err(DriverError::Invalid("the consumer's stream cannot be None under the wait policy".into()));
            }
            let event = pool.take(backend)?;
            let result = backend.record(&event, producer).and_then(|()| backend.wait(consumer, &event));
            pool.give(event);
            result.map(|()| Action::Waited)
        }
    }
}

/// A producer's record of which streams have pending work on a buffer: one event per
/// stream that has used it (not only the last, as cudarc keeps).
///
/// ```
/// use cai_core::sync::{PendingWork, Recorder, Op};
/// use cai_core::{Stream, StreamHandle};
///
/// let s = |n| Stream::Handle(StreamHandle::new(n).unwrap());
/// let work = PendingWork::new(Recorder::default());
/// work.record(s(7))?;
/// work.record(s(9))?;
/// assert_eq!(work.export_on(s(3))?, s(3)); // stream 3 now waits on 7 and 9
/// assert_eq!(work.backend().ops().iter().filter(|op| matches!(op, Op::Wait { .. })).count(), 2);
/// # Ok::<(), cai_core::sync::DriverError>(())
/// ```
pub struct PendingWork<B: Backend> {
    backend: B,
    events: Mutex<HashMap<Stream, B::Event>>,
}

impl<B: Backend + fmt::Debug> fmt::Debug for PendingWork<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut streams: Vec<Stream> =
            self.events.lock().unwrap_or_else(PoisonError::into_inner).keys().copied().collect();
        streams.sort_by_key(|s| s.to_raw());
        f.debug_struct("PendingWork").field("backend", &self.backend).field("streams", &streams).finish()
    }
}

impl<B: Backend> PendingWork<B> {
    /// No pending work yet.
    pub fn new(backend: B) -> Self {
        PendingWork { backend, events: Mutex::new(HashMap::new()) }
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Notes that work touching the buffer was enqueued on `stream`: (re-)records that
    /// stream's event. `Stream::None` is refused.
    pub fn record(&self, stream: Stream) -> Result<(), DriverError> {
        if stream.is_none() {
            return Err(DriverError::Invalid("work cannot be recorded on stream None".into()));
        }
        let mut events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(event) = events.get(&stream) {
            return self.backend.record(event, stream);
        }
        let event = self.backend.create_event()?;
        self.backend.record(&event, stream)?;
        events.insert(stream, event);
        Ok(())
    }

    /// Makes `target` wait on the event of every other stream with pending work and
    /// returns it, to be exported. With `target` = `Stream::None` (the producer's opt-out)
    /// nothing is ordered.
    pub fn export_on(&self, target: Stream) -> Result<Stream, DriverError> {
        if target.is_none() {
            return Ok(Stream::None);
        }
        let events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        let mut others: Vec<(&Stream, &B::Event)> = events.iter().filter(|(s, _)| **s != target).collect();
        others.sort_by_key(|(s, _)| s.to_raw());
        for (_, event) in others {
            self.backend.wait(target, event)?;
        }
        Ok(target)
    }

    /// The streams with recorded work, in increasing handle order.
    pub fn streams(&self) -> Vec<Stream> {
        let mut streams: Vec<Stream> =
            self.events.lock().unwrap_or_else(PoisonError::into_inner).keys().copied().collect();
        streams.sort_by_key(|s| s.to_raw());
        streams
    }
}

/// One operation a [`Recorder`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `create_event` made event `event`.
    Create {
        /// The event's number.
        event: u32,
    },
    /// `record(event, stream)`.
    Record {
        /// The event's number.
        event: u32,
        /// The stream.
        stream: Stream,
    },
    /// `wait(stream, event)`.
    Wait {
        /// The waiting stream.
        stream: Stream,
        /// The event's number.
        event: u32,
    },
    /// `synchronize(stream)`.
    Synchronize {
        /// The stream.
        stream: Stream,
    },
}

/// A backend that performs nothing and writes every operation down, numbering events
/// from 0 in creation order.
#[derive(Debug, Default)]
pub struct Recorder {
    ops: Mutex<Vec<Op>>,
    events: Mutex<u32>,
}

impl Recorder {
    /// The operations so far, in order.
    pub fn ops(&self) -> Vec<Op> {
        self.ops.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Forgets the operations so far (event numbering goes on).
    pub fn clear(&self) {
        self.ops.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }

    fn push(&self, op: Op) {
        self.ops.lock().unwrap_or_else(PoisonError::into_inner).push(op);
    }
}

fn not_none(stream: Stream, what: &str) -> Result<(), DriverError> {
    if stream.is_none() {
        Err(DriverError::Invalid(format!("{what} on stream None")))
    } else {
        Ok(())
    }
}

impl Backend for Recorder {
    type Event = u32;

    fn create_event(&self) -> Result<u32, DriverError> {
        let mut next = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        let event = *next;
        *next += 1;
        self.push(Op::Create { event });
        Ok(event)
    }

    fn record(&self, event: &u32, stream: Stream) -> Result<(), DriverError> {
        not_none(stream, "record")?;
        self.push(Op::Record { event: *event, stream });
        Ok(())
    }

    fn wait(&self, stream: Stream, event: &u32) -> Result<(), DriverError> {
        not_none(stream, "wait")?;
        self.push(Op::Wait { stream, event: *event });
        Ok(())
    }

    fn synchronize(&self, stream: Stream) -> Result<(), DriverError> {
        not_none(stream, "synchronize")?;
        self.push(Op::Synchronize { stream });
        Ok(())
    }
}

impl<B: Backend + ?Sized> Backend for &B {
    type Event = B::Event;
    fn create_event(&self) -> Result<Self::Event, DriverError> {
        (**self).create_event()
    }
    fn record(&self, event: &Self::Event, stream: Stream) -> Result<(), DriverError> {
        (**self).record(event, stream)
    }
    fn wait(&self, stream: Stream, event: &Self::Event) -> Result<(), DriverError> {
        (**self).wait(stream, event)
    }
    fn synchronize(&self, stream: Stream) -> Result<(), DriverError> {
        (**self).synchronize(stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::StreamHandle;

    fn s(n: usize) -> Stream {
        Stream::Handle(StreamHandle::new(n).unwrap())
    }

    #[test]
    fn spec_example_streams_7_9_15_exported_on_3() {
        let work = PendingWork::new(Recorder::default());
        for n in [7, 9, 15] {
            work.record(s(n)).unwrap();
        }
        work.backend().clear();
        assert_eq!(work.export_on(s(3)).unwrap(), s(3));
        assert_eq!(
            work.backend().ops(),
            [
                Op::Wait { stream: s(3), event: 0 },
                Op::Wait { stream: s(3), event: 1 },
                Op::Wait { stream: s(3), event: 2 },
            ]
        );
    }

    #[test]
    fn one_event_per_stream_rerecorded_on_new_work() {
        let work = PendingWork::new(Recorder::default());
        work.record(s(7)).unwrap();
        work.record(s(9)).unwrap();
        work.record(s(7)).unwrap();
        assert_eq!(
            work.backend().ops(),
            [
                Op::Create { event: 0 },
                Op::Record { event: 0, stream: s(7) },
                Op::Create { event: 1 },
                Op::Record { event: 1, stream: s(9) },
                Op::Record { event: 0, stream: s(7) },
            ]
        );
        assert_eq!(work.streams(), [s(7), s(9)]);
    }

    #[test]
    fn export_stream_does_not_wait_on_itself() {
        let work = PendingWork::new(Recorder::default());
        work.record(s(3)).unwrap();
        work.record(s(9)).unwrap();
        work.backend().clear();
        work.export_on(s(3)).unwrap();
        assert_eq!(work.backend().ops(), [Op::Wait { stream: s(3), event: 1 }]);
        // Default streams are streams like any other.
        work.backend().clear();
        work.export_on(Stream::LegacyDefault).unwrap();
        assert_eq!(
            work.backend().ops(),
            [
                Op::Wait { stream: Stream::LegacyDefault, event: 0 },
                Op::Wait { stream: Stream::LegacyDefault, event: 1 }
            ]
        );
    }

    #[test]
    fn exporting_none_orders_nothing() {
        let work = PendingWork::new(Recorder::default());
        work.record(s(7)).unwrap();
        work.backend().clear();
        assert_eq!(work.export_on(Stream::None).unwrap(), Stream::None);
        assert!(work.backend().ops().is_empty());
        assert!(work.record(Stream::None).is_err());
    }

    #[test]
    fn import_with_stream_none_does_nothing_under_every_policy() {
        let r = Recorder::default();
        let pool = EventPool::new();
        for policy in [SyncPolicy::Wait, SyncPolicy::Synchronize, SyncPolicy::Ignore] {
            assert_eq!(import(&r, &pool, Stream::None, s(5), policy).unwrap(), Action::NoStream);
        }
        assert!(r.ops().is_empty());
    }

    #[test]
    fn import_wait_records_on_producer_and_consumer_waits() {
        let r = Recorder::default();
        let pool = EventPool::new();
        assert_eq!(import(&r, &pool, s(7), Stream::LegacyDefault, SyncPolicy::Wait).unwrap(), Action::Waited);
        assert_eq!(
            r.ops(),
            [
                Op::Create { event: 0 },
                Op::Record { event: 0, stream: s(7) },
                Op::Wait { stream: Stream::LegacyDefault, event: 0 },
            ]
        );
        // Steady state: the pooled event is reused, nothing is created.
        r.clear();
        import(&r, &pool, s(9), s(11), SyncPolicy::Wait).unwrap();
        assert_eq!(r.ops(), [Op::Record { event: 0, stream: s(9) }, Op::Wait { stream: s(11), event: 0 }]);
        assert_eq!(pool.len(), 1);
    }

    #[test]
    fn import_on_the_same_stream_is_elided() {
        let r = Recorder::default();
        let pool = EventPool::new();
        assert_eq!(import(&r, &pool, s(7), s(7), SyncPolicy::Wait).unwrap(), Action::SameStream);
        assert_eq!(
            import(&r, &pool, Stream::LegacyDefault, Stream::LegacyDefault, SyncPolicy::Wait).unwrap(),
            Action::SameStream
        );
        assert!(r.ops().is_empty());
    }

    #[test]
    fn import_synchronize_blocks_on_the_producer_stream() {
        let r = Recorder::default();
        let pool = EventPool::new();
        assert_eq!(import(&r, &pool, s(7), s(7), SyncPolicy::Synchronize).unwrap(), Action::Synchronized);
        assert_eq!(r.ops(), [Op::Synchronize { stream: s(7) }]);
    }

    #[test]
    fn import_ignore_does_nothing() {
        let r = Recorder::default();
        let pool = EventPool::new();
        assert_eq!(import(&r, &pool, s(7), s(9), SyncPolicy::Ignore).unwrap(), Action::Ignored);
        assert!(r.ops().is_empty());
    }

    #[test]
    fn import_wait_needs_a_consumer_stream() {
        let r = Recorder::default();
        assert!(import(&r, &EventPool::new(), s(7), Stream::None, SyncPolicy::Wait).is_err());
    }

    #[test]
    fn policy_names() {
        for (text, policy) in [
            ("wait", SyncPolicy::Wait),
            ("1", SyncPolicy::Wait),
            ("Synchronize", SyncPolicy::Synchronize),
            ("sync", SyncPolicy::Synchronize),
            ("ignore", SyncPolicy::Ignore),
            ("0", SyncPolicy::Ignore),
        ] {
            assert_eq!(SyncPolicy::parse(text), Ok(policy));
        }
        let e = SyncPolicy::parse("later").unwrap_err();
        assert!(e.starts_with("CAI_IMPORT_SYNC: 'later' is not a sync policy"), "{e}");
        assert_eq!(SyncPolicy::parse(SyncPolicy::Synchronize.name()), Ok(SyncPolicy::Synchronize));
    }

    /// A backend whose calls fail, to check that errors propagate and events return.
    struct Failing;
    impl Backend for Failing {
        type Event = ();
        fn create_event(&self) -> Result<(), DriverError> {
            Ok(())
        }
        fn record(&self, _: &(), _: Stream) -> Result<(), DriverError> {
            Err(DriverError::NotFound)
        }
        fn wait(&self, _: Stream, _: &()) -> Result<(), DriverError> {
            Err(DriverError::NotFound)
        }
        fn synchronize(&self, _: Stream) -> Result<(), DriverError> {
            Err(DriverError::NotFound)
        }
    }

    #[test]
    fn driver_errors_propagate_and_events_go_back_to_the_pool() {
        let pool = EventPool::new();
        assert_eq!(import(&Failing, &pool, s(7), s(9), SyncPolicy::Wait), Err(DriverError::NotFound));
        assert_eq!(pool.len(), 1);
        assert_eq!(import(&Failing, &pool, s(7), s(9), SyncPolicy::Synchronize), Err(DriverError::NotFound));
        assert_eq!(PendingWork::new(Failing).record(s(7)), Err(DriverError::NotFound));
    }
}
