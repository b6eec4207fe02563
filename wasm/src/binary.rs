//! The binary step behind the package's `Policy#handle` (the hot path of every JS
//! host): the common inputs come in, and every output goes out, as compact records in
//! one byte buffer that the policy owns and the JS side reads and writes in place in
//! the module's memory. No JSON text, no string passed through wasm-bindgen, no
//! allocation for the buffer once it has grown to its working size.
//!
//! It is an encoding of the same values, not another protocol: the JS side
//! (`npm/src/binary.js`) encodes only inputs it has fully checked against what the
//! JSON reader accepts (every other input, and every input it does not recognise,
//! goes through `handleJson`, so errors keep their exact text), and it builds from
//! the records plain objects deep-equal to `JSON.parse` of `handleJson`'s answer.
//! The two files are one format; change them together. An input the policy refuses
//! (past a bound of `rota_core::limits`, or any other error) is answered with status
//! 2, and JS feeds it again through the JSON step, which refuses it in its own words:
//! the policy changes nothing on an error, and the bounds are checked once (in
//! `Policy::handle`), not here as well.
//!
//! # The buffer
//!
//! `__ioBuffer(n)` grows the buffer to at least `n` bytes and returns its address. JS
//! writes an input at offset 0 and calls `__step(len, level)`, which reads the input,
//! steps the policy, writes the answer over the buffer from offset 0 and returns the
//! buffer's (possibly new) address. `level` (0 debug, 1 info, 2 warn) leaves the events
//! below it out of the answer, and its bit [`NO_PERSIST`] the `persist` outputs. All
//! numbers are little-endian.
//!
//! Input: `[0]` kind (1 lease, 2 tryLease, 3 release, 4 tick, 5 cancel, 6 report,
//! 7 resume, 8 probeResult), `[1]` flags (which optional fields are present), `[2]` a
//! small value (report: the failure kind; probeResult: up), `[8..16)` `now` as f64,
//! `[16..40)` up to three more f64 numbers, then strings from 40, each a u32 byte
//! length and its UTF-8 bytes.
//!
//! | kind | flags | numbers | strings |
//! |---|---|---|---|
//! | lease, tryLease | 1 rank, 2 eventTime, 4 deadline, 8 prefer, 16 pin, 32 label, 64 avoid | rank, eventTime, deadline | id, role, prefer?, pin?, label?, avoid? (u32 count + strings) |
//! | release | | lease | |
//! | cancel | | | id |
//! | report (with a `kind`; a failure of facts takes the JSON step) | 1 resetAt, 2 retryAfterMs | resetAt, retryAfterMs | executor, message |
//! | resume | | | executor |
//! | probeResult | | | executor |
//!
//! Answer: `[0..4)` its length, `[4..8)` the buffer's size (the most the next input
//! may use), `[8]` status (0 outputs, 2 an input this reader or the policy refused:
//! use the JSON step), `[9]` 1 when there is a wake-up time, `[12..16)` the number of
//! outputs, `[16..24)` the wake-up time as f64, then from 24: the outputs (status 0).
//!
//! A string is a byte `t`: below 0x80, an ASCII string of `t` bytes follows; 0x80, a
//! u32 byte length and UTF-8 bytes follow; 0x81, a slot byte: the string in that
//! slot ([`Strings`]); 0x82, a slot byte and a string (of the first two forms), which
//! takes that slot; 0x83, the input's own `id` (a lease's or a tryLease's: the id JS
//! just sent, which it keeps rather than reads back); 0x84, a u32 index: the executor
//! name at that place of the executor table ([`Strings`]); 0x85, a u32 index and a
//! string (of the first two forms), which takes that place. A number the core holds as u64 or i64 is
//! written as the nearest f64 (what `JSON.parse` gives for its decimal text).
//!
//! Outputs, each a kind byte and its fields in the JSON's order:
//!
//! | kind | fields |
//! |---|---|
//! | 0 any output | its JSON text (string) |
//! | 1 granted | request, lease (f64), executor, role, passed (u32), extras (u8: 1 occupied, 2 hold), hold? (JSON text) |
//! | 2 waiting | request, role, report, ahead (u32) |
//! | 3 event | level (u8: 0 debug, 1 info, 2 warn), name, message, count (u32), (key, value)* |
//! | 4 cancelled, 6 unavailable | request |
//! | 5 timedOut | request, u32 count, reasons |
//! | 7 exhausted | request, role, count (u32), reasons |
//! | 8 probe | executor, url |
//! | 9 createMachine | request, executor |
//! | 10 preflight | executor |
//! | 11 the `granted` event of the grant just before it | level (u8), message: its fields are that grant's `executor`, `lease`, `passed`, `request`, `role` |
//! | 12 the same, with the plain message "`<executor> takes <role>`" | level (u8) |
//! | 13 a plain release's `released` event: fields `{executor, lease}`, message "`<executor>'s slot is released`" | level (u8), executor, lease (f64) |
//! | 14 persist | u32 count, ids, version (u32), u32 count, exclusions: id, reason, kind, has until (u8), until? (f64) |
//!
//! An output that names an `owner` (a shared roster's) is always kind 0; so is the
//! event after such a grant. Inputs with an `owner` or a `timeoutMs` take the JSON step.
//!
//! A field value: a byte 0 null, 1 false, 2 true, 3 a number (f64), 4 a string,
//! 5 anything else (its JSON text, a string).

use rota_core::json::to_text;
use rota_core::{Failure, FailureKind, Input, LeaseRequest, Level, Output, OutputRef};
use serde_json::Value;

/// Where the answer's outputs start.
pub(crate) const HEADER: usize = 24;
/// Where an input's strings start.
const STRINGS: usize = 40;
/// The largest integer every JS number holds exactly (`Number.MAX_SAFE_INTEGER`).
const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

/// In `__step`'s level byte: leave the `persist` outputs out of the answer.
pub(crate) const NO_PERSIST: u8 = 4;

pub(crate) const STATUS_OUTPUTS: u8 = 0;
pub(crate) const STATUS_REFUSED: u8 = 2;

/// The input in the buffer's first `len` bytes, or `None` when it is not one this
/// reader knows (JS then sends it as JSON: the buffer is never trusted to be well
/// formed, only to be bounded). Its bounds are `Policy::handle`'s to check.
pub(crate) fn read_input(buf: &[u8]) -> Option<Input> {
    let mut r = Reader {
        buf,
        at: STRINGS.min(buf.len()),
    };
    let kind = *buf.first()?;
    let flags = *buf.get(1)?;
    let small = *buf.get(2)?;
    let now = r.u64_at(8)?;
    Some(match kind {
        1 | 2 => {
            let id = r.string()?;
            let role = r.string()?;
            let rank = if flags & 1 != 0 {
                Some(r.i64_at(16)?)
            } else {
                None
            };
            let event_time = if flags & 2 != 0 {
                Some(r.u64_at(24)?)
            } else {
                None
            };
            let deadline = if flags & 4 != 0 {
                Some(r.u64_at(32)?)
            } else {
                None
            };
            let prefer = if flags & 8 != 0 {
                Some(r.string()?)
            } else {
                None
            };
            let pin = if flags & 16 != 0 {
                Some(r.string()?)
            } else {
                None
            };
            let label = if flags & 32 != 0 {
                Some(r.string()?)
            } else {
                None
            };
            let avoid = if flags & 64 != 0 {
                let count = r.u32()? as usize;
                // Each string takes at least its 4-byte length: a bound on a bogus count.
                if count > buf.len() / 4 {
                    return None;
                }
                let mut avoid = Vec::with_capacity(count);
                for _ in 0..count {
                    avoid.push(r.string()?);
                }
                avoid
            } else {
                Vec::new()
            };
            let request = LeaseRequest {
                now,
                id,
                role,
                avoid,
                prefer,
                pin,
                rank,
                event_time,
                label,
                deadline,
                // An owner or a `timeoutMs` takes the JSON step (`binary.js`).
                timeout_ms: None,
                owner: None,
            };
            if kind == 1 {
                Input::Lease(request)
            } else {
                Input::TryLease(request)
            }
        }
        3 => Input::Release {
            now,
            lease: r.u64_at(16)?,
        },
        4 => Input::Tick { now },
        5 => Input::Cancel {
            now,
            id: r.string()?,
        },
        6 => {
            let kind = match small {
                0 => FailureKind::UsageLimit,
                1 => FailureKind::RateLimit,
                2 => FailureKind::Authentication,
                3 => FailureKind::Outage,
                4 => FailureKind::ModelUnavailable,
                5 => FailureKind::Other,
                _ => return None,
            };
            let executor = r.string()?;
            let message = r.string()?;
            let reset_at = if flags & 1 != 0 {
                Some(r.u64_at(16)?)
            } else {
                None
            };
            let retry_after_ms = if flags & 2 != 0 {
                Some(r.u64_at(24)?)
            } else {
                None
            };
            Input::Report {
                now,
                executor,
                failure: Failure {
                    reset_at,
                    retry_after_ms,
                    ..Failure::of_kind(kind, message)
                },
            }
        }
        7 => Input::Resume {
            now,
            executor: r.string()?,
        },
        8 => Input::ProbeResult {
            now,
            executor: r.string()?,
            up: match small {
                0 => false,
                1 => true,
                _ => return None,
            },
        },
        _ => return None,
    })
}

/// Reads an input: numbers at fixed places, strings in order from `at`.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn f64_at(&self, at: usize) -> Option<f64> {
        let bytes = self.buf.get(at..at + 8)?;
        Some(f64::from_le_bytes(bytes.try_into().ok()?))
    }

    /// A whole number in `0..=MAX_SAFE` (what JS sends only after checking it).
    fn u64_at(&self, at: usize) -> Option<u64> {
        let v = self.f64_at(at)?;
        (v.fract() == 0.0 && (0.0..=MAX_SAFE).contains(&v)).then_some(v as u64)
    }

    /// A whole number in `-MAX_SAFE..=MAX_SAFE`.
    fn i64_at(&self, at: usize) -> Option<i64> {
        let v = self.f64_at(at)?;
        (v.fract() == 0.0 && (-MAX_SAFE..=MAX_SAFE).contains(&v)).then_some(v as i64)
    }

    fn u32(&mut self) -> Option<u32> {
        let bytes = self.buf.get(self.at..self.at + 4)?;
        self.at += 4;
        Some(u32::from_le_bytes(bytes.try_into().ok()?))
    }

    fn string(&mut self) -> Option<String> {
        let len = self.u32()? as usize;
        let bytes = self.buf.get(self.at..self.at.checked_add(len)?)?;
        self.at += len;
        std::str::from_utf8(bytes).ok().map(str::to_owned)
    }
}

/// The strings an answer sends by reference: those that tend to repeat from one
/// answer to the next at the same place (an event's name, message and field keys, a
/// grant's executor and role ...). Each such place has a slot holding the last string
/// sent there; the JS side mirrors the slots (it fills one from every `0x82` record
/// and reads it for every `0x81`). A slot is compared, never hashed: a miss costs a
/// copy into the slot's own buffer. JS reads every answer whole, in order; when it
/// could not, it calls `__ioReset`, which empties the slots on both sides.
#[derive(Default)]
pub(crate) struct Strings {
    slots: Vec<String>,
    /// The id of the lease or tryLease being answered (else empty): its grant or its
    /// wait names it as `0x83`, the string JS sent (issue 15: a request id is new on
    /// every lease, so neither a slot nor a decode on the JS side pays).
    input_id: String,
    /// The executor table: by an executor's place in the roster, the name last sent
    /// for it (a grant's or a release's executor). The roster hands out its executors
    /// in turn, so one slot for them all would miss on every grant (issue 15: a JS
    /// string decoded per grant). A place is a key, never trusted: its name is
    /// compared, and another name there replaces it.
    executors: Vec<String>,
}

/// The places with a slot. A grant's request, executor and role share theirs with
/// the same fields of the event that follows it (sent once, referenced there).
const SLOT_EXECUTOR: usize = 0;
const SLOT_ROLE: usize = 1;
const SLOT_REQUEST: usize = 2;
const SLOT_EVENT_NAME: usize = 3;
const SLOT_EVENT_MESSAGE: usize = 4;
/// A waiting request's report: the same text for every request that waits on an
/// unchanged roster (issue 15: one JS string for them all, not one decoded for each).
const SLOT_REPORT: usize = 5;
/// A persisted exclusion's reason and kind: a persist lists every exclusion, and
/// most of them share these (one JS string each, not one decoded per exclusion).
const SLOT_EXCLUSION_REASON: usize = 6;
const SLOT_EXCLUSION_KIND: usize = 7;
/// An event's field keys, by position (the first [`FIELD_SLOTS`]).
const SLOT_FIELD_KEY: usize = 8;
/// An event's string field values, by position.
const SLOT_FIELD_VALUE: usize = SLOT_FIELD_KEY + FIELD_SLOTS;
const FIELD_SLOTS: usize = 16;
const SLOTS: usize = SLOT_FIELD_VALUE + FIELD_SLOTS;
/// Longer strings are always sent whole.
const SLOT_LONGEST: usize = 160;
/// The executor table's places: the roster's most executors.
const EXECUTOR_TABLE: usize = rota_core::limits::MAX_EXECUTORS;
/// A report names at most ten executors and a count: longer than other slots' strings.
const REPORT_LONGEST: usize = 1024;

/// `a == b`, eight bytes at a time: wasm32's `memcmp` is a loop over bytes, and a
/// waiting report (about a hundred bytes) is compared with its slot's on every wait.
fn same_text(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let (words_a, words_b) = (a.chunks_exact(8), b.chunks_exact(8));
    let tails_equal = words_a.remainder().iter().eq(words_b.remainder());
    tails_equal
        && words_a
            .zip(words_b)
            .all(|(x, y)| <[u8; 8]>::try_from(x).ok() == <[u8; 8]>::try_from(y).ok())
}

impl Strings {
    pub(crate) fn clear(&mut self) {
        self.slots.iter_mut().for_each(String::clear);
        self.executors.clear();
    }

    /// The input about to be answered: a lease's or tryLease's id is echoed (`0x83`).
    pub(crate) fn answering(&mut self, input: Option<&Input>) {
        self.input_id.clear();
        if let Some(Input::Lease(request) | Input::TryLease(request)) = input {
            self.input_id.push_str(&request.id);
        }
    }
}

fn level_byte(level: Level) -> u8 {
    match level {
        Level::Debug => 0,
        Level::Info => 1,
        Level::Warn => 2,
    }
}

/// The owner an output names (a shared roster's), if any.
fn owner_of(output: &Output) -> Option<&str> {
    match output {
        Output::Granted { owner, .. }
        | Output::Exhausted { owner, .. }
        | Output::TimedOut { owner, .. }
        | Output::Unavailable { owner, .. }
        | Output::Cancelled { owner, .. }
        | Output::Waiting { owner, .. }
        | Output::CreateMachine { owner, .. }
        | Output::DeleteMachine { owner, .. } => owner.as_deref(),
        _ => None,
    }
}

/// Writes an answer over `out` from offset 0: the header, then the records. The
/// buffer keeps its length (its whole allocation, zeroed when it grew), so that JS may
/// write the next input anywhere in it; it doubles when an answer needs more.
pub(crate) struct Writer<'a> {
    out: &'a mut Vec<u8>,
    at: usize,
    strings: &'a mut Strings,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(out: &'a mut Vec<u8>, strings: &'a mut Strings, status: u8) -> Writer<'a> {
        let mut writer = Writer {
            out,
            at: 0,
            strings,
        };
        writer.fixed([0; HEADER]);
        if let Some(byte) = writer.out.get_mut(8) {
            *byte = status;
        }
        if writer.strings.slots.len() < SLOTS {
            writer.strings.slots.resize(SLOTS, String::new());
        }
        writer
    }

    /// Fills in the header's length, size, output count and wake-up time.
    pub(crate) fn finish(self, count: u32, wake_at: Option<u64>) {
        let len = self.at as u32;
        let size = self.out.len() as u32;
        let (flag, time) = match wake_at {
            Some(t) => (1, t as f64),
            None => (0, 0.0),
        };
        if let Some(header) = self
            .out
            .get_mut(..HEADER)
            .and_then(|header| <&mut [u8; HEADER]>::try_from(header).ok())
        {
            let [l0, l1, l2, l3] = len.to_le_bytes();
            let [s0, s1, s2, s3] = size.to_le_bytes();
            let [c0, c1, c2, c3] = count.to_le_bytes();
            let [t0, t1, t2, t3, t4, t5, t6, t7] = time.to_le_bytes();
            let status = header[8];
            *header = [
                l0, l1, l2, l3, s0, s1, s2, s3, status, flag, 0, 0, c0, c1, c2, c3, t0, t1, t2, t3,
                t4, t5, t6, t7,
            ];
        }
    }

    /// A few bytes: one store (an array assignment, where `copy_from_slice` would call
    /// a generic copy in this size-optimized build).
    #[inline]
    fn fixed<const N: usize>(&mut self, bytes: [u8; N]) {
        let end = self.at + N;
        if end > self.out.len() {
            self.grow(end);
        }
        if let Some(to) = self
            .out
            .get_mut(self.at..end)
            .and_then(|to| <&mut [u8; N]>::try_from(to).ok())
        {
            *to = bytes;
        }
        self.at = end;
    }

    fn put(&mut self, bytes: &[u8]) {
        let end = self.at + bytes.len();
        if end > self.out.len() {
            self.grow(end);
        }
        if let Some(to) = self.out.get_mut(self.at..end) {
            to.copy_from_slice(bytes);
        }
        self.at = end;
    }

    #[cold]
    fn grow(&mut self, end: usize) {
        let size = end.max(2 * self.out.len()).max(256);
        self.out.resize(size, 0);
        // The whole allocation: what JS may use for the next input.
        let capacity = self.out.capacity();
        self.out.resize(capacity, 0);
    }

    fn byte(&mut self, b: u8) {
        self.fixed([b]);
    }

    fn u32(&mut self, n: u32) {
        self.fixed(n.to_le_bytes());
    }

    fn f64(&mut self, n: f64) {
        self.fixed(n.to_le_bytes());
    }

    pub(crate) fn str(&mut self, s: &str) {
        if s.len() < 0x80 && s.is_ascii() {
            self.byte(s.len() as u8);
        } else {
            self.byte(0x80);
            self.u32(s.len() as u32);
        }
        self.put(s.as_bytes());
    }

    /// A request id: `0x83` when it is the input's own, else at its slot.
    fn request(&mut self, id: &str) {
        if self.is_input_id(id) {
            self.byte(0x83);
        } else {
            self.shared(SLOT_REQUEST, id);
        }
    }

    /// A request id with no slot (a wait's: each is another request's).
    fn request_unshared(&mut self, id: &str) {
        if self.is_input_id(id) {
            self.byte(0x83);
        } else {
            self.str(id);
        }
    }

    fn is_input_id(&self, id: &str) -> bool {
        !id.is_empty() && same_text(&self.strings.input_id, id)
    }

    /// A string at a place with a slot: by reference when it is the slot's.
    fn shared(&mut self, slot: usize, s: &str) {
        self.shared_up_to(slot, s, SLOT_LONGEST);
    }

    /// An executor's name, by its place in the roster (`at`) when it has one: a
    /// reference when the executor table holds that name there.
    fn executor(&mut self, at: Option<usize>, name: &str) {
        let Some(i) =
            at.filter(|&i| i < EXECUTOR_TABLE && !name.is_empty() && name.len() <= SLOT_LONGEST)
        else {
            return self.shared(SLOT_EXECUTOR, name);
        };
        let table = &mut self.strings.executors;
        if table.len() <= i {
            table.resize(i + 1, String::new());
        }
        let Some(held) = table.get_mut(i) else {
            return self.shared(SLOT_EXECUTOR, name);
        };
        let [b0, b1, b2, b3] = (i as u32).to_le_bytes();
        if same_text(held, name) {
            self.fixed([0x84, b0, b1, b2, b3]);
        } else {
            held.clear();
            held.push_str(name);
            self.fixed([0x85, b0, b1, b2, b3]);
            self.str(name);
        }
    }

    /// As `shared`, for strings up to `longest` bytes.
    fn shared_up_to(&mut self, slot: usize, s: &str, longest: usize) {
        if s.is_empty() || s.len() > longest {
            return self.str(s);
        }
        let Some(last) = self.strings.slots.get_mut(slot) else {
            return self.str(s);
        };
        if same_text(last, s) {
            self.fixed([0x81, slot as u8]);
        } else {
            last.clear();
            last.push_str(s);
            self.fixed([0x82, slot as u8]);
            self.str(s);
        }
    }

    fn json(&mut self, value: &Value) {
        self.str(&to_text(value));
    }

    fn value(&mut self, slot: usize, value: &Value) {
        match value {
            Value::Null => self.byte(0),
            Value::Bool(false) => self.byte(1),
            Value::Bool(true) => self.byte(2),
            Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(u), _, _) => {
                    self.byte(3);
                    self.f64(u as f64);
                }
                (None, Some(i), _) => {
                    self.byte(3);
                    self.f64(i as f64);
                }
                (None, None, Some(f)) => {
                    self.byte(3);
                    self.f64(f);
                }
                _ => {
                    self.byte(5);
                    self.json(value);
                }
            },
            Value::String(s) => {
                self.byte(4);
                if slot < SLOT_FIELD_VALUE + FIELD_SLOTS {
                    self.shared(slot, s);
                } else {
                    self.str(s);
                }
            }
            _ => {
                self.byte(5);
                self.json(value);
            }
        }
    }

    /// Writes an output read in place. `last_grant` is the lease of the `granted`
    /// record written just before, if the record before was one (its event, kind 12,
    /// takes that grant's fields on the JS side).
    pub(crate) fn output_ref(&mut self, output: &OutputRef<'_>, last_grant: &mut Option<u64>) {
        let previous = last_grant.take();
        match output {
            OutputRef::Output(output) => self.output(output),
            OutputRef::Granted(grant) if grant.owner.is_none() => {
                self.byte(1);
                self.request(grant.request);
                self.f64(grant.lease as f64);
                self.executor(grant.executor_at, grant.executor);
                self.shared(SLOT_ROLE, grant.role);
                self.u32(grant.passed);
                self.byte(u8::from(grant.occupied) | (u8::from(grant.hold.is_some()) << 1));
                if let Some(hold) = grant.hold {
                    self.json(hold);
                }
                *last_grant = Some(grant.lease);
            }
            OutputRef::GrantedEvent(level, grant)
                if grant.owner.is_none()
                    && previous == Some(grant.lease)
                    && grant.label.is_none() =>
            {
                // The grant's event: its fields are the grant's (JS takes them from it),
                // and so is its message when it is the plain one (JS writes it).
                if grant.has_plain_message() {
                    self.fixed([12, level_byte(*level)]);
                } else if let Output::Event { message, .. } = grant.event(*level) {
                    self.fixed([11, level_byte(*level)]);
                    self.shared(SLOT_EVENT_MESSAGE, &message);
                }
            }
            OutputRef::Released {
                level,
                executor,
                at,
                lease,
            } => {
                // A plain release's event: JS writes its message from the executor.
                self.fixed([13, level_byte(*level)]);
                self.executor(Some(*at), executor);
                self.f64(*lease as f64);
            }
            // A shared roster's grant (it names its owner), or an event JS cannot
            // rebuild from the grant before it: built, and written as any output.
            OutputRef::Granted(grant) => self.output(&grant.output()),
            OutputRef::GrantedEvent(level, grant) => self.output(&grant.event(*level)),
        }
    }

    /// Writes a built output.
    fn output(&mut self, output: &Output) {
        if owner_of(output).is_some() {
            // A shared roster's output (it names its owner): as its canonical text.
            self.byte(0);
            let text = rota_core::write::to_json_text(output);
            self.str(&text);
            return;
        }
        match output {
            Output::Granted {
                request,
                lease,
                executor,
                role,
                hold,
                passed,
                occupied,
                ..
            } => {
                self.byte(1);
                self.request(request);
                self.f64(*lease as f64);
                self.shared(SLOT_EXECUTOR, executor);
                self.shared(SLOT_ROLE, role);
                self.u32(*passed);
                self.byte(u8::from(*occupied) | (u8::from(hold.is_some()) << 1));
                if let Some(hold) = hold {
                    self.json(hold);
                }
            }
            Output::Waiting {
                request,
                role,
                report,
                ahead,
                ..
            } => {
                self.byte(2);
                self.request_unshared(request);
                self.shared(SLOT_ROLE, role);
                self.shared_up_to(SLOT_REPORT, report, REPORT_LONGEST);
                self.u32(*ahead);
            }
            Output::Event {
                level,
                name,
                message,
                fields,
            } => {
                self.byte(3);
                self.byte(level_byte(*level));
                self.shared(SLOT_EVENT_NAME, name);
                self.shared(SLOT_EVENT_MESSAGE, message);
                self.u32(fields.len() as u32);
                for (i, (key, value)) in fields.iter().enumerate() {
                    if i < FIELD_SLOTS {
                        self.shared(SLOT_FIELD_KEY + i, key);
                    } else {
                        self.str(key);
                    }
                    let slot = match key {
                        "request" => SLOT_REQUEST,
                        "executor" => SLOT_EXECUTOR,
                        "role" => SLOT_ROLE,
                        _ => SLOT_FIELD_VALUE + i,
                    };
                    self.value(slot, value);
                }
            }
            Output::Cancelled { request, .. } => {
                self.byte(4);
                self.str(request);
            }
            Output::TimedOut {
                request, reasons, ..
            } => {
                self.byte(5);
                self.str(request);
                self.u32(reasons.len() as u32);
                for reason in reasons {
                    self.str(reason);
                }
            }
            Output::Unavailable { request, .. } => {
                self.byte(6);
                self.str(request);
            }
            Output::Exhausted {
                request,
                role,
                reasons,
                ..
            } => {
                self.byte(7);
                self.str(request);
                self.str(role);
                self.u32(reasons.len() as u32);
                for reason in reasons {
                    self.str(reason);
                }
            }
            Output::Probe { executor, url } => {
                self.byte(8);
                self.str(executor);
                self.str(url);
            }
            Output::CreateMachine {
                request, executor, ..
            } => {
                self.byte(9);
                self.str(request);
                self.str(executor);
            }
            Output::Preflight { executor } => {
                self.byte(10);
                self.str(executor);
            }
            Output::Persist { ids, state } => {
                self.byte(14);
                self.u32(ids.len() as u32);
                for id in ids {
                    self.str(id);
                }
                self.u32(state.version);
                self.u32(state.exclusions.len() as u32);
                for x in &state.exclusions {
                    self.str(&x.id);
                    self.shared(SLOT_EXCLUSION_REASON, &x.reason);
                    self.shared(SLOT_EXCLUSION_KIND, x.kind.name());
                    match x.until {
                        Some(until) => {
                            self.byte(1);
                            self.f64(until as f64);
                        }
                        None => self.byte(0),
                    }
                }
            }
            Output::DeleteMachine { .. } | Output::StartFailed { .. } => {
                self.byte(0);
                // As its canonical text.
                let text = rota_core::write::to_json_text(output);
                self.str(&text);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::same_text;

    #[test]
    fn same_text_is_string_equality() {
        let texts = [
            "",
            "a",
            "e0 busy",
            "e0 busy; e1 busy",
            "e0 busy; e1 bust",
            "e0 busy; e1 busy; e2 busy; e3 busy; and 60 more",
            "f0 busy; e1 busy; e2 busy; e3 busy; and 60 more",
            "e0 busy; e1 busy; e2 busy; e3 busy; and 60 mord",
            "é0 busy",
        ];
        for a in texts {
            for b in texts {
                assert_eq!(same_text(a, b), a == b, "{a:?} and {b:?}");
            }
        }
    }
}
