//! The sync engine: version 3's stream rules, as decisions over a [`Backend`].
//!
//! The engine decides which events are recorded on which streams and which streams wait
//! on them; a backend carries the decisions out. The CUDA driver backend lives in the
//! `cuda` module (feature `cuda`); [`Recorder`] only writes the operations down, so that
//! every decision is tested on machines without a GPU.
//!
//! **Streams are located.** A stream handle means something only in its CUDA context,
//! and the markers 1 (legacy default) and 2 (per-thread default) name a different stream
//! in every context, and 2 a different one on every thread. The backend
//! [locates](Backend::locate) each stream first: a handle in the context it was created
//! in, 1 and 2 in the context current on the calling thread. Streams are compared as
//! [`Located`] values (context and stream), events are created and recorded in the
//! context of the stream they are recorded on, and per-thread work is keyed by thread.
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
//! first import, no event is created. A consumer that then worked on a stream of its own
//! [hands the memory back](hand_back) when it is done: the producer's stream waits on an
//! event of the consumer's, so the producer's later work cannot overtake it.
//!
//! **Graph capture.** While a stream captures a CUDA graph, its work is recorded into the
//! graph, not run, and several driver calls would invalidate the capture. The engine asks
//! the backend about [`Capture`] first and never makes such a call:
//!
//! | producer's stream | consumer's stream | what [`order`] does |
//! |---|---|---|
//! | not capturing | not capturing | event wait ([`Action::Waited`]) |
//! | not capturing | capturing | the host waits for the producer's event once, at capture time, so that every launch of the graph sees the data ([`Action::WaitedForCapture`]) |
//! | capturing | capturing, same capture | event wait: a dependency inside the graph ([`Action::Waited`]) |
//! | capturing | anything else | [`DriverError::Capture`]: that work runs only when the graph is launched |
//! | the legacy stream, while a blocking stream of its context captures | | [`DriverError::Capture`]: touching it would invalidate the capture |
//!
//! `Synchronize` refuses a capturing producer stream the same way (a capturing stream
//! cannot be synchronized). Work a producer [records](PendingWork::record) while its
//! stream captures belongs to the graph: an export inside the same capture depends on it,
//! an export outside the capture does not wait for it (the graph's launch is ordered by
//! whoever launches it), and an export on a capturing stream host-waits for work recorded
//! outside the capture.

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::{Mutex, PoisonError};
use std::thread::ThreadId;

use crate::error::DriverError;
use crate::stream::Stream;

/// A stream and the context it belongs to: what the engine compares streams by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Located<C> {
    /// The stream (never [`Stream::None`]).
    pub stream: Stream,
    /// Its context: for a handle, the context it was created in; for the default streams,
    /// the context they were resolved in.
    pub context: C,
}

impl<C> fmt::Display for Located<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.stream)
    }
}

/// Whether a stream is capturing a CUDA graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Capture {
    /// Not capturing: work runs when it is enqueued.
    Idle,
    /// Capturing into the graph of the capture sequence with this id.
    Active(u64),
    /// The legacy default stream, while a blocking stream of its context captures in the
    /// global or thread-local mode: any use of it would join (and invalidate) that capture.
    Implicit,
}

/// What carries the engine's decisions out: the CUDA driver, or a [`Recorder`].
pub trait Backend {
    /// An event handle.
    type Event: Send;
    /// A context handle.
    type Context: Copy + Eq + Hash + fmt::Debug + Send;
    /// Locates `stream`: a handle in its own context; the legacy and per-thread default
    /// streams in the context current on this thread (or the backend's own, when none is).
    /// [`Stream::None`] is an error.
    fn locate(&self, stream: Stream) -> Result<Located<Self::Context>, DriverError>;
    /// Whether `stream` is capturing a graph. Must not disturb a capture under way.
    fn capture(&self, stream: Located<Self::Context>) -> Result<Capture, DriverError>;
    /// Creates an event (without timing) in `context`.
    fn create_event(&self, context: Self::Context) -> Result<Self::Event, DriverError>;
    /// Records `event` (created in `stream`'s context) on `stream`: it completes when the
    /// work queued so far does.
    fn record(&self, event: &Self::Event, stream: Located<Self::Context>) -> Result<(), DriverError>;
    /// Makes `stream`'s later work wait for `event`, without blocking the host.
    fn wait(&self, stream: Located<Self::Context>, event: &Self::Event) -> Result<(), DriverError>;
    /// Blocks the host until the work queued on `stream` so far has finished.
    fn synchronize(&self, stream: Located<Self::Context>) -> Result<(), DriverError>;
    /// Blocks the host until `event` has completed.
    fn wait_host(&self, event: &Self::Event) -> Result<(), DriverError>;
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
    /// The error names what was received and what is accepted; the caller says where the
    /// value came from.
    pub fn parse(value: &str) -> Result<SyncPolicy, String> {
        match value.trim().to_ascii_lowercase().as_str() {
            "wait" | "1" => Ok(SyncPolicy::Wait),
            "synchronize" | "sync" => Ok(SyncPolicy::Synchronize),
            "ignore" | "0" => Ok(SyncPolicy::Ignore),
            _ => Err(format!(
                "{} is not a sync policy (expected 'wait', 'synchronize' or 'ignore', or '1' / '0')",
                crate::error::quoted(value)
            )),
        }
    }

    /// The policy `CAI_IMPORT_SYNC` asks for, [`SyncPolicy::Wait`] when it is unset, and an
    /// error naming the variable when it holds anything else.
    pub fn from_env() -> Result<SyncPolicy, String> {
        match std::env::var(SyncPolicy::ENV) {
            Ok(v) => SyncPolicy::parse(&v).map_err(|e| format!("{}: {e}", SyncPolicy::ENV)),
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

/// What [`import`] or [`order`] did.
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
    /// The consumer's stream is capturing a graph: the host waited for the producer's
    /// pending work, so that the graph sees it whenever it is launched.
    WaitedForCapture,
    /// The host waited for the producer's stream.
    Synchronized,
    /// The consumer's work was captured into a CUDA graph that the producer's stream is
    /// not part of: it runs when the graph is launched, which whoever launches the graph
    /// orders ([`hand_back`]).
    InGraph,
}

/// Reusable events, one free list per context, so that steady-state imports create none.
pub struct EventPool<B: Backend> {
    free: Mutex<HashMap<B::Context, Vec<B::Event>>>,
}

impl<B: Backend> fmt::Debug for EventPool<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventPool").field("free", &self.len()).finish()
    }
}

impl<B: Backend> Default for EventPool<B> {
    fn default() -> Self {
        EventPool { free: Mutex::new(HashMap::new()) }
    }
}

impl<B: Backend> EventPool<B> {
    /// An empty pool.
    pub fn new() -> Self {
        EventPool::default()
    }

    /// An event of `context` from the pool, or a new one when there is none.
    pub fn take(&self, backend: &B, context: B::Context) -> Result<B::Event, DriverError> {
        let pooled = self.free.lock().unwrap_or_else(PoisonError::into_inner).get_mut(&context).and_then(Vec::pop);
        match pooled {
            Some(e) => Ok(e),
            None => backend.create_event(context),
        }
    }

    /// Returns an event of `context`. A wait enqueued on it is unaffected by its later
    /// re-recording, so an event can go back as soon as the wait is enqueued.
    pub fn give(&self, context: B::Context, event: B::Event) {
        self.free.lock().unwrap_or_else(PoisonError::into_inner).entry(context).or_default().push(event);
    }

    /// How many events wait in the pool, all contexts together.
    pub fn len(&self) -> usize {
        self.free.lock().unwrap_or_else(PoisonError::into_inner).values().map(Vec::len).sum()
    }

    /// Whether the pool holds no event.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

pub(crate) fn implicit_error(stream: Stream) -> DriverError {
    DriverError::Capture(format!(
        "the legacy default stream (stream {stream}) cannot be used while a blocking stream of its context is \
         capturing a CUDA graph (it would join and invalidate the capture); use a non-blocking stream, or \
         import outside the capture"
    ))
}

/// How the work queued on `to` can be ordered after the work queued on `from`, from the
/// streams' capture states (the module's capture table): `Ok(true)` when the host must
/// wait (`to` captures a graph that `from` is not part of), `Ok(false)` for an event wait,
/// and an error where no ordering is possible. `to` names the consumer's stream.
pub fn plan(
    produced: Capture,
    consumed: Capture,
    from: Stream,
    to: &dyn std::fmt::Display,
) -> Result<bool, DriverError> {
    match (produced, consumed) {
        (Capture::Implicit, _) => Err(implicit_error(from)),
        (_, Capture::Implicit) => Err(implicit_error(Stream::LegacyDefault)),
        (Capture::Active(a), Capture::Active(b)) if a == b => Ok(false),
        (Capture::Active(a), _) => Err(DriverError::Capture(format!(
            "the producer's stream {from} is capturing a CUDA graph (capture {a}), so its work runs only when the \
             graph is launched and {to} cannot be ordered after it; consume the array on the capturing stream (or \
             another stream of the same capture), or after launching the graph"
        ))),
        (Capture::Idle, Capture::Active(_)) => Ok(true),
        (Capture::Idle, Capture::Idle) => Ok(false),
    }
}

/// Orders the work queued on `to` from now on after the work queued on `from` so far,
/// without blocking the host where the streams allow it (see the module's capture table).
pub fn order<B: Backend>(
    backend: &B,
    pool: &EventPool<B>,
    from: Located<B::Context>,
    to: Located<B::Context>,
) -> Result<Action, DriverError> {
    if from == to {
        return Ok(Action::SameStream);
    }
    let (produced, consumed) = (backend.capture(from)?, backend.capture(to)?);
    let host = plan(produced, consumed, from.stream, &format_args!("stream {}", to.stream))?;
    wait_for(backend, pool, from, to, host)
}

/// Records a pooled event of `from`'s context on `from`, and makes `to` wait on it, or the
/// host when `host` (the event goes back to the pool either way).
fn wait_for<B: Backend>(
    backend: &B,
    pool: &EventPool<B>,
    from: Located<B::Context>,
    to: Located<B::Context>,
    host: bool,
) -> Result<Action, DriverError> {
    let event = pool.take(backend, from.context)?;
    let result = backend.record(&event, from).and_then(|()| {
        if host {
            backend.wait_host(&event).map(|()| Action::WaitedForCapture)
        } else {
            backend.wait(to, &event).map(|()| Action::Waited)
        }
    });
    pool.give(from.context, event);
    result
}

/// The other half of an ordered import: orders the work queued on `producer` from now on
/// after the work the consumer queued on `consumer` so far, so that the producer's later
/// work neither overwrites nor frees what the consumer's work still reads or writes. The
/// specification asks this of a consumer that waited for the producer's stream and then
/// worked on a stream of its own, before it returns control to its user.
///
/// | consumer's stream | producer's stream | what `hand_back` does |
/// |---|---|---|
/// | the same stream | | nothing ([`Action::SameStream`]) |
/// | not capturing | not capturing | event wait ([`Action::Waited`]) |
/// | capturing | capturing, same capture | event wait: a dependency inside the graph ([`Action::Waited`]) |
/// | capturing | anything else | nothing ([`Action::InGraph`]): that work runs when the graph is launched |
/// | not capturing | capturing | the host waits for the consumer's work ([`Action::WaitedForCapture`]) |
/// | the legacy stream, while a blocking stream of its context captures | | [`DriverError::Capture`] |
pub fn hand_back<B: Backend>(
    backend: &B,
    pool: &EventPool<B>,
    consumer: Located<B::Context>,
    producer: Located<B::Context>,
) -> Result<Action, DriverError> {
    if consumer == producer {
        return Ok(Action::SameStream);
    }
    let host = match (backend.capture(consumer)?, backend.capture(producer)?) {
        (Capture::Implicit, _) => return Err(implicit_error(consumer.stream)),
        (_, Capture::Implicit) => return Err(implicit_error(producer.stream)),
        (Capture::Active(a), Capture::Active(b)) if a == b => false,
        (Capture::Active(_), _) => return Ok(Action::InGraph),
        (Capture::Idle, Capture::Active(_)) => true,
        (Capture::Idle, Capture::Idle) => false,
    };
    wait_for(backend, pool, consumer, producer, host)
}

/// Blocks the host until the work queued on `from` so far has finished, through an event
/// (later work on `from` is not waited for). A capturing stream cannot be waited on: its
/// work runs when the graph is launched ([`DriverError::Capture`]).
pub fn settle<B: Backend>(backend: &B, pool: &EventPool<B>, from: Located<B::Context>) -> Result<Action, DriverError> {
    match backend.capture(from)? {
        Capture::Idle => {}
        Capture::Implicit => return Err(implicit_error(from.stream)),
        Capture::Active(a) => {
            return Err(DriverError::Capture(format!(
                "the producer's stream {} is capturing a CUDA graph (capture {a}), so its work runs only when the \
                 graph is launched and the host cannot wait for it; order the capturing stream instead",
                from.stream
            )))
        }
    }
    let event = pool.take(backend, from.context)?;
    let result = backend.record(&event, from).and_then(|()| backend.wait_host(&event));
    pool.give(from.context, event);
    result.map(|()| Action::Synchronized)
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
        SyncPolicy::Synchronize => {
            let from = backend.locate(producer)?;
            match backend.capture(from)? {
                Capture::Idle => backend.synchronize(from).map(|()| Action::Synchronized),
                Capture::Implicit => Err(implicit_error(producer)),
                Capture::Active(a) => Err(DriverError::Capture(format!(
                    "the producer's stream {producer} is capturing a CUDA graph (capture {a}) and cannot be \
                     synchronized; use the wait policy with the capturing stream as the consumer's"
                ))),
            }
        }
        SyncPolicy::Wait => {
            if consumer.is_none() {
                return Err(DriverError::Invalid("the consumer's stream cannot be None under the wait policy".into()));
            }
            let from = backend.locate(producer)?;
            let to = backend.locate(consumer)?;
            order(backend, pool, from, to)
        }
    }
}

/// Where one stream's pending work is recorded: the located stream, and for the
/// per-thread default stream the thread whose stream it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key<C> {
    at: Located<C>,
    thread: Option<ThreadId>,
}

/// One stream's pending work: what it ran outside a capture and what it captured, each
/// with an event of its own, so that work captured later does not hide work enqueued
/// before the capture began (which still runs on the stream).
struct Pending<E> {
    /// The last work recorded outside any capture.
    idle: Option<E>,
    /// The last work recorded inside a capture.
    in_capture: Option<E>,
    /// The capture sequence of `in_capture`'s work.
    sequence: u64,
}

impl<E> Pending<E> {
    fn slot(&mut self, in_capture: bool) -> &mut Option<E> {
        match in_capture {
            true => &mut self.in_capture,
            false => &mut self.idle,
        }
    }
}

/// Each stream's pending work, in the order the streams were first recorded.
type WorkList<B> = Vec<(Key<<B as Backend>::Context>, Pending<<B as Backend>::Event>)>;

/// A producer's record of which streams have pending work on a buffer: an event per
/// stream that has used it (not only the last, as cudarc keeps), and a second one for the
/// work a stream captured into a CUDA graph.
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
/// # Ok::<(), cai_core::DriverError>(())
/// ```
pub struct PendingWork<B: Backend> {
    backend: B,
    work: Mutex<WorkList<B>>,
}

impl<B: Backend + fmt::Debug> fmt::Debug for PendingWork<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingWork").field("backend", &self.backend).field("streams", &self.streams()).finish()
    }
}

impl<B: Backend> PendingWork<B> {
    /// No pending work yet.
    pub fn new(backend: B) -> Self {
        PendingWork { backend, work: Mutex::new(Vec::new()) }
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    fn key(&self, stream: Stream) -> Result<Key<B::Context>, DriverError> {
        let at = self.backend.locate(stream)?;
        let thread = (stream == Stream::PerThreadDefault).then(|| std::thread::current().id());
        Ok(Key { at, thread })
    }

    /// Notes that work touching the buffer was enqueued on `stream`: (re-)records that
    /// stream's event, its capture event while the stream captures a graph. `Stream::None`
    /// is refused.
    pub fn record(&self, stream: Stream) -> Result<(), DriverError> {
        if stream.is_none() {
            return Err(DriverError::Invalid("work cannot be recorded on stream None".into()));
        }
        let key = self.key(stream)?;
        let captured = match self.backend.capture(key.at)? {
            Capture::Idle => None,
            Capture::Active(id) => Some(id),
            Capture::Implicit => return Err(implicit_error(stream)),
        };
        let in_capture = captured.is_some();
        let mut work = self.work.lock().unwrap_or_else(PoisonError::into_inner);
        let found = work.iter().position(|(k, _)| *k == key);
        let index = match found.and_then(|i| Some((i, work[i].1.slot(in_capture).as_ref()?))) {
            Some((i, event)) => {
                self.backend.record(event, key.at)?;
                i
            }
            // The stream's first work of this kind: its event is kept once it is recorded
            // (an event never recorded would be waited on for nothing, or inside a capture
            // whose sequence it does not belong to).
            None => {
                let event = self.backend.create_event(key.at.context)?;
                self.backend.record(&event, key.at)?;
                let index = found.unwrap_or_else(|| {
                    work.push((key, Pending { idle: None, in_capture: None, sequence: 0 }));
                    work.len() - 1
                });
                *work[index].1.slot(in_capture) = Some(event);
                index
            }
        };
        if let Some(sequence) = captured {
            work[index].1.sequence = sequence;
        }
        Ok(())
    }

    /// Makes `target` wait on the event of every other stream with pending work and
    /// returns it, to be exported. With `target` = `Stream::None` (the producer's opt-out)
    /// nothing is ordered.
    pub fn export_on(&self, target: Stream) -> Result<Stream, DriverError> {
        if target.is_none() {
            return Ok(Stream::None);
        }
        let key = self.key(target)?;
        let work = self.work.lock().unwrap_or_else(PoisonError::into_inner);
        let others: Vec<&Pending<B::Event>> = work.iter().filter(|(k, _)| *k != key).map(|(_, p)| p).collect();
        if others.is_empty() {
            return Ok(target);
        }
        let capture = self.backend.capture(key.at)?;
        if capture == Capture::Implicit {
            return Err(implicit_error(target));
        }
        for pending in others {
            // Work enqueued outside a capture may still run on its stream.
            if let Some(event) = &pending.idle {
                match capture {
                    Capture::Active(_) => self.backend.wait_host(event)?,
                    _ => self.backend.wait(key.at, event)?,
                }
            }
            // Work captured into a graph runs when the graph is launched, which the
            // launcher orders; within the same capture it is a dependency of the graph.
            if let (Some(event), Capture::Active(sequence)) = (&pending.in_capture, capture) {
                if pending.sequence == sequence {
                    self.backend.wait(key.at, event)?;
                }
            }
        }
        Ok(target)
    }

    /// The streams with recorded work, in the order they were first recorded.
    pub fn streams(&self) -> Vec<Stream> {
        self.work.lock().unwrap_or_else(PoisonError::into_inner).iter().map(|(k, _)| k.at.stream).collect()
    }
}

/// One operation a [`Recorder`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `create_event` made event `event` in `context`.
    Create {
        /// The event's number.
        event: u32,
        /// The context it belongs to.
        context: u32,
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
    /// `wait_host(event)`.
    WaitHost {
        /// The event's number.
        event: u32,
    },
}

/// An event of the [`Recorder`]: its number and its context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecordedEvent {
    /// The number, from 0 in creation order.
    pub id: u32,
    /// The context it was created in.
    pub context: u32,
}

/// A backend that performs nothing and writes every operation down, numbering events
/// from 0 in creation order. Contexts are numbers: handles belong to context 0 unless
/// [`set_context`](Recorder::set_context) says otherwise, and the default streams resolve
/// in the [current](Recorder::set_current) context (0 at first). Recording an event on a
/// stream of another context is an error, as it is for the driver.
#[derive(Debug, Default)]
pub struct Recorder {
    ops: Mutex<Vec<Op>>,
    events: Mutex<u32>,
    current: Mutex<u32>,
    contexts: Mutex<HashMap<usize, u32>>,
    captures: Mutex<HashMap<Located<u32>, Capture>>,
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

    /// Makes `context` the one the default streams resolve in, as making a context
    /// current on the calling thread does.
    pub fn set_current(&self, context: u32) {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = context;
    }

    /// Places the stream handle `handle` in `context`.
    pub fn set_context(&self, handle: usize, context: u32) {
        self.contexts.lock().unwrap_or_else(PoisonError::into_inner).insert(handle, context);
    }

    /// Sets what [`capture`](Backend::capture) answers for `stream` located in `context`.
    pub fn set_capture(&self, stream: Stream, context: u32, capture: Capture) {
        self.captures.lock().unwrap_or_else(PoisonError::into_inner).insert(Located { stream, context }, capture);
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
    type Event = RecordedEvent;
    type Context = u32;

    fn locate(&self, stream: Stream) -> Result<Located<u32>, DriverError> {
        not_none(stream, "locate")?;
        let context = match stream {
            Stream::Handle(h) => {
                self.contexts.lock().unwrap_or_else(PoisonError::into_inner).get(&h.get()).copied().unwrap_or(0)
            }
            _ => *self.current.lock().unwrap_or_else(PoisonError::into_inner),
        };
        Ok(Located { stream, context })
    }

    fn capture(&self, stream: Located<u32>) -> Result<Capture, DriverError> {
        Ok(self.captures.lock().unwrap_or_else(PoisonError::into_inner).get(&stream).copied().unwrap_or(Capture::Idle))
    }

    fn create_event(&self, context: u32) -> Result<RecordedEvent, DriverError> {
        let mut next = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        let event = RecordedEvent { id: *next, context };
        *next += 1;
        self.push(Op::Create { event: event.id, context });
        Ok(event)
    }

    fn record(&self, event: &RecordedEvent, stream: Located<u32>) -> Result<(), DriverError> {
        not_none(stream.stream, "record")?;
        if event.context != stream.context {
            return Err(DriverError::Invalid(format!(
                "event {} of context {} recorded on stream {} of context {}",
                event.id, event.context, stream.stream, stream.context
            )));
        }
        self.push(Op::Record { event: event.id, stream: stream.stream });
        Ok(())
    }

    fn wait(&self, stream: Located<u32>, event: &RecordedEvent) -> Result<(), DriverError> {
        not_none(stream.stream, "wait")?;
        self.push(Op::Wait { stream: stream.stream, event: event.id });
        Ok(())
    }

    fn synchronize(&self, stream: Located<u32>) -> Result<(), DriverError> {
        not_none(stream.stream, "synchronize")?;
        self.push(Op::Synchronize { stream: stream.stream });
        Ok(())
    }

    fn wait_host(&self, event: &RecordedEvent) -> Result<(), DriverError> {
        self.push(Op::WaitHost { event: event.id });
        Ok(())
    }
}

impl<B: Backend + ?Sized> Backend for &B {
    type Event = B::Event;
    type Context = B::Context;
    fn locate(&self, stream: Stream) -> Result<Located<B::Context>, DriverError> {
        (**self).locate(stream)
    }
    fn capture(&self, stream: Located<B::Context>) -> Result<Capture, DriverError> {
        (**self).capture(stream)
    }
    fn create_event(&self, context: B::Context) -> Result<Self::Event, DriverError> {
        (**self).create_event(context)
    }
    fn record(&self, event: &Self::Event, stream: Located<B::Context>) -> Result<(), DriverError> {
        (**self).record(event, stream)
    }
    fn wait(&self, stream: Located<B::Context>, event: &Self::Event) -> Result<(), DriverError> {
        (**self).wait(stream, event)
    }
    fn synchronize(&self, stream: Located<B::Context>) -> Result<(), DriverError> {
        (**self).synchronize(stream)
    }
    fn wait_host(&self, event: &Self::Event) -> Result<(), DriverError> {
        (**self).wait_host(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::StreamHandle;

    fn s(n: usize) -> Stream {
        Stream::Handle(StreamHandle::new(n).unwrap())
    }

    fn create(event: u32) -> Op {
        Op::Create { event, context: 0 }
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
                create(0),
                Op::Record { event: 0, stream: s(7) },
                create(1),
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
    fn per_thread_default_streams_of_two_threads_are_two_streams() {
        let work = PendingWork::new(Recorder::default());
        work.record(Stream::PerThreadDefault).unwrap();
        std::thread::scope(|scope| {
            scope.spawn(|| work.record(Stream::PerThreadDefault).unwrap());
        });
        assert_eq!(work.streams(), [Stream::PerThreadDefault, Stream::PerThreadDefault], "one entry per thread");
        work.backend().clear();
        // This thread's per-thread stream waits on the other thread's, not on itself.
        work.export_on(Stream::PerThreadDefault).unwrap();
        assert_eq!(work.backend().ops(), [Op::Wait { stream: Stream::PerThreadDefault, event: 1 }]);
    }

    #[test]
    fn the_same_marker_in_two_contexts_is_two_streams() {
        let r = Recorder::default();
        let pool = EventPool::new();
        // Stream 1 resolved on device 0, then stream 1 resolved on device 1: different streams.
        let on0 = r.locate(Stream::LegacyDefault).unwrap();
        r.set_current(1);
        let on1 = r.locate(Stream::LegacyDefault).unwrap();
        assert_ne!(on0, on1);
        assert_eq!(order(&r, &pool, on0, on1).unwrap(), Action::Waited);
        // The event was made in the producer's context and recorded there.
        assert_eq!(
            r.ops(),
            [
                Op::Create { event: 0, context: 0 },
                Op::Record { event: 0, stream: Stream::LegacyDefault },
                Op::Wait { stream: Stream::LegacyDefault, event: 0 },
            ]
        );
        assert_eq!(order(&r, &pool, on1, on1).unwrap(), Action::SameStream);
    }

    #[test]
    fn events_are_recorded_in_the_producer_streams_context() {
        let r = Recorder::default();
        r.set_context(7, 3);
        r.set_context(9, 5);
        let pool = EventPool::new();
        assert_eq!(import(&r, &pool, s(7), s(9), SyncPolicy::Wait).unwrap(), Action::Waited);
        assert_eq!(import(&r, &pool, s(9), s(7), SyncPolicy::Wait).unwrap(), Action::Waited);
        assert_eq!(import(&r, &pool, s(7), s(9), SyncPolicy::Wait).unwrap(), Action::Waited);
        let creates: Vec<Op> = r.ops().into_iter().filter(|op| matches!(op, Op::Create { .. })).collect();
        assert_eq!(creates, [Op::Create { event: 0, context: 3 }, Op::Create { event: 1, context: 5 }]);
        assert_eq!(pool.len(), 2, "one pooled event per context, reused");
        // A backend mistake would show: an event recorded on another context's stream fails.
        let stray = r.create_event(5).unwrap();
        assert!(r.record(&stray, r.locate(s(7)).unwrap()).is_err());
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
            [create(0), Op::Record { event: 0, stream: s(7) }, Op::Wait { stream: Stream::LegacyDefault, event: 0 },]
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
    fn a_capturing_consumer_gets_a_host_wait_not_a_cross_capture_event_wait() {
        let r = Recorder::default();
        let pool = EventPool::new();
        r.set_capture(s(9), 0, Capture::Active(4));
        assert_eq!(import(&r, &pool, s(7), s(9), SyncPolicy::Wait).unwrap(), Action::WaitedForCapture);
        assert_eq!(r.ops(), [create(0), Op::Record { event: 0, stream: s(7) }, Op::WaitHost { event: 0 }]);
    }

    #[test]
    fn a_capturing_producer_orders_only_streams_of_its_own_capture() {
        let r = Recorder::default();
        let pool = EventPool::new();
        r.set_capture(s(7), 0, Capture::Active(4));
        r.set_capture(s(9), 0, Capture::Active(4));
        r.set_capture(s(11), 0, Capture::Active(5));
        // Same capture: an event dependency inside the graph.
        assert_eq!(import(&r, &pool, s(7), s(9), SyncPolicy::Wait).unwrap(), Action::Waited);
        // The capturing stream itself.
        assert_eq!(import(&r, &pool, s(7), s(7), SyncPolicy::Wait).unwrap(), Action::SameStream);
        r.clear();
        for consumer in [s(11), s(13), Stream::LegacyDefault] {
            let e = import(&r, &pool, s(7), consumer, SyncPolicy::Wait).unwrap_err();
            assert!(matches!(e, DriverError::Capture(_)), "{e}");
            assert!(e.to_string().starts_with("the producer's stream 7 is capturing a CUDA graph (capture 4)"), "{e}");
        }
        let e = import(&r, &pool, s(7), s(9), SyncPolicy::Synchronize).unwrap_err();
        assert!(e.to_string().contains("cannot be synchronized"), "{e}");
        assert!(r.ops().is_empty(), "nothing touched a capturing stream: {:?}", r.ops());
    }

    #[test]
    fn the_legacy_stream_is_not_touched_while_a_blocking_capture_forbids_it() {
        let r = Recorder::default();
        let pool = EventPool::new();
        r.set_capture(Stream::LegacyDefault, 0, Capture::Implicit);
        for (producer, consumer) in [(s(7), Stream::LegacyDefault), (Stream::LegacyDefault, s(7))] {
            let e = import(&r, &pool, producer, consumer, SyncPolicy::Wait).unwrap_err();
            assert!(
                e.to_string().contains("the legacy default stream (stream 1) cannot be used while a blocking stream"),
                "{e}"
            );
        }
        assert!(import(&r, &pool, Stream::LegacyDefault, s(7), SyncPolicy::Synchronize).is_err());
        let work = PendingWork::new(&r);
        assert!(work.record(Stream::LegacyDefault).is_err());
        assert!(r.ops().is_empty(), "{:?}", r.ops());
    }

    #[test]
    fn hand_back_makes_the_producer_stream_wait_for_the_consumer_stream() {
        let r = Recorder::default();
        let pool = EventPool::new();
        let at = |stream| r.locate(stream).unwrap();
        assert_eq!(hand_back(&r, &pool, at(s(9)), at(s(7))).unwrap(), Action::Waited);
        assert_eq!(r.ops(), [create(0), Op::Record { event: 0, stream: s(9) }, Op::Wait { stream: s(7), event: 0 }]);
        r.clear();
        assert_eq!(hand_back(&r, &pool, at(s(7)), at(s(7))).unwrap(), Action::SameStream);
        assert!(r.ops().is_empty());
        // The event is created in the consumer stream's context, where it is recorded.
        r.set_context(11, 1);
        assert_eq!(hand_back(&r, &pool, at(s(11)), at(s(7))).unwrap(), Action::Waited);
        assert_eq!(
            r.ops(),
            [
                Op::Create { event: 1, context: 1 },
                Op::Record { event: 1, stream: s(11) },
                Op::Wait { stream: s(7), event: 1 }
            ]
        );
    }

    #[test]
    fn hand_back_under_capture() {
        let r = Recorder::default();
        let pool = EventPool::new();
        let at = |stream| r.locate(stream).unwrap();
        r.set_capture(s(9), 0, Capture::Active(4));
        r.set_capture(s(11), 0, Capture::Active(4));
        r.set_capture(s(13), 0, Capture::Active(5));
        // Work captured on the consumer's stream runs at the graph's launch: nothing to order
        // now, and nothing touches the capturing stream.
        assert_eq!(hand_back(&r, &pool, at(s(9)), at(s(7))).unwrap(), Action::InGraph);
        assert_eq!(hand_back(&r, &pool, at(s(9)), at(s(13))).unwrap(), Action::InGraph);
        assert!(r.ops().is_empty(), "{:?}", r.ops());
        // Inside one capture: a dependency of the graph.
        assert_eq!(hand_back(&r, &pool, at(s(9)), at(s(11))).unwrap(), Action::Waited);
        assert_eq!(r.ops(), [create(0), Op::Record { event: 0, stream: s(9) }, Op::Wait { stream: s(11), event: 0 }]);
        // A producer stream that began capturing meanwhile: the host waits for the
        // consumer's work, which a cross-capture event wait could not order.
        r.clear();
        assert_eq!(hand_back(&r, &pool, at(s(7)), at(s(9))).unwrap(), Action::WaitedForCapture);
        assert_eq!(r.ops(), [Op::Record { event: 0, stream: s(7) }, Op::WaitHost { event: 0 }]);
        // The legacy stream, while a blocking capture forbids touching it.
        r.clear();
        r.set_capture(Stream::LegacyDefault, 0, Capture::Implicit);
        for (consumer, producer) in [(s(7), Stream::LegacyDefault), (Stream::LegacyDefault, s(7))] {
            let e = hand_back(&r, &pool, at(consumer), at(producer)).unwrap_err();
            assert!(e.to_string().contains("the legacy default stream (stream 1) cannot be used"), "{e}");
        }
        assert!(r.ops().is_empty(), "{:?}", r.ops());
    }

    #[test]
    fn exports_under_capture() {
        let r = Recorder::default();
        let work = PendingWork::new(&r);
        work.record(s(7)).unwrap(); // outside any capture: event 0
        r.set_capture(s(9), 0, Capture::Active(4));
        work.record(s(9)).unwrap(); // inside capture 4: event 1
        r.clear();
        // An export on a stream of capture 4: a graph dependency on 9, a host wait for 7.
        r.set_capture(s(3), 0, Capture::Active(4));
        work.export_on(s(3)).unwrap();
        assert_eq!(r.ops(), [Op::WaitHost { event: 0 }, Op::Wait { stream: s(3), event: 1 }]);
        // An export outside the capture does not wait on the captured work.
        r.clear();
        work.export_on(s(5)).unwrap();
        assert_eq!(r.ops(), [Op::Wait { stream: s(5), event: 0 }]);
    }

    #[test]
    fn work_captured_later_does_not_hide_work_enqueued_before_the_capture() {
        let r = Recorder::default();
        let work = PendingWork::new(&r);
        work.record(s(7)).unwrap(); // event 0, outside any capture
        r.set_capture(s(7), 0, Capture::Active(4));
        work.record(s(7)).unwrap(); // event 1, inside capture 4: event 0 is kept
        assert_eq!(r.ops()[2..], [create(1), Op::Record { event: 1, stream: s(7) }]);
        for ended in [false, true] {
            if ended {
                r.set_capture(s(7), 0, Capture::Idle);
            }
            r.clear();
            work.export_on(s(3)).unwrap();
            assert_eq!(r.ops(), [Op::Wait { stream: s(3), event: 0 }], "capture ended: {ended}");
        }
        // Inside the same capture (stream 7 in it again, as CUDA would have it while the
        // capture lasts): the host waits for the earlier work, the graph on the captured work.
        r.set_capture(s(7), 0, Capture::Active(4));
        r.set_capture(s(3), 0, Capture::Active(4));
        r.clear();
        work.export_on(s(3)).unwrap();
        assert_eq!(r.ops(), [Op::WaitHost { event: 0 }, Op::Wait { stream: s(3), event: 1 }]);
        // Recorded again in each state: the same two events, re-recorded.
        r.clear();
        r.set_capture(s(7), 0, Capture::Active(5));
        work.record(s(7)).unwrap();
        r.set_capture(s(7), 0, Capture::Idle);
        work.record(s(7)).unwrap();
        assert_eq!(r.ops(), [Op::Record { event: 1, stream: s(7) }, Op::Record { event: 0, stream: s(7) }]);
        assert_eq!(work.streams(), [s(7)]);
    }

    #[test]
    fn settle_waits_on_the_host_for_an_event_and_never_for_a_capturing_stream() {
        let r = Recorder::default();
        let pool = EventPool::new();
        let at = r.locate(s(7)).unwrap();
        assert_eq!(settle(&r, &pool, at).unwrap(), Action::Synchronized);
        assert_eq!(r.ops(), [create(0), Op::Record { event: 0, stream: s(7) }, Op::WaitHost { event: 0 }]);
        r.clear();
        r.set_capture(s(7), 0, Capture::Active(2));
        let e = settle(&r, &pool, at).unwrap_err();
        assert!(e.to_string().contains("the host cannot wait for it"), "{e}");
        assert!(r.ops().is_empty());
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
        assert!(e.starts_with("'later' is not a sync policy"), "{e}");
        assert_eq!(SyncPolicy::parse(SyncPolicy::Synchronize.name()), Ok(SyncPolicy::Synchronize));
    }

    /// A backend whose calls fail, to check that errors propagate and events return.
    struct Failing;
    impl Backend for Failing {
        type Event = ();
        type Context = ();
        fn locate(&self, stream: Stream) -> Result<Located<()>, DriverError> {
            Ok(Located { stream, context: () })
        }
        fn capture(&self, _: Located<()>) -> Result<Capture, DriverError> {
            Ok(Capture::Idle)
        }
        fn create_event(&self, _: ()) -> Result<(), DriverError> {
            Ok(())
        }
        fn record(&self, _: &(), _: Located<()>) -> Result<(), DriverError> {
            Err(DriverError::NotFound)
        }
        fn wait(&self, _: Located<()>, _: &()) -> Result<(), DriverError> {
            Err(DriverError::NotFound)
        }
        fn synchronize(&self, _: Located<()>) -> Result<(), DriverError> {
            Err(DriverError::NotFound)
        }
        fn wait_host(&self, _: &()) -> Result<(), DriverError> {
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
